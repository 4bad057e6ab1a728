"""Neural-network ops: convolution, pooling, normalization, Gemm/MatMul, softmax, recurrent
layers (ONNX operator spec, per op; output-size formulas as in the spec's "Outputs" sections).

Conv, ConvTranspose, Gemm and MatMul are ``out-elementwise-fusable`` (an elementwise epilogue can
run on their accumulators); pooling and normalizations are ``opaque`` or ``reduction`` as their
loop nests reduce over a window or an axis.
"""

from __future__ import annotations

import math

from onnx import TensorProto

from ..ir import TensorType
from ..ir.types import Dim
from .registry import InferContext, broadcast, op


def _spatial(ctx: InferContext, x_spatial: list[Dim], kernel: list[int], *, transpose: bool = False,
             ceil_mode: bool = False) -> list[Dim]:
    n = len(x_spatial)
    strides = list(ctx.attr("strides") or [1] * n)
    dil = list(ctx.attr("dilations") or [1] * n)
    pads = list(ctx.attr("pads") or [0] * (2 * n))
    auto_pad = ctx.attr("auto_pad", "NOTSET") or "NOTSET"
    if len(strides) != n or len(dil) != n or len(pads) != 2 * n or len(kernel) != n:
        raise ctx.fail(f"strides/dilations/pads/kernel_shape do not match {n} spatial dims "
                       f"(strides {strides}, dilations {dil}, pads {pads}, kernel {kernel})")
    if any(s <= 0 for s in strides) or any(d <= 0 for d in dil):
        raise ctx.fail(f"strides {strides} and dilations {dil} must be positive", attribute="strides")
    out: list[Dim] = []
    for i, d in enumerate(x_spatial):
        if not isinstance(d, int):
            out.append(f"{ctx.node.outputs[0].name}_s{i}")
            continue
        k_eff = dil[i] * (kernel[i] - 1) + 1
        if transpose:
            op_ = list(ctx.attr("output_padding") or [0] * n)
            if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
                out.append(d * strides[i])
            else:
                p = 0 if auto_pad == "VALID" else pads[i] + pads[i + n]
                out.append(strides[i] * (d - 1) + op_[i] + k_eff - p)
            continue
        if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
            out.append(-(-d // strides[i]))
        elif auto_pad == "VALID":
            out.append((d - k_eff) // strides[i] + 1)
        else:
            span = d + pads[i] + pads[i + n] - k_eff
            if ceil_mode:
                o = -(-span // strides[i]) + 1
                if (o - 1) * strides[i] >= d + pads[i]:  # the last window must start inside the input
                    o -= 1
            else:
                o = span // strides[i] + 1
            out.append(o)
        if isinstance(out[-1], int) and out[-1] <= 0:
            raise ctx.fail(f"spatial dim {i} of size {d} gives output size {out[-1]} (kernel {kernel[i]}, "
                           f"dilation {dil[i]}, pads {pads[i]}+{pads[i + n]}, stride {strides[i]})")
    return out


def _kernel(ctx: InferContext, w_spatial: list[Dim]) -> list[Dim]:
    """The window: ``kernel_shape`` when given (ONNX Conv/ConvTranspose: it must equal the weight's
    spatial dims W[2:]), else W[2:]. Raises CompileError naming ``kernel_shape`` when they differ."""
    given = ctx.attr("kernel_shape")
    if not given:
        return w_spatial
    if len(given) != len(w_spatial) or \
            any(isinstance(d, int) and d != k for d, k in zip(w_spatial, given, strict=True)):
        raise ctx.fail(f"kernel_shape {list(given)} does not match the weight's spatial dims {w_spatial}",
                       attribute="kernel_shape")
    return list(given)


@op("Conv", "ConvInteger", kind="out-elementwise-fusable")
def infer_conv(ctx: InferContext) -> list[TensorType]:
    x, w = ctx.shape(0), ctx.shape(1)
    if len(x) < 3 or len(w) != len(x):
        raise ctx.fail(f"input {list(x)} and weight {list(w)} must have the same rank >= 3")
    group = int(ctx.attr("group", 1))
    if isinstance(x[1], int) and isinstance(w[1], int) and x[1] != w[1] * group:
        raise ctx.fail(f"input has {x[1]} channels, weight expects {w[1]} x group {group}", attribute="group")
    kernel = _kernel(ctx, list(w[2:]))
    if not all(isinstance(k, int) for k in kernel):
        raise ctx.fail("kernel shape must be static", attribute="kernel_shape")
    spatial = _spatial(ctx, list(x[2:]), kernel)  # type: ignore[arg-type]
    elem = TensorProto.INT32 if ctx.node.op_type == "ConvInteger" else ctx.type(0).elem_type
    return [TensorType(elem, (x[0], w[0], *spatial))]


@op("ConvTranspose", kind="out-elementwise-fusable")
def infer_conv_transpose(ctx: InferContext) -> list[TensorType]:
    x, w = ctx.shape(0), ctx.shape(1)
    group = int(ctx.attr("group", 1))
    if isinstance(x[1], int) and (group < 1 or x[1] % group):
        raise ctx.fail(f"group {group} does not divide the {x[1]} input channels", attribute="group")
    if isinstance(x[1], int) and isinstance(w[0], int) and w[0] != x[1]:
        raise ctx.fail(f"W has {w[0]} input channels (dim 0) where X has {x[1]}")
    kernel = _kernel(ctx, list(w[2:]))
    m = w[1] * group if isinstance(w[1], int) else w[1]
    out_shape = ctx.attr("output_shape")
    if out_shape:
        spatial: list[Dim] = list(out_shape)[-(len(x) - 2):]
    else:
        spatial = _spatial(ctx, list(x[2:]), kernel, transpose=True)  # type: ignore[arg-type]
    return [TensorType(ctx.type(0).elem_type, (x[0], m, *spatial))]


@op("MaxPool", "AveragePool", "LpPool", kind="opaque")
def infer_pool(ctx: InferContext) -> list[TensorType]:
    x = ctx.shape(0)
    kernel = ctx.attr("kernel_shape")
    if not kernel:
        raise ctx.fail("attribute kernel_shape is required", attribute="kernel_shape")
    if ctx.node.op_type == "AveragePool" and ctx.attr("dilations") and ctx.opset < 19:
        pass
    spatial = _spatial(ctx, list(x[2:]), list(kernel), ceil_mode=bool(ctx.attr("ceil_mode", 0)))
    t = TensorType(ctx.type(0).elem_type, (x[0], x[1], *spatial))
    return [t, TensorType(TensorProto.INT64, t.shape)]


@op("GlobalAveragePool", "GlobalMaxPool", "GlobalLpPool", kind="reduction")
def infer_global_pool(ctx: InferContext) -> list[TensorType]:
    x = ctx.shape(0)
    return [TensorType(ctx.type(0).elem_type, (x[0], x[1], *[1] * (len(x) - 2)))]


@op("BatchNormalization", kind="broadcast")
def infer_batchnorm(ctx: InferContext) -> list[TensorType]:
    x = ctx.type(0)
    c = TensorType(ctx.type(1).elem_type, (ctx.shape(0)[1],) if len(ctx.shape(0)) > 1 else (1,))
    return [x, c, c, c, c]


@op("InstanceNormalization", "LRN", "MeanVarianceNormalization", kind="opaque")
def infer_norm_same(ctx: InferContext) -> list[TensorType]:
    """Same type as X. Refuses what ONNX Runtime refuses: an LRN ``size`` below 1 or an input below rank 3,
    an InstanceNormalization scale or B whose length is not X's channel count."""
    x = ctx.shape(0)
    if ctx.node.op_type == "LRN":
        if int(ctx.attr("size", 0)) < 1:
            raise ctx.fail(f"size {ctx.attr('size')} is below 1 (LRN needs size >= 1)", attribute="size")
        if len(x) < 3:
            raise ctx.fail(f"input has rank {len(x)}; LRN needs [N, C, D1, ...] (rank >= 3)")
    if ctx.node.op_type == "InstanceNormalization" and len(x) > 1 and isinstance(x[1], int):
        for i, name in ((1, "scale"), (2, "B")):
            if ctx.has(i) and ctx.shape(i) != (x[1],):
                raise ctx.fail(f"{name} has shape {list(ctx.shape(i))}; it needs X's {x[1]} channels")
    return [ctx.type(0)]


@op("GroupNormalization", kind="opaque")
def infer_group_norm(ctx: InferContext) -> list[TensorType]:
    return [ctx.type(0)]


@op("LayerNormalization", kind="opaque")
def infer_layer_norm(ctx: InferContext) -> list[TensorType]:
    x = ctx.shape(0)
    axis = ctx.axis(int(ctx.attr("axis", -1)), len(x))
    for i, name in ((1, "Scale"), (2, "B")):
        t = ctx.shape(i) if ctx.has(i) else ()
        if len(t) > len(x) - axis or any(isinstance(a, int) and isinstance(b, int) and a not in (1, b)
                                         for a, b in zip(reversed(t), reversed(x), strict=False)):
            raise ctx.fail(f"{name} has shape {list(t)}, which does not broadcast to the normalized "
                           f"dims {list(x[axis:])}")
    stat_elem = int(ctx.attr("stash_type", TensorProto.FLOAT))
    stat = TensorType.of(stat_elem, (*x[:axis], *[1] * (len(x) - axis)))
    return [ctx.type(0), stat, stat]


@op("Gemm", kind="out-elementwise-fusable")
def infer_gemm(ctx: InferContext) -> list[TensorType]:
    a, b = ctx.shape(0), ctx.shape(1)
    if len(a) != 2 or len(b) != 2:
        raise ctx.fail(f"A {list(a)} and B {list(b)} must be 2-D")
    m, ka = (a[1], a[0]) if ctx.attr("transA", 0) else (a[0], a[1])
    kb, n = (b[1], b[0]) if ctx.attr("transB", 0) else (b[0], b[1])
    if isinstance(ka, int) and isinstance(kb, int) and ka != kb:
        raise ctx.fail(f"inner dims differ: A {list(a)} (transA={ctx.attr('transA', 0)}) and B {list(b)} "
                       f"(transB={ctx.attr('transB', 0)})")
    if ctx.has(2):
        broadcast(ctx, (m, n), ctx.shape(2))  # C must broadcast to [M, N]
    return [TensorType(ctx.type(0).elem_type, (m, n))]


def _matmul_shape(ctx: InferContext, a: tuple[Dim, ...], b: tuple[Dim, ...]) -> tuple[Dim, ...]:
    if not a or not b:
        raise ctx.fail("MatMul inputs must have rank >= 1")
    a2 = (1, *a) if len(a) == 1 else a
    b2 = (*b, 1) if len(b) == 1 else b
    if isinstance(a2[-1], int) and isinstance(b2[-2], int) and a2[-1] != b2[-2]:
        raise ctx.fail(f"inner dims differ: {list(a)} x {list(b)}")
    batch = broadcast(ctx, a2[:-2], b2[:-2])
    out = [*batch, a2[-2], b2[-1]]
    if len(a) == 1:
        out.pop(-2)
    if len(b) == 1:
        out.pop(-1)
    return tuple(out)


@op("MatMul", kind="out-elementwise-fusable")
def infer_matmul(ctx: InferContext) -> list[TensorType]:
    return [TensorType(ctx.type(0).elem_type, _matmul_shape(ctx, ctx.shape(0), ctx.shape(1)))]


@op("MatMulInteger", kind="out-elementwise-fusable")
def infer_matmul_integer(ctx: InferContext) -> list[TensorType]:
    return [TensorType(TensorProto.INT32, _matmul_shape(ctx, ctx.shape(0), ctx.shape(1)))]


@op("QLinearMatMul", kind="out-elementwise-fusable")  # an integer MatMul: anchors its epilogue's group
def infer_qlinear_matmul(ctx: InferContext) -> list[TensorType]:
    return [TensorType(ctx.type(7).elem_type, _matmul_shape(ctx, ctx.shape(0), ctx.shape(3)))]


@op("Softmax", "LogSoftmax", "Hardmax", kind="opaque")
def infer_softmax(ctx: InferContext) -> list[TensorType]:
    r = ctx.rank(0)
    ctx.axis(int(ctx.attr("axis", -1 if ctx.opset >= 13 else 1)), max(r, 1))
    return [ctx.type(0)]


def _rnn(ctx: InferContext, gates_out: int) -> list[TensorType]:
    x = ctx.shape(0)
    if len(x) != 3:
        raise ctx.fail(f"X must be 3-D, got {list(x)}")
    hidden = ctx.attr("hidden_size")
    if hidden is None:
        w = ctx.shape(1)
        hidden = w[1] // gates_out if isinstance(w[1], int) else w[1]
    direction = ctx.attr("direction", "forward")
    nd = 2 if direction == "bidirectional" else 1
    layout = int(ctx.attr("layout", 0))
    seq, batch = (x[1], x[0]) if layout else (x[0], x[1])
    elem = ctx.type(0).elem_type
    y = (batch, seq, nd, hidden) if layout else (seq, nd, batch, hidden)
    yh = (batch, nd, hidden) if layout else (nd, batch, hidden)
    return [TensorType(elem, y), TensorType(elem, yh), TensorType(elem, yh)]


@op("LSTM", kind="opaque")
def infer_lstm(ctx: InferContext) -> list[TensorType]:
    return _rnn(ctx, 4)


@op("GRU", kind="opaque")
def infer_gru(ctx: InferContext) -> list[TensorType]:
    return _rnn(ctx, 3)


@op("RNN", kind="opaque")
def infer_rnn(ctx: InferContext) -> list[TensorType]:
    return _rnn(ctx, 1)


_ = math
