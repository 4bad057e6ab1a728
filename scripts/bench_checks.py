"""What the kernels' run-time checks cost (compiler.runtime.faults: computed indices, integer Div/Mod).

    .venv/bin/python scripts/bench_checks.py [--repeats 200]

Compiles three models twice in one process, once as Prism builds them and once with
``LowerCtx.checked`` patched to return the value unchecked (the baseline; this script only), binds
both Programs in this process (``compiler.runtime.program.Bound``, one thread) and prints the median
run time of each (ms) and the ratio checked / unchecked:

- ``gather``: ``y = Gather(x, i + 1)``, x 4096 x 256 float32, 65,536 computed indices;
- ``gather_elements``: ``y = GatherElements(x, i + 1, axis=1)``, x and i 512 x 1024;
- ``int_div``: ``y = Div(a, b + 1)`` on 1,048,576 int32 values.

Medians of ``--repeats`` runs each, alternating checked and unchecked, on whatever else the machine
runs at the time (say so when you quote them). Not part of the test suite.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from compiler.driver import compile_program  # noqa: E402
from compiler.loops import registry  # noqa: E402
from compiler.runtime.pool import set_threads  # noqa: E402
from compiler.runtime.program import bind  # noqa: E402

F, I32, I64 = TensorProto.FLOAT, TensorProto.INT32, TensorProto.INT64


def _model(nodes, inputs, outputs, inits):
    g = helper.make_graph(nodes, "g", inputs, outputs, inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m


def models(rng: np.random.Generator):
    vi = helper.make_tensor_value_info
    one64 = numpy_helper.from_array(np.array(1, np.int64), "one")
    x = numpy_helper.from_array(rng.standard_normal((4096, 256), dtype=np.float32), "x")
    gather = _model([helper.make_node("Add", ["i", "one"], ["j"]), helper.make_node("Gather", ["x", "j"], ["y"])],
                    [vi("i", I64, [65536])], [vi("y", F, [65536, 256])], [x, one64])
    x2 = numpy_helper.from_array(rng.standard_normal((512, 1024), dtype=np.float32), "x")
    elements = _model([helper.make_node("Add", ["i", "one"], ["j"]),
                       helper.make_node("GatherElements", ["x", "j"], ["y"], axis=1)],
                      [vi("i", I64, [512, 1024])], [vi("y", F, [512, 1024])], [x2, one64])
    one32 = numpy_helper.from_array(np.array(1, np.int32), "one")
    div = _model([helper.make_node("Add", ["b", "one"], ["c"]), helper.make_node("Div", ["a", "c"], ["y"])],
                 [vi("a", I32, [1 << 20]), vi("b", I32, [1 << 20])], [vi("y", I32, [1 << 20])], [one32])
    return {
        "gather": (gather, [rng.integers(0, 4095, 65536)]),
        "gather_elements": (elements, [rng.integers(0, 1023, (512, 1024))]),
        "int_div": (div, [rng.integers(-1000, 1000, 1 << 20, dtype=np.int32),
                          rng.integers(0, 50, 1 << 20, dtype=np.int32)]),
    }


def compiled(model, unchecked: bool):
    original = registry.LowerCtx.checked
    if unchecked:
        registry.LowerCtx.checked = lambda self, node, kind, value, bad, message: value  # type: ignore[method-assign]
    try:
        return compile_program(model, None).program
    finally:
        registry.LowerCtx.checked = original  # type: ignore[method-assign]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=200)
    args = ap.parse_args()
    set_threads(1)
    print(f"{'model':<16}{'checked ms':>12}{'unchecked ms':>14}{'ratio':>8}")
    for name, (model, inputs) in models(np.random.default_rng(0)).items():
        runs = {}
        for unchecked in (False, True):
            prog = compiled(model, unchecked)
            prog.threads = 1
            runs[unchecked] = bind(prog, inputs)
            runs[unchecked].run()
        np.testing.assert_array_equal(runs[False].outputs()[0], runs[True].outputs()[0])
        times: dict[bool, list[float]] = {False: [], True: []}
        for _ in range(args.repeats):
            for unchecked in (False, True):
                t0 = time.perf_counter()
                runs[unchecked].run()
                times[unchecked].append((time.perf_counter() - t0) * 1e3)
        c, u = statistics.median(times[False]), statistics.median(times[True])
        print(f"{name:<16}{c:>12.3f}{u:>14.3f}{c / u:>8.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
