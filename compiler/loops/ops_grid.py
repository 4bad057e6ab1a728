"""Lowering of GridSample (opsets 16 and 20+; any number of spatial dims), DeformConv and RoiAlign.

Semantics: the ONNX GridSample spec as its reference implementation computes it
(``onnx.reference.ops.op_grid_sample``): the grid's last axis holds normalized coordinates in
reverse dim order (x, y, ...), denormalized with ``align_corners`` (``(n + 1) / 2 * (d - 1)``, else
``((n + 1) * d - 1) / 2``). ``nearest`` rounds half to even; ``linear`` weighs the 2 neighbours and
``cubic`` the 4 neighbours (Keys, a = -0.75) per dim. Coordinates outside the border are clamped
(``border``) or reflected (``reflection``, about ``[-0.5, d - 0.5]`` or ``[0, d - 1]`` with
``align_corners``) before interpolation; each tap outside the input reads 0 (``zeros``), its
clamped index (``border``) or its reflected index (``reflection``). Taps are a reduction over
2 (linear) or 4 (cubic) positions per spatial dim.
"""

from __future__ import annotations

from ..ir import Node
from .ir import Bin, Cast, Expr, Float, Int, add, call, emax, emin, mul, select, sub
from .ops_reduce import red
from .registry import LowerCtx, bad, register
from .tensor import Tensor, fconst

A = -0.75


def _reflect(x: Expr, lo: float, hi: float) -> Expr:
    dt = x.dtype
    rng = hi - lo

    def side(dx: Expr, near: float, far: float, sign: float) -> Expr:
        n = call("floor", Bin("/", dx, Float(rng, dt)))
        r = sub(dx, mul(n, Float(rng, dt)))
        even = Bin("==", sub(n, mul(Float(2.0, dt), call("floor", mul(n, Float(0.5, dt))))), Float(0.0, dt))
        return select(even, add(Float(near, dt), mul(Float(sign, dt), r)), sub(Float(far, dt), mul(Float(sign, dt), r)))

    below = side(sub(Float(lo, dt), x), lo, hi, 1.0)
    above = side(sub(x, Float(hi, dt)), hi, lo, -1.0)
    return select(Bin("<", x, Float(lo, dt)), below, select(Bin(">", x, Float(hi, dt)), above, x))


def _cubic_w(t: Expr, r: Expr) -> Expr:
    """Keys weight of tap ``t`` (0..3, at floor(x) - 1 + t) for ``r = x - floor(x)``."""
    dt = r.dtype

    def k(d: Expr) -> Expr:  # |d| in [0, 2]
        d2 = mul(d, d)
        d3 = mul(d2, d)
        near = add(sub(mul(Float(A + 2, dt), d3), mul(Float(A + 3, dt), d2)), Float(1.0, dt))
        far = add(sub(mul(Float(A, dt), d3), mul(Float(5 * A, dt), d2)), sub(mul(Float(8 * A, dt), d), Float(4 * A, dt)))
        return select(Bin("<=", d, Float(1.0, dt)), near, far)
    one = Float(1.0, dt)
    ws = [k(add(r, one)), k(r), k(sub(one, r)), k(sub(Float(2.0, dt), r))]
    return select(Bin("==", t, Int(0)), ws[0], select(Bin("==", t, Int(1)), ws[1], select(Bin("==", t, Int(2)), ws[2],
                                                                                           ws[3])))


@register("GridSample", complex_op=True)
def _grid_sample(ctx: LowerCtx, node: Node, ins: list[Tensor | None]) -> list[Tensor]:
    x, grid = ins[0], ins[1]
    assert x is not None and grid is not None
    mode = {"bilinear": "linear", "bicubic": "cubic"}.get(node.attr_str("mode", "linear"), node.attr_str("mode", "linear"))
    pad = node.attr_str("padding_mode", "zeros")
    ac = bool(node.attr("align_corners", 0))
    if mode not in ("nearest", "linear", "cubic") or pad not in ("zeros", "border", "reflection"):
        raise bad(node, "mode", f"mode {mode!r} / padding_mode {pad!r} is not defined")
    dims = list(x.shape[2:])
    nd = len(dims)
    dt = x.dtype if x.dtype in ("f32", "f64") else "f32"
    lw = ctx.lowering
    borders = [(0.0, d - 1.0) if ac else (-0.5, d - 0.5) for d in dims]

    def coord(i: list[Expr], k: int) -> Expr:
        g = grid[[i[0]] + i[2:] + [Int(nd - 1 - k)]]
        g = g if g.dtype == dt else Cast(dt, g)
        d = dims[k]
        if ac:
            v = mul(mul(add(g, Float(1.0, dt)), Float(0.5, dt)), Float(d - 1.0, dt))
        else:
            v = mul(sub(mul(add(g, Float(1.0, dt)), Float(float(d), dt)), Float(1.0, dt)), Float(0.5, dt))
        if mode == "nearest":
            v = call("round", v)
        lo, hi = borders[k]
        if pad == "border":
            v = select(Bin("or", Bin("<", v, Float(lo, dt)), Bin(">", v, Float(hi, dt))),
                       emin(emax(v, Float(0.0, dt)), Float(d - 1.0, dt)), v)
        elif pad == "reflection":
            v = _reflect(v, lo, hi)
        return v

    def tap(idx: Expr, k: int) -> tuple[Expr, Expr | None]:
        """Index to load (in bounds) and, for zeros padding, the in-bounds condition."""
        d = dims[k]
        if pad == "zeros":
            ok = Bin("and", Bin(">=", idx, Int(0)), Bin("<", idx, Int(d)))
            return emin(emax(idx, 0), d - 1), ok
        if pad == "border":
            return emin(emax(idx, 0), d - 1), None
        lo, hi = borders[k]
        r = Cast("i64", _reflect(Cast(dt, idx), lo, hi))
        return emin(emax(r, 0), d - 1), None

    def sample(i: list[Expr], positions: list[Expr]) -> Expr:
        """X at one integer position per spatial axis, in ``dt``: clamped or reflected per the
        padding mode, zero where ``padding_mode="zeros"`` puts it outside."""
        idx, conds = [], []
        for k, pos in enumerate(positions):
            j, ok = tap(pos, k)
            idx.append(j)
            if ok is not None:
                conds.append(ok)
        v = x[i[:2] + idx]
        v = v if v.dtype == dt else Cast(dt, v)
        for c in conds:
            v = select(c, v, Float(0.0, dt))
        return v

    def fn(i: list[Expr]) -> Expr:
        xs = [coord(i, k) for k in range(nd)]
        if mode == "nearest":
            v = sample(i, [Cast("i64", xs[k]) for k in range(nd)])
            return v if x.dtype == dt else Cast(x.dtype, v)
        n_t = 2 if mode == "linear" else 4
        axes = [lw.axis("rg", n_t) for _ in range(nd)]
        positions, weight = [], None
        for k in range(nd):
            f = call("floor", xs[k])
            r = sub(xs[k], f)
            t = axes[k][0]
            base = Cast("i64", f)
            positions.append(add(base, t) if mode == "linear" else add(sub(base, 1), t))
            w = select(Bin("==", t, Int(0)), sub(Float(1.0, dt), r), r) if mode == "linear" else _cubic_w(t, r)
            weight = w if weight is None else mul(weight, w)
        assert weight is not None
        out = red("sum", axes, mul(weight, sample(i, positions)))
        return out if x.dtype == dt else Cast(x.dtype, out)
    return [Tensor(ctx.out_shape(node), x.dtype, fn)]


@register("DeformConv", complex_op=True)
def _deform_conv(ctx: LowerCtx, node: Node, ins: list[Tensor | None]) -> list[Tensor]:
    """DeformConv (2-D): each tap of the kernel samples X bilinearly (zero outside) at its regular
    position plus the learned offset, times the mask, as the reference's GridSample with
    align_corners=1 does; then the grouped convolution sum and the bias."""
    x, w, off = ins[0], ins[1], ins[2]
    b = ins[3] if len(ins) > 3 else None
    mask = ins[4] if len(ins) > 4 else None
    assert x is not None and w is not None and off is not None
    if x.rank != 4:
        raise bad(node, "X", "DeformConv is supported for 2-D images")
    kh_n, kw_n = w.shape[2], w.shape[3]
    st = list(node.attr("strides", [1, 1]))
    dil = list(node.attr("dilations", [1, 1]))
    pads = list(node.attr("pads", [0, 0, 0, 0]))
    group, og = int(node.attr("group", 1)), int(node.attr("offset_group", 1))
    c_in, cg = x.shape[1], w.shape[1]
    per_group = w.shape[0] // group
    per_og = c_in // og
    h_n, w_n = x.shape[2], x.shape[3]
    dt = x.dtype
    lw = ctx.lowering

    def fn(i: list[Expr]) -> Expr:
        n, co, oy, ox = i
        rc, rkh, rkw = lw.axis("rc", cg), lw.axis("rh", kh_n), lw.axis("rw", kw_n)
        ty, tx = lw.axis("ty", 2), lw.axis("tx", 2)
        ci = rc[0] if group == 1 else add(mul(Bin("//", co, Int(per_group)), cg), rc[0])
        g = Bin("//", ci, Int(per_og)) if og > 1 else Int(0)
        k = add(mul(rkh[0], kw_n), rkw[0])
        ch = add(mul(add(mul(g, kh_n * kw_n), k), 2), 0)
        py = add(Cast(dt, add(sub(mul(oy, st[0]), pads[0]), mul(rkh[0], dil[0]))), off[[n, ch, oy, ox]])
        px = add(Cast(dt, add(sub(mul(ox, st[1]), pads[1]), mul(rkw[0], dil[1]))), off[[n, add(ch, 1), oy, ox]])
        fy, fx = call("floor", py), call("floor", px)
        ry, rx = sub(py, fy), sub(px, fx)
        yi, xi = add(Cast("i64", fy), ty[0]), add(Cast("i64", fx), tx[0])
        wy = select(Bin("==", ty[0], Int(0)), sub(Float(1.0, dt), ry), ry)
        wx = select(Bin("==", tx[0], Int(0)), sub(Float(1.0, dt), rx), rx)
        inside = Bin("and", Bin("and", Bin(">=", yi, Int(0)), Bin("<", yi, Int(h_n))),
                     Bin("and", Bin(">=", xi, Int(0)), Bin("<", xi, Int(w_n))))
        v = select(inside, x[[n, ci, emin(emax(yi, 0), h_n - 1), emin(emax(xi, 0), w_n - 1)]], Float(0.0, dt))
        term = mul(mul(mul(wy, wx), v), w[[co, rc[0], rkh[0], rkw[0]]])
        if mask is not None:
            term = mul(term, mask[[n, add(mul(g, kh_n * kw_n), k), oy, ox]])
        total = red("sum", [rc, rkh, rkw, ty, tx], term)
        return add(total, b[[co]]) if b is not None else total
    return [Tensor(ctx.out_shape(node), dt, fn)]


@register("RoiAlign", complex_op=True)
def _roi_align(ctx: LowerCtx, node: Node, ins: list[Tensor | None]) -> list[Tensor]:
    """RoiAlign with a fixed ``sampling_ratio`` (> 0): each output bin averages (``avg``) or takes the
    maximum (``max``, of the four weighted corner values per sample) of ``sampling_ratio``^2 bilinear
    samples, with the reference's edge rules (a sample beyond [-1, size] contributes 0; coordinates
    are clamped at 0 and at the last pixel). ``half_pixel`` shifts the ROI by -0.5; the legacy
    ``output_half_pixel`` instead forces ROI sizes of at least 1."""
    x, rois, bidx = ins[0], ins[1], ins[2]
    assert x is not None and rois is not None and bidx is not None
    sr = int(node.attr("sampling_ratio", 0))
    if sr <= 0:
        raise bad(node, "sampling_ratio", "adaptive sampling (sampling_ratio=0) makes the sample count "
                                          "depend on the ROI values; only fixed ratios are supported")
    ctm = node.attr_str("coordinate_transformation_mode", "half_pixel")
    half = ctm == "half_pixel"
    is_max = node.attr_str("mode", "avg") == "max"
    scale = float(node.attr("spatial_scale", 1.0))
    out = ctx.out_shape(node)
    oh, ow = out[2], out[3]
    h_n, w_n = x.shape[2], x.shape[3]
    dt = x.dtype
    lw = ctx.lowering
    f = lambda v: fconst(v, dt)  # noqa: E731

    def fn(i: list[Expr]) -> Expr:
        r, c, ph, pw = i
        coord = [rois[[r, Int(k)]] for k in range(4)]
        coord = [v if v.dtype == dt else Cast(dt, v) for v in coord]
        start = [sub(mul(coord[k], f(scale)), f(0.5 if half else 0.0)) for k in (1, 0)]  # h, w
        end = [sub(mul(coord[k], f(scale)), f(0.5 if half else 0.0)) for k in (3, 2)]
        size = [sub(end[d], start[d]) for d in range(2)]
        if not half:
            size = [emax(s, f(1.0)) for s in size]
        bins = [Bin("/", size[0], f(oh)), Bin("/", size[1], f(ow))]
        iy, ix = lw.axis("sy", sr), lw.axis("sx", sr)
        ty, tx = lw.axis("cy", 2), lw.axis("cx", 2)
        pos = []
        for d, (p, s_ax) in enumerate(((ph, iy), (pw, ix))):
            pos.append(add(add(start[d], mul(Cast(dt, p), bins[d])),
                           mul(add(Cast(dt, s_ax[0]), f(0.5)), Bin("/", bins[d], f(sr)))))
        y, xx = pos
        outside = Bin("or", Bin("or", Bin("<", y, f(-1.0)), Bin(">", y, f(h_n))),
                      Bin("or", Bin("<", xx, f(-1.0)), Bin(">", xx, f(w_n))))
        taps, weights = [], []
        for v, n_, t in ((y, h_n, ty), (xx, w_n, tx)):
            v = emax(v, f(0.0))
            low: Expr = Cast("i64", call("floor", v))
            at_end = Bin(">=", low, Int(n_ - 1))
            low = select(at_end, Int(n_ - 1), low)
            v = select(at_end, Cast(dt, low), v)
            frac = sub(v, Cast(dt, low))
            taps.append(select(Bin("==", t[0], Int(0)), low, emin(add(low, 1), n_ - 1)))
            weights.append(select(Bin("==", t[0], Int(0)), sub(f(1.0), frac), frac))
        b = bidx[[r]]
        b = b if b.dtype == "i64" else Cast("i64", b)
        val = select(outside, f(0.0), mul(mul(weights[0], weights[1]), x[[b, c, taps[0], taps[1]]]))
        if is_max:
            return red("max", [iy, ix], red("max", [ty, tx], val))
        return mul(red("sum", [iy, ix, ty, tx], val), f(1.0 / (sr * sr)))
    return [Tensor(out, dt, fn)]
