"""Lowering of Einsum, LpPool, GlobalLpPool, DFT and Col2Im.

Semantics: the ONNX specs. Einsum: the equation's letters index the operands; a letter repeated
within one operand takes its diagonal; ``...`` stands for the broadcast leading dims; without
``->`` the output has the letters that occur once, sorted. The output element is a sum, over the
letters not in the output, of the product of the operands. LpPool: ``(sum |x|^p)^(1/p)`` over each
window (pads, strides, dilations and ``ceil_mode`` as pooling; padding contributes 0). DFT: the
discrete Fourier transform along ``axis`` of a real (last dim 1) or complex (last dim 2) signal,
``Y[k] = sum_n x[n] exp(-+2 pi i k n / L)`` (``inverse`` flips the sign and divides by ``L``),
``dft_length`` pads with zeros or truncates, ``onesided`` keeps ``L // 2 + 1`` bins. The twiddle
factors come from compile-time tables indexed by ``k * n mod L`` (exact zeros where they are 0).
"""

from __future__ import annotations

import itertools
import string

import numpy as np

from ..ir import Node
from .ir import Bin, Cast, Expr, Float, Int, add, call, emax, emin, mul, select, sub
from .ops_nn import _geom, _window
from .ops_reduce import red
from .registry import LowerCtx, bad, const_input, register
from .tensor import Tensor, norm_axis


def _parse(eq: str, ranks: list[int]) -> tuple[list[str], str]:
    eq = eq.replace(" ", "")
    lhs, _, rhs = eq.partition("->")
    terms = lhs.split(",")
    free = [c for c in string.ascii_letters if not any(c in t for t in terms)]
    n_ell = max((r - len(t.replace("...", "")) for t, r in zip(terms, ranks, strict=True) if "..." in t), default=0)
    ell = "".join(free[:n_ell])
    terms = [t.replace("...", ell[len(ell) - (r - len(t.replace("...", ""))):] if r - len(t.replace("...", "")) else "")
             for t, r in zip(terms, ranks, strict=True)]
    if "->" in eq:
        out = rhs.replace("...", ell)
    else:
        letters = "".join(terms)
        out = ell + "".join(sorted(c for c in set(letters) if letters.count(c) == 1 and c not in ell))
    return terms, out


@register("Einsum", complex_op=True)
def _einsum(ctx: LowerCtx, node: Node, ins: list[Tensor | None]) -> list[Tensor]:
    xs = [t for t in ins if t is not None]
    eq = node.attr_str("equation")
    terms, out = _parse(eq, [t.rank for t in xs])
    sizes: dict[str, int] = {}
    for t, x in zip(terms, xs, strict=True):
        if len(t) != x.rank:
            raise bad(node, "equation", f"term {t!r} does not match an operand of rank {x.rank}")
        for c, d in zip(t, x.shape, strict=True):
            if d != 1 or c not in sizes:
                sizes[c] = max(sizes.get(c, 1), d)
    contracted = sorted({c for t in terms for c in t} - set(out))
    dt = ctx.out_dtype(node)

    def fn(i: list[Expr]) -> Expr:
        axes = {c: ctx.lowering.axis("re", sizes[c]) for c in contracted}
        env = {c: v for c, v in zip(out, i, strict=True)}
        env.update({c: a[0] for c, a in axes.items()})
        prod: Expr | None = None
        for t, x in zip(terms, xs, strict=True):
            v = x[[env[c] if x.shape[k] != 1 else Int(0) for k, c in enumerate(t)]]
            prod = v if prod is None else mul(prod, v)
        assert prod is not None
        return red("sum", [axes[c] for c in contracted], prod) if contracted else prod
    return [Tensor(ctx.out_shape(node), dt, fn)]


@register("LpPool", "GlobalLpPool", complex_op=True)
def _lp_pool(ctx: LowerCtx, node: Node, ins: list[Tensor | None]) -> list[Tensor]:
    x = ins[0]
    assert x is not None
    p = float(node.attr("p", 2))
    out = ctx.out_shape(node)
    ks = list(x.shape[2:]) if node.op_type == "GlobalLpPool" else list(node.attr("kernel_shape"))
    if node.op_type == "GlobalLpPool":
        st, dil, pb, in_sp, out_sp = [1] * len(ks), [1] * len(ks), [0] * len(ks), list(x.shape[2:]), list(out[2:])
    else:
        st, dil, pb, in_sp, out_sp = _geom(node, x, out, ks)
    dt = x.dtype

    def fn(i: list[Expr]) -> Expr:
        rk = [ctx.lowering.axis("rp", k) for k in ks]
        pos, cond = _window(i[2:], [v for v, _ in rk], st, dil, pb, in_sp, out_sp, ks)
        v = call("abs", x[i[:2] + pos])
        term = mul(v, v) if p == 2 else call("pow", v, Float(p, dt))
        if cond is not None:
            term = select(cond, term, Float(0.0, dt))
        s = red("sum", rk, term)
        return call("sqrt", s) if p == 2 else call("pow", s, Float(1.0 / p, dt))
    return [Tensor(out, dt, fn)]


@register("DFT", complex_op=True)
def _dft(ctx: LowerCtx, node: Node, ins: list[Tensor | None]) -> list[Tensor]:
    x = ins[0]
    assert x is not None
    if ctx.opset >= 20:
        ax = int(const_input(node, ins[2], "axis").reshape(-1)[0]) if len(ins) > 2 and ins[2] is not None else -2
    else:
        ax = int(node.attr("axis", 1))
    ax = norm_axis(node, ax, x.rank)
    if ax == x.rank - 1:
        raise bad(node, "axis", "the last axis holds the real/imaginary parts")
    inverse, onesided = bool(node.attr("inverse", 0)), bool(node.attr("onesided", 0))
    n_in = x.shape[ax]
    length = int(const_input(node, ins[1], "dft_length").reshape(-1)[0]) if len(ins) > 1 and ins[1] is not None \
        else n_in
    complex_in = x.shape[-1] == 2
    dt = ctx.out_dtype(node)
    sign = 1.0 if inverse else -1.0
    scale = 1.0 / length if inverse else 1.0
    n_used = min(n_in, length)
    ph = 2 * np.pi * np.arange(length) / length
    tab_dt = np.float64
    odt, dt = dt, "f64"  # accumulate in double: exact zeros stay below the cases' atol
    cos_np, sin_np = np.cos(ph), np.sin(ph)
    cos_t = ctx.const_tensor(np.where(np.abs(cos_np) < 1e-12, 0.0, cos_np).astype(tab_dt), f"{node.label}_cos")
    sin_t = ctx.const_tensor(np.where(np.abs(sin_np) < 1e-12, 0.0, sin_np).astype(tab_dt), f"{node.label}_sin")

    def fn(i: list[Expr]) -> Expr:
        rn = ctx.lowering.axis("rf", n_used)
        n = rn[0]
        k = i[ax]
        src = i[:ax] + [n] + i[ax + 1:-1]
        xr = x[src + [Int(0)]]
        xi = x[src + [Int(1)]] if complex_in else Float(0.0, dt)
        xr = xr if xr.dtype == dt else Cast(dt, xr)
        xi = xi if xi.dtype == dt else Cast(dt, xi)
        kn = Bin("%", mul(k, n), Int(length))  # exact phase index into the twiddle tables
        c, s = cos_t[[kn]], mul(Float(sign, dt), sin_t[[kn]])
        re = sub(mul(xr, c), mul(xi, s))
        im = add(mul(xr, s), mul(xi, c))
        part = select(Bin("==", i[-1], Int(0)), re, im)
        total = red("sum", [rn], part)
        total = mul(total, Float(scale, dt)) if scale != 1.0 else total
        return total if odt == dt else Cast(odt, total)
    out = ctx.out_shape(node)
    if onesided and inverse:  # irfft: Hermitian half spectrum in, real signal of out[ax] samples out
        return [_irfft(ctx, node, x, ax, out, odt)]
    if onesided and out[ax] != length // 2 + 1:
        raise bad(node, "onesided", f"output length {out[ax]} is not {length // 2 + 1}")
    return [Tensor(out, odt, fn)]


def _irfft(ctx: LowerCtx, node: Node, x: Tensor, ax: int, out: tuple[int, ...], odt: str) -> Tensor:
    """``y[n] = 1/N sum_k Re(X[k] exp(2 pi i k n / N))`` with ``X[N - k] = conj(X[k])`` beyond the
    given half spectrum; ``N`` is the output length."""
    n_out, n_half = out[ax], x.shape[ax]
    ph = 2 * np.pi * np.arange(n_out) / n_out
    cos_t = ctx.const_tensor(np.where(np.abs(np.cos(ph)) < 1e-12, 0.0, np.cos(ph)), f"{node.label}_icos")
    sin_t = ctx.const_tensor(np.where(np.abs(np.sin(ph)) < 1e-12, 0.0, np.sin(ph)), f"{node.label}_isin")

    def fn(i: list[Expr]) -> Expr:
        rk = ctx.lowering.axis("rk", n_out)
        k = rk[0]
        mirrored = Bin(">=", k, Int(n_half))
        src = select(mirrored, sub(Int(n_out), k), k)
        src = emin(emax(src, 0), n_half - 1)
        base = i[:ax] + [src] + i[ax + 1:-1]
        xr: Expr = Cast("f64", x[base + [Int(0)]])
        xi: Expr = Cast("f64", x[base + [Int(1)]]) if x.shape[-1] == 2 else Float(0.0, "f64")
        xi = select(mirrored, sub(Float(0.0, "f64"), xi), xi)
        kn = Bin("%", mul(k, i[ax]), Int(n_out))
        total = red("sum", [rk], sub(mul(xr, cos_t[[kn]]), mul(xi, sin_t[[kn]])))
        total = mul(total, Float(1.0 / n_out, "f64"))
        return total if odt == "f64" else Cast(odt, total)
    return Tensor(out, odt, fn)


@register("Col2Im", complex_op=True)
def _col2im(ctx: LowerCtx, node: Node, ins: list[Tensor | None]) -> list[Tensor]:
    """Col2Im: ``out[n, c, p]`` sums the column entries of every block offset ``k`` whose sliding
    position ``(p + pad_begin - k * dilation) / stride`` is a whole, in-range block index."""
    x = ins[0]
    assert x is not None
    image = [int(v) for v in const_input(node, ins[1], "image_shape").reshape(-1)]
    block = [int(v) for v in const_input(node, ins[2], "block_shape").reshape(-1)]
    nd = len(image)
    dil = list(node.attr("dilations", [1] * nd))
    st = list(node.attr("strides", [1] * nd))
    pads = list(node.attr("pads", [0] * 2 * nd))
    n_blk = [(image[d] + pads[d] + pads[nd + d] - dil[d] * (block[d] - 1) - 1) // st[d] + 1 for d in range(nd)]
    k_tot = int(np.prod(block))
    dt = x.dtype

    def fn(i: list[Expr]) -> Expr:
        rk = [ctx.lowering.axis("rb", b) for b in block]
        ok: Expr | None = None
        col: Expr = Int(0)
        kflat: Expr = Int(0)
        for d in range(nd):
            num = sub(add(i[2 + d], pads[d]), mul(rk[d][0], dil[d]))
            q = Bin("//", emax(num, 0), Int(st[d]))
            cond = Bin("and", Bin(">=", num, Int(0)), Bin("and", Bin("==", Bin("%", emax(num, 0), Int(st[d])), Int(0)),
                                                         Bin("<", q, Int(n_blk[d]))))
            ok = cond if ok is None else Bin("and", ok, cond)
            col = add(mul(col, n_blk[d]), emin(q, n_blk[d] - 1))
            kflat = add(mul(kflat, block[d]), rk[d][0])
        v = x[[i[0], add(mul(i[1], k_tot), kflat), col]]
        assert ok is not None
        return red("sum", rk, select(ok, v, Float(0.0, dt)))
    return [Tensor(ctx.out_shape(node), dt, fn)]


@register("Det", complex_op=True)
def _det(ctx: LowerCtx, node: Node, ins: list[Tensor | None]) -> list[Tensor]:
    """Det of the trailing n x n matrices by the Leibniz formula (sum over the n! permutations of
    signed products): exact in structure, meant for the small matrices (n <= 5) of inference graphs."""
    x = ins[0]
    assert x is not None
    n = x.shape[-1]
    if n > 5 or x.shape[-2] != n:
        raise bad(node, "X", f"Det of {x.shape[-2]}x{n} matrices is supported up to 5x5")
    perms = list(itertools.permutations(range(n)))

    def sign(p: tuple[int, ...]) -> int:
        s, seen = 1, list(p)
        for a in range(n):
            while seen[a] != a:
                b = seen[a]
                seen[a], seen[b] = seen[b], seen[a]
                s = -s
        return s

    def fn(i: list[Expr]) -> Expr:
        total: Expr | None = None
        for p in perms:
            term: Expr | None = None
            for r, c in enumerate(p):
                v = x[i + [Int(r), Int(c)]]
                term = v if term is None else mul(term, v)
            assert term is not None
            total = term if total is None and sign(p) > 0 else (
                sub(Float(0.0, x.dtype), term) if total is None else (add(total, term) if sign(p) > 0
                                                                        else sub(total, term)))
        assert total is not None
        return total
    return [Tensor(ctx.out_shape(node), x.dtype, fn)]


@register("STFT", complex_op=True)
def _stft(ctx: LowerCtx, node: Node, ins: list[Tensor | None]) -> list[Tensor]:
    """STFT: frame ``f`` starts at ``f * frame_step``; ``Y[b, f, k] = sum_n x[b, f*step + n] w[n]
    exp(-2 pi i k n / frame_length)`` (window 1 when absent), real or complex signal, accumulated in
    double with twiddle tables as DFT."""
    x = ins[0]
    assert x is not None
    step = int(const_input(node, ins[1], "frame_step").reshape(-1)[0])
    win = ins[2] if len(ins) > 2 else None
    if len(ins) > 3 and ins[3] is not None:
        flen = int(const_input(node, ins[3], "frame_length").reshape(-1)[0])
    elif win is not None:
        flen = win.shape[0]
    else:
        raise bad(node, "frame_length", "frame_length or window is required")
    out = ctx.out_shape(node)
    odt = ctx.out_dtype(node)
    ph = 2 * np.pi * np.arange(flen) / flen
    cos_t = ctx.const_tensor(np.where(np.abs(np.cos(ph)) < 1e-12, 0.0, np.cos(ph)), f"{node.label}_cos")
    sin_t = ctx.const_tensor(np.where(np.abs(np.sin(ph)) < 1e-12, 0.0, np.sin(ph)), f"{node.label}_sin")
    complex_in = x.shape[-1] == 2

    def fn(i: list[Expr]) -> Expr:
        rn = ctx.lowering.axis("rs", flen)
        n = rn[0]
        pos = add(mul(i[1], step), n)
        xr: Expr = Cast("f64", x[[i[0], pos, Int(0)]])
        xi: Expr = Cast("f64", x[[i[0], pos, Int(1)]]) if complex_in else Float(0.0, "f64")
        if win is not None:
            wv = Cast("f64", win[[n]])
            xr, xi = mul(xr, wv), mul(xi, wv)
        kn = Bin("%", mul(i[2], n), Int(flen))
        c, s = cos_t[[kn]], mul(Float(-1.0, "f64"), sin_t[[kn]])
        re = sub(mul(xr, c), mul(xi, s))
        im = add(mul(xr, s), mul(xi, c))
        total = red("sum", [rn], select(Bin("==", i[3], Int(0)), re, im))
        return total if odt == "f64" else Cast(odt, total)
    return [Tensor(out, odt, fn)]
