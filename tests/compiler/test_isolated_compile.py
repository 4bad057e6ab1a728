"""compiler.isolated_compile: a compilation in a limited child gives the events an in-process one gives,
as they happen; the caller's tuning database answers the child's look-ups; a child SIGKILLed mid-run
(as the kernel's OOM killer does) leaves a compile.failed naming the signal, the stage and the last
event; a callback that raises (a time limit) stops the child. The crashes and limits inside LLVM's
code generation run through a real worker in tests/explorer/test_stack_crashes.py."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest
from onnx import TensorProto, helper

import compiler
from compiler.isolated_compile import CompileLimits, compile_isolated

LIMITS = CompileLimits(address_space_bytes=4 << 30, cpu_s=300)
REQUEST = {"pipeline": "O1", "verify": True, "benchmark": False}


def matmul(path: Path) -> Path:
    g = helper.make_graph([helper.make_node("MatMul", ["a", "b"], ["y"], name="mm")], "mm",
                          [helper.make_tensor_value_info("a", TensorProto.FLOAT, [16, 32]),
                           helper.make_tensor_value_info("b", TensorProto.FLOAT, [32, 8])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [16, 8])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    path.write_bytes(m.SerializeToString())
    return path


def children() -> list[int]:
    me = os.getpid()
    out = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            if int(stat.read_text().rsplit(")", 1)[1].split()[1]) == me:
                out.append(int(stat.parent.name))
        except (OSError, ValueError, IndexError):
            pass
    return out


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


class Database:
    """A tuning database with no records that counts the look-ups the child sends."""

    name, label = "counting", "the counting database"

    def __init__(self) -> None:
        self.asked: list[tuple[str, dict]] = []

    def best(self, workload, target):  # type: ignore[no-untyped-def]
        self.asked.append((workload, target))
        return None

    def add(self, record):  # type: ignore[no-untyped-def]
        raise AssertionError("a compilation adds no records")

    def records(self):  # type: ignore[no-untyped-def]
        return iter(())


def test_the_child_streams_the_in_process_events_and_asks_the_callers_database(tmp_path) -> None:
    path = matmul(tmp_path / "mm.onnx")
    here = compiler.compile(str(path), **REQUEST, tuning_db=Database())
    db, got, arrived = Database(), [], []

    def on_event(e: dict) -> None:
        got.append(e)
        arrived.append(time.monotonic())

    out = compile_isolated(path, on_event=on_event, tuning_db=db, limits=LIMITS, **REQUEST)
    ended = time.monotonic()
    assert out["returncode"] == 0 and out["ended_by_child"] and out["events"] == len(got)
    assert [e["type"] for e in got] == [e["type"] for e in here.events]
    assert [e["seq"] for e in got] == list(range(len(got)))
    assert got[-1]["type"] == "compile.finished"
    assert ended - arrived[0] > 0.3, "the first event arrived only when the child had finished"
    assert db.asked and all(set(t) == {"triple", "cpu", "features"} for _, t in db.asked)
    applied = next(e for e in got if e["type"] == "tune.applied")
    assert applied["database"] == "counting" and "the counting database" in applied["message"]
    assert next(e for e in got if e["type"] == "model.verified")["passed"] is True
    assert 0 < out["peak_rss_bytes"] < LIMITS.address_space_bytes


def test_a_child_sigkilled_mid_run_is_reported_with_its_stage_and_last_event(tmp_path) -> None:
    got: list[dict] = []

    def on_event(e: dict) -> None:
        got.append(e)
        if e["type"] == "pass.started" and e["index"] == 0:
            for pid in children():  # what the kernel's OOM killer does to the largest process
                os.kill(pid, signal.SIGKILL)

    out = compile_isolated(matmul(tmp_path / "mm.onnx"), on_event=on_event, limits=LIMITS, **REQUEST)
    assert out["returncode"] == -signal.SIGKILL and not out["ended_by_child"]
    last = got[-1]
    assert [e["seq"] for e in got] == list(range(len(got)))
    assert last["type"] == "compile.failed" and last["reason"] == "compiler_lost" and last["stage"] == "passes", last
    assert last["message"].startswith("the compiler process was killed by SIGKILL in stage passes (after "), last
    assert "most likely the kernel's OOM killer" in last["message"] or "OOM killer ended it" in last["message"], last


def test_a_callback_that_raises_stops_the_child(tmp_path) -> None:
    class Stop(BaseException):
        pass

    running: list[int] = []

    def on_event(e: dict) -> None:
        if e["type"] == "pass.started":  # the compiling child; not other tests' children (a measuring child)
            running.extend(p for p in children() if b"compiler.isolated_compile" in _cmdline(p))
            raise Stop

    with pytest.raises(Stop):
        compile_isolated(matmul(tmp_path / "mm.onnx"), on_event=on_event, limits=LIMITS, **REQUEST)
    assert running and not set(running) & set(children()), "the child lives on"


def test_the_callers_roofline_ceilings_are_the_childs(tmp_path) -> None:
    """A worker measures its ceilings once: the child takes the caller's instead of measuring again
    (the figures below are no machine's, so model.timed can only have them from the caller)."""
    from compiler.runtime import ceilings

    fake = {"peak_gflops": 1234.5, "peak_gbps": 67.8, "threads": 1, "target": "host", "lanes": 8,
            "copy_bytes": 1 << 20, "method": "given by the test", "host": "nowhere", "cpu": "none"}
    saved = dict(ceilings._CACHE)
    try:
        ceilings._CACHE.pop(("host", 1), None)
        ceilings.add_known_ceilings([fake])
        assert any(c["method"] == "given by the test" for c in ceilings.known_ceilings())
        got: list[dict] = []
        compile_isolated(matmul(tmp_path / "mm.onnx"), on_event=got.append, limits=LIMITS,
                         **{**REQUEST, "benchmark": True, "threads": 1})
        timed = next(e for e in got if e["type"] == "model.timed")
        assert timed["ceilings"] == fake
    finally:
        ceilings._CACHE.clear()
        ceilings._CACHE.update(saved)
