"""One Conv (+ bias + Relu) layer: Prism's kernel under schedule traces against ONNX Runtime, CPU time.

``python scripts/conv_ab.py --conv 256,256,14,3,1,1 [--conv ...] [--trace 'tile=6x2' ...] [--threads 1]``
``--conv Ci,Co,HW,K,stride,pad`` builds a one-node model (seeded random weights, input [1, Ci, HW, HW]); each
``--trace`` (``compiler.schedule.knobs`` values, ``name=value`` separated by spaces; ``''`` is the default
schedule) compiles it once with pipeline O2. The variants and ONNX Runtime (CPU EP, the same intra-op
threads) run alternately in this process; at one thread the figure is the median CPU time of the calling
thread (``time.thread_time_ns``: robust to other processes on a shared machine), at more the median wall
time. Every variant's output is checked against ONNX Runtime (rtol 1e-3, atol 1e-4 x max|y|). The trace
reaches the schedules through ``compiler.driver.lower.lower_node`` (wrapped for the one compile), as a
tuning record would; the line shows the knobs every variant took.

``--pipeline 'O2,quantize{dtype=int8}'`` compiles the quantized layer (calibrated on seeded random inputs);
ONNX Runtime then also runs the pass's QDQ model (its integer kernels, the "onnxruntime int8" line, which
the variants are checked against: within two quantization steps of the output, 2 x max|y| / 255).
"""

from __future__ import annotations

import argparse
import time
from typing import Any

import numpy as np
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

from compiler.driver import compile_program
from compiler.driver import lower as driver_lower
from compiler.runtime.pool import set_threads
from compiler.runtime.program import Bound
from compiler.runtime.timing import ort_options

_LOWER_NODE = driver_lower.lower_node


def conv_model(ci: int, co: int, hw: int, k: int, stride: int, pad: int) -> Any:
    rng = np.random.default_rng(0)
    w = (rng.standard_normal((co, ci, k, k)) * np.sqrt(2 / (ci * k * k))).astype(np.float32)
    b = rng.standard_normal(co).astype(np.float32) * 0.1
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[pad] * 4, strides=[stride] * 2, name="conv"),
             helper.make_node("Relu", ["c"], ["y"], name="relu")]
    g = helper.make_graph(nodes, "conv", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, ci, hw, hw])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                          [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def compile_with(model: Any, trace: dict[str, Any], pipeline: str = "O2") -> tuple[Any, dict[str, Any]]:
    """``compile_program(model, pipeline=pipeline)`` with every kernel scheduled by ``trace``; returns it and
    the knobs taken."""
    taken: dict[str, Any] = {}

    def lower_node(node: Any, name: str, opset: int, target: Any, tr: Any = None) -> Any:
        lk, ctx = _LOWER_NODE(node, name, opset, target, trace)
        taken.update(ctx.taken)
        return lk, ctx

    driver_lower.lower_node = lower_node
    try:
        return compile_program(model, None, pipeline=pipeline), taken
    finally:
        driver_lower.lower_node = _LOWER_NODE


def parse_trace(text: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for part in text.split():
        k, v = part.split("=")
        out[k] = int(v) if v.lstrip("-").isdigit() else v
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--conv", action="append", required=True)
    ap.add_argument("--trace", action="append", default=None)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--repeats", type=int, default=15)
    ap.add_argument("--pipeline", default="O2", help="e.g. 'O2,quantize{dtype=int8}' (then ORT INT8 runs too)")
    args = ap.parse_args()
    traces = args.trace or [""]
    clock = time.thread_time_ns if args.threads == 1 else time.perf_counter_ns
    for spec in args.conv:
        ci, co, hw, k, s, p = (int(x) for x in spec.split(","))
        model = conv_model(ci, co, hw, k, s, p)
        x = np.random.default_rng(1).standard_normal((1, ci, hw, hw)).astype(np.float32)
        sess = ort.InferenceSession(model.SerializeToString(), ort_options(ort, args.threads),
                                    providers=["CPUExecutionProvider"])
        ref = sess.run(None, {"x": x})[0]
        runs: list[tuple[str, Any]] = []
        qsess = None
        for tr in traces:
            comp, taken_d = compile_with(model, parse_trace(tr), args.pipeline)
            prog = comp.program
            prog.threads = args.threads
            bd = Bound(prog, [x])
            bd.run()
            got = bd.outputs()[0]
            qdq = comp.ctx.artifacts.qdq_model if comp.ctx is not None else None
            if qdq is not None and qsess is None:
                qsess = ort.InferenceSession(qdq.SerializeToString(), ort_options(ort, args.threads),
                                             providers=["CPUExecutionProvider"])
                ref = qsess.run(None, {"x": x})[0]
            tol = 2 * float(np.abs(ref).max()) / 255 if qsess is not None else 1e-4 * float(np.abs(ref).max())
            ok = np.allclose(got, ref, rtol=0 if qsess is not None else 1e-3, atol=tol)
            taken = " ".join(f"{a}={b}" for a, b in taken_d.items())
            runs.append((f"{tr or 'default'} [{taken}]{'' if ok else ' MISMATCH'}", bd.run))
        if qsess is not None:
            runs.append(("onnxruntime int8", lambda s=qsess, xx=x: s.run(None, {"x": xx})))
        set_threads(args.threads)
        runs.append(("onnxruntime", lambda s=sess, xx=x: s.run(None, {"x": xx})))
        times: list[list[int]] = [[] for _ in runs]
        for _ in range(args.repeats):
            for i, (_, fn) in enumerate(runs):
                t = clock()
                fn()
                times[i].append(clock() - t)
        ort_ms = float(np.median(times[-1])) / 1e6
        gflop = 2 * co * ci * k * k * ((hw + 2 * p - k) // s + 1) ** 2 / 1e9
        print(f"Conv {ci}->{co} {k}x{k}/{s} pad {p} @{hw}x{hw}, {args.threads} thread(s), {gflop:.3f} GFLOP")
        for (name, _), ts in zip(runs, times, strict=True):
            ms = float(np.median(ts)) / 1e6
            print(f"  {ms:9.3f} ms {gflop / ms * 1e3:7.1f} GFLOP/s  x{ms / ort_ms:5.2f} ORT  {name}")


if __name__ == "__main__":
    main()
