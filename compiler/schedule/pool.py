"""Direct schedule for 2-D MaxPool and AveragePool (float32; MaxPool also on uint8/int8, as a quantized
model's pool runs after ``fold-qdq``, padded with the type's lowest value), with the group's elementwise
epilogue (if ``fuse-ops`` put one in the pool's group; O2 today keeps a pool in a group of its own).

The generic lowering vectorizes a pool over output columns, so a strided window reads its taps with
a stride across the lanes (a gather per tap). This schedule reads every tap with contiguous vector
loads, as the depthwise Conv schedule does (``compiler.schedule.depthwise``):

* per image and channel (the ``parallel`` axis: channels write disjoint outputs), the channel is
  copied once into a padded scratch plane ``xpad[C, 1, S, Hp, Wq]`` split into ``S`` = stride-along-width
  column phases, filled with the pad value outside X (-inf for MaxPool; for AveragePool NaN with
  ``count_include_pad=0``, 0 with ``count_include_pad=1``, as ``onnx.reference`` pads); without padding
  and with stride 1 along W, X is read in place;
* per output row, output columns in vector lanes (``NV`` vectors of the target's ``W`` lanes,
  accumulators in registers), the ``kH x kW`` taps unrolled; the last column vector stores with a
  lane mask; the group's epilogue is applied before the one store.

NaN and padding follow the generic lowering (``compiler.loops.ops_nn``, which follows
``onnx.reference``): MaxPool with strides and dilations 1 leaves NaN taps out (-inf if none is left);
with another stride or dilation a NaN at the window's first in-bounds tap is kept (the reference seeds
its maximum with that tap) and other NaNs are left out; AveragePool with ``count_include_pad=0`` is the
mean of the window's non-NaN in-bounds taps, with ``count_include_pad=1`` the sum over the padded
window (a NaN propagates) divided by the taps inside the padded extent (``ceil_mode`` windows past it
count less). ``ceil_mode``, pads/auto_pad, strides and dilations as the ONNX spec. The taps are taken
in the generic lowering's (row-major) order with the same operations, so results are bitwise those of
the default schedule.
"""

from __future__ import annotations

from typing import Any

from ..loops.ir import (
    Allocate,
    Bin,
    Buffer,
    Expr,
    Float,
    For,
    If,
    Int,
    Load,
    Seq,
    Stmt,
    Store,
    Var,
    add,
    emax,
    mul,
    select,
    sub,
    substitute,
)
from ..loops.lower import LoweredKernel
from ..loops.ops_nn import _geom, _spatial_pads, max_pool_tap
from ..loops.tensor import Tensor
from ..targets import Target
from .around import lower_around_single
from .depthwise import fill_phases
from .gemm import (
    add_scratch,
    epilogue,
    finish,
    replace_anchor,
)
from .knobs import choose

MAX_TAPS = 64  # windows of more taps keep the default schedule (the taps are unrolled)
INT_LOWEST = {"u8": 0, "i8": -128}  # an integer MaxPool's pad value and initial maximum (ONNX MaxPool-12: int8/uint8)
POOLS = ("MaxPool", "AveragePool")


def pool_missed(node: Any) -> str | None:
    """Why the pool ``node`` cannot take this schedule (None when it can): the reason a ``missed``
    remark gives."""
    x, y = node.inputs[0], node.outputs[0]
    ks = list(node.attr("kernel_shape", []))
    if len(ks) != 2:
        return f"only 2-D pools have this schedule (kernel_shape {ks})"
    ints = ("u8", "i8") if node.op_type == "MaxPool" else ()
    if y.type is None or y.type.short not in ("f32", *ints) or not y.type.is_static or x is None or x.type is None:
        return f"the output {y.type} is not a static float32 tensor" + (" or 8-bit integer one" if ints else "")
    if len(node.outputs) > 1 and node.outputs[1].consumers():
        return "its Indices output is used"
    if ks[0] * ks[1] > MAX_TAPS:
        return f"{ks[0]}x{ks[1]} = {ks[0] * ks[1]} taps, more than the {MAX_TAPS} this schedule unrolls"
    return None


def reads_once(pool: Any) -> bool:
    """True for a pool without padding whose windows do not overlap (kernel at most the stride, no
    dilation: 2x2 stride 2): the default schedule reads each input once, and copying X into phases
    first would double the memory traffic of a kernel that is all memory traffic."""
    ks = [int(k) for k in pool.attr("kernel_shape")]
    st = [int(s) for s in pool.attr("strides", [1, 1])]
    pads = [int(p) for p in pool.attr("pads", [0, 0, 0, 0])]
    return (not any(pads) and pool.attr("auto_pad", "NOTSET") in ("NOTSET", "VALID") and not pool.attr("ceil_mode", 0)
            and all(int(d) == 1 for d in pool.attr("dilations", [1, 1])) and all(k <= s for k, s in zip(ks, st, strict=True)))


def try_pool(node: Any, kernel: str, opset: int, target: Target) -> LoweredKernel | None:
    """The direct pool kernel of a group whose one reducing op is a 2-D f32 MaxPool/AveragePool (module
    docstring), or None."""
    got = lower_around_single(node, kernel, opset, POOLS,
                              lambda pool: pool_missed(pool) is None and not reads_once(pool))
    if got is None:
        return None
    pool, lk, out_buf, out_t, x, xbuf = got
    ep = epilogue(out_t, 4, (out_t.shape[2], out_t.shape[3]))
    if ep is None:
        return None
    return _schedule(lk, pool, x, xbuf, out_buf, ep, target.vector_width_f32)


def _schedule(lk: LoweredKernel, pool: Any, x: Tensor, xbuf: Buffer, out_buf: Buffer, ep: tuple[Expr, list[Var]],
              width: int) -> LoweredKernel:
    n_b, c_n, h, wd = xbuf.shape
    _, _, oh, ow = out_buf.shape
    ks = [int(k) for k in pool.attr("kernel_shape")]
    st, dil, pb, in_sp, out_sp = _geom(pool, x, out_buf.shape, ks)
    pe = _spatial_pads(pool, in_sp, out_sp, ks, st, dil)[2:]
    is_max, include = pool.op_type == "MaxPool", bool(pool.attr("count_include_pad", 0))
    dt = xbuf.dtype
    lowest = Int(INT_LOWEST[dt], dt) if dt in INT_LOWEST else Float(float("-inf"))
    pad: float | Expr = lowest if is_max else 0.0 if include else float("nan")
    s = st[1]
    nv = int(choose("pool_vectors", max(1, min(4, -(-ow // width))), [1, 2, 3, 4]))
    tile_w = nv * width
    vn, vc, vy, vt, vv, vl = Var("n"), Var("c"), Var("oy"), Var("ot"), Var("nv"), Var("ni")
    ox = add(mul(vt, tile_w), add(mul(vv, width), vl))
    sched = lk.func.attrs.setdefault("schedule", [])
    sched.append(f"# {pool.op_type} {pool.label}: {ks[0]}x{ks[1]} window, strides {st}, {oh}x{ow} outputs: "
                 "direct schedule")
    fill: Stmt | None = None
    over = _overhangs(ks, st, dil, pb, in_sp, out_sp)
    if any(pb) or s > 1 or any(over):
        hp = (oh - 1) * st[0] + (ks[0] - 1) * dil[0] + 1
        wq = -(-(-(-ow // tile_w) * tile_w + (ks[1] - 1) * dil[1] // s) // width) * width
        xp = add_scratch(lk, "xpad", (c_n, 1, s, hp, wq), dt)
        fill = fill_phases(xbuf, xp, vn, vc, 1, (h, wd), pb, s, width, pad)
        sched.append(f"pad(X -> xpad[{c_n}, 1, {s}, {hp}, {wq}]) compute_at c  # pad value {pad}, {s} column "
                     f"phase(s) of stride {s}: every tap reads consecutive floats")

        def x_at(r: Expr, col: int) -> Expr:
            return Load(xp, (vc, Int(0), Int(col % s), r, add(ox, col // s)))
    else:
        def x_at(r: Expr, col: int) -> Expr:
            return Load(xbuf, (vn, vc, r, add(ox, col)))
        sched.append("# no padding, stride 1 along width, windows inside X: X read in place")
    lane = (vv, vl)
    accs = [Buffer(name, dt, (nv, width), "local") for name in ("acc", "cnt")[:1 if is_max or include else 2]]
    upd: list[Stmt] = []
    o = [vy, ox]
    for dy in range(ks[0]):
        for dx in range(ks[1]):
            v = x_at(add(mul(vy, st[0]), dy * dil[0]), dx * dil[1])
            if is_max:
                tap = v if dt in INT_LOWEST else max_pool_tap(v, None, o, [Int(dy), Int(dx)], st, dil, pb)
                upd.append(Store(accs[0], lane, emax(Load(accs[0], lane), tap)))
            elif include:
                upd.append(Store(accs[0], lane, add(Load(accs[0], lane), v)))
            else:
                ok = Bin("==", v, v)
                upd += [Store(accs[0], lane, add(Load(accs[0], lane), select(ok, v, Float(0.0)))),
                        Store(accs[1], lane, add(Load(accs[1], lane), select(ok, Float(1.0), Float(0.0))))]
    if is_max:
        value: Expr = Load(accs[0], lane)
    elif not include:
        value = Bin("/", Load(accs[0], lane), Load(accs[1], lane))
    else:
        value = mul(Load(accs[0], lane), Float(1.0 / float(ks[0] * ks[1]))) if not (any(pb[:2]) or any(over)) \
            else Bin("/", Load(accs[0], lane), _padded_count(ks, st, dil, pb, in_sp, pe, o))
    epi, vs = ep
    mapping = {vs[0].name: vn, vs[1].name: vc, vs[2].name: vy, vs[3].name: ox}
    out: Stmt = Store(out_buf, (vn, vc, vy, ox), substitute(replace_anchor(epi, value), mapping))
    if ow % tile_w:
        out = If(Bin("<", ox, Int(ow)), out)

    def lanes(b: Stmt) -> Stmt:
        return For(vv, nv, For(vl, width, b, "vectorized"), "unrolled")
    init = lowest if is_max else Float(0.0)
    body: Stmt = Seq([*(lanes(Store(a, lane, init)) for a in accs), *(lanes(u) for u in upd), lanes(out)])
    for a in accs:
        body = Allocate(a, body)
    row: Stmt = For(vy, oh, For(vt, -(-ow // tile_w), body))
    per_c = Seq([fill, row]) if fill is not None else row
    sched += [f"vectorize(ox, {width}) x {nv}  # output columns in lanes, {nv} vector(s) of accumulators",
              f"unroll(kh, kw)  # {ks[0] * ks[1]} taps, contiguous loads", "parallel(c)  # channels write disjoint outputs",
              "compute_at(epilogue, ox)  # applied to the result before the one store"]
    nest = For(vn, n_b, For(vc, c_n, per_c, "parallel"))
    return finish(lk, [nest], n_b * c_n * oh * ow * ks[0] * ks[1] * (1 if is_max or include else 2))


def _overhangs(ks: list[int], st: list[int], dil: list[int], pb: list[int], in_sp: list[int],
               out_sp: list[int]) -> list[bool]:
    """Per axis, whether the last window runs past the input's end (``compiler.loops.ops_nn._window``)."""
    return [(out_sp[d] - 1) * st[d] - pb[d] + (ks[d] - 1) * dil[d] > in_sp[d] - 1 for d in range(2)]


def _padded_count(ks: list[int], st: list[int], dil: list[int], pb: list[int], in_sp: list[int], pe: list[int],
                  o: list[Expr]) -> Expr:
    """AveragePool with ``count_include_pad=1``: the number of the window's taps inside the padded
    extent ``[-pad_begin, size + pad_end)`` (per axis, multiplied) as an expression of the output
    position ``o``."""
    counts: list[Expr] = []
    for d in range(2):
        total: Expr | None = None
        for r in range(ks[d]):
            i = add(sub(mul(o[d], st[d]), pb[d]), r * dil[d])
            one = select(Bin("<", i, Int(in_sp[d] + pe[d])), Float(1.0), Float(0.0))
            total = one if total is None else add(total, one)
        assert total is not None
        counts.append(total)
    return mul(counts[0], counts[1])


__all__ = ["MAX_TAPS", "POOLS", "pool_missed", "reads_once", "try_pool"]
