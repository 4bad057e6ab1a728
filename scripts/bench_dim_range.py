"""Benchmark: one artifact for N=1..8 (the batch size a run-time argument, compiler.runtime.batch)
against a build specialized to each N, and ONNX Runtime, at the same thread count, in one run.

    flock /work/coord/bench.lock .venv/bin/python scripts/bench_dim_range.py [--threads 1] [--repeats 200]

Prints per model and N the median ms of each (one native call of the entry function for Prism) and
the ratios run-time/specialized and run-time/ORT. Models: a small conv net (Conv-Relu-Conv-Relu-
GlobalAveragePool-Gemm over 3x32x32), a conv net of every Conv schedule with pooling and normalization
(``conv_pools``) and a one-layer transformer encoder (32 tokens, width 64).
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

from compiler import synthetic  # noqa: E402
from compiler.driver import Request  # noqa: E402
from compiler.driver.stages import run_stages  # noqa: E402
from compiler.driver.state import Compilation  # noqa: E402
from compiler.events import EventStream  # noqa: E402
from compiler.runtime.program import bind  # noqa: E402
from compiler.runtime.timing import median_ms  # noqa: E402


def _c(name: str, arr: np.ndarray) -> onnx.TensorProto:
    return numpy_helper.from_array(np.asarray(arr, np.float32), name)


def conv_net() -> tuple[onnx.ModelProto, list]:
    rng = np.random.default_rng(0)
    nodes = [h.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]), h.make_node("Relu", ["c1"], ["r1"]),
             h.make_node("Conv", ["r1", "w2", "b2"], ["c2"], pads=[1, 1, 1, 1], strides=[2, 2]),
             h.make_node("Relu", ["c2"], ["r2"]), h.make_node("GlobalAveragePool", ["r2"], ["p"]),
             h.make_node("Flatten", ["p"], ["f"]), h.make_node("Gemm", ["f", "fc", "fb"], ["y"], transB=1)]
    inits = [_c("w1", rng.standard_normal((32, 3, 3, 3)) * 0.2), _c("b1", rng.standard_normal(32) * 0.1),
             _c("w2", rng.standard_normal((64, 32, 3, 3)) * 0.05), _c("b2", rng.standard_normal(64) * 0.1),
             _c("fc", rng.standard_normal((10, 64))), _c("fb", rng.standard_normal(10))]
    g = h.make_graph(nodes, "convnet", [h.make_tensor_value_info("x", T.FLOAT, ["N", 3, 32, 32])],
                     [h.make_tensor_value_info("y", T.FLOAT, ["N", 10])], inits)
    return h.make_model(g, opset_imports=[h.make_opsetid("", 17)], ir_version=8), ["N", 3, 32, 32]


def conv_pools() -> tuple[onnx.ModelProto, list]:
    """Every Conv schedule with pooling and normalization around them at 32x32 (``compiler.synthetic.conv_pools``,
    the run-time batch tests' conv net)."""
    return synthetic.conv_pools(32), ["N", 3, 32, 32]


def encoder(tokens: int = 32, d: int = 64) -> tuple[onnx.ModelProto, list]:
    rng = np.random.default_rng(1)
    nodes = [h.make_node("MatMul", ["x", "wq"], ["q"]), h.make_node("MatMul", ["x", "wk"], ["k"]),
             h.make_node("MatMul", ["x", "wv"], ["v"]), h.make_node("Transpose", ["k"], ["kt"], perm=[0, 2, 1]),
             h.make_node("MatMul", ["q", "kt"], ["s"]), h.make_node("Mul", ["s", "scale"], ["ss"]),
             h.make_node("Softmax", ["ss"], ["a"], axis=-1), h.make_node("MatMul", ["a", "v"], ["o"]),
             h.make_node("Add", ["o", "x"], ["res"]),
             h.make_node("LayerNormalization", ["res", "gamma", "beta"], ["ln"], axis=-1),
             h.make_node("MatMul", ["ln", "w1"], ["f1"]), h.make_node("Relu", ["f1"], ["g1"]),
             h.make_node("MatMul", ["g1", "w2"], ["f2"]), h.make_node("Add", ["f2", "ln"], ["y"])]
    inits = [_c(n, rng.standard_normal((d, d)) * 0.1) for n in ("wq", "wk", "wv")]
    inits += [_c("scale", 1 / np.sqrt(d)), _c("gamma", np.ones(d)), _c("beta", np.zeros(d)),
              _c("w1", rng.standard_normal((d, 4 * d)) * 0.1), _c("w2", rng.standard_normal((4 * d, d)) * 0.1)]
    g = h.make_graph(nodes, "encoder", [h.make_tensor_value_info("x", T.FLOAT, ["N", tokens, d])],
                     [h.make_tensor_value_info("y", T.FLOAT, ["N", tokens, d])], inits)
    return h.make_model(g, opset_imports=[h.make_opsetid("", 17)], ir_version=8), ["N", tokens, d]


def squeezenet() -> tuple[onnx.ModelProto, list]:
    """light_squeezenet (the onnx wheel's SqueezeNet 1.0) with seeded random weights, batch dim N."""
    from compiler.samples import fetch, randomized  # only with --squeezenet

    m = randomized(fetch("light_squeezenet"), seed=0)
    inits = {t.name for t in m.graph.initializer}
    for vi in [*(i for i in m.graph.input if i.name not in inits), *m.graph.output]:  # batch 1 -> N for ORT
        vi.type.tensor_type.shape.dim[0].dim_param = "N"
    return m, ["N", 3, 224, 224]


def _input(m: onnx.ModelProto) -> str:
    inits = {t.name for t in m.graph.initializer}
    return next(i.name for i in m.graph.input if i.name not in inits)


def _program(m: onnx.ModelProto, shape: list, threads: int, dim_range: tuple[int, int] | None):
    name = _input(m)
    comp = Compilation(Request(m, input_shapes={name: shape}, dim_ranges={"N": dim_range} if dim_range else None,
                               verify=False, benchmark=False, link=True, kernel_events=False, threads=threads),
                       EventStream(None))
    run_stages(comp)
    return comp.program


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--repeats", type=int, default=200)
    ap.add_argument("--squeezenet", action="store_true", help="also light_squeezenet (N=1,3,8 at 224x224)")
    args = ap.parse_args()
    print(f"threads {args.threads}, median of {args.repeats} runs; ms")
    print(f"{'model':10} {'N':>2} {'run-time N':>11} {'specialized':>12} {'ORT':>8} {'rt/spec':>8} {'rt/ORT':>7}")
    for make in (conv_net, conv_pools, encoder, *((squeezenet,) if args.squeezenet else ())):
        m, shape = make()
        name = _input(m)
        ranged = _program(m, shape, args.threads, (1, 8))
        so = ort.SessionOptions()
        so.intra_op_num_threads = so.inter_op_num_threads = args.threads
        sess = ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"])
        for n in (1, 3, 8):
            x = np.random.default_rng(n).standard_normal([n, *shape[1:]]).astype(np.float32)
            spec = _program(m, [n, *shape[1:]], args.threads, None)
            b_rt, b_sp = bind(ranged, [x]), bind(spec, [x])
            b_rt.run()
            b_sp.run()
            ref = sess.run(None, {name: x})[0]
            for b in (b_rt, b_sp):
                np.testing.assert_allclose(b.outputs()[0], ref, rtol=1e-3, atol=1e-4)
            t_rt, t_sp = median_ms(b_rt.entry, args.repeats), median_ms(b_sp.entry, args.repeats)
            t_ort = median_ms(lambda s=sess, f={name: x}: s.run(None, f), args.repeats)
            print(f"{m.graph.name:10} {n:>2} {t_rt:>11.4f} {t_sp:>12.4f} {t_ort:>8.4f} {t_rt / t_sp:>8.2f} "
                  f"{t_rt / t_ort:>7.2f}", flush=True)


if __name__ == "__main__":
    main()
