"""Small ONNX models with tunable kernels (schedules with knobs, compiler.schedule.knobs), for the
explorer's tuning tests and scripts/tune_throughput.py: seeded random weights, written to a path."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def _save(nodes: list, inits: list, x_shape: list[int], y_shape: list[int], name: str, path: Path) -> Path:
    graph = helper.make_graph(nodes, name, [helper.make_tensor_value_info("x", TensorProto.FLOAT, x_shape)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, y_shape)], initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, path)
    return path


def gemm_model(path: Path) -> Path:
    """x[1, 64] @ W[64, 96] + b, Relu: one GEMM kernel whose schedule has knobs."""
    rng = np.random.default_rng(16)
    inits = [numpy_helper.from_array(rng.standard_normal((64, 96)).astype(np.float32), "W"),
             numpy_helper.from_array(rng.standard_normal(96).astype(np.float32), "b")]
    nodes = [helper.make_node("MatMul", ["x", "W"], ["m"], name="mm"), helper.make_node("Add", ["m", "b"], ["a"], name="add"),
             helper.make_node("Relu", ["a"], ["y"], name="relu")]
    return _save(nodes, inits, [1, 64], [1, 96], "gemm", path)


def conv_stack_model(path: Path) -> Path:
    """x[1, 16, 24, 24] -> Conv 3x3 (32) + Relu -> Conv 3x3 (32) + Relu -> Conv 1x1 (16): three conv
    workloads, each a tuning task."""
    rng = np.random.default_rng(17)

    def w(name: str, shape: tuple[int, ...]):
        return numpy_helper.from_array((0.1 * rng.standard_normal(shape)).astype(np.float32), name)

    inits = [w("w1", (32, 16, 3, 3)), w("b1", (32,)), w("w2", (32, 32, 3, 3)), w("b2", (32,)), w("w3", (16, 32, 1, 1)),
             w("b3", (16,))]
    pad = {"pads": [1, 1, 1, 1], "kernel_shape": [3, 3]}
    nodes = [helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], name="conv1", **pad),
             helper.make_node("Relu", ["c1"], ["r1"], name="relu1"),
             helper.make_node("Conv", ["r1", "w2", "b2"], ["c2"], name="conv2", **pad),
             helper.make_node("Relu", ["c2"], ["r2"], name="relu2"),
             helper.make_node("Conv", ["r2", "w3", "b3"], ["y"], name="conv3", kernel_shape=[1, 1])]
    return _save(nodes, inits, [1, 16, 24, 24], [1, 16, 24, 24], "convs", path)


def runtime_if_model(path: Path) -> Path:
    """y = If(c, Relu(x), Neg(x)) with `c` a graph input: compiled in parts (the condition decided
    at run time), which the search cannot tune."""
    then_g = helper.make_graph([helper.make_node("Relu", ["x"], ["t"], name="then_relu")], "then", [],
                               [helper.make_tensor_value_info("t", TensorProto.FLOAT, [1, 4])])
    else_g = helper.make_graph([helper.make_node("Neg", ["x"], ["e"], name="else_neg")], "else", [],
                               [helper.make_tensor_value_info("e", TensorProto.FLOAT, [1, 4])])
    node = helper.make_node("If", ["c"], ["y"], name="branch", then_branch=then_g, else_branch=else_g)
    graph = helper.make_graph([node], "branchy", [helper.make_tensor_value_info("c", TensorProto.BOOL, []),
                                                  helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, path)
    return path
