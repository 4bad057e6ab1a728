"""Benchmark models of the kinds users bring, built with ``onnx.helper`` with seeded random weights.

No PyTorch wheel for the CPU can be installed here (only PyPI is reachable; its ``torch`` pulls the
CUDA stack), so the models are written as exporters write them (``torch.onnx.export`` at opset 17:
attention as MatMul/Transpose/Softmax, LayerNormalization decomposed into ReduceMean/Sub/Pow/Sqrt/Div,
GELU as its Erf or Tanh formula, BatchNormalization folded into Conv bias, ReLU6 as Clip), with
weights drawn from ``numpy.random.default_rng(seed)`` and scaled by ``1/sqrt(fan_in)`` so that
activations stay of order one through the layers.

:data:`BENCH_MODELS` names each builder with its input shapes; :func:`load` builds a model once and
caches it under ``~/.cache/prism/models/<name>.onnx`` (``PRISM_CACHE`` overrides ``~/.cache/prism``),
never in the repository; ``scripts/export_bench_models.py`` writes them all.

- ``bert_tiny_2l``: 2 encoder layers, 32 tokens, hidden 128, 2 heads, FFN 512, decomposed LayerNorm,
  GELU (Erf), an additive attention mask (the last 4 tokens padded): a sub-millisecond model.
- ``vit_enc_4l``: 4 encoder layers, 64 tokens, hidden 256, 4 heads, FFN 1024, ``LayerNormalization``
  (opset 17), GELU (Tanh form).
- ``mobilenet_v2ish``: width-0.5 MobileNetV2 at 1x3x160x160: inverted residuals (1x1 expand, 3x3
  depthwise, 1x1 project), Clip(0, 6), residual Adds, GlobalAveragePool, Gemm.
- ``mobilenet_v3ish``: MobileNetV3-Small-class at 1x3x224x224: depthwise 3x3/5x5, squeeze-excitation
  (GlobalAveragePool, 1x1 Conv, Relu, 1x1 Conv, HardSigmoid, Mul), HardSwish.
- ``gru_kws``: a keyword-spotting recurrent model: 2 GRU layers (hidden 64) over 49 frames of 40
  features, the last frame through Gemm to 12 classes.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper

from .synthetic import SeededGraph

OPSET = 17


class _Builder(SeededGraph):
    """Nodes and initializers of one graph, with unique names and seeded weights."""

    def weight(self, shape: tuple[int, ...], fan_in: int, base: str = "w") -> str:
        w = self.rng.standard_normal(shape) / math.sqrt(fan_in)
        return self.const(w.astype(np.float32), base)

    def op(self, op: str, *inputs: str, **attrs: Any) -> str:
        out = self.name(op.lower())
        self.nodes.append(helper.make_node(op, list(inputs), [out], name=out, **attrs))
        return out

    def model(self, name: str, inputs: dict[str, list[int]], output: str, shape: list[int]) -> onnx.ModelProto:
        g = helper.make_graph(self.nodes, name, [helper.make_tensor_value_info(k, TensorProto.FLOAT, v)
                                                 for k, v in inputs.items()],
                              [helper.make_tensor_value_info(output, TensorProto.FLOAT, shape)], self.inits)
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="prism-bench")
        m.ir_version = 8
        onnx.checker.check_model(m)
        return m


# transformer encoders --------------------------------------------------------------------------
def _layer_norm(b: _Builder, x: str, h: int, decomposed: bool) -> str:
    g, beta = b.const(np.ones(h, np.float32), "ln_g"), b.const(np.zeros(h, np.float32), "ln_b")
    if not decomposed:
        return b.op("LayerNormalization", x, g, beta, axis=-1, epsilon=1e-5)
    mean = b.op("ReduceMean", x, axes=[-1])
    d = b.op("Sub", x, mean)
    var = b.op("ReduceMean", b.op("Pow", d, b.const(np.array(2.0, np.float32))), axes=[-1])
    std = b.op("Sqrt", b.op("Add", var, b.const(np.array(1e-5, np.float32))))
    return b.op("Add", b.op("Mul", b.op("Div", d, std), g), beta)


def _gelu(b: _Builder, x: str, tanh: bool) -> str:
    half = b.const(np.array(0.5, np.float32))
    one = b.const(np.array(1.0, np.float32))
    if tanh:
        cube = b.op("Mul", b.op("Pow", x, b.const(np.array(3.0, np.float32))), b.const(np.array(0.044715, np.float32)))
        inner = b.op("Mul", b.op("Add", x, cube), b.const(np.array(math.sqrt(2 / math.pi), np.float32)))
        t = b.op("Tanh", inner)
    else:
        t = b.op("Erf", b.op("Div", x, b.const(np.array(math.sqrt(2.0), np.float32))))
    return b.op("Mul", b.op("Mul", x, half), b.op("Add", t, one))


def _linear(b: _Builder, x: str, n_in: int, n_out: int) -> str:
    return b.op("Add", b.op("MatMul", x, b.weight((n_in, n_out), n_in)), b.const(np.zeros(n_out, np.float32), "bias"))


def _encoder_layer(b: _Builder, x: str, s: int, h: int, heads: int, ffn: int, mask: str | None,
                   decomposed: bool, tanh: bool) -> str:
    hd = h // heads
    split = b.const(np.array([1, s, heads, hd], np.int64), "shape")
    q, k, v = (b.op("Reshape", _linear(b, x, h, h), split) for _ in range(3))
    q = b.op("Transpose", q, perm=[0, 2, 1, 3])
    k = b.op("Transpose", k, perm=[0, 2, 3, 1])
    v = b.op("Transpose", v, perm=[0, 2, 1, 3])
    scores = b.op("Mul", b.op("MatMul", q, k), b.const(np.array(1 / math.sqrt(hd), np.float32)))
    if mask is not None:
        scores = b.op("Add", scores, mask)
    ctx = b.op("MatMul", b.op("Softmax", scores, axis=-1), v)
    ctx = b.op("Reshape", b.op("Transpose", ctx, perm=[0, 2, 1, 3]), b.const(np.array([1, s, h], np.int64), "shape"))
    x1 = _layer_norm(b, b.op("Add", x, _linear(b, ctx, h, h)), h, decomposed)
    ff = _linear(b, _gelu(b, _linear(b, x1, h, ffn), tanh), ffn, h)
    return _layer_norm(b, b.op("Add", x1, ff), h, decomposed)


def _encoder(name: str, layers: int, s: int, h: int, heads: int, ffn: int, *, masked: bool, decomposed: bool,
             tanh: bool, seed: int) -> onnx.ModelProto:
    b = _Builder(seed)
    mask = None
    if masked:  # additive mask: the last 4 tokens are padding
        m = np.zeros((1, 1, 1, s), np.float32)
        m[..., -4:] = -10000.0
        mask = b.const(m, "mask")
    x = "x"
    for _ in range(layers):
        x = _encoder_layer(b, x, s, h, heads, ffn, mask, decomposed, tanh)
    return b.model(name, {"x": [1, s, h]}, x, [1, s, h])


def bert_tiny_2l() -> onnx.ModelProto:
    return _encoder("bert_tiny_2l", 2, 32, 128, 2, 512, masked=True, decomposed=True, tanh=False, seed=11)


def vit_enc_4l() -> onnx.ModelProto:
    return _encoder("vit_enc_4l", 4, 64, 256, 4, 1024, masked=False, decomposed=False, tanh=True, seed=12)


# depthwise-separable CNNs ----------------------------------------------------------------------
def _conv(b: _Builder, x: str, cin: int, cout: int, k: int, stride: int = 1, group: int = 1) -> str:
    w = b.weight((cout, cin // group, k, k), cin // group * k * k)
    bias = b.const((b.rng.standard_normal(cout) * 0.1).astype(np.float32), "bias")
    return b.op("Conv", x, w, bias, kernel_shape=[k, k], strides=[stride, stride], pads=[k // 2] * 4, group=group)


def _relu6(b: _Builder, x: str) -> str:
    return b.op("Clip", x, b.const(np.array(0.0, np.float32)), b.const(np.array(6.0, np.float32)))


def _head(b: _Builder, x: str, c: int, classes: int) -> str:
    flat = b.op("Flatten", b.op("GlobalAveragePool", x), axis=1)
    return b.op("Gemm", flat, b.weight((classes, c), c), b.const(np.zeros(classes, np.float32), "bias"), transB=1)


def mobilenet_v2ish() -> onnx.ModelProto:
    b = _Builder(21)
    x = _relu6(b, _conv(b, "x", 3, 16, 3, 2))
    c = 16
    for t, cout, n, s in [(1, 8, 1, 1), (6, 12, 2, 2), (6, 16, 3, 2), (6, 32, 4, 2), (6, 48, 3, 1), (6, 80, 3, 2),
                          (6, 160, 1, 1)]:
        for i in range(n):
            stride, hidden = (s if i == 0 else 1), c * t
            y = _relu6(b, _conv(b, x, c, hidden, 1)) if t != 1 else x
            y = _relu6(b, _conv(b, y, hidden, hidden, 3, stride, group=hidden))
            y = _conv(b, y, hidden, cout, 1)
            x = b.op("Add", x, y) if stride == 1 and c == cout else y
            c = cout
    x = _relu6(b, _conv(b, x, c, 640, 1))
    return b.model("mobilenet_v2ish", {"x": [1, 3, 160, 160]}, _head(b, x, 640, 1000), [1, 1000])


def _hswish(b: _Builder, x: str) -> str:
    return b.op("HardSwish", x)


def _se(b: _Builder, x: str, c: int) -> str:
    r = max(8, c // 4)
    s = b.op("Relu", _conv(b, b.op("GlobalAveragePool", x), c, r, 1))
    s = b.op("HardSigmoid", _conv(b, s, r, c, 1), alpha=1 / 6, beta=0.5)
    return b.op("Mul", x, s)


def mobilenet_v3ish() -> onnx.ModelProto:
    b = _Builder(22)
    x = _hswish(b, _conv(b, "x", 3, 16, 3, 2))
    c = 16
    for k, exp, cout, se, hs, s in [(3, 16, 16, True, False, 2), (3, 72, 24, False, False, 2),
                                    (3, 88, 24, False, False, 1), (5, 96, 40, True, True, 2),
                                    (5, 240, 40, True, True, 1), (5, 120, 48, True, True, 1),
                                    (5, 288, 96, True, True, 2), (5, 576, 96, True, True, 1)]:
        act = (lambda v: _hswish(b, v)) if hs else (lambda v: b.op("Relu", v))
        y = act(_conv(b, x, c, exp, 1)) if exp != c else x
        y = act(_conv(b, y, exp, exp, k, s, group=exp))
        if se:
            y = _se(b, y, exp)
        y = _conv(b, y, exp, cout, 1)
        x = b.op("Add", x, y) if s == 1 and c == cout else y
        c = cout
    x = _hswish(b, _conv(b, x, c, 576, 1))
    return b.model("mobilenet_v3ish", {"x": [1, 3, 224, 224]}, _head(b, x, 576, 1000), [1, 1000])


# recurrent -------------------------------------------------------------------------------------
def gru_kws() -> onnx.ModelProto:
    b = _Builder(31)
    t, feat, hid, classes = 49, 40, 64, 12
    x, n_in = "x", feat
    for _ in range(2):
        w = b.weight((1, 3 * hid, n_in), n_in)
        r = b.weight((1, 3 * hid, hid), hid)
        bias = b.const(np.zeros((1, 6 * hid), np.float32), "bias")
        y = b.op("GRU", x, w, r, bias, hidden_size=hid, linear_before_reset=1)  # [T, 1, 1, H]
        x = b.op("Squeeze", y, b.const(np.array([1], np.int64), "axes"))  # [T, 1, H]
        n_in = hid
    last = b.op("Gather", x, b.const(np.array(t - 1, np.int64), "idx"), axis=0)  # [1, H]
    out = b.op("Gemm", last, b.weight((classes, hid), hid), b.const(np.zeros(classes, np.float32), "bias"), transB=1)
    return b.model("gru_kws", {"x": [t, 1, feat]}, out, [1, classes])


BENCH_MODELS: dict[str, Callable[[], onnx.ModelProto]] = {
    "bert_tiny_2l": bert_tiny_2l, "vit_enc_4l": vit_enc_4l, "mobilenet_v2ish": mobilenet_v2ish,
    "mobilenet_v3ish": mobilenet_v3ish, "gru_kws": gru_kws,
}


def cache_dir() -> Path:
    """``$PRISM_CACHE/models`` (default ``~/.cache/prism/models``)."""
    return Path(os.environ.get("PRISM_CACHE", Path.home() / ".cache" / "prism")) / "models"


def load(name: str) -> Path:
    """The path of bench model ``name`` (:data:`BENCH_MODELS`), built and cached on first use.
    Raises KeyError naming the known models for another name."""
    if name not in BENCH_MODELS:
        raise KeyError(f"unknown bench model {name!r}; known: {', '.join(BENCH_MODELS)}")
    path = cache_dir() / f"{name}.onnx"
    if not path.is_file():
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".tmp{os.getpid()}")
        onnx.save_model(BENCH_MODELS[name](), str(tmp))
        tmp.replace(path)
    return path
