"""Small models for the tuner's tests, built with onnx.helper and seeded weights: a MatMul + bias + Relu
(the GEMM micro-kernel: tile and column-block knobs) and a Conv 3x3 + Relu (im2col: tile and row-block
knobs) followed by an elementwise tail (vector and unroll knobs)."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def _model(nodes: list, inputs: list, outputs: list, inits: dict[str, np.ndarray], name: str) -> onnx.ModelProto:
    g = helper.make_graph(nodes, name, inputs, outputs,
                          [numpy_helper.from_array(v.astype(np.float32), k) for k, v in inits.items()])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=9)


def matmul_relu(m: int = 48, k: int = 96, n: int = 80, seed: int = 0) -> onnx.ModelProto:
    """Y = Relu(X[m, k] @ W[k, n] + b[n])."""
    rng = np.random.default_rng(seed)
    return _model([helper.make_node("MatMul", ["x", "w"], ["mm"]), helper.make_node("Add", ["mm", "b"], ["s"]),
                   helper.make_node("Relu", ["s"], ["y"])],
                  [helper.make_tensor_value_info("x", TensorProto.FLOAT, [m, k])],
                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, [m, n])],
                  {"w": rng.standard_normal((k, n)) / np.sqrt(k), "b": rng.standard_normal(n)}, "matmul_relu")


def conv_tail(c: int = 16, co: int = 24, hw: int = 20, seed: int = 0) -> onnx.ModelProto:
    """Y = Tanh(Relu(Conv3x3(X) + b)) * 0.5 + 1 — the Conv group and a separate elementwise kernel
    (Tanh is not fused into the Conv's epilogue at O2? it may be: the test reads the kernels it gets)."""
    rng = np.random.default_rng(seed)
    return _model([helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1], kernel_shape=[3, 3]),
                   helper.make_node("Relu", ["c"], ["r"]),
                   helper.make_node("Transpose", ["r"], ["t"], perm=[0, 2, 3, 1]),
                   helper.make_node("Tanh", ["t"], ["y"])],
                  [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, c, hw, hw])],
                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, hw, hw, co])],
                  {"w": rng.standard_normal((co, c, 3, 3)) / np.sqrt(9 * c), "b": rng.standard_normal(co)},
                  "conv_tail")


def norm_softmax(rows: int = 24, cols: int = 80, seed: int = 0) -> onnx.ModelProto:
    """Y = Softmax(LayerNormalization(X[1, rows, cols]) * 2) over the last axis: two row kernels (the
    row_vectors knob); ``cols`` not a multiple of 8 or 16, so every width leaves a shorter last vector."""
    rng = np.random.default_rng(seed)
    return _model([helper.make_node("LayerNormalization", ["x", "g", "b"], ["n"], axis=-1, epsilon=1e-5),
                   helper.make_node("Mul", ["n", "two"], ["s"]), helper.make_node("Softmax", ["s"], ["y"], axis=-1)],
                  [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, rows, cols])],
                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, rows, cols])],
                  {"g": 1 + 0.1 * rng.standard_normal(cols), "b": 0.1 * rng.standard_normal(cols),
                   "two": np.array(2.0)}, "norm_softmax")


def depthwise_relu(c: int = 24, hw: tuple[int, int] = (20, 40), mult: int = 1, seed: int = 0) -> onnx.ModelProto:
    """Y = Relu(Conv3x3(X[1, c, H, W], group c, ``mult`` output channels per group, pads 1) + b): the
    direct depthwise / narrow grouped schedule (dw_tile knob)."""
    rng = np.random.default_rng(seed)
    return _model([helper.make_node("Conv", ["x", "w", "b"], ["c"], group=c, kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
                   helper.make_node("Relu", ["c"], ["y"])],
                  [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, c, *hw])],
                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, c * mult, *hw])],
                  {"w": rng.standard_normal((c * mult, 1, 3, 3)) / 3, "b": rng.standard_normal(c * mult)},
                  "depthwise_relu")


def nchwc_chain(c: int = 16, e: int = 32, hw: tuple[int, int] = (9, 13), seed: int = 0) -> onnx.ModelProto:
    """1x1 expand + Relu, depthwise 3x3, 1x1 project + residual Add: under ``convert-layout`` a chain of
    ``prism.NchwcConv`` (nchwc_tile knob), dense and depthwise."""
    rng = np.random.default_rng(seed)
    return _model([helper.make_node("Conv", ["x", "w1", "b1"], ["a"]), helper.make_node("Relu", ["a"], ["r"]),
                   helper.make_node("Conv", ["r", "wd", "bd"], ["d"], group=e, kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
                   helper.make_node("Conv", ["d", "w2", "b2"], ["p"]), helper.make_node("Add", ["p", "x"], ["y"])],
                  [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, c, *hw])],
                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, c, *hw])],
                  {"w1": rng.standard_normal((e, c, 1, 1)) * 0.3, "b1": rng.standard_normal(e),
                   "wd": rng.standard_normal((e, 1, 3, 3)) * 0.3, "bd": rng.standard_normal(e),
                   "w2": rng.standard_normal((c, e, 1, 1)) * 0.2, "b2": rng.standard_normal(c)}, "nchwc_chain")


def two_matmuls(m: int = 48, k: int = 96, n: int = 80, n2: int = 64, seed: int = 0) -> onnx.ModelProto:
    """Y = Relu(Relu(X[m, k] @ W1[k, n] + b1) @ W2[n, n2] + b2): two kernels of the same ops at two shapes
    (similar workloads: one's record seeds the other's search)."""
    rng = np.random.default_rng(seed)
    return _model([helper.make_node("MatMul", ["x", "w1"], ["m1"]), helper.make_node("Add", ["m1", "b1"], ["s1"]),
                   helper.make_node("Relu", ["s1"], ["r1"]), helper.make_node("MatMul", ["r1", "w2"], ["m2"]),
                   helper.make_node("Add", ["m2", "b2"], ["s2"]), helper.make_node("Relu", ["s2"], ["y"])],
                  [helper.make_tensor_value_info("x", TensorProto.FLOAT, [m, k])],
                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, [m, n2])],
                  {"w1": rng.standard_normal((k, n)) / np.sqrt(k), "b1": rng.standard_normal(n),
                   "w2": rng.standard_normal((n, n2)) / np.sqrt(n), "b2": rng.standard_normal(n2)}, "two_matmuls")


def measure_request(task, traces: list, **kw) -> dict:  # type: ignore[no-untyped-def]
    """A measurement request for ``task`` (compiler.tune.tasks) on the host at 1 thread, 5 repeats,
    checked to be JSON-able (what a Celery task carries)."""
    import json

    from compiler.tune.measure import make_request

    req = make_request(task.workload, task.kernel, "host", task.source(), traces, threads=1, repeats=5, **kw)
    json.dumps(req)
    return req
