"""Benchmark: a run-time Loop (its trip count a graph input) in Prism against ONNX Runtime, one run,
same thread count: the iterations in generated code (compiler.codegen.loop_entry) and dispatched from
Python (the fallback), per shape.

    flock /work/coord/bench.lock .venv/bin/python scripts/bench_loop.py [--threads 1] [--repeats 30]

Body: ``a <- a * 0.5 + x`` (``x`` an outer value read by the body), one loop-carried value of
``[size]`` float32, no scan output; ``M`` iterations, median ms of whole-model runs.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from compiler.driver import compile_program  # noqa: E402
from compiler.runtime.program import bind  # noqa: E402
from compiler.runtime.timing import median_ms  # noqa: E402


def loop_model(size: int) -> onnx.ModelProto:
    vi = h.make_tensor_value_info
    body = h.make_graph([h.make_node("Mul", ["a", "k"], ["am"]), h.make_node("Add", ["am", "x"], ["a2"]),
                         h.make_node("Identity", ["c"], ["c2"])], "body",
                        [vi("i", T.INT64, []), vi("c", T.BOOL, []), vi("a", T.FLOAT, [size])],
                        [vi("c2", T.BOOL, []), vi("a2", T.FLOAT, [size])],
                        [numpy_helper.from_array(np.float32(0.5), "k")])
    g = h.make_graph([h.make_node("Loop", ["m", "", "x"], ["y"], body=body, name="L")], "loop",
                     [vi("x", T.FLOAT, [size]), vi("m", T.INT64, [])], [vi("y", T.FLOAT, [size])])
    return h.make_model(g, opset_imports=[h.make_opsetid("", 17)], ir_version=8)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--repeats", type=int, default=30)
    args = ap.parse_args()
    print(f"threads {args.threads}, median of {args.repeats} runs; ms")
    print(f"{'loop':>12} {'native':>9} {'python':>9} {'ORT':>8} {'native/ORT':>10} {'python/ORT':>10}")
    for trips, size in ((1000, 64), (100, 4096)):
        m = loop_model(size)
        prog = compile_program(m, None).program
        prog.threads = args.threads
        x = np.linspace(-1, 1, size, dtype=np.float32)
        feeds = [x, np.array(trips, np.int64)]
        so = ort.SessionOptions()
        so.intra_op_num_threads = so.inter_op_num_threads = args.threads
        sess = ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"])
        ref = sess.run(None, {"x": x, "m": feeds[1]})[0]
        b = bind(prog, feeds)
        b.run()
        np.testing.assert_allclose(b.outputs()[0], ref, rtol=1e-5, atol=1e-6)
        t_native = median_ms(b.run, args.repeats)
        native = prog.steps[0].attrs.pop("native")  # the fallback: every iteration from Python
        t_python = median_ms(b.run, args.repeats)
        np.testing.assert_allclose(b.outputs()[0], ref, rtol=1e-5, atol=1e-6)
        prog.steps[0].attrs["native"] = native
        t_ort = median_ms(lambda s=sess, f={"x": x, "m": feeds[1]}: s.run(None, f), args.repeats)
        print(f"{f'{trips}x[{size}]':>12} {t_native:>9.3f} {t_python:>9.3f} {t_ort:>8.3f} {t_native / t_ort:>10.2f} "
              f"{t_python / t_ort:>10.2f}", flush=True)


if __name__ == "__main__":
    main()
