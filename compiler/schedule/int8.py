"""INT8 micro-kernels: QLinearConv, ConvInteger (group 1 or depthwise, 2-D), QLinearMatMul, MatMulInteger and
``com.microsoft.QGemm`` with a constant weight, with their group's epilogue.

The anchor is a GEMM of int32 accumulators held in registers across the reduction, like the float
micro-kernel (``compiler.schedule.microkernel``), but each step multiplies ``G`` k at once: a word of the
packed operand holds G values (``compiler.quant.pack``) and one ``dpbusd`` (G = 4, u8 x s8: AVX-512 VNNI
``vpdpbusd``, 64 multiply-adds per instruction; on AVX2 ``vpmaddubsw`` + ``vpmaddwd`` with ones, 32 per
pair, chosen only when no weight pair can saturate int16: ``pack.pairs_fit_i16``) or ``dpwssd`` (G = 2,
s16 x s16: ``vpdpwssd``, or ``pmaddwd`` + add on x86 without VNNI) updates 16 (8, 4) i32 lanes
(``compiler.codegen.dot``).

* Conv: lanes = output pixels (so the NCHW output is stored contiguously), rows = output channels (the
  weight word is broadcast). Weights are packed at compile time to ``[Co/MR, KG, MR]`` words. The input
  is padded once into a scratch copy (pad value: the input zero point), then each column block packs its
  ``[KG, pixels]`` words (im2col and interleave in one pass; for a 1x1 stride-1 Conv straight from X).
* Depthwise Conv (group = channels): each channel padded once, output pixels in vector lanes, the taps
  unrolled as i32 multiply-adds of ``x - x_zero_point`` and the weight (``int8_nest.depthwise_nest``).
* Gemm / MatMul (constant B): lanes = output columns, B packed to ``[N/NR, KG, NR]`` words, the word of
  G activation bytes of row m broadcast (read as one i32 when K is a multiple of 4, an int8 activation
  flipped to unsigned with one xor).

Zero points and the int8 activation shift are exact: with G = 2 the activation is stored as ``x - z``
(16 bits); with G = 4 the compensation ``-(z + off) sum_k w`` is folded into the int32 bias at compile
time. The epilogue is the group's own expression on the accumulator: requantization (float32
multiplier, round half to even, saturation), then whatever follows in the group (a residual QLinearAdd,
a folded Relu as Clip), applied before the one store. Returns None where it does not apply (the
generic lowering of ``compiler.loops.ops_quant`` then computes the same values).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ..ir import FusedGroup
from ..loops.ir import Buffer, Cast, Expr, Int, Load, add, mul
from ..loops.lower import KernelArg, LoweredKernel
from ..loops.ops_nn import _geom
from ..loops.ops_qlinear import requantize, requantize_float
from ..loops.registry import LowerCtx
from ..loops.tensor import Tensor
from ..ops.registry import registry_key
from ..quant import pack
from ..targets import Target
from .gemm import VIRTUAL
from .gemm import epilogue as _epilogue
from .gemm import finish as _finish
from .gemm import lower_around as _lower_around
from .gemm import probe_buffer as _probe_buffer
from .int8_nest import conv_nest, depthwise_nest, gemm_nest
from .knobs import choose

ANCHORS = ("QLinearConv", "ConvInteger", "QLinearMatMul", "MatMulInteger", "com.microsoft.QGemm")
_SLOTS = {  # x, x_scale, x_zp, w, w_scale, w_zp, y_scale, y_zp, bias
    "QLinearConv": (0, 1, 2, 3, 4, 5, 6, 7, 8), "QLinearMatMul": (0, 1, 2, 3, 4, 5, 6, 7, None),
    "com.microsoft.QGemm": (0, 1, 2, 3, 4, 5, 7, 8, 6), "ConvInteger": (0, None, 2, 1, None, 3, None, None, None),
    "MatMulInteger": (0, None, 2, 1, None, 3, None, None, None),
    "Conv": (0, None, None, 1, None, None, None, None, 2)}  # the float Conv of the bf16 kernels (schedule.reduced)


def vnni(target: Target) -> bool:
    """True where the target has AVX-512 VNNI (``vpdpbusd`` on 512-bit vectors)."""
    feats = set(target.features.split(","))
    return "+avx512vnni" in feats and "+avx512f" in feats


def _const(node: Any, slot: int | None, outer: dict[int, Any]) -> np.ndarray | None:
    """The constant at input ``slot`` (a group body's input read through ``outer`` to the outer value)."""
    if slot is None:
        return None
    v = node.input(slot)
    v = outer.get(id(v), v) if v is not None else None
    return None if v is None or v.const is None else np.asarray(v.const)


def _spec(anchor: Any, outer: dict[int, Any]) -> dict[str, Any] | None:
    """The anchor's constant operands: weight as int [M, K] (``w - w_zp``; M = output channel / column),
    x zero point, signedness, bias, requantization multipliers (None: an int32 result), out dtype."""
    key = registry_key(anchor)
    sx, sxs, sxz, sw, sws, swz, sys_, syz, sb = _SLOTS[key]
    x, w = anchor.input(sx), _const(anchor, sw, outer)
    if x is None or x.type is None or x.type.short not in ("u8", "i8") or w is None or w.dtype.kind not in "iu":
        return None
    xz = _const(anchor, sxz, outer)
    if (anchor.input(sxz) is not None and xz is None) or (xz is not None and xz.size != 1):
        return None
    wz = _const(anchor, swz, outer)
    if anchor.input(swz) is not None and wz is None:
        return None
    conv = "Conv" in key
    if conv:
        group = int(anchor.attr("group", 1))
        if w.ndim != 4 or (group != 1 and not (w.shape[1] == 1 and group == w.shape[0])):
            return None
        wm = w.reshape(w.shape[0], -1).astype(np.int64) - (0 if wz is None else wz.astype(np.int64).reshape(-1, 1))
    else:
        if w.ndim != 2:
            return None
        wk = w.T if key.endswith("QGemm") and int(anchor.attr("transB", 0)) else w  # [K, N]
        if key.endswith("QGemm") and int(anchor.attr("transA", 0)):
            return None
        zcol = 0 if wz is None else wz.astype(np.int64).reshape(1, -1)
        wm = (wk.astype(np.int64) - zcol).T  # [N, K]
    spec = {"conv": conv, "depthwise": conv and int(anchor.attr("group", 1)) > 1, "w": wm, "xz": 0 if xz is None else int(xz.reshape(-1)[0]), "signed": x.type.short == "i8",
            "bias": np.zeros(wm.shape[0], np.int64), "mult": None, "yz": 0}
    b = _const(anchor, sb, outer)
    if sb is not None and anchor.input(sb) is not None:
        if b is None:
            return None
        spec["bias"] = np.broadcast_to(b.astype(np.int64).reshape(-1), (wm.shape[0],)).copy()
    if sxs is not None:
        xs, ws = _const(anchor, sxs, outer), _const(anchor, sws, outer)
        ys = _const(anchor, sys_, outer) if sys_ is not None and anchor.input(sys_) is not None else None
        if xs is None or ws is None or xs.size != 1:
            return None
        alpha = float(anchor.attr("alpha", 1.0)) if key.endswith("QGemm") else 1.0
        wsv = np.broadcast_to(ws.astype(np.float32).reshape(-1), (wm.shape[0],))
        if ys is None:  # QGemm without y_scale: a float32 output
            spec["scale"] = (np.float32(xs.reshape(-1)[0]) * np.float32(alpha) * wsv).astype(np.float32)
        else:
            spec["mult"] = pack.multiplier(float(xs.reshape(-1)[0]), wsv, float(ys.reshape(-1)[0]), alpha)
            yz = _const(anchor, syz, outer)
            spec["yz"] = 0 if yz is None else int(yz.reshape(-1)[0])
    return spec


def lower_anchored(node: Any, kernel: str, opset: int, anchor: Any, acc_dtype: str,
                   value: Callable[[LowerCtx, Any, Buffer], Callable[[list[Expr]], Expr]]
                   ) -> tuple[LoweredKernel, Buffer, Tensor, Buffer] | None:
    """The group ``node`` lowered with ``anchor``'s result replaced by ``value(ctx, anchor, acc)``'s
    function of the output index (``acc``: the virtual accumulator buffer, ``acc_dtype``), not built:
    ``(kernel, output buffer, output tensor, the anchor's input buffer)``, or None when the group has
    several outputs or the anchor reads a computed (not stored) input."""
    def override(ctx: LowerCtx, n: Any, ins: list[Tensor | None]) -> list[Tensor]:
        shape = ctx.out_shape(n)
        return [Tensor(shape, ctx.out_dtype(n), value(ctx, n, Buffer(VIRTUAL, acc_dtype, shape, "virtual")))]

    lowered = _lower_around(node, kernel, opset, anchor, override)
    if lowered is None:
        return None
    lk, out_buf, out_t, ins = lowered
    x = ins[0]
    xbuf = _probe_buffer(x) if x is not None else None
    return None if xbuf is None else (lk, out_buf, out_t, xbuf)


def try_int8(node: Any, kernel: str, opset: int, target: Target) -> LoweredKernel | None:
    """The INT8 micro-kernel of a group anchored by an integer Conv/MatMul/Gemm, or None (see module)."""

    nodes = list(node.body.nodes) if isinstance(node, FusedGroup) else [node]
    anchors = [n for n in nodes if registry_key(n) in ANCHORS]
    if len(anchors) != 1 or len(node.outputs) != 1:
        return None
    anchor = anchors[0]
    t = anchor.outputs[0].type
    outer = {id(i): o for i, o in zip(node.body.inputs, node.inputs, strict=True)} if isinstance(node, FusedGroup) \
        else {}
    spec = _spec(anchor, outer)
    if spec is None or t is None or not t.is_static:
        return None
    group = pack.choose_group(spec["w"], vnni(target), "+avx2" in target.features.split(","))
    bias = spec["bias"] + (0 if spec["depthwise"] else pack.compensation(spec["w"], spec["xz"], spec["signed"], group))
    # a bias near the int32 limit (a channel of tiny weight scale) plus the zero-point compensation and the
    # accumulator (at most 256 sum_k |w| per row) may leave int32: the part of the bias beyond what leaves room
    # for the accumulator is added in float32, where the requantization converts the sum anyway
    limit = 2 ** 31 - 1 - 256 * int(np.abs(spec["w"]).sum(axis=1).max(initial=0))
    big = bool(np.abs(bias).max(initial=0) > limit)
    if limit <= 0 or (big and spec["mult"] is None and "scale" not in spec):
        return None
    clipped = np.clip(bias, -limit, limit)
    excess = (bias - clipped).astype(np.float32)
    bias = clipped

    def value(ctx: LowerCtx, n: Any, vbuf: Buffer) -> Callable[[list[Expr]], Expr]:
        bt = ctx.const_tensor(bias.astype(np.int32), f"{n.label}.bias_total")
        ch = 1 if spec["conv"] else len(vbuf.shape) - 1
        mt = ctx.const_tensor(spec["mult"], f"{n.label}.multiplier") if spec["mult"] is not None else None
        st = ctx.const_tensor(spec["scale"], f"{n.label}.scale") if "scale" in spec else None
        dt = ctx.out_dtype(n)

        et = ctx.const_tensor(excess, f"{n.label}.bias_excess") if big else None

        def fn(idx: list[Expr]) -> Expr:
            acc = add(Load(vbuf, tuple(idx)), bt[[idx[ch]]])
            wide = add(Cast("f32", acc), et[[idx[ch]]]) if et is not None else Cast("f32", acc)
            if mt is not None and et is not None:
                return requantize_float(mul(wide, mt[[idx[ch]]]), Int(spec["yz"], "i32"), dt)
            if mt is not None:
                return requantize(acc, mt[[idx[ch]]], Int(spec["yz"], "i32"), dt)
            if st is not None:
                return mul(wide, st[[idx[ch]]])
            return acc
        return fn

    lowered = lower_anchored(node, kernel, opset, anchor, "i32", value)
    if lowered is None:
        return None
    lk, out_buf, out_t, xbuf = lowered
    sched = lk.func.attrs.setdefault("schedule", [])
    how = "vpdpbusd (AVX-512 VNNI), u8 x s8 in 4-byte words" if group == 4 and vnni(target) else \
        ("vpmaddubsw + vpmaddwd(1) (AVX2), u8 x s8 in 4-byte words (no weight pair can saturate int16)"
         if group == 4 else "pmaddwd / vpdpwssd: s16 x s16 in 2-halfword words (exact; " +
         ("a weight pair could saturate vpmaddubsw's int16: quantize{reduce-range=true} gives 7-bit weights)"
          if not vnni(target) else "weights beyond int8)"))
    if spec["depthwise"]:
        how = "depthwise: i32 multiply-adds of (x - x_zero_point) and w, output pixels in vector lanes"
    sched.append(f"int8 dot step: {how}")
    if spec["depthwise"]:
        return _depthwise(lk, anchor, xbuf, spec, out_buf, out_t, target)
    if spec["conv"]:
        return conv_kernel(lk, anchor, xbuf, spec, group, out_buf, out_t, target)
    return gemm_kernel(lk, anchor, xbuf, spec, group, out_buf, out_t, target)


def _depthwise(lk: LoweredKernel, node: Any, xbuf: Buffer, spec: dict[str, Any], out_buf: Buffer, out_t: Tensor,
               target: Target) -> LoweredKernel | None:
    """Depthwise QLinearConv (group = channels): ``compiler.schedule.int8_nest.depthwise_nest``; the zero point
    is subtracted in the kernel, so the bias needs no compensation."""
    kh, kw = node.input(_SLOTS[registry_key(node)][3]).type.shape[2:]
    oh, ow = out_t.shape[2], out_t.shape[3]
    ep = _epilogue(out_t, 4, (oh, ow))
    if ep is None:
        return None
    xt = Tensor(xbuf.shape, xbuf.dtype, lambda i: Load(xbuf, tuple(i)))
    st, dil, pb, _, _ = _geom(node, xt, out_t.shape, [kh, kw])
    wbuf = _add_const(lk, "wdw", spec["w"].astype(np.int32), f"{node.label}.W - w_zero_point [C, {kh * kw}]")
    body = depthwise_nest(lk, xbuf, wbuf, out_buf, ep[0], ep[1], spec, target.vector_width_f32,
                          (xbuf.shape[0], xbuf.shape[1], xbuf.shape[2], xbuf.shape[3], kh, kw, oh, ow), (st, dil, pb))
    return _finish(lk, [body], xbuf.shape[0] * 2 * xbuf.shape[1] * kh * kw * oh * ow)


def _add_const(lk: LoweredKernel, name: str, data: np.ndarray, label: str) -> Buffer:
    buf = Buffer(name, "i32", tuple(data.shape), "const")
    lk.args.append(KernelArg("const", label, buf, np.ascontiguousarray(data, dtype=np.int32)))
    return buf


def _pick_mr(m: int, width: int) -> int:
    choices = (8, 6, 4, 2, 1) if width >= 16 else (4, 3, 2, 1)
    return next(r for r in choices if m % r == 0)


def conv_tile(co: int, width: int, registers: int) -> tuple[int, int]:
    """A Conv's register tile ``(mr output channels, nv vectors of output pixels)``: knob ``int8_tile``
    (default ``mr x 2``, mr from :func:`_pick_mr`); its choices keep the ``mr * nv`` accumulators, the ``nv``
    panel vectors and one broadcast weight within the target's ``registers`` vector registers."""
    mr = _pick_mr(co, width)
    opts = [f"{r}x{v}" for r in (1, 2, 4, 6, 8, 12, 14, 16) if co % r == 0 for v in (1, 2, 3, 4)
            if r * v + v + 1 <= registers]
    r, v = (int(x) for x in str(choose("int8_tile", f"{mr}x2", opts)).split("x"))
    return r, v


def conv_kernel(lk: LoweredKernel, node: Any, xbuf: Buffer, spec: dict[str, Any], group: int, out_buf: Buffer,
          out_t: Tensor, target: Target) -> LoweredKernel | None:
    n_b, c_n, h, w_ = xbuf.shape
    wm = spec["w"]
    co, k_n = wm.shape
    kh, kw = node.input(_SLOTS[registry_key(node)][3]).type.shape[2:]
    oh, ow = out_t.shape[2], out_t.shape[3]
    ep = _epilogue(out_t, 4, (oh, ow))
    if ep is None:
        return None
    epi, vs = ep
    xt = Tensor(xbuf.shape, xbuf.dtype, lambda i: Load(xbuf, tuple(i)))
    st, dil, pb, _, _ = _geom(node, xt, out_t.shape, [kh, kw])
    width = target.vector_width_f32
    mr, nv = conv_tile(co, width, 32 if width >= 16 else 16)
    words = pack.tile_rows(pack.pack_any(wm, group, spec.get("format")), mr)
    wbuf = _add_const(lk, "wpack", words, f"{node.label}.W packed [Co/{mr}, K/{group}, {mr}] words")
    lk.func.attrs["schedule"].append(f"pack(W: [{co}, {c_n}, {kh}, {kw}] -> [{co // mr}, {words.shape[1]}, {mr}] "
                                     f"int32 words of {group})  # at compile time")
    body = conv_nest(lk, xbuf, wbuf, out_buf, epi, vs, spec, group, mr, nv * width, width,
                     (n_b, c_n, h, w_, co, k_n, kh, kw, oh, ow), (st, dil, pb))
    return _finish(lk, [body], n_b * 2 * co * k_n * oh * ow)


def gemm_kernel(lk: LoweredKernel, node: Any, abuf: Buffer, spec: dict[str, Any], group: int, out_buf: Buffer,
          out_t: Tensor, target: Target) -> LoweredKernel | None:
    wm = spec["w"]
    n_n, k_n = wm.shape
    if abuf.shape[-1] != k_n or out_t.shape[-1] != n_n:
        return None
    m_n = int(np.prod(out_t.shape[:-1]))
    if int(np.prod(abuf.shape[:-1])) != m_n:
        return None
    ep = _epilogue(out_t, out_t.rank, None)
    if ep is None:
        return None
    epi, vs = ep
    width = target.vector_width_f32
    mr = _pick_mr(m_n, width)
    nr = (4 if mr == 1 else 2) * width
    words = pack.tile_cols(pack.pack_any(wm, group, spec.get("format")), nr)
    bbuf = _add_const(lk, "bpack", words, f"{node.label}.B packed [N/{nr}, K/{group}, {nr}] words")
    lk.func.attrs["schedule"].append(f"pack(B: [{k_n}, {n_n}] -> [{words.shape[0]}, {words.shape[1]}, {nr}] int32 "
                                     f"words of {group})  # at compile time, zero-padded")
    body = gemm_nest(lk, abuf, bbuf, out_buf, epi, vs, spec, group, mr, nr, width, (m_n, n_n, k_n))
    return _finish(lk, [body], 2 * m_n * n_n * k_n)


__all__ = ["ANCHORS", "conv_kernel", "conv_tile", "gemm_kernel", "lower_anchored", "try_int8", "vnni"]
