"""Byte table lookups: a load from a 256-entry uint8/int8 table whose index is an 8-bit value.

``prism.QLinearLookup`` (``compiler.ops.lookup``) lowers to ``table[i64(x) - min(x's type)]``
(``compiler.loops.ops_qlinear``). In a vectorized body ``byte_index`` (there) recognizes that load and
:func:`emit_lookup` computes it on the whole vector:

* AVX-512 VBMI: the table in four 64-byte registers; ``vpermi2b`` (``llvm.x86.avx512.vpermi2var.qi.512``)
  picks from the first 128 entries and from the last 128 by the index's low 7 bits, and the index's top
  bit selects between the two (``vpmovb2m`` + ``vpblendmb``): 64 lookups in about four instructions, as
  ONNX Runtime's MLAS and TensorRT's int8 lookup kernels do it with ``vpermb``/``vpshufb``. A vector of
  fewer lanes is padded to 64 bytes, more are done in 64-byte pieces.
* AVX2 (no VBMI): the table as sixteen 16-byte rows; per 32 (SSSE3: 16) lanes, ``vpshufb``
  (``llvm.x86.avx2.pshuf.b``) picks a byte of every row by the index's low nibble and the high nibble
  selects the row (``vpcmpeqb`` + ``vpblendvb``): 32 lookups in about 64 instructions, all in
  registers, where the per-lane form needs an extract, a load and an insert per byte (MLAS's AVX2 and
  XNNPACK's SSSE3 table lookups use the same nibble split).
* AVX2, fewer than 32 lanes (an int8 epilogue of 8 or 16 i32 lanes): ``vpgatherdd``
  (``llvm.x86.avx2.gather.d.d.256``) of the aligned dword holding each entry (offset ``4 * (i >> 2)``, so
  no read leaves the 256 bytes), ``vpsrlvd`` by ``8 * (i & 3)`` and a truncation: eight lookups per gather.
* elsewhere: one byte load per lane (the table stays in L1), the portable path.

The index of an int8 ``x`` is ``x + 128``, which is ``x ^ 0x80`` in 8 bits; of a uint8 ``x``, ``x``.
"""

from __future__ import annotations

from llvmlite import ir

from ..loops.ops_qlinear import byte_index

I8 = ir.IntType(8)
I32 = ir.IntType(32)
I64 = ir.IntType(64)
VPERMI2B = "llvm.x86.avx512.vpermi2var.qi.512"
__all__ = ["byte_index", "emit_lookup", "vbmi"]


def vbmi(features: frozenset[str]) -> bool:
    """True where ``vpermi2b`` on 512-bit vectors exists (AVX-512 VBMI; features without '+')."""
    return "avx512vbmi" in features and "avx512f" in features and "avx512bw" in features


def _declare(m: ir.Module) -> ir.Function:
    v64 = ir.VectorType(I8, 64)
    fn = m.globals.get(VPERMI2B)
    return fn if fn is not None else ir.Function(m, ir.FunctionType(v64, [v64, v64, v64]), VPERMI2B)


def emit_lookup(m: ir.Module, b: ir.IRBuilder, table: ir.Value, x: ir.Value, signed: bool,
                features: frozenset[str]) -> ir.Value:
    """``table[index(x)]`` for ``x`` an i8 scalar or ``<L x i8>`` vector; ``table`` points at 256 bytes.
    Returns a value of ``x``'s type (the table's bytes)."""
    lanes = x.type.count if isinstance(x.type, ir.VectorType) else 1
    idx = x
    if signed:
        flip = ir.Constant(x.type, [I8(0x80)] * lanes) if lanes > 1 else I8(0x80)
        idx = b.xor(x, flip)
    if lanes >= 8 and not vbmi(features) and "avx2" in features:
        if lanes >= 32:
            return _nibble_lookup(m, b, table, idx, lanes, 32)
        return _gather_lookup(m, b, table, idx, lanes)
    if lanes >= 16 and not vbmi(features) and "ssse3" in features:
        return _nibble_lookup(m, b, table, idx, lanes, 16)
    if lanes == 1 or not vbmi(features):
        return _per_lane(b, table, idx, lanes)
    v64 = ir.VectorType(I8, 64)
    regs = [b.load(b.gep(table, [I64(64 * k)], inbounds=True, source_etype=I8), typ=v64, align=1) for k in range(4)]
    fn = _declare(m)
    pieces = []
    for start in range(0, lanes, 64):
        n = min(64, lanes - start)
        mask = [start + k if k < n else lanes for k in range(64)]  # lanes: a zero index for the padding
        wide = b.shuffle_vector(idx, ir.Constant(idx.type, [I8(0)] * lanes), ir.Constant(ir.VectorType(I32, 64), mask))
        lo = b.call(fn, [regs[0], wide, regs[1]])
        hi = b.call(fn, [regs[2], wide, regs[3]])
        top = b.icmp_signed("<", wide, ir.Constant(v64, [I8(0)] * 64))
        pieces.append((b.select(top, hi, lo), n))
    return _join(b, pieces, lanes)


def _nibble_lookup(m: ir.Module, b: ir.IRBuilder, table: ir.Value, idx: ir.Value, lanes: int,
                   width: int) -> ir.Value:
    """``table[idx]`` by ``pshufb`` on the 16 rows of 16 bytes, the row chosen by ``idx >> 4``, in pieces of
    ``width`` (32: AVX2 ``vpshufb`` on both 128-bit halves, each holding the row; 16: SSSE3)."""
    vt = ir.VectorType(I8, width)
    name = "llvm.x86.avx2.pshuf.b" if width == 32 else "llvm.x86.ssse3.pshuf.b.128"
    fn = m.globals.get(name) or ir.Function(m, ir.FunctionType(vt, [vt, vt]), name)
    v16 = ir.VectorType(I8, 16)
    dup = ir.Constant(ir.VectorType(I32, width), [k % 16 for k in range(width)])
    rows = []
    for r in range(16):
        row = b.load(b.gep(table, [I64(16 * r)], inbounds=True, source_etype=I8), typ=v16, align=1)
        rows.append(row if width == 16 else b.shuffle_vector(row, ir.Constant(v16, ir.Undefined), dup))

    def splat(v: int) -> ir.Constant:
        return ir.Constant(vt, [I8(v)] * width)
    pieces = []
    for start in range(0, lanes, width):
        n = min(width, lanes - start)
        mask = [start + k if k < n else lanes for k in range(width)]  # lanes: a zero index for the padding
        w = idx if lanes == width else b.shuffle_vector(idx, ir.Constant(idx.type, [I8(0)] * lanes),
                                                        ir.Constant(ir.VectorType(I32, width), mask))
        lo, hi = b.and_(w, splat(0x0F)), b.lshr(w, splat(4))
        out = b.call(fn, [rows[0], lo])
        for r in range(1, 16):
            out = b.select(b.icmp_unsigned("==", hi, splat(r)), b.call(fn, [rows[r], lo]), out)
        pieces.append((out, n))
    return _join(b, pieces, lanes)


def _gather_lookup(m: ir.Module, b: ir.IRBuilder, table: ir.Value, idx: ir.Value, lanes: int) -> ir.Value:
    """``table[idx]`` by ``vpgatherdd`` of aligned dwords, eight lanes a piece (see module)."""
    v8 = ir.VectorType(I32, 8)
    name = "llvm.x86.avx2.gather.d.d.256"
    fn = m.globals.get(name) or ir.Function(m, ir.FunctionType(v8, [v8, ir.PointerType(I8), v8, v8, I8]), name)

    def splat(v: int) -> ir.Constant:
        return ir.Constant(v8, [I32(v)] * 8)
    pieces = []
    for start in range(0, lanes, 8):
        n = min(8, lanes - start)
        mask = [start + k if k < n else lanes for k in range(8)]  # lanes: a zero index for the padding
        w = idx if lanes == 8 else b.shuffle_vector(idx, ir.Constant(idx.type, [I8(0)] * lanes),
                                                    ir.Constant(v8, mask))
        wide = b.zext(w, v8)
        words = b.call(fn, [splat(0), b.bitcast(table, ir.PointerType(I8)), b.lshr(wide, splat(2)), splat(-1), I8(4)])
        byte = b.lshr(words, b.shl(b.and_(wide, splat(3)), splat(3)))
        pieces.append((b.trunc(byte, ir.VectorType(I8, 8)), n))
    return _join(b, pieces, lanes)


def _per_lane(b: ir.IRBuilder, table: ir.Value, idx: ir.Value, lanes: int) -> ir.Value:
    if lanes == 1:
        return b.load(b.gep(table, [b.zext(idx, I64)], inbounds=True, source_etype=I8), typ=I8)
    acc = ir.Constant(idx.type, ir.Undefined)
    for k in range(lanes):
        at = b.zext(b.extract_element(idx, I64(k)), I64)
        acc = b.insert_element(acc, b.load(b.gep(table, [at], inbounds=True, source_etype=I8), typ=I8), I64(k))
    return acc


def _join(b: ir.IRBuilder, pieces: list[tuple[ir.Value, int]], lanes: int) -> ir.Value:
    """The first ``n`` bytes of each piece (64, 32 or 16 bytes), concatenated into ``<lanes x i8>``."""
    if len(pieces) == 1:
        v, n = pieces[0]
        return b.shuffle_vector(v, ir.Constant(v.type, ir.Undefined), ir.Constant(ir.VectorType(I32, lanes),
                                                                                  list(range(n))))
    full = [v for v, n in pieces if n == v.type.count]
    if len(full) == len(pieces) and len(pieces) & (len(pieces) - 1) == 0:  # concatenate pairwise
        while len(full) > 1:
            c = full[0].type.count
            full = [b.shuffle_vector(x, y, ir.Constant(ir.VectorType(I32, 2 * c), list(range(2 * c))))
                    for x, y in zip(full[::2], full[1::2], strict=True)]
        return full[0]
    acc = ir.Constant(ir.VectorType(I8, lanes), ir.Undefined)
    at = 0
    for v, n in pieces:
        for k in range(n):
            acc = b.insert_element(acc, b.extract_element(v, I64(k)), I64(at))
            at += 1
    return acc
