"""Seeded synthetic ONNX models of two kinds outside the CNN set, built with ``onnx.helper``.

These are what the kernel tests and ``python -m compiler.synthetic`` (Prism against ONNX Runtime,
same run, same thread count) measure the transformer and depthwise kernels on, before or beside the
PyTorch-exported models of ``compiler.bench``. Weights are seeded standard-normal values scaled by
``1/sqrt(fan_in)`` (so activations stay O(1) through the layers), never all equal.

* :func:`bert_encoder`: a BERT-class encoder as PyTorch's exporter writes it (opset 13):
  per layer ``MatMul + Add`` Q/K/V projections, ``Reshape -> Transpose(0,2,1,3)`` into heads (K as
  ``Transpose(0,2,3,1)``), ``MatMul -> Div(sqrt(d)) -> Add(mask) -> Softmax -> MatMul``,
  ``Transpose -> Reshape``, output projection, residual ``Add``, LayerNormalization in its decomposed
  form (``ReduceMean -> Sub -> Pow -> ReduceMean -> Add -> Sqrt -> Div -> Mul -> Add``), a GELU FFN
  (Erf form ``x * 0.5 * (1 + erf(x / sqrt 2))``, or the Tanh form with ``gelu="tanh"``). Inputs:
  ``x`` float32 ``[1, seq, hidden]`` and, with ``mask=True``, ``mask`` float32 ``[1, 1, 1, seq]``
  (additive: 0 or -10000). With ``layernorm_op=True`` the model is opset 17 and uses the
  ``LayerNormalization`` op instead of the decomposed form.
* :func:`mobilenet_block`: a MobileNetV3-class network: stem Conv 3x3/2 + HardSwish, inverted
  residual blocks (1x1 expand + HardSwish/Relu, depthwise kxk (stride 1 or 2) + act, optional
  squeeze-excitation ``GlobalAveragePool -> Conv -> Relu -> Conv -> HardSigmoid -> Mul``, 1x1
  project, residual Add where shapes allow), then ``GlobalAveragePool -> Conv 1x1 -> HardSwish ->
  Flatten -> Gemm``. Input ``x`` float32 ``[1, 3, size, size]``.
"""

from __future__ import annotations

import argparse
import math
import sys
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

import compiler


class SeededGraph:
    """The nodes and initializers of one ONNX graph being built: unique names and a seeded generator.

    ``rng`` is ``numpy.random.default_rng(seed)``; :meth:`name` numbers names in creation order, so
    a builder run twice with the same seed writes the same model. Shared by this module's builder
    and :mod:`compiler.bench_models`', which add their own ``weight``/``op``/``model``.
    """

    def __init__(self, seed: int) -> None:
        self.rng = np.random.default_rng(seed)
        self.nodes: list[onnx.NodeProto] = []
        self.inits: list[onnx.TensorProto] = []
        self.n = 0

    def name(self, base: str) -> str:
        """``base`` with the next number: ``conv_7``."""
        self.n += 1
        return f"{base}_{self.n}"

    def const(self, data: np.ndarray, base: str = "c") -> str:
        """A new initializer holding ``data`` (its dtype and shape as given); returns its name."""
        nm = self.name(base)
        self.inits.append(numpy_helper.from_array(np.asarray(data), nm))
        return nm


class _Builder(SeededGraph):
    def weight(self, shape: tuple[int, ...], fan_in: int, base: str = "w") -> str:
        w = self.rng.standard_normal(shape).astype(np.float32) / np.float32(math.sqrt(fan_in))
        return self.const(w, base)

    def op(self, op_type: str, inputs: list[str], **attrs: Any) -> str:
        out = self.name(op_type.lower())
        self.nodes.append(helper.make_node(op_type, inputs, [out], name=self.name(op_type), **attrs))
        return out

    def model(self, name: str, inputs: list[onnx.ValueInfoProto], output: str, out_shape: list[int],
              opset: int) -> onnx.ModelProto:
        g = helper.make_graph(self.nodes, name, inputs,
                              [helper.make_tensor_value_info(output, TensorProto.FLOAT, out_shape)], self.inits)
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
        m.ir_version = 8
        onnx.checker.check_model(m)
        return m


def _layernorm(b: _Builder, x: str, hidden: int, as_op: bool) -> str:
    gamma = b.const((1.0 + 0.1 * b.rng.standard_normal(hidden)).astype(np.float32), "ln_g")
    beta = b.const((0.1 * b.rng.standard_normal(hidden)).astype(np.float32), "ln_b")
    if as_op:
        return b.op("LayerNormalization", [x, gamma, beta], axis=-1, epsilon=1e-5)
    mean = b.op("ReduceMean", [x], axes=[-1], keepdims=1)
    d = b.op("Sub", [x, mean])
    sq = b.op("Pow", [d, b.const(np.array(2.0, np.float32))])
    var = b.op("ReduceMean", [sq], axes=[-1], keepdims=1)
    std = b.op("Sqrt", [b.op("Add", [var, b.const(np.array(1e-5, np.float32))])])
    return b.op("Add", [b.op("Mul", [b.op("Div", [d, std]), gamma]), beta])


def _linear(b: _Builder, x: str, k: int, n: int) -> str:
    return b.op("Add", [b.op("MatMul", [x, b.weight((k, n), k)]), b.const(0.1 * b.rng.standard_normal(n)
                                                                          .astype(np.float32), "bias")])


def _gelu(b: _Builder, x: str, form: str) -> str:
    if form == "erf":
        e = b.op("Erf", [b.op("Div", [x, b.const(np.array(math.sqrt(2.0), np.float32))])])
        return b.op("Mul", [b.op("Mul", [x, b.op("Add", [e, b.const(np.array(1.0, np.float32))])]),
                            b.const(np.array(0.5, np.float32))])
    cube = b.op("Pow", [x, b.const(np.array(3.0, np.float32))])
    inner = b.op("Mul", [b.op("Add", [x, b.op("Mul", [cube, b.const(np.array(0.044715, np.float32))])]),
                         b.const(np.array(math.sqrt(2.0 / math.pi), np.float32))])
    t = b.op("Add", [b.op("Tanh", [inner]), b.const(np.array(1.0, np.float32))])
    return b.op("Mul", [b.op("Mul", [x, b.const(np.array(0.5, np.float32))]), t])


def bert_encoder(seq: int = 128, hidden: int = 256, heads: int = 4, ffn: int = 1024, layers: int = 2, *,
                 mask: bool = True, gelu: str = "erf", layernorm_op: bool = False, seed: int = 0) -> onnx.ModelProto:
    """A BERT-class encoder (see the module docstring); output ``y`` float32 ``[1, seq, hidden]``."""
    if hidden % heads:
        raise ValueError(f"hidden {hidden} is not a multiple of heads {heads}")
    b = _Builder(seed)
    d = hidden // heads
    heads_shape = b.const(np.array([1, seq, heads, d], np.int64), "shape")
    flat_shape = b.const(np.array([1, seq, hidden], np.int64), "shape")
    x = "x"
    for _ in range(layers):
        q = b.op("Transpose", [b.op("Reshape", [_linear(b, x, hidden, hidden), heads_shape])], perm=[0, 2, 1, 3])
        k = b.op("Transpose", [b.op("Reshape", [_linear(b, x, hidden, hidden), heads_shape])], perm=[0, 2, 3, 1])
        v = b.op("Transpose", [b.op("Reshape", [_linear(b, x, hidden, hidden), heads_shape])], perm=[0, 2, 1, 3])
        s = b.op("Div", [b.op("MatMul", [q, k]), b.const(np.array(math.sqrt(d), np.float32))])
        if mask:
            s = b.op("Add", [s, "mask"])
        p = b.op("Softmax", [s], axis=-1)
        c = b.op("Reshape", [b.op("Transpose", [b.op("MatMul", [p, v])], perm=[0, 2, 1, 3]), flat_shape])
        x = _layernorm(b, b.op("Add", [_linear(b, c, hidden, hidden), x]), hidden, layernorm_op)
        h = _gelu(b, _linear(b, x, hidden, ffn), gelu)
        x = _layernorm(b, b.op("Add", [_linear(b, h, ffn, hidden), x]), hidden, layernorm_op)
    ins = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, seq, hidden])]
    if mask:
        ins.append(helper.make_tensor_value_info("mask", TensorProto.FLOAT, [1, 1, 1, seq]))
    b.nodes.append(helper.make_node("Identity", [x], ["y"], name="output"))
    return b.model("bert_encoder", ins, "y", [1, seq, hidden], 17 if layernorm_op else 13)


def _conv(b: _Builder, x: str, cin: int, cout: int, k: int, stride: int = 1, group: int = 1, bias: bool = True) -> str:
    ins = [x, b.weight((cout, cin // group, k, k), cin // group * k * k)]
    if bias:
        ins.append(b.const((0.1 * b.rng.standard_normal(cout)).astype(np.float32), "bias"))
    return b.op("Conv", ins, kernel_shape=[k, k], strides=[stride, stride], pads=[k // 2] * 4, group=group)


def _act(b: _Builder, x: str, kind: str) -> str:
    return b.op("HardSwish", [x]) if kind == "hs" else b.op("Relu", [x])


# (expand, out, kernel, stride, se, act) per block: MobileNetV3-Small's first layers
MBV3_BLOCKS = [(16, 16, 3, 2, True, "re"), (72, 24, 3, 2, False, "re"), (88, 24, 3, 1, False, "re"),
               (96, 40, 5, 2, True, "hs"), (240, 40, 5, 1, True, "hs"), (120, 48, 5, 1, True, "hs")]


def mobilenet_block(size: int = 224, blocks: list | None = None, *, seed: int = 0) -> onnx.ModelProto:
    """A MobileNetV3-class CNN (see the module docstring); output ``y`` float32 ``[1, 100]``."""
    b = _Builder(seed)
    x = _act(b, _conv(b, "x", 3, 16, 3, 2), "hs")
    c = 16
    for e, o, k, s, se, act in blocks or MBV3_BLOCKS:
        h = _act(b, _conv(b, x, c, e, 1), act) if e != c else x
        h = _act(b, _conv(b, h, e, e, k, s, group=e), act)
        if se:
            sq = max(8, e // 4)
            g = b.op("GlobalAveragePool", [h])
            g = b.op("Relu", [_conv(b, g, e, sq, 1)])
            g = b.op("HardSigmoid", [_conv(b, g, sq, e, 1)], alpha=1.0 / 6, beta=0.5)
            h = b.op("Mul", [h, g])
        h = _conv(b, h, e, o, 1)
        x = b.op("Add", [h, x]) if s == 1 and o == c else h
        c = o
    g = b.op("GlobalAveragePool", [x])
    g = _act(b, _conv(b, g, c, 256, 1), "hs")
    f = b.op("Flatten", [g], axis=1)
    y = b.op("Gemm", [f, b.weight((100, 256), 256), b.const(np.zeros(100, np.float32))], transB=1)
    b.nodes.append(helper.make_node("Identity", [y], ["y"], name="output"))
    return b.model("mobilenet_block", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, size, size])],
                   "y", [1, 100], 14)


MODELS = {
    "bert_s128": lambda: bert_encoder(128, 256, 4, 1024, 2),
    "bert_s32_tanh_ln": lambda: bert_encoder(32, 128, 2, 512, 2, gelu="tanh", layernorm_op=True, mask=False),
    "mobilenet_v3ish": lambda: mobilenet_block(224),
}


def conv_pools(size: int = 16) -> onnx.ModelProto:
    """Every Conv schedule and the pooling and normalization around them, batch dim ``N``, input
    ``[N, 3, size, size]`` float32, output ``[N, 5]``: a small-K direct 3x3 Conv, MaxPool, a cache-blocked
    3x3 Conv with BatchNormalization, depthwise 3x3, a 1x1 Conv with a residual Add,
    InstanceNormalization, a padded AveragePool, nearest Resize, GlobalAveragePool and a Gemm head
    (the run-time batch tests of ``compiler.schedule.batch_loops`` and ``scripts/bench_dim_range.py``)."""
    rng = np.random.default_rng(3)

    def c(name: str, shape: tuple[int, ...], scale: float = 0.3) -> onnx.TensorProto:
        return numpy_helper.from_array((rng.standard_normal(shape) * scale).astype(np.float32), name)

    n = helper.make_node
    nodes = [n("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]), n("Relu", ["c1"], ["r1"]),
             n("MaxPool", ["r1"], ["p1"], kernel_shape=[2, 2], strides=[2, 2]),
             n("Conv", ["p1", "w2"], ["c2"], pads=[1, 1, 1, 1]),
             n("BatchNormalization", ["c2", "g", "be", "mu", "var"], ["bn"]), n("Relu", ["bn"], ["r2"]),
             n("Conv", ["r2", "wd"], ["d"], pads=[1, 1, 1, 1], group=32),
             n("Conv", ["d", "w3"], ["c3"]), n("Add", ["c3", "r2"], ["res"]),
             n("InstanceNormalization", ["res", "ig", "ib"], ["inorm"]),
             n("AveragePool", ["inorm"], ["ap"], kernel_shape=[3, 3], pads=[1, 1, 1, 1], count_include_pad=0),
             n("Resize", ["ap", "", "sc"], ["up"], mode="nearest"),
             n("GlobalAveragePool", ["up"], ["gp"]), n("Flatten", ["gp"], ["f"]),
             n("Gemm", ["f", "fc", "fb"], ["y"], transB=1)]
    inits = [c("w1", (16, 3, 3, 3)), c("b1", (16,)), c("w2", (32, 16, 3, 3), 0.1), c("g", (32,)), c("be", (32,)),
             c("mu", (32,)), numpy_helper.from_array((rng.random(32) + 0.5).astype(np.float32), "var"),
             c("wd", (32, 1, 3, 3)), c("w3", (32, 32, 1, 1), 0.2), c("ig", (32,)), c("ib", (32,)),
             numpy_helper.from_array(np.array([1, 1, 2, 2], np.float32), "sc"), c("fc", (5, 32)), c("fb", (5,))]
    g = helper.make_graph(nodes, "convpools", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, size, size])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 5])], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m


def main(argv: list[str] | None = None) -> int:
    """Compile each synthetic model at O2 and print Prism ms, ONNX Runtime ms and the ratio (one run)."""
    ap = argparse.ArgumentParser(prog="python -m compiler.synthetic", description=main.__doc__)
    ap.add_argument("models", nargs="*", default=list(MODELS), help=f"models (default all: {', '.join(MODELS)})")
    ap.add_argument("--pipeline", default="O2")
    args = ap.parse_args(argv)
    for name in args.models:
        r = compiler.compile(MODELS[name](), pipeline=args.pipeline)
        t = (r.of_type("model.timed") or [{}])[-1]
        v = (r.of_type("model.verified") or [{}])[-1]
        print(f"{name:20s} prism {t.get('prism_ms')} ms  ort {t.get('onnxruntime_ms')} ms  ratio {t.get('ratio')}  "
              f"kernels {len(r.of_type('kernel.compiled'))}  err {v.get('max_abs_error')} pass {v.get('passed')}"
              + (f"  error {r.error}" if r.error else ""), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
