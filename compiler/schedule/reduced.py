"""The bfloat16 micro-kernels of ``quantize{dtype=bf16}`` (``compiler.quant.reduced``): Conv (group 1,
2-D), MatMul and Gemm with a constant weight on the bfloat16 grid whose activation input the graph rounds
to bfloat16 (a ``prism.NarrowCast{to=bfloat16}``, possibly the last node of the producing group), on
AVX-512 BF16 ``vdpbf16ps``: per f32 lane and instruction, two bf16 products added to a float32
accumulator (32 multiply-adds per 512-bit instruction, twice the f32 FMA's).

The loop nests are the INT8 kernels' (``compiler.schedule.int8_nest``) with words of two bfloat16 instead
of four or two integers: the weight packed at compile time to ``[Co/MR, ceil(K/2), MR]`` words (Conv) or
``[N/NR, ceil(K/2), NR]`` (Gemm/MatMul), the activation packed per column block (im2col and interleave;
a value on the bfloat16 grid is exactly its top 16 bits), accumulators in ``<16 x float>`` registers
across the reduction, then the group's float epilogue (bias, activation, residual) before the one store.
The values are those of the float32 kernels on the same rounded operands up to the order of the float32
additions (pairs of k, then k) and ``vdpbf16ps``'s flushing of subnormals. Returns None where it does
not apply; the float32 micro-kernel then computes the layer from the same rounded operands.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..ir import FusedGroup, Value
from ..loops.ir import Buffer, Expr, Load, add
from ..loops.lower import LoweredKernel
from ..loops.registry import LowerCtx
from ..targets import Target, get_target
from .int8 import conv_kernel, gemm_kernel, lower_anchored

FORMAT = "bfloat16"
PASS_THROUGH = ("Relu", "MaxPool", "Reshape", "Flatten", "Identity")  # keep a value on the bfloat16 grid


def has_bf16(target: Target) -> bool:
    """True where the target has AVX-512 BF16 (``vdpbf16ps`` on 512-bit vectors)."""
    feats = set(target.features.split(","))
    return "+avx512bf16" in feats and "+avx512f" in feats and target.vector_width_f32 == 16


def fast_path(dtype: str, target: str) -> str | None:
    """How ``target`` (a name) runs ``dtype`` layers faster than float32, or None (the float32 kernels)."""
    try:
        t = get_target(target)
    except Exception:  # an unknown target name fails later, in the driver, with its own message
        return None
    if dtype == "bf16" and has_bf16(t):
        return ("vdpbf16ps (AVX-512 BF16): two bf16 products per float32 lane and instruction, float32 "
                "accumulation, weights packed as bf16 pairs at compile time")
    return None


def on_grid(v: Value | None, depth: int = 0, up: dict[int, Value | None] | None = None) -> bool:
    """True when ``v``'s values are on the bfloat16 grid by construction: the output of a
    ``prism.NarrowCast{to=bfloat16}``, of a value-preserving op (``PASS_THROUGH``) of such a value, or of a
    fused group whose body computes it so (``up``: a body's inputs -> the group's outer inputs)."""
    if v is None or depth > 8:
        return False
    if up is not None and id(v) in up:
        return on_grid(up[id(v)], depth + 1)
    p = v.producer
    if p is None:
        return False
    if isinstance(p, FusedGroup):
        k = next(i for i, o in enumerate(p.outputs) if o is v)
        return on_grid(p.body.outputs[k], depth + 1, {id(i): o for i, o in zip(p.body.inputs, p.inputs, strict=True)})
    if p.domain == "prism" and p.op_type == "NarrowCast":
        return p.attr("to") == FORMAT
    return not p.domain and p.op_type in PASS_THROUGH and on_grid(p.input(0), depth + 1, up)


def _weight(anchor: Any, outer: dict[int, Any]) -> np.ndarray | None:
    w = anchor.input(1)
    w = outer.get(id(w), w) if w is not None else None
    if w is None or w.const is None or w.const.dtype != np.float32:
        return None
    data = np.asarray(w.const)
    return data if not np.any(data.view(np.uint32) & 0xFFFF) else None


def _spec(anchor: Any, outer: dict[int, Any]) -> dict[str, Any] | None:
    """Weight as float32 [M, K] (M = output channel / column), bias, or None (see module)."""
    w = _weight(anchor, outer)
    x = anchor.input(0)
    x = outer.get(id(x), x) if x is not None else None
    if w is None or not on_grid(x):
        return None
    op = anchor.op_type
    bias = anchor.input(2)
    bias = outer.get(id(bias), bias) if bias is not None else None
    if op == "Conv":
        if w.ndim != 4 or int(anchor.attr("group", 1)) != 1:
            return None
        wm = w.reshape(w.shape[0], -1)
    elif op in ("MatMul", "Gemm") and w.ndim == 2:
        if op == "Gemm" and (int(anchor.attr("transA", 0)) or float(anchor.attr("alpha", 1.0)) != 1.0
                             or float(anchor.attr("beta", 1.0)) != 1.0):
            return None
        wm = (w if op == "Gemm" and int(anchor.attr("transB", 0)) else w.T)  # [N, K]
    else:
        return None
    b = np.zeros(wm.shape[0], np.float32)
    if bias is not None:
        if bias.const is None or op == "MatMul":
            return None
        b = np.broadcast_to(np.asarray(bias.const, np.float32).reshape(-1), (wm.shape[0],)).astype(np.float32)
    return {"conv": op == "Conv", "depthwise": False, "w": np.ascontiguousarray(wm, np.float32), "xz": 0,
            "signed": False, "format": "bf16", "bias": b}


def try_bf16(node: Any, kernel: str, opset: int, target: Target) -> LoweredKernel | None:
    """The bf16 micro-kernel of a group anchored by a Conv/MatMul/Gemm on bf16 operands, or None."""
    if not has_bf16(target):
        return None
    nodes = list(node.body.nodes) if isinstance(node, FusedGroup) else [node]
    anchors = [n for n in nodes if not n.domain and n.op_type in ("Conv", "MatMul", "Gemm")]
    if len(anchors) != 1 or len(node.outputs) != 1:
        return None
    anchor = anchors[0]
    outer = {id(i): o for i, o in zip(node.body.inputs, node.inputs, strict=True)} if isinstance(node, FusedGroup) \
        else {}
    t = anchor.outputs[0].type
    spec = _spec(anchor, outer)
    if spec is None or t is None or not t.is_static or t.short != "f32":
        return None

    def value(ctx: LowerCtx, n: Any, vbuf: Buffer) -> Any:
        bt = ctx.const_tensor(spec["bias"], f"{n.label}.bias")
        ch = 1 if spec["conv"] else len(vbuf.shape) - 1

        def fn(idx: list[Expr]) -> Expr:
            return add(Load(vbuf, tuple(idx)), bt[[idx[ch]]])
        return fn

    lowered = lower_anchored(node, kernel, opset, anchor, "f32", value)
    if lowered is None:
        return None
    lk, out_buf, out_t, xbuf = lowered
    if xbuf.dtype != "f32":
        return None
    lk.func.attrs.setdefault("schedule", []).append("dot step: vdpbf16ps (AVX-512 BF16), 2 bf16 x bf16 products "
                                                    "per f32 lane, f32 accumulate")
    build = conv_kernel if spec["conv"] else gemm_kernel
    return build(lk, anchor, xbuf, spec, 2, out_buf, out_t, target)


__all__ = ["fast_path", "has_bf16", "on_grid", "try_bf16"]
