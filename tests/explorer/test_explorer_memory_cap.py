"""The worker's aggregate memory cap (services/memory_cap.py): a reservation over the cap is refused at
once naming both sizes; one that does not fit beside a live process's waits, then is refused naming
what the others hold; a dead process's reservation is dropped; `grow` raises what a run holds."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time

import pytest

from explorer.compilations.services import memory_cap

MIB = 1 << 20


@pytest.fixture
def cap(settings, tmp_path):
    settings.VAR_DIR = tmp_path
    settings.PRISM_WORKER_MEMORY_CAP_BYTES = 1000 * MIB
    settings.PRISM_WORKER_MEMORY_WAIT_S = 0.6
    settings.PRISM_COMPILE_BASE_BYTES = 600 * MIB
    settings.PRISM_COMPILE_BYTES_PER_MODEL_BYTE = 6.0
    return settings


def hold(node: str, pid: int, nbytes: int) -> None:
    """Write a reservation of another process into the node's ledger, as its pool process would."""
    with memory_cap._ledger(node) as entries:
        entries[str(pid)] = {"bytes": nbytes, "compilation": "other", "since": time.time()}


def test_the_estimate_is_the_base_plus_a_multiple_of_the_model(cap):
    assert memory_cap.estimate_bytes(10 * MIB) == 600 * MIB + 60 * MIB


def test_a_compilation_over_the_cap_alone_is_refused_at_once_naming_both_sizes(cap):
    t0 = time.monotonic()
    with pytest.raises(memory_cap.MemoryRefused) as e, memory_cap.reserve("w1@h", "c1", 1200 * MIB):
        pass
    assert time.monotonic() - t0 < 0.5
    assert e.value.message == (f"this compilation needs an estimated {1200 * MIB} bytes of memory, over the worker's "
                               f"memory cap of {1000 * MIB} bytes (PRISM_WORKER_MEMORY_CAP_BYTES)")


def test_one_that_does_not_fit_beside_a_live_run_waits_then_is_refused(cap):
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        hold("w1@h", other.pid, 700 * MIB)
        t0 = time.monotonic()
        with pytest.raises(memory_cap.MemoryRefused) as e, memory_cap.reserve("w1@h", "c2", 400 * MIB):
            pass
        assert time.monotonic() - t0 >= 0.6
        assert e.value.message == (
            f"waited 0.6 s (PRISM_WORKER_MEMORY_WAIT_S) for memory: this compilation needs an estimated {400 * MIB} "
            f"bytes and the worker's 1 other compilation(s) hold {700 * MIB} bytes of its memory cap of "
            f"{1000 * MIB} bytes (PRISM_WORKER_MEMORY_CAP_BYTES)")
        with memory_cap.reserve("w1@h", "c3", 300 * MIB):  # fits beside it
            assert memory_cap.held_bytes("w1@h") == {str(other.pid): 700 * MIB, str(os.getpid()): 300 * MIB}
        assert memory_cap.held_bytes("w1@h") == {str(other.pid): 700 * MIB}
        assert memory_cap.held_bytes("w2@h") == {}  # another worker's cap is its own
    finally:
        other.kill()
        other.wait()
    with memory_cap.reserve("w1@h", "c4", 900 * MIB):  # the dead process holds nothing
        assert memory_cap.held_bytes("w1@h") == {str(os.getpid()): 900 * MIB}


def test_a_wait_ends_when_the_other_run_releases(cap, settings):
    settings.PRISM_WORKER_MEMORY_WAIT_S = 30.0
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(1.0)"])
    hold("w1@h", other.pid, 700 * MIB)
    threading.Thread(target=other.wait).start()  # reaped when it exits, as Celery reaps a pool process
    t0 = time.monotonic()
    with memory_cap.reserve("w1@h", "c5", 400 * MIB, poll_s=0.05):
        waited = time.monotonic() - t0
    assert 0.3 < waited < 20


def test_grow_raises_what_a_run_holds(cap):
    with memory_cap.reserve("w1@h", "c6", 100 * MIB) as r:
        r.grow(50 * MIB)  # never lowered
        assert memory_cap.held_bytes("w1@h") == {str(os.getpid()): 100 * MIB}
        r.grow(2000 * MIB)  # not refused: the run is under way; later ones wait
        assert memory_cap.held_bytes("w1@h") == {str(os.getpid()): 2000 * MIB}
    assert memory_cap.held_bytes("w1@h") == {}
