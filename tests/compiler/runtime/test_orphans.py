"""No orphans (issue 17 item 3): the child that runs generated code dies with its parent
(PR_SET_PDEATHSIG), and the run folder a killed parent leaves is removed by the reaper
(compiler.runtime.process.remove_stale_run_dirs)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
from onnx import helper

from compiler.codegen.compile import compile_kernel
from compiler.ir import Graph, TensorType
from compiler.loops.ir import Buffer, Float, For, Int, Load, PrimFunc, Store, Var, add
from compiler.loops.lower import KernelArg
from compiler.passes.plan_memory import liveness, place
from compiler.runtime.process import remove_stale_run_dirs, run_dir
from compiler.runtime.runner import run_model
from compiler.targets import get_target

REPO = Path(__file__).resolve().parents[3]


def spin_forever() -> None:
    """Run (in a child, through the runner) a kernel that adds 1.0 to x[0] 2**40 times: it spins at
    100% CPU for hours, as generated code stuck in a loop does."""
    g = Graph("m")
    g.opset_imports = {"": 17}
    x = g.add_input("x", TensorType.of(np.float32, (4,)))
    n = g.add_node("Identity", [x], ["y"], name="id")
    n.outputs[0].type = x.type
    g.outputs = [x]
    buf = Buffer("x", "f32", (4,), "arena")
    i = Var("i")
    body = For(i, 1 << 40, Store(buf, (Int(0),), add(Load(buf, (Int(0),)), Float(1.0))))
    ck = compile_kernel(PrimFunc("spin", [buf], body), get_target("host"))
    kernel = {"name": "spin", "symbol": ck.symbol, "obj": ck.obj,
              "args": [KernelArg("value", "x", Buffer("x", "f32", (4,), "arena"))]}
    model = helper.make_model(helper.make_graph(
        [helper.make_node("Identity", ["x"], ["y"])], "m", [helper.make_tensor_value_info("x", 1, [4])],
        [helper.make_tensor_value_info("y", 1, [4])]), opset_imports=[helper.make_opsetid("", 17)])
    run_model([kernel], g, place(liveness(g)[0]), model.SerializeToString(), verify=False, benchmark=False)


def _children(pid: int) -> list[int]:
    out = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            out.append(int(stat.parent.name))
    return out


def _gone(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return True
    return state == "Z"  # a zombie waiting for init to reap it runs no code


def test_a_killed_parent_takes_its_child_with_it_and_the_reaper_removes_its_folder(tmp_path):
    env = {**os.environ, "TMPDIR": str(tmp_path), "PYTHONPATH": str(REPO)}
    parent = subprocess.Popen(
        [sys.executable, "-c", "from tests.compiler.runtime.test_orphans import spin_forever; spin_forever()"],
        cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 120
        while not (children := _children(parent.pid)) or not list(tmp_path.glob("prism-run-*")):
            assert parent.poll() is None, parent.stderr.read().decode()[-2000:]
            assert time.monotonic() < deadline, "the child never started"
            time.sleep(0.1)
        (child,) = children
        time.sleep(1.0)  # it is spinning in the kernel now
        assert not _gone(child)
        (folder,) = tmp_path.glob(f"prism-run-{parent.pid}-*")
        parent.kill()
        parent.wait(timeout=10)
        deadline = time.monotonic() + 10
        while not _gone(child):
            assert time.monotonic() < deadline, f"child {child} outlived its killed parent"
            time.sleep(0.05)
    finally:
        if parent.poll() is None:
            parent.kill()
        for pid in _children(parent.pid) if parent.poll() is None else []:
            os.kill(pid, 9)
        if "child" in locals() and not _gone(child):
            os.kill(child, 9)  # an orphan spinning: never leave it behind
    assert folder.is_dir()  # a killed parent cannot clean up: the reaper does
    assert remove_stale_run_dirs(tmp_path, older_than_s=0) == [folder]
    assert not folder.exists()


def test_the_reaper_leaves_folders_of_live_parents_and_fresh_ones(tmp_path):
    live = tmp_path / f"prism-run-{os.getpid()}-abc"
    live.mkdir()
    dead_pid = 2 ** 22 + 7  # above pid_max's default: no such process
    fresh = tmp_path / f"prism-exec-{dead_pid}-def"
    fresh.mkdir()
    other = tmp_path / f"prism-other-{dead_pid}-x"
    other.mkdir()
    assert remove_stale_run_dirs(tmp_path, older_than_s=3600) == []
    assert remove_stale_run_dirs(tmp_path, older_than_s=0) == [fresh]
    assert live.is_dir() and other.is_dir()


def test_a_run_folder_is_removed_when_the_run_fails(tmp_path, monkeypatch):
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", None)
    try:
        with run_dir("run") as d:
            assert d.parent == tmp_path and d.name.startswith(f"prism-run-{os.getpid()}-")
            raise RuntimeError("boom")
    except RuntimeError:
        pass
    assert list(tmp_path.iterdir()) == []
