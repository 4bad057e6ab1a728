"""Integer dot-product steps of the INT8 micro-kernels (``compiler.schedule.int8``), as LLVM IR.

``dpbusd(acc, a, b)``: per i32 lane, ``acc + sum_{j<4} u8(a_j) * s8(b_j)`` where ``a_j``/``b_j`` are the
four bytes of the lane (little-endian), the semantics of AVX-512 VNNI ``vpdpbusd`` (no saturation;
Intel SDM). ``dpwssd(acc, a, b)``: ``acc + sum_{j<2} s16(a_j) * s16(b_j)`` over the two 16-bit halves,
``vpdpwssd``'s semantics, which is also ``pmaddwd`` (SSE2/AVX2/AVX-512BW) followed by an add.

Emitted as: ``llvm.x86.avx512.vpdpbusd.512`` / ``vpdpwssd.512`` on targets with ``avx512vnni`` (16
lanes); ``pmaddwd`` (``llvm.x86.avx2.pmadd.wd``, ``llvm.x86.avx512.pmaddw.d.512``, ``llvm.x86.sse2.pmadd.wd``)
plus ``add`` for ``dpwssd`` on x86 without VNNI; ``dpbusd`` on AVX2 without VNNI (vectors of 8, 16, 32 or 64 lanes, in 8-lane pieces) as
``vpmaddubsw`` (``llvm.x86.avx2.pmadd.ub.sw``: u8 x s8 products of adjacent byte pairs summed into i16,
*saturating*) then ``vpmaddwd`` with ones (the two i16 of each lane summed into i32) then ``add``, the
step of ONNX Runtime MLAS's AVX2 U8S8 kernel; elsewhere the portable form: the bytes or halves widened to
i32, multiplied, and summed lane group by lane group. All forms but the AVX2 ``dpbusd`` are exact (32-bit
accumulation of products that fit in 32 bits); that one equals ``vpdpbusd`` only where no byte pair
``u*w0 + v*w1`` (u, v in [0, 255]) leaves int16, which ``compiler.quant.pack.pairs_fit_i16`` checks on
the constant weights before a kernel chooses it (``choose_group``).

``dpbf16ps(acc, a, b)``: per f32 lane, ``acc + a.hi * b.hi + a.lo * b.lo`` with ``a``/``b`` words of two
bfloat16 values (AVX-512 BF16 ``vdpbf16ps``; a portable form of shifts and float multiply-adds elsewhere).
"""

from __future__ import annotations

from llvmlite import ir

I32 = ir.IntType(32)


def _vec(t: ir.Type, n: int) -> ir.Type:
    return ir.VectorType(t, n)


def _as_vector(b: ir.IRBuilder, v: ir.Value) -> tuple[ir.Value, int]:
    """``v`` as a vector of i32 (a scalar i32 as <1 x i32>) and its lane count."""
    if isinstance(v.type, ir.VectorType):
        return v, v.type.count
    one = b.insert_element(ir.Constant(_vec(I32, 1), ir.Undefined), v, ir.IntType(64)(0))
    return one, 0


def _declare(m: ir.Module, name: str, ret: ir.Type, args: list[ir.Type]) -> ir.Function:
    fn = m.globals.get(name)
    return fn if fn is not None else ir.Function(m, ir.FunctionType(ret, args), name)


def _portable(b: ir.IRBuilder, acc: ir.Value, x: ir.Value, y: ir.Value, lanes: int, group: int,
              unsigned_a: bool) -> ir.Value:
    """The widened form: ``group`` sub-elements per lane, multiplied in i32 and summed."""
    width = 32 // group
    sub = ir.IntType(width)
    xs = b.bitcast(x, _vec(sub, lanes * group))
    ys = b.bitcast(y, _vec(sub, lanes * group))
    wide = _vec(I32, lanes * group)
    xw = b.zext(xs, wide) if unsigned_a else b.sext(xs, wide)
    yw = b.sext(ys, wide)
    prod = b.mul(xw, yw)
    total = acc
    for j in range(group):
        idx = ir.Constant(_vec(I32, lanes), [group * k + j for k in range(lanes)])
        part = b.shuffle_vector(prod, ir.Constant(wide, ir.Undefined), idx)
        total = b.add(total, part)
    return total


class _BFloat(ir.Type):
    """LLVM's ``bfloat`` (llvmlite.ir has no such type): the operand type of ``vdpbf16ps`` in LLVM >= 17."""

    def _to_string(self) -> str:
        return "bfloat"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _BFloat)

    def __hash__(self) -> int:
        return hash("bfloat")


def _splat(t: ir.Type, v: int) -> ir.Constant:
    return ir.Constant(t, [ir.Constant(t.element, v)] * t.count) if isinstance(t, ir.VectorType) else ir.Constant(t, v)


def _as_i32(b: ir.IRBuilder, v: ir.Value) -> ir.Value:
    t = v.type
    return b.bitcast(v, _vec(I32, t.count) if isinstance(t, ir.VectorType) else I32)


def _as_f32(b: ir.IRBuilder, v: ir.Value) -> ir.Value:
    t = v.type
    return b.bitcast(v, _vec(ir.FloatType(), t.count) if isinstance(t, ir.VectorType) else ir.FloatType())


def _bf16_half(b: ir.IRBuilder, fn: str, x: ir.Value) -> ir.Value:
    """``bf16lo(x)``: the top 16 bits of f32 ``x`` in the low half of an i32; ``bf16hi``: in the high half."""
    bits = _as_i32(b, x)
    return b.lshr(bits, _splat(bits.type, 16)) if fn == "bf16lo" else b.and_(bits, _splat(bits.type, -65536))


def _dpbf16ps(m: ir.Module, b: ir.IRBuilder, acc: ir.Value, x: ir.Value, y: ir.Value,
              features: frozenset[str]) -> ir.Value:
    """``acc + f32(x.hi) * f32(y.hi) + f32(x.lo) * f32(y.lo)`` per f32 lane, x/y i32 words of two bf16, in
    that order (Intel SDM, VDPBF16PS; the products are exact in f32). ``vdpbf16ps`` on 16 lanes with
    ``avx512bf16`` (8 lanes with ``avx512vl`` too), else the bits widened by shifts: the same values except
    that the instruction flushes subnormal inputs and results to zero."""
    lanes = acc.type.count if isinstance(acc.type, ir.VectorType) else 0
    width = {16: ("512", ()), 8: ("256", ("avx512vl",))}.get(lanes)
    if width is not None and "avx512bf16" in features and all(f in features for f in width[1]):
        bt = _vec(_BFloat(), 2 * lanes)
        f = _declare(m, f"llvm.x86.avx512bf16.dpbf16ps.{width[0]}", acc.type, [acc.type, bt, bt])
        return b.call(f, [acc, b.bitcast(x, bt), b.bitcast(y, bt)])
    hi = [_as_f32(b, b.and_(v, _splat(v.type, -65536))) for v in (x, y)]
    lo = [_as_f32(b, b.shl(v, _splat(v.type, 16))) for v in (x, y)]
    return b.fadd(b.fadd(acc, b.fmul(hi[0], hi[1])), b.fmul(lo[0], lo[1]))


def emit_dot(m: ir.Module, b: ir.IRBuilder, fn: str, args: list[ir.Value], features: frozenset[str]) -> ir.Value:
    """``dpbusd``, ``dpwssd`` (acc, a, b; i32 scalars or vectors of equal lanes), ``dpbf16ps`` (f32 acc, i32
    words of two bf16) or ``bf16lo``/``bf16hi`` (f32 -> i32) of ``args``."""
    if fn in ("bf16lo", "bf16hi"):
        return _bf16_half(b, fn, args[0])
    if fn == "dpbf16ps":
        return _dpbf16ps(m, b, args[0], args[1], args[2], features)
    acc, x, y = (_as_vector(b, a) for a in args)
    lanes = max(acc[1], 1)
    scalar = acc[1] == 0
    av, xv, yv = acc[0], x[0], y[0]
    vnni = "avx512vnni" in features and "avx512f" in features
    if fn == "dpbusd" and vnni and lanes == 16:
        f = _declare(m, "llvm.x86.avx512.vpdpbusd.512", av.type, [av.type] * 3)
        r = b.call(f, [av, xv, yv])
    elif fn == "dpwssd" and vnni and lanes == 16:
        f = _declare(m, "llvm.x86.avx512.vpdpwssd.512", av.type, [av.type] * 3)
        r = b.call(f, [av, xv, yv])
    elif fn == "dpbusd" and not scalar and lanes >= 8 and lanes & (lanes - 1) == 0 and "avx2" in features:
        r = b.add(av, _pmaddubsw_wd(m, b, xv, yv, lanes))
    elif fn == "dpwssd" and _pmadd(features, lanes) is not None:
        name = _pmadd(features, lanes)
        i16v = _vec(ir.IntType(16), 2 * lanes)
        f = _declare(m, name, av.type, [i16v, i16v])  # type: ignore[arg-type]
        r = b.add(av, b.call(f, [b.bitcast(xv, i16v), b.bitcast(yv, i16v)]))
    else:
        r = _portable(b, av, xv, yv, lanes, 4 if fn == "dpbusd" else 2, unsigned_a=fn == "dpbusd")
    return b.extract_element(r, ir.IntType(64)(0)) if scalar else r


def _pmaddubsw_wd(m: ir.Module, b: ir.IRBuilder, x: ir.Value, y: ir.Value, lanes: int) -> ir.Value:
    """``pmaddwd(pmaddubsw(x, y), 1)`` per 8-lane (256-bit) piece of the ``<lanes x i32>`` words ``x``
    (u8 bytes) and ``y`` (s8 bytes), concatenated: per i32 lane ``sat16(x0*y0 + x1*y1) + sat16(x2*y2 + x3*y3)``."""
    i8v, i16v, i32v = _vec(ir.IntType(8), 32), _vec(ir.IntType(16), 16), _vec(I32, 8)
    ubsw = _declare(m, "llvm.x86.avx2.pmadd.ub.sw", i16v, [i8v, i8v])
    wd = _declare(m, "llvm.x86.avx2.pmadd.wd", i32v, [i16v, i16v])
    ones = ir.Constant(i16v, [ir.IntType(16)(1)] * 16)
    pieces = []
    for start in range(0, lanes, 8):
        sel = ir.Constant(_vec(I32, 8), list(range(start, start + 8)))
        xs, ys = ((v if lanes == 8 else b.shuffle_vector(v, ir.Constant(v.type, ir.Undefined), sel)) for v in (x, y))
        pieces.append(b.call(wd, [b.call(ubsw, [b.bitcast(xs, i8v), b.bitcast(ys, i8v)]), ones]))
    while len(pieces) > 1:  # concatenate pairwise: <8> + <8> -> <16> ...
        nxt = []
        for a, c in zip(pieces[::2], pieces[1::2], strict=True):
            n = a.type.count
            nxt.append(b.shuffle_vector(a, c, ir.Constant(_vec(I32, 2 * n), list(range(2 * n)))))
        pieces = nxt
    return pieces[0]


def _pmadd(features: frozenset[str], lanes: int) -> str | None:
    if lanes == 8 and "avx2" in features:
        return "llvm.x86.avx2.pmadd.wd"
    if lanes == 16 and "avx512bw" in features:
        return "llvm.x86.avx512.pmaddw.d.512"
    if lanes == 4 and "sse2" in features:
        return "llvm.x86.sse2.pmadd.wd"
    return None
