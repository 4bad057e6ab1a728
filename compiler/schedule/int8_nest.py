"""The loop nests of the INT8 micro-kernels (``compiler.schedule.int8`` documents the scheme): the
register-tiled integer GEMM, the input padding and the im2col-and-interleave packing of a Conv.

A *word* is an i32 holding ``G`` operand values (``compiler.quant.pack``): for ``G = 4`` the activation
bytes as unsigned (``x + off``, ``off`` = 128 for int8), for ``G = 2`` the 16-bit ``x - z``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from ..loops.ir import (
    Allocate,
    Bin,
    Buffer,
    Cast,
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
    call,
    floordiv,
    floormod,
    mul,
    sub,
    substitute,
)
from ..loops.lower import KernelArg, LoweredKernel
from ..loops.tensor import unravel
from .gemm import replace_anchor as _replace_anchor
from .int8_epilogue import exact_dequantize

L2_BLOCK_BYTES = 256 * 1024
L1_PANEL_BYTES = 20 * 1024
PARALLEL_MIN_OPS = 20_000_000  # a column block's work below which its tiles stay serial (~60 us at 330 GOP/s)
SIGN_FLIP = -2139062144  # 0x80808080 as int32: the top bit of each of the four bytes


def _i32(e: Expr) -> Expr:
    return e if e.dtype == "i32" else Cast("i32", e)


def word(values: list[Expr | None], group: int, xz: int, off: int, fmt: str | None = None) -> Expr:
    """The i32 word of ``group`` activation values (None: a padded k, worth 0). ``fmt="bf16"``: two
    float32 values on the bfloat16 grid, each word half the top 16 bits of one (exact: the low 16 are 0)."""
    out: Expr | None = None
    for j, v in enumerate(values):
        if v is None:
            continue
        if fmt == "bf16":
            part = call("bf16hi" if j else "bf16lo", v)
        elif group == 4:
            part = add(_i32(v), Int(off, "i32")) if off else _i32(v)
            part = Bin("<<", part, Int(8 * j, "i32")) if j else part
        else:
            part = sub(_i32(v), Int(xz, "i32")) if xz else _i32(v)
            part = Bin("<<", part, Int(16, "i32")) if j else Bin("&", part, Int(0xFFFF, "i32"))
        out = part if out is None else Bin("|", out, part)
    return out if out is not None else Int(0, "i32")


def dot_step(spec: dict[str, Any], group: int) -> tuple[str, str]:
    """``(dot intrinsic, accumulator dtype)`` of a kernel: dpbf16ps/f32 for bf16, dpbusd or dpwssd/i32."""
    if spec.get("format") == "bf16":
        return "dpbf16ps", "f32"
    return ("dpbusd" if group == 4 else "dpwssd"), "i32"


def _words_loop(kg_n: int, k_n: int, group: int, body: Callable[[Expr, Callable[[int], Expr | None]], Stmt],
                value: Callable[[Expr], Expr]) -> Stmt:
    """``body(kg, j -> value of k = kg*G + j)`` over the full word groups (a loop) and the partial last one
    (peeled, its missing k as None)."""
    full = k_n // group
    vk = Var("kg")
    stmts: list[Stmt] = []
    if full:
        stmts.append(For(vk, full, body(vk, lambda j: value(add(mul(vk, group), j)))))
    if kg_n > full:
        last = Int(full)
        stmts.append(body(last, lambda j: value(Int(full * group + j)) if full * group + j < k_n else None))
    return stmts[0] if len(stmts) == 1 else Seq(stmts)


def gemm_tiles(acc_rows: int, nr: int, m_tiles: int, n_tiles: int, kg_n: int, a_word: Callable[[Expr, Expr, Expr], Expr],
               b_word: Callable[[Expr, Expr, Expr], Expr], store: Callable[[Expr, Expr, Expr, Expr], Stmt],
               fn: str, a_unsigned: bool = False, acc_dtype: str = "i32", cols_outer: bool = False,
               work: int = 0) -> Stmt:
    """``for mo, nt: acc[mr, nr] = 0; for kg: acc += dot(b_word(kg, nt, ni), a_word(mo, kg, mi)); store``
    (``cols_outer``: ``for nt, mo``, the column panel kept in L1 while the row tiles stream past it). The
    outer tile loop is the kernel's parallel axis (its iterations write disjoint rows / columns of the
    output; ``compiler.schedule.parallel`` then runs the column block's packing before it in parallel
    too) where one block's ``work`` (multiply-adds x 2) reach :data:`PARALLEL_MIN_OPS`: that module's
    threshold assumes 50 GFLOP/s, six times slower than these kernels run, and would split blocks of a
    few microseconds (a 2-thread A/B on dwcnn's pointwise Convs was slower split).

    ``dpbusd``'s first operand is the unsigned one (``vpdpbusd``: u8 of src1 times s8 of src2): the
    activation words. ``a_unsigned`` says that the broadcast ``a_word`` holds them (Gemm/MatMul: A is the
    activation, the packed B the weights), else the vector ``b_word`` does (Conv: the im2col panel)."""
    vmo, vnt, vk, vmi, vni = (Var(x) for x in ("mo", "nt", "kq", "mi", "ni"))
    acc = Buffer("acc", acc_dtype, (acc_rows, nr), "local")
    zero = Float(0.0) if acc_dtype == "f32" else Int(0, "i32")
    init = For(vmi, acc_rows, For(vni, nr, Store(acc, (vmi, vni), zero), "vectorized"), "unrolled")
    ops = (a_word(vmo, vk, vmi), b_word(vk, vnt, vni))
    upd = Store(acc, (vmi, vni), call(fn, Load(acc, (vmi, vni)), *(ops if a_unsigned else ops[::-1])))
    kloop = For(vk, kg_n, For(vmi, acc_rows, For(vni, nr, upd, "vectorized"), "unrolled"))
    out = For(vmi, acc_rows, For(vni, nr, store(vmo, vnt, vmi, vni), "vectorized"), "unrolled")
    tile = Allocate(acc, Seq([init, kloop, out]))
    par = work >= PARALLEL_MIN_OPS
    if cols_outer:
        return For(vnt, n_tiles, For(vmo, m_tiles, tile), "parallel" if par and n_tiles > 1 else "serial")
    return For(vmo, m_tiles, For(vnt, n_tiles, tile), "parallel" if par and m_tiles > 1 else "serial")


def _epilogue_store(epi: Expr, acc_val: Expr, mapping: dict[str, Expr], buf: Buffer, idx: tuple[Expr, ...],
                    conds: list[Expr]) -> Stmt:
    st: Stmt = Store(buf, idx, exact_dequantize(substitute(_replace_anchor(epi, acc_val), mapping)))
    if conds:
        c = conds[0]
        for x in conds[1:]:
            c = Bin("and", c, x)
        st = If(c, st)
    return st


def gemm_nest(lk: LoweredKernel, abuf: Buffer, bbuf: Buffer, out_buf: Buffer, epi: Expr, vs: list[Var],
              spec: dict[str, Any], group: int, mr: int, nr: int, width: int, dims: tuple[int, int, int]) -> Stmt:
    """Rows m of A (broadcast words), columns n of the packed B (vector words)."""
    m_n, n_n, k_n = dims
    kg_n = -(-k_n // group)
    off = 128 if spec["signed"] and group == 4 else 0
    tiles = math.ceil(n_n / nr)
    fn, acc_t = dot_step(spec, group)
    if group == 4 and k_n % 4 == 0:
        av = Buffer(abuf.name, "i32", (m_n, k_n // 4), abuf.scope)  # four bytes of a row read as one word

        def a_word(mo: Expr, kg: Expr, mi: Expr) -> Expr:
            w = Load(av, (add(mul(mo, mr), mi), kg))
            return Bin("^", w, Int(SIGN_FLIP, "i32")) if off else w
        how = "A read as int32 words" + (" (xor 0x80808080: int8 -> unsigned)" if off else "")
    else:  # G values per word from bytes; the last word may read past a row (its weights are 0) or the end (slack)
        flat = Buffer(abuf.name, abuf.dtype, (m_n * k_n + group,), abuf.scope)

        def a_word(mo: Expr, kg: Expr, mi: Expr) -> Expr:
            m = add(mul(mo, mr), mi)
            return word([Load(flat, (add(mul(m, k_n), add(mul(kg, group), j)),)) for j in range(group)],
                        group, spec["xz"], off, spec.get("format"))
        how = f"A packed {group} per word on the fly"
    out2 = Buffer(out_buf.name, out_buf.dtype, (m_n, n_n), out_buf.scope)
    lead = [int(d) for d in out_buf.shape[:-1]]

    def store(mo: Expr, nt: Expr, mi: Expr, ni: Expr) -> Stmt:
        m, n = add(mul(mo, mr), mi), add(mul(nt, nr), ni)
        mapping = dict(zip([v.name for v in vs[:-1]], unravel(m, lead), strict=True)) | {vs[-1].name: n}
        conds: list[Expr] = [Bin("<", n, Int(n_n))] if n_n % nr else []
        return _epilogue_store(epi, Load(Buffer("acc", acc_t, (mr, nr), "local"), (mi, ni)), mapping, out2, (m, n),
                               conds)

    lk.func.attrs["schedule"] += [f"tile(m={m_n}, n={n_n}; {mr}, {nr}) -> mo, nt, mi, ni  # {mr}x{nr} {acc_t} register tile",
                                  f"split(k, {group}) -> kq  # {group} products per lane and step", how,
                                  "cache_write(acc, local)", "unroll(mi)", f"vectorize(ni)  # {nr // width} x "
                                  f"<{width} x {acc_t}>", "compute_at(epilogue, ni)  # requantize before the store"]
    return gemm_tiles(mr, nr, m_n // mr, tiles, kg_n, a_word, lambda kg, nt, ni: Load(bbuf, (nt, kg, ni)),
                      store, fn, a_unsigned=True, acc_dtype=acc_t, work=2 * m_n * n_n * k_n)


def _lanes(extent: int, width: int) -> int | None:
    return next((v for v in (width, 8, 4) if v <= width and extent % v == 0), None)


def _vector_for(var: Var, extent: int, width: int, body: Callable[[Expr], Stmt]) -> Stmt:
    """``for var in extent: body(var)``, vectorized by the widest of width/8/4 lanes dividing it; where none
    divides it, the widest that fits runs the whole vectors and a serial loop the rest (a 10- or 14-pixel
    output row: ppocr's and ResNet's small maps were scalar before)."""
    lanes = _lanes(extent, width)
    if lanes is None:
        fit = next((v for v in (width, 8, 4) if v <= min(width, extent)), None)
        if fit is None:
            return For(var, extent, body(var))
        main = extent // fit * fit
        vo, vi, vt = Var(var.name + "_o"), Var(var.name + "_i"), Var(var.name + "_t")
        return Seq([For(vo, main // fit, For(vi, fit, body(add(mul(vo, fit), vi)), "vectorized")),
                    For(vt, extent - main, body(add(vt, main)))])
    if lanes == extent:
        return For(var, extent, body(var), "vectorized")
    vo, vi = Var(var.name + "_o"), Var(var.name + "_i")
    return For(vo, extent // lanes, For(vi, lanes, body(add(mul(vo, lanes), vi)), "vectorized"))


def _pad_image(lk: LoweredKernel, xbuf: Buffer, spec: dict[str, Any], dims: tuple[int, ...],
               geom: tuple[list[int], list[int], list[int]], width: int, vn: Var) -> tuple[Buffer, list[Stmt]]:
    """Image ``vn`` of X copied into scratch ``xpad[c, hp, wp]`` (the padded input the convolution's
    windows read, ``hp``/``wp`` covering every window at stride and dilation ``geom``), its border
    ``x_zero_point`` (0.0 for f32 X): the buffer and the fill-then-copy statements."""
    n_b, c_n, h, w_, co, k_n, kh, kw, oh, ow = dims
    st, dil, pb = geom
    hp, wp = (oh - 1) * st[0] + (kh - 1) * dil[0] + 1, (ow - 1) * st[1] + (kw - 1) * dil[1] + 1
    numel = c_n * hp * wp
    xp = Buffer("xpad", xbuf.dtype, (c_n, hp, wp), "scratch")
    flat = Buffer("xpad", xbuf.dtype, (-(-numel // width) * width,), "scratch")
    lk.args.append(KernelArg("scratch", f"{lk.name}.xpad", flat))
    vi, vc, vy, vx = Var("pi"), Var("c"), Var("y"), Var("x")
    pad_value = Float(0.0) if xbuf.dtype == "f32" else Int(spec["xz"], xbuf.dtype)
    fill = _vector_for(vi, flat.shape[0], width, lambda i: Store(flat, (i,), pad_value))
    ch, cw = min(h, hp - pb[0]), min(w_, wp - pb[1])
    copy = For(vc, c_n, For(vy, ch, _vector_for(vx, cw, width, lambda x: Store(
        xp, (vc, add(vy, pb[0]), add(x, pb[1])), Load(xbuf, (vn, vc, vy, x))))))
    lk.func.attrs["schedule"].append(f"pad(X -> xpad[{c_n}, {hp}, {wp}], value = x_zero_point {spec['xz']})  "
                                     "# once per image")
    return xp, [fill, copy]


def _im2col_packer(xp: Buffer, col: Buffer, spec: dict[str, Any], group: int, off: int, dims: tuple[int, ...],
                   geom: tuple[list[int], list[int], list[int]], width: int, vb: Var,
                   rows: int) -> Callable[[Expr, Callable[[int], Expr | None]], Stmt]:
    """For :func:`_words_loop`: the statement packing word row ``kg`` of ``col`` for output-row block
    ``vb`` (``rows`` output rows of ``ow`` pixels) from the padded image ``xp``: word lane ``j`` holds
    reduction index ``vals(j)`` = (channel, ky, kx) of each pixel's window (None: a zero lane)."""
    kh, kw, oh, ow = dims[6:10]
    st, dil, _ = geom
    vy2, vx2 = Var("ly"), Var("ox")

    def packed(kg: Expr, vals: Callable[[int], Expr | None]) -> Stmt:
        def one(ox: Expr) -> Stmt:
            oy = add(mul(vb, rows), vy2)
            taps: list[Expr | None] = []
            for j in range(group):
                k = vals(j)
                if k is None:
                    taps.append(None)
                    continue
                ci, r = floordiv(k, kh * kw), floormod(k, kh * kw)
                dy, dx = floordiv(r, kw), floormod(r, kw)
                taps.append(Load(xp, (ci, add(mul(oy, st[0]), mul(dy, dil[0])), add(mul(ox, st[1]),
                                                                                  mul(dx, dil[1])))))
            return Store(col, (kg, add(mul(vy2, ow), ox)), word(taps, group, spec["xz"], off, spec.get("format")))
        inner = _vector_for(vx2, ow, width, one)
        if oh % rows:
            inner = If(Bin("<", add(mul(vb, rows), vy2), Int(oh)), inner)
        return For(vy2, rows, inner)
    return packed


def _col_buffer(lk: LoweredKernel, kg_n: int, cols: int) -> Buffer:
    """The scratch ``col[kg_n, stride]`` of a Conv's packed words. The k loop reads one 64-byte line of every
    word row: a row stride of an even number of lines (a 1x1 Conv's 1024-pixel block: 4 KiB) maps every row
    to the same few L1 and L2 sets, which then thrash (the block streamed from L3 once per row tile); an
    odd number of lines spreads the rows over every set."""
    line = 64 // 4
    stride = cols + (line if -(-cols // line) % 2 == 0 else 0)
    col = Buffer("col", "i32", (kg_n, stride), "scratch")
    lk.args.append(KernelArg("scratch", f"{lk.name}.col", col))
    return col


def _cols_outer(co: int, kg_n: int, nr: int, cols: int) -> bool:
    """The loop order of a Conv's tiles. A row tile's weight words (mr per k step) are read in order, a
    column panel's (nr per k step) a row stride apart; with the column tiles outside, each panel stays in
    L1 while all the weights stream past it from L2, a quarter of the bytes (mr = nr / 4) that the other
    order streams from L2 (the whole block once per row tile): chosen when all the weights fit in L2 beside
    the block and one panel in L1."""
    return co * kg_n * 4 <= L2_BLOCK_BYTES and kg_n * nr * 4 <= L1_PANEL_BYTES and cols > nr


def conv_nest(lk: LoweredKernel, xbuf: Buffer, wbuf: Buffer, out_buf: Buffer, epi: Expr, vs: list[Var],
              spec: dict[str, Any], group: int, mr: int, nr: int, width: int, dims: tuple[int, ...],
              geom: tuple[list[int], list[int], list[int]]) -> Stmt:
    """Per image: pad X once (unless 1x1 stride 1), then per column block pack the words and run the GEMM."""
    n_b, c_n, h, w_, co, k_n, kh, kw, oh, ow = dims
    st, dil, pb = geom
    kg_n = -(-k_n // group)
    off = 128 if spec["signed"] and group == 4 else 0
    n_pix = oh * ow
    direct = kh == kw == 1 and st == [1, 1] and pb == [0, 0] and h * w_ == n_pix
    vn = Var("n")
    sched = lk.func.attrs["schedule"]
    stmts: list[Stmt] = []
    if direct:
        blk = min(n_pix, max(nr, (L2_BLOCK_BYTES // max(1, kg_n * 4)) // nr * nr))
        blk = -(-blk // nr) * nr if blk < n_pix else n_pix
        xv = Buffer(xbuf.name, xbuf.dtype, (n_b, c_n, n_pix), xbuf.scope)

        sched.append(f"view(X as [{c_n}, {n_pix}])  # 1x1 stride 1: words packed straight from X")
    else:
        xp, pad = _pad_image(lk, xbuf, spec, dims, geom, width, vn)
        stmts += pad
        blk = None
    rows = 1
    if not direct:
        rows = max(1, min(oh, L2_BLOCK_BYTES // max(1, kg_n * 4 * ow)))
        blk = rows * ow
    assert blk is not None
    cols = -(-blk // nr) * nr
    col = _col_buffer(lk, kg_n, cols)
    stride = col.shape[1]
    nblocks = math.ceil(n_pix / blk)
    vb = Var("nb")
    if direct:
        vp = Var("p")

        def packed(kg: Expr, vals: Callable[[int], Expr | None]) -> Stmt:
            def one(p: Expr) -> Stmt:
                q = add(mul(vb, blk), p)
                return Store(col, (kg, p), word([None if (k := vals(j)) is None else Load(xv, (vn, k, q))
                                                 for j in range(group)], group, spec["xz"], off, spec.get("format")))
            return _vector_for(vp, cols, width, one)
        prologue = _words_loop(kg_n, k_n, group, packed, lambda k: k)
    else:
        prologue = _words_loop(kg_n, k_n, group, _im2col_packer(xp, col, spec, group, off, dims, geom, width, vb, rows),
                               lambda k: k)
    sched.append(f"im2col+interleave(X -> col[{kg_n}, {cols}] words, row stride {stride}) compute_at nb  # {blk} "
                 f"output pixels per block: {kg_n}x{cols} words stay in L2; an odd number of 64-byte lines per row")
    ov = Buffer(out_buf.name, out_buf.dtype, (n_b, co, n_pix), out_buf.scope)
    fn, acc_t = dot_step(spec, group)
    accb = Buffer("acc", acc_t, (mr, nr), "local")

    def store(mo: Expr, nt: Expr, mi: Expr, ni: Expr) -> Stmt:
        c_out, n_local = add(mul(mo, mr), mi), add(mul(nt, nr), ni)
        p = add(mul(vb, blk), n_local)
        conds: list[Expr] = []
        if cols != blk:
            conds.append(Bin("<", n_local, Int(blk)))
        if n_pix % blk:
            conds.append(Bin("<", p, Int(n_pix)))
        mapping = {vs[0].name: vn, vs[1].name: c_out, vs[2].name: Int(0), vs[3].name: p}
        return _epilogue_store(epi, Load(accb, (mi, ni)), mapping, ov, (vn, c_out, p), conds)

    sched += [f"tile(m={co}, n={n_pix}; {mr}, {nr}) -> mo, nt, mi, ni  # {mr}x{nr} {acc_t} register tile",
              f"split(n, {blk}) -> nb, n", f"split(k, {group}) -> kq  # {group} products per lane and step",
              "cache_write(acc, local)", "unroll(mi)", f"vectorize(ni)  # {nr // width} x <{width} x {acc_t}>",
              "compute_at(epilogue, ni)  # requantize, then the group's epilogue, before the one store"]
    cols_outer = _cols_outer(co, kg_n, nr, cols)
    gemm = gemm_tiles(mr, nr, co // mr, cols // nr, kg_n, lambda mo, kg, mi: Load(wbuf, (mo, kg, mi)),
                      lambda kg, nt, ni: Load(col, (kg, add(mul(nt, nr), ni))), store, fn, acc_dtype=acc_t,
                      cols_outer=cols_outer, work=2 * co * k_n * blk)
    sched.append("reorder(nt, mo)  # each column panel held in L1, the weights streamed from L2" if cols_outer
                 else "reorder(mo, nt)  # each row tile's weights held in L1, the block streamed from L2")
    stmts.append(For(vb, nblocks, Seq([prologue, gemm])))
    return For(vn, n_b, Seq(stmts))


def depthwise_nest(lk: LoweredKernel, xbuf: Buffer, wbuf: Buffer, out_buf: Buffer, epi: Expr, vs: list[Var],
                   spec: dict[str, Any], width: int, dims: tuple[int, ...],
                   geom: tuple[list[int], list[int], list[int]]) -> Stmt:
    """Depthwise Conv: per image and channel, the channel padded once (value: the zero point), then each
    output row with the pixels in vector lanes and the ``kh x kw`` taps unrolled as i32 multiply-adds of
    ``x - x_zero_point`` and the weight (a broadcast constant); the epilogue on the sum, one store."""
    n_b, c_n, h, w_, kh, kw, oh, ow = dims
    st, dil, pb = geom
    xz = spec["xz"]
    hp, wp = (oh - 1) * st[0] + (kh - 1) * dil[0] + 1, (ow - 1) * st[1] + (kw - 1) * dil[1] + 1
    flat = Buffer("xpad", xbuf.dtype, (-(-hp * wp // width) * width,), "scratch")
    xp = Buffer("xpad", xbuf.dtype, (hp, wp), "scratch")
    lk.args.append(KernelArg("scratch", f"{lk.name}.xpad", flat))
    vn, vc, vi, vy, vx, voy = Var("n"), Var("c"), Var("pi"), Var("y"), Var("x"), Var("oy")
    fill = _vector_for(vi, flat.shape[0], width, lambda i: Store(flat, (i,), Int(xz, xbuf.dtype)))
    ch, cw = min(h, hp - pb[0]), min(w_, wp - pb[1])
    copy = For(vy, ch, _vector_for(vx, cw, width, lambda x: Store(xp, (add(vy, pb[0]), add(x, pb[1])),
                                                                   Load(xbuf, (vn, vc, vy, x)))))

    def one(ox: Expr) -> Stmt:
        acc: Expr = Int(0, "i32")
        for dy in range(kh):
            for dx in range(kw):
                xv = Load(xp, (add(mul(voy, st[0]), dy * dil[0]), add(mul(ox, st[1]), dx * dil[1])))
                term = mul(sub(_i32(xv), Int(xz, "i32")) if xz else _i32(xv), Load(wbuf, (vc, Int(dy * kw + dx))))
                acc = term if isinstance(acc, Int) else add(acc, term)
        mapping = {vs[0].name: vn, vs[1].name: vc, vs[2].name: voy, vs[3].name: ox}
        return Store(out_buf, (vn, vc, voy, ox), substitute(_replace_anchor(epi, acc), mapping))

    rows = For(voy, oh, _vector_for(Var("ox"), ow, width, one))
    lk.func.attrs["schedule"] += [f"pad(X[c] -> xpad[{hp}, {wp}], value = x_zero_point {xz})  # per channel",
                                  f"unroll(kh, kw)  # {kh * kw} taps as i32 multiply-adds",
                                  f"vectorize(ox)  # output pixels in lanes of {width} x i32",
                                  "compute_at(epilogue, ox)  # requantize before the store"]
    return For(vn, n_b, For(vc, c_n, Seq([fill, copy, rows])))
