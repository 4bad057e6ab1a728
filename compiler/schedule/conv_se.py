"""The squeeze of squeeze-excitation: GlobalAveragePool as one vectorized row sum per channel.

A squeeze-excitation block (``GlobalAveragePool -> Conv 1x1 -> act -> Conv 1x1 -> HardSigmoid /
Sigmoid -> Mul``, MobileNetV3, EfficientNet) reads its activation twice: once to pool it, once to
scale it. The pool is a reduction of ``H * W`` contiguous floats per (image, channel); the default
schedule sums each row serially (one dependent add per element). This schedule sweeps each row with
vectors of the target's ``W`` f32 lanes (``W`` partial sums in a register, the last ``H*W mod W``
elements as one shorter vector), adds the lanes, and multiplies by ``1 / (H * W)`` as the generic
lowering does; the group's elementwise epilogue is applied before the one store. Rows are independent
(the ``parallel`` axis). The partial sums reassociate the row sum (within float rounding: tests
compare with ONNX Runtime). Semantics: ONNX GlobalAveragePool. Returns None where the group does not
fit (another reducing op in the group, a non-float32 or dynamic shape, an input that is not a plain
buffer read): the default schedule applies.
"""

from __future__ import annotations

from typing import Any

from ..loops.ir import (
    Allocate,
    Bin,
    Buffer,
    Float,
    For,
    Int,
    Load,
    Seq,
    Store,
    Var,
    add,
    floordiv,
    floormod,
    mul,
    substitute,
)
from ..loops.lower import LoweredKernel
from ..loops.tensor import Tensor
from ..targets import Target
from .around import lower_around_single
from .gemm import epilogue, finish, replace_anchor
from .rows import sweep


def try_global_pool(node: Any, kernel: str, opset: int, target: Target) -> LoweredKernel | None:
    """The row-sum kernel of a group whose one reducing op is a 2-D GlobalAveragePool, or None."""
    def f32_static(pool: Any) -> bool:
        t = pool.outputs[0].type
        return t is not None and t.short == "f32" and t.is_static and t.rank == 4

    got = lower_around_single(node, kernel, opset, {"GlobalAveragePool"}, f32_static)
    if got is None:
        return None
    pool, lk, out_buf, out_t, x, xbuf = got
    ep = epilogue(out_t, 4, None)
    if ep is None:
        return None
    n_b, c_n, h, w = xbuf.shape
    hw, width = h * w, target.vector_width_f32
    rows = Buffer(xbuf.name, xbuf.dtype, (n_b * c_n, hw), xbuf.scope)
    acc, total = Buffer("acc", "f32", (width,), "local"), Buffer("sum", "f32", (1,), "local")
    vr, vi, vh, z = Var("r"), Var("i"), Var("h"), (Int(0),)
    lanes = min(width, hw)

    def add_row(j: Any, lane: Var) -> Store:
        return Store(acc, (lane,), add(Load(acc, (lane,)), Load(rows, (vr, j))))
    mean = mul(Load(total, z), Float(1.0 / float(hw)))
    epi, vs = ep
    value = substitute(replace_anchor(epi, mean), {vs[0].name: floordiv(vr, c_n), vs[1].name: floormod(vr, c_n),
                                                    vs[2].name: Int(0), vs[3].name: Int(0)})
    ov = Buffer(out_buf.name, out_buf.dtype, (n_b * c_n,), out_buf.scope)
    body = Seq([For(vi, lanes, Store(acc, (vi,), Float(0.0)), "vectorized"), sweep(hw, width, add_row, "s"),
                Store(total, z, Float(0.0)),
                For(vh, lanes, Store(total, z, add(Load(total, z), Load(acc, (vh,))))),
                Store(ov, (vr,), value)])
    sched = lk.func.attrs.setdefault("schedule", [])
    sched += [f"# {pool.label}: {n_b * c_n} rows of {hw} contiguous floats (H x W = {h} x {w})",
              f"vectorize(hw, {width})  # {width} partial sums in a register, then added lane by lane "
              "(reassociated)", "parallel(r)  # rows are independent",
              "compute_at(epilogue, r)  # x 1/(H*W) and the group's epilogue before the one store"]
    nest = For(vr, n_b * c_n, Allocate(acc, Allocate(total, body)), "parallel")
    return finish(lk, [nest], n_b * c_n * (hw + 1))


def channel_scale(t: Tensor) -> tuple[Buffer, Buffer] | None:
    """``(X, s)`` when ``t`` reads ``X[n, c, h, w] * s[n|0, c, 0, 0]`` (the excitation's Mul that
    ``fuse-ops`` fuses into a 1x1 Conv as its operand scale), else None."""
    if t.rank != 4:
        return None
    vs = [Var(f"__q{i}") for i in range(4)]
    e = t.fn(list(vs))
    if not isinstance(e, Bin) or e.op != "*":
        return None
    def at(ld: Load, i: int, v: Var) -> bool:  # reads index v along axis i (a size-1 axis reads 0)
        return ld.indices[i] == v or ld.buf.shape[i] == 1 and ld.indices[i] == Int(0)

    for a, b in ((e.a, e.b), (e.b, e.a)):
        if isinstance(a, Load) and len(a.indices) == 4 and all(at(a, i, v) for i, v in enumerate(vs)) \
                and a.buf.scope != "local" and isinstance(b, Load) and len(b.indices) == 4 \
                and b.buf.scope != "local" and b.indices[1:] == (vs[1], Int(0), Int(0)) \
                and b.indices[0] in (vs[0], Int(0)) and b.buf.shape[1] == a.buf.shape[1]:
            return a.buf, b.buf
    return None


__all__ = ["channel_scale", "try_global_pool"]
