"""What compiling in a child process costs (issue 17): wall time of one compilation in process
(``compiler.compile``, as a warm pool process runs it) and in a child (``compiler.isolated_compile``,
as the explorer's workers run it by default), alternating, on a small and a large model.

    flock /work/coord/bench.lock .venv/bin/python scripts/compile_child_overhead.py [--repeats 3]

Models: a 4x32 Relu (one kernel) and onnx's light_resnet50 (O2: about 60 kernels, a few MiB of
events). Each compiles with verification and without benchmarking (the measuring child is the same
in both). In process, two rows: the kernel cache cleared before each compile and the on-disk cache off
(what a new model costs) and kept (the same model again: every kernel a cache hit). In a child, three
rows: started for the compilation (cold) with the disk cache off (``PRISM_KERNEL_CACHE=0``: the child's
in-process cache starts empty), a spare started ``--idle-s`` before (what a worker has between tasks:
``compiler.isolated_compile.prestart``), disk cache off too, and a cold child reading the on-disk cache
(``compiler.codegen.disk_cache``, a folder of this run's, filled by the first such child). Prints the medians of wall time and of
CPU time (this process and its children), the ratios to the first row, the child's peak resident memory
and the event bytes streamed.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import onnx
from onnx import TensorProto, helper

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import compiler  # noqa: E402
from compiler.codegen.compile import kernel_cache  # noqa: E402
from compiler.isolated_compile import compile_isolated, prestart  # noqa: E402


def small(tmp: Path) -> Path:
    g = helper.make_graph([helper.make_node("Relu", ["x"], ["y"], name="relu")], "relu",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 32])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 32])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    p = tmp / "relu.onnx"
    p.write_bytes(m.SerializeToString())
    return p


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--idle-s", type=float, default=8.0, help="seconds between starting the spare and using it")
    args = ap.parse_args()
    tmp = Path("/tmp") / f"prism-overhead-{int(time.time())}"
    tmp.mkdir()
    models = {"relu 4x32 (O1)": (small(tmp), "O1"),
              "light_resnet50 (O2)": (Path(onnx.__file__).parent / "backend/test/data/light/light_resnet50.onnx", "O2")}
    kw = {"verify": True, "benchmark": False}
    os.environ["PRISM_KERNEL_CACHE_DIR"] = tempfile.mkdtemp(prefix="prism-overhead-kernels-")
    os.environ["PRISM_KERNEL_CACHE"] = "0"
    compiler.compile(str(models["relu 4x32 (O1)"][0]), pipeline="O1", **kw)  # imports and LLVM loaded, as in a worker
    for label, (path, pipeline) in models.items():
        rows: dict[str, list[tuple[float, float]]] = {k: [] for k in ROWS}
        peak = nbytes = 0
        for _ in range(args.repeats):
            kernel_cache().clear()
            with timed(rows["in process, cache cleared"]):
                r = compiler.compile(str(path), pipeline=pipeline, **kw)
            assert r.error is None, r.error
            with timed(rows["in process, cache warm"]):
                compiler.compile(str(path), pipeline=pipeline, **kw)
            for row, spare in (("child, cold start", False), ("child, spare started", True)):
                if spare:
                    prestart()
                    time.sleep(args.idle_s)  # a worker between two tasks: the spare imports meanwhile
                evs: list[dict] = []
                with timed(rows[row]):
                    out = compile_isolated(path, on_event=evs.append, pipeline=pipeline, spare=False, **kw)
                assert evs[-1]["type"] == "compile.finished", evs[-1]
                peak, nbytes = out["peak_rss_bytes"], sum(len(json.dumps(e)) for e in evs)
            os.environ["PRISM_KERNEL_CACHE"] = "1"
            if not rows["child, disk cache warm"]:  # the first fills the folder
                compile_isolated(path, on_event=lambda e: None, pipeline=pipeline, spare=False, **kw)
            with timed(rows["child, disk cache warm"]):
                compile_isolated(path, on_event=lambda e: None, pipeline=pipeline, spare=False, **kw)
            os.environ["PRISM_KERNEL_CACHE"] = "0"
        wall = {k: statistics.median(w for w, _ in v) for k, v in rows.items()}
        cpu = {k: statistics.median(c for _, c in v) for k, v in rows.items()}
        base = "in process, cache cleared"
        print(f"{label} (child peak RSS {peak >> 20} MiB, {nbytes >> 10} KiB of events):", flush=True)
        for k in ROWS:
            print(f"  {k:28s} wall {wall[k]:6.2f} s ({wall[k] / wall[base]:.2f}x)  CPU {cpu[k]:6.2f} s "
                  f"({cpu[k] / cpu[base]:.2f}x)", flush=True)


ROWS = ("in process, cache cleared", "in process, cache warm", "child, cold start", "child, spare started",
        "child, disk cache warm")


@contextmanager
def timed(into: list[tuple[float, float]]) -> Iterator[None]:
    """Appends (wall s, CPU s of this process and its children, the measuring child included)."""
    def cpu() -> float:
        a, b = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
        return a.ru_utime + a.ru_stime + b.ru_utime + b.ru_stime
    t, c = time.perf_counter(), cpu()
    yield
    into.append((time.perf_counter() - t, cpu() - c))


if __name__ == "__main__":
    main()
