"""The worker's memory settings (issue 17 item 1) follow the machine unless the environment says
otherwise, and a pool process applies its address-space limit."""

from __future__ import annotations

import os
import resource
import socket
import subprocess
import sys
from pathlib import Path

from django.conf import settings

REPO = Path(__file__).resolve().parents[2]


def test_worker_memory_settings_default_to_fractions_of_the_machine_memory():
    with open("/proc/meminfo") as f:
        total = int(f.readline().split()[1]) * 1024
    if "PRISM_WORKER_MAX_MEMORY_KB" not in os.environ:
        kb = settings.CELERY_WORKER_MAX_MEMORY_PER_CHILD
        assert settings.PRISM_WORKER_MAX_MEMORY_KB == kb and 0 < kb <= total // 4 // 1024
    if "PRISM_WORKER_MAX_ADDRESS_SPACE_BYTES" not in os.environ:
        assert 4 << 30 <= settings.PRISM_WORKER_MAX_ADDRESS_SPACE_BYTES <= max(total // 2, 4 << 30)


def test_a_pool_process_limits_its_address_space():
    code = ("import django, resource; django.setup()\n"
            "from explorer.compilations.signals import limit_address_space\n"
            "limit_address_space(); print(resource.getrlimit(resource.RLIMIT_AS)[0])\n")
    env = {**os.environ, "PRISM_WORKER_MAX_ADDRESS_SPACE_BYTES": str(6 << 30),
           "DJANGO_SETTINGS_MODULE": "explorer.settings", "PYTHONPATH": str(REPO)}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=REPO,
                         timeout=120, check=True)
    hard = resource.getrlimit(resource.RLIMIT_AS)[1]
    assert int(out.stdout.strip()) == (6 << 30 if hard == resource.RLIM_INFINITY else min(6 << 30, hard))


def test_a_dead_pool_process_report_names_how_it_died_and_where(settings, tmp_path):
    """services.fault_log.last_words on faulthandler's report (its format: the error line, then each
    thread's stack, most recent call first): the compiler's innermost frame, and for SIGABRT the limit."""
    from explorer.compilations.services import fault_log

    settings.VAR_DIR = tmp_path
    settings.PRISM_WORKER_MAX_ADDRESS_SPACE_BYTES = 6 << 30
    report = fault_log.path_for("elsewhere", 4242)
    report.parent.mkdir(parents=True)
    report.write_text('Fatal Python error: Aborted\n\nThread 0x01 (most recent call first):\n'
                      '  File "/x/lib/python3.11/threading.py", line 320 in wait\n'
                      '  File "/repo/explorer/compilations/signals.py", line 70 in _reap_forever\n\n'
                      'Current thread 0x02 (most recent call first):\n'
                      '  File "/repo/compiler/codegen/compile.py", line 165 in _compile\n'
                      '  File "/repo/compiler/driver/codegen.py", line 40 in run\n')
    assert fault_log.last_words("elsewhere pid 4242") == (
        "it died of Aborted in compiler/codegen/compile.py line 165 (_compile) (an allocation that fails inside "
        f"LLVM under the address-space limit of {6 << 30} bytes, PRISM_WORKER_MAX_ADDRESS_SPACE_BYTES, aborts so)")
    report.write_text("")  # SIGKILL: no report
    assert fault_log.last_words("elsewhere pid 4242") is None
    assert fault_log.last_words("elsewhere pid 1") is None and fault_log.last_words("") is None
    os.utime(report, (0, 0))  # an hour and more unchanged, its process gone: the reaper removes it
    mine = fault_log.path_for(socket.gethostname(), 4242)
    mine.write_text("")
    os.utime(mine, (0, 0))
    alive = fault_log.path_for(socket.gethostname(), os.getpid())
    alive.write_text("")
    os.utime(alive, (0, 0))
    dead_pid_exists = Path("/proc/4242").exists()
    removed = fault_log.remove_stale()
    assert (mine in removed) is not dead_pid_exists and alive.exists() and report.exists()  # other hosts' kept
