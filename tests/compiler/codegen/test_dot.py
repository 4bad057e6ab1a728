"""The bf16 dot step (compiler.codegen.dot ``dpbf16ps``) against a numpy float32 reference of Intel's
VDPBF16PS pseudo-code (``acc += hi * hi``, then ``acc += lo * lo``, each product exact in float32): the
portable form everywhere, the instruction (``llvm.x86.avx512bf16.dpbf16ps.512``) where the host has
AVX-512 BF16 (bit for bit: the same additions in the same order)."""

from __future__ import annotations

import ctypes

import llvmlite.binding as llvm
import ml_dtypes
import numpy as np
import pytest
from llvmlite import ir

from compiler.codegen.dot import emit_dot
from compiler.schedule.reduced import has_bf16
from compiler.targets import get_target

F32, I32 = ir.FloatType(), ir.IntType(32)
HOST = frozenset(f[1:] for f in get_target("host").features.split(",") if f.startswith("+"))


def _run(features: frozenset[str], acc: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """JIT ``out = dpbf16ps(acc, a, b)`` on 16 lanes with ``features`` and run it on the host."""
    m = ir.Module("dot")
    m.triple = llvm.get_process_triple()
    vf, vi = ir.VectorType(F32, 16), ir.VectorType(I32, 16)
    fn = ir.Function(m, ir.FunctionType(ir.VoidType(), [vf.as_pointer(), vi.as_pointer(), vi.as_pointer(),
                                                        vf.as_pointer()]), "f")
    bld = ir.IRBuilder(fn.append_basic_block())
    r = emit_dot(m, bld, "dpbf16ps", [bld.load(a, align=4) for a in fn.args[:3]], features)
    bld.store(r, fn.args[3], align=4)  # numpy's buffers are 4-byte aligned, not 64
    bld.ret_void()
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    tm = llvm.Target.from_default_triple().create_target_machine(cpu=llvm.get_host_cpu_name(),
                                                                 features=llvm.get_host_cpu_features().flatten())
    engine = llvm.create_mcjit_compiler(llvm.parse_assembly(str(m)), tm)
    engine.finalize_object()
    out = np.zeros(16, np.float32)
    f = ctypes.CFUNCTYPE(None, *[ctypes.c_void_p] * 4)(engine.get_function_address("f"))
    f(acc.ctypes.data, a.ctypes.data, b.ctypes.data, out.ctypes.data)
    return out


def _words(x: np.ndarray) -> np.ndarray:
    """[32] bfloat16 values as [16] int32 words, element 2i in the low half (little-endian pairs)."""
    return np.ascontiguousarray(x.astype(ml_dtypes.bfloat16)).view(np.uint16).view(np.int32).copy()


@pytest.mark.parametrize("hw", [False, True])
def test_dpbf16ps_matches_the_pseudo_code(hw: bool) -> None:
    if hw and not has_bf16(get_target("host")):
        pytest.skip("host has no AVX-512 BF16: vdpbf16ps cannot run here (the portable form is tested)")
    rng = np.random.default_rng(0)
    x = (rng.standard_normal(32) * 3).astype(np.float32)
    y = (rng.standard_normal(32) * 3).astype(np.float32)
    acc = (rng.standard_normal(16) * 10).astype(np.float32)
    xr, yr = (v.astype(ml_dtypes.bfloat16).astype(np.float32) for v in (x, y))
    want = (acc + xr[1::2] * yr[1::2]).astype(np.float32) + xr[0::2] * yr[0::2]
    feats = HOST if hw else HOST - {"avx512bf16"}
    got = _run(feats, acc, _words(x), _words(y))
    np.testing.assert_array_equal(got, want.astype(np.float32))
