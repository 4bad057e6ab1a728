"""Every form of the byte table lookup (compiler.codegen.lookup.emit_lookup) against numpy indexing of the
same 256-entry table, on all 256 indices, signed and unsigned, at the lane counts kernels use: the AVX2
``vpgatherdd`` form (8, 16 lanes), the ``vpshufb`` nibble form (AVX2 at 32 and 64 lanes, SSSE3 at 16),
the VBMI ``vpermi2b`` form where the host has it, and the per-lane loads."""

from __future__ import annotations

import llvmlite.binding as llvm
import numpy as np
import pytest
from llvmlite import ir

from compiler.codegen.compile import emit_function_object
from compiler.codegen.lookup import emit_lookup, vbmi
from compiler.runtime.jit import JitModule
from compiler.targets import get_target

I8 = ir.IntType(8)
HOST = frozenset(f[1:] for f in get_target("host").features.split(",") if f.startswith("+"))
NO_VBMI = HOST - {"avx512vbmi"}


def _run(features: frozenset[str], table: np.ndarray, x: np.ndarray, lanes: int, signed: bool) -> np.ndarray:
    """JIT ``out[i:i+lanes] = table[index(x[i:i+lanes])]`` with ``features``; run it over ``x``."""
    m = ir.Module("lut")
    m.triple = llvm.get_process_triple()
    vt = ir.VectorType(I8, lanes)
    p = ir.PointerType(I8)
    fn = ir.Function(m, ir.FunctionType(ir.VoidType(), [p, p, p]), "f")
    bld = ir.IRBuilder(fn.append_basic_block())
    v = bld.load(bld.bitcast(fn.args[1], vt.as_pointer()), align=1)
    bld.store(emit_lookup(m, bld, fn.args[0], v, signed, features), bld.bitcast(fn.args[2], vt.as_pointer()), align=1)
    bld.ret_void()
    jit = JitModule([emit_function_object(lambda: str(m), get_target("host"), "lookup test")])
    f = jit.function("f", 3)
    out = np.zeros_like(x)
    for i in range(0, x.size, lanes):
        f(table.ctypes.data, x[i:].ctypes.data, out[i:].ctypes.data)
    return out


@pytest.mark.parametrize("form,lanes", [("avx2", 8), ("avx2", 16), ("avx2", 32), ("avx2", 64), ("ssse3", 16),
                                        ("vbmi", 64), ("portable", 16)])
@pytest.mark.parametrize("signed", [False, True])
def test_lookup_form_matches_numpy_indexing(form: str, lanes: int, signed: bool) -> None:
    feats = {"avx2": NO_VBMI, "ssse3": frozenset({"sse2", "ssse3"}), "vbmi": HOST, "portable": frozenset()}[form]
    if form == "vbmi" and not vbmi(HOST):
        pytest.skip("host has no AVX-512 VBMI: vpermi2b cannot run here")
    if not {"avx2": {"avx2"}, "ssse3": {"ssse3"}}.get(form, set()) <= HOST:
        pytest.skip(f"host has no {form.upper()}")
    rng = np.random.default_rng(lanes)
    table = rng.integers(0, 256, 256).astype(np.uint8)
    x = np.concatenate([np.arange(256), rng.integers(0, 256, 256)]).astype(np.uint8)
    got = _run(feats, table, x.view(np.int8) if signed else x, lanes, signed)
    want = table[(x.view(np.int8).astype(np.int64) + 128) if signed else x]
    np.testing.assert_array_equal(got.view(np.uint8), want)
