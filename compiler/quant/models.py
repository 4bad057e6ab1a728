"""Two FP32 model kinds of the INT8 benchmark set built with ``onnx.helper`` (seeded random weights):
a transformer encoder and a depthwise-separable CNN (MobileNet-style). The set's other members are
trained models from ``compiler.samples`` (ResNet-50 with seeded weights, YOLOv8n, PP-OCRv4 det)."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh


def _w(rng: np.random.Generator, name: str, *shape: int, std: float | None = None) -> onnx.TensorProto:
    fan_in = int(np.prod(shape[1:])) if len(shape) > 1 else shape[0]
    s = std if std is not None else (2.0 / max(fan_in, 1)) ** 0.5
    return nh.from_array((rng.standard_normal(shape) * s).astype(np.float32), name)


def _model(nodes: list, name: str, ins: list, outs: list, inits: list) -> onnx.ModelProto:
    m = h.make_model(h.make_graph(nodes, name, ins, outs, inits), opset_imports=[h.make_opsetid("", 17)])
    m.ir_version = 9
    return m


def encoder(layers: int = 2, tokens: int = 32, dim: int = 128, heads: int = 4, seed: int = 0) -> onnx.ModelProto:
    """A BERT-style encoder: per layer, multi-head self-attention (Q/K/V/output projections as MatMul
    with constant weights + bias Add, Softmax over scaled QK^T), residual Add + LayerNormalization, and a
    ReLU feed-forward block (4 x dim; opset 17 has no Gelu op); input ``x`` [1, tokens, dim], output ``y`` the same shape."""
    rng = np.random.default_rng(seed)
    nodes, inits = [], [nh.from_array(np.array([1, tokens, heads, dim // heads], np.int64), "split_shape"),
                        nh.from_array(np.array([1, tokens, dim], np.int64), "merge_shape"),
                        nh.from_array(np.array(1.0 / np.sqrt(dim // heads), np.float32), "scale")]
    x = "x"
    for i in range(layers):
        p = f"l{i}_"
        for proj in ("q", "k", "v", "o"):
            inits += [_w(rng, p + f"w{proj}", dim, dim), nh.from_array(np.zeros(dim, np.float32), p + f"b{proj}")]
        inits += [_w(rng, p + "w1", dim, 4 * dim), nh.from_array(np.zeros(4 * dim, np.float32), p + "b1"),
                  _w(rng, p + "w2", 4 * dim, dim), nh.from_array(np.zeros(dim, np.float32), p + "b2")]
        for n in ("ln1", "ln2"):
            inits += [nh.from_array(np.ones(dim, np.float32), p + n + "_g"),
                      nh.from_array(np.zeros(dim, np.float32), p + n + "_b")]
        for proj in ("q", "k", "v"):
            nodes += [h.make_node("MatMul", [x, p + f"w{proj}"], [p + proj + "0"], name=p + proj + "_proj"),
                      h.make_node("Add", [p + proj + "0", p + f"b{proj}"], [p + proj + "1"], name=p + proj + "_bias"),
                      h.make_node("Reshape", [p + proj + "1", "split_shape"], [p + proj + "2"], name=p + proj + "_split"),
                      h.make_node("Transpose", [p + proj + "2"], [p + proj],
                                  perm=[0, 2, 3, 1] if proj == "k" else [0, 2, 1, 3], name=p + proj + "_heads")]
        nodes += [h.make_node("MatMul", [p + "q", p + "k"], [p + "s0"], name=p + "scores"),
                  h.make_node("Mul", [p + "s0", "scale"], [p + "s1"], name=p + "scaled"),
                  h.make_node("Softmax", [p + "s1"], [p + "a"], axis=-1, name=p + "softmax"),
                  h.make_node("MatMul", [p + "a", p + "v"], [p + "c0"], name=p + "context"),
                  h.make_node("Transpose", [p + "c0"], [p + "c1"], perm=[0, 2, 1, 3], name=p + "merge_t"),
                  h.make_node("Reshape", [p + "c1", "merge_shape"], [p + "c2"], name=p + "merge"),
                  h.make_node("MatMul", [p + "c2", p + "wo"], [p + "o0"], name=p + "o_proj"),
                  h.make_node("Add", [p + "o0", p + "bo"], [p + "o1"], name=p + "o_bias"),
                  h.make_node("Add", [p + "o1", x], [p + "r1"], name=p + "residual1"),
                  h.make_node("LayerNormalization", [p + "r1", p + "ln1_g", p + "ln1_b"], [p + "n1"], axis=-1,
                              name=p + "ln1"),
                  h.make_node("MatMul", [p + "n1", p + "w1"], [p + "f0"], name=p + "ff1"),
                  h.make_node("Add", [p + "f0", p + "b1"], [p + "f1"], name=p + "ff1_bias"),
                  h.make_node("Relu", [p + "f1"], [p + "f2"], name=p + "act"),
                  h.make_node("MatMul", [p + "f2", p + "w2"], [p + "f3"], name=p + "ff2"),
                  h.make_node("Add", [p + "f3", p + "b2"], [p + "f4"], name=p + "ff2_bias"),
                  h.make_node("Add", [p + "f4", p + "n1"], [p + "r2"], name=p + "residual2"),
                  h.make_node("LayerNormalization", [p + "r2", p + "ln2_g", p + "ln2_b"], [p + "out"], axis=-1,
                              name=p + "ln2")]
        x = p + "out"
    nodes.append(h.make_node("Identity", [x], ["y"], name="output"))
    return _model(nodes, "encoder", [h.make_tensor_value_info("x", T.FLOAT, [1, tokens, dim])],
                  [h.make_tensor_value_info("y", T.FLOAT, [1, tokens, dim])], inits)


def dwcnn(size: int = 112, width: int = 32, blocks: int = 4, classes: int = 100, seed: int = 0) -> onnx.ModelProto:
    """A MobileNet-v1-style classifier: a 3x3 stride-2 stem, then per block a depthwise 3x3 Conv
    (group = channels, stride 2 every other block) + Relu and a pointwise 1x1 Conv + Relu doubling the
    channels every other block; GlobalAveragePool, Flatten, Gemm to ``classes`` scores. Input ``x``
    [1, 3, size, size]."""
    rng = np.random.default_rng(seed)
    nodes = [h.make_node("Conv", ["x", "stem_w", "stem_b"], ["s0"], pads=[1, 1, 1, 1], strides=[2, 2], name="stem"),
             h.make_node("Relu", ["s0"], ["s1"], name="stem_relu")]
    inits = [_w(rng, "stem_w", width, 3, 3, 3), nh.from_array(np.zeros(width, np.float32), "stem_b")]
    x, c = "s1", width
    for i in range(blocks):
        stride = 2 if i % 2 else 1
        co = c * 2 if i % 2 else c
        inits += [_w(rng, f"dw{i}_w", c, 1, 3, 3), nh.from_array(np.zeros(c, np.float32), f"dw{i}_b"),
                  _w(rng, f"pw{i}_w", co, c, 1, 1), nh.from_array(np.zeros(co, np.float32), f"pw{i}_b")]
        nodes += [h.make_node("Conv", [x, f"dw{i}_w", f"dw{i}_b"], [f"d{i}"], pads=[1, 1, 1, 1], strides=[stride] * 2,
                              group=c, name=f"dw{i}"),
                  h.make_node("Relu", [f"d{i}"], [f"dr{i}"], name=f"dw{i}_relu"),
                  h.make_node("Conv", [f"dr{i}", f"pw{i}_w", f"pw{i}_b"], [f"p{i}"], name=f"pw{i}"),
                  h.make_node("Relu", [f"p{i}"], [f"pr{i}"], name=f"pw{i}_relu")]
        x, c = f"pr{i}", co
    inits += [_w(rng, "fc_w", classes, c), nh.from_array(np.zeros(classes, np.float32), "fc_b")]
    nodes += [h.make_node("GlobalAveragePool", [x], ["g"], name="gap"), h.make_node("Flatten", ["g"], ["f"], name="flat"),
              h.make_node("Gemm", ["f", "fc_w", "fc_b"], ["y"], transB=1, name="fc")]
    return _model(nodes, "dwcnn", [h.make_tensor_value_info("x", T.FLOAT, [1, 3, size, size])],
                  [h.make_tensor_value_info("y", T.FLOAT, [1, classes])], inits)
