"""Integer dot-product steps of the INT8 micro-kernels (``compiler.schedule.int8``), as LLVM IR.

``dpbusd(acc, a, b)``: per i32 lane, ``acc + sum_{j<4} u8(a_j) * s8(b_j)`` where ``a_j``/``b_j`` are the
four bytes of the lane (little-endian), the semantics of AVX-512 VNNI ``vpdpbusd`` (no saturation;
Intel SDM). ``dpwssd(acc, a, b)``: ``acc + sum_{j<2} s16(a_j) * s16(b_j)`` over the two 16-bit halves,
``vpdpwssd``'s semantics, which is also ``pmaddwd`` (SSE2/AVX2/AVX-512BW) followed by an add.

Emitted as: ``llvm.x86.avx512.vpdpbusd.512`` / ``vpdpwssd.512`` on targets with ``avx512vnni`` (16
lanes); ``pmaddwd`` (``llvm.x86.avx2.pmadd.wd``, ``llvm.x86.avx512.pmaddw.d.512``, ``llvm.x86.sse2.pmadd.wd``)
plus ``add`` for ``dpwssd`` on x86 without VNNI; elsewhere (and for ``dpbusd`` without VNNI) the
portable form: the bytes or halves widened to i32, multiplied, and summed lane group by lane group.
All forms are exact (32-bit accumulation of products that fit in 32 bits).
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


def emit_dot(m: ir.Module, b: ir.IRBuilder, fn: str, args: list[ir.Value], features: frozenset[str]) -> ir.Value:
    """``dpbusd`` or ``dpwssd`` of ``args`` (acc, a, b; i32 scalars or vectors of equal lanes)."""
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
    elif fn == "dpwssd" and _pmadd(features, lanes) is not None:
        name = _pmadd(features, lanes)
        i16v = _vec(ir.IntType(16), 2 * lanes)
        f = _declare(m, name, av.type, [i16v, i16v])  # type: ignore[arg-type]
        r = b.add(av, b.call(f, [b.bitcast(xv, i16v), b.bitcast(yv, i16v)]))
    else:
        r = _portable(b, av, xv, yv, lanes, 4 if fn == "dpbusd" else 2, unsigned_a=fn == "dpbusd")
    return b.extract_element(r, ir.IntType(64)(0)) if scalar else r


def _pmadd(features: frozenset[str], lanes: int) -> str | None:
    if lanes == 8 and "avx2" in features:
        return "llvm.x86.avx2.pmadd.wd"
    if lanes == 16 and "avx512bw" in features:
        return "llvm.x86.avx512.pmaddw.d.512"
    if lanes == 4 and "sse2" in features:
        return "llvm.x86.sse2.pmadd.wd"
    return None
