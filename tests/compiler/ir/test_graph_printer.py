"""Golden test of the one IR printer: a small hand-written model and the text expected for it,
written by hand from the printer's documented format (compiler/ir/printer.py)."""

from __future__ import annotations

import hashlib

import numpy as np
from onnx import TensorProto, helper, numpy_helper

from compiler.frontend import load
from compiler.ir import print_graph


def _model():
    w = numpy_helper.from_array(np.arange(1, 7, dtype=np.float32).reshape(2, 3, 1, 1), "w")
    b = numpy_helper.from_array(np.array([0.5, -1.0], np.float32), "b")
    shape = numpy_helper.from_array(np.array([1, 32], np.int64), "shape")
    big = numpy_helper.from_array(np.arange(32, dtype=np.float32).reshape(1, 32), "big")
    nodes = [
        helper.make_node("Conv", ["x", "w", "b"], ["conv_out"], name="conv1", kernel_shape=[1, 1],
                         strides=[1, 1], pads=[0, 0, 0, 0]),
        helper.make_node("Relu", ["conv_out"], ["relu out"]),
        helper.make_node("Reshape", ["relu out", "shape"], ["flat"], name="flat"),
        helper.make_node("Add", ["flat", "big"], ["y"]),
    ]
    g = helper.make_graph(nodes, "tiny", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 4, 4])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 32])],
                          initializer=[w, b, shape, big])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def test_printer_golden() -> None:
    graph, _ = load(_model())
    big_digest = hashlib.sha256(np.arange(32, dtype=np.float32).tobytes()).hexdigest()[:8]
    expected = "\n".join([
        "graph @tiny(%x: f32[1, 3, 4, 4]) {",
        "  %b = constant f32[2] dense<[0.5, -1.0]>",
        f"  %big = constant f32[1, 32] <digest {big_digest}>",
        "  %shape = constant i64[2] dense<[1, 32]>",
        "  %w = constant f32[2, 3, 1, 1] dense<[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]>",
        "  %conv_out = Conv(%x, %w, %b) {kernel_shape = [1, 1], pads = [0, 0, 0, 0], strides = [1, 1]}"
        " : f32[1, 2, 4, 4]  // conv1",
        '  %"relu out" = Relu(%conv_out) : f32[1, 2, 4, 4]',
        '  %flat = Reshape(%"relu out", %shape) : f32[1, 32]',
        "  %y = Add(%flat, %big) : f32[1, 32]",
        "  return %y",
        "}",
    ])
    assert print_graph(graph) == expected


def test_printer_is_deterministic_across_imports() -> None:
    a, _ = load(_model())
    b, _ = load(_model())
    assert print_graph(a) == print_graph(b)
