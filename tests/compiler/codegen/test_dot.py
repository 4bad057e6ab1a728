"""The dot steps of compiler.codegen.dot against numpy references of Intel's pseudo-code.

``dpbf16ps`` against VDPBF16PS (``acc += hi * hi``, then ``acc += lo * lo``, each product exact in
float32): the portable form everywhere, the instruction (``llvm.x86.avx512bf16.dpbf16ps.512``) where the
host has AVX-512 BF16 (bit for bit: the same additions in the same order).

``dpbusd`` against VPDPBUSD (exact int32 sums of four u8 x s8 products) where it must be exact, and its
AVX2 form (VPMADDUBSW: adjacent pairs summed with signed 16-bit saturation, then VPMADDWD with ones)
against a numpy model of that saturation at and past the edge that ``compiler.quant.pack.pairs_fit_i16``
guards."""

from __future__ import annotations

import llvmlite.binding as llvm
import ml_dtypes
import numpy as np
import pytest
from llvmlite import ir

from compiler.codegen.compile import emit_function_object
from compiler.codegen.dot import emit_dot
from compiler.quant import pack
from compiler.runtime.jit import JitModule
from compiler.schedule.reduced import has_bf16
from compiler.targets import get_target

F32, I32 = ir.FloatType(), ir.IntType(32)
HOST = frozenset(f[1:] for f in get_target("host").features.split(",") if f.startswith("+"))


def _run(features: frozenset[str], acc: np.ndarray, a: np.ndarray, b: np.ndarray, op: str = "dpbf16ps") -> np.ndarray:
    """JIT ``out = op(acc, a, b)`` on ``len(acc)`` lanes with ``features`` and run it on the host."""
    m = ir.Module("dot")
    m.triple = llvm.get_process_triple()
    lanes = acc.size
    vf, vi = ir.VectorType(F32 if acc.dtype == np.float32 else I32, lanes), ir.VectorType(I32, lanes)
    fn = ir.Function(m, ir.FunctionType(ir.VoidType(), [vf.as_pointer(), vi.as_pointer(), vi.as_pointer(),
                                                        vf.as_pointer()]), "f")
    bld = ir.IRBuilder(fn.append_basic_block())
    r = emit_dot(m, bld, op, [bld.load(a, align=4) for a in fn.args[:3]], features)
    bld.store(r, fn.args[3], align=4)  # numpy's buffers are 4-byte aligned, not 64
    bld.ret_void()
    out = np.zeros(lanes, acc.dtype)
    jit = JitModule([emit_function_object(lambda: str(m), get_target("host"), "dot test")])
    f = jit.function("f", 4)
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


def _dpbusd_ref(acc: np.ndarray, u: np.ndarray, w: np.ndarray, saturate: bool) -> np.ndarray:
    """Per i32 lane of ``u`` ([lanes, 4] uint8) and ``w`` ([lanes, 4] int8): ``acc + sum_j u_j w_j`` (VPDPBUSD),
    or with ``saturate`` VPMADDUBSW's ``sat16(u0 w0 + u1 w1) + sat16(u2 w2 + u3 w3)`` (Intel SDM)."""
    p = u.astype(np.int64) * w.astype(np.int64)
    pairs = p[:, 0::2] + p[:, 1::2]
    if saturate:
        pairs = np.clip(pairs, -32768, 32767)
    return (acc.astype(np.int64) + pairs.sum(axis=1)).astype(np.int32)


def _edge_operands(lanes: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Random bytes, with the first lanes at the int16 edge: u = 255 against weight pairs summing to 128 and
    -128 (fit), 129 and -129 (saturate), and -128 with -128 (the most negative pair)."""
    rng = np.random.default_rng(seed)
    u = rng.integers(0, 256, (lanes, 4)).astype(np.uint8)
    w = rng.integers(-128, 128, (lanes, 4)).astype(np.int8)
    edge = [[64, 64, -64, -64], [127, 1, -128, 0], [65, 64, -65, -64], [127, 2, -128, -1], [-128, -128, 127, 127]]
    for i, row in enumerate(edge):
        u[i], w[i] = 255, row
    return (rng.integers(-10 ** 6, 10 ** 6, lanes).astype(np.int32), u, w)


@pytest.mark.parametrize("lanes", [8, 16, 32])
def test_dpbusd_avx2_form_saturates_pairs_like_vpmaddubsw(lanes: int) -> None:
    if "avx2" not in HOST:
        pytest.skip("host has no AVX2: vpmaddubsw cannot run here")
    acc, u, w = _edge_operands(lanes, lanes)
    feats = HOST - {"avx512vnni", "avxvnni"}
    got = _run(feats, acc, u.view(np.int32).reshape(-1).copy(), w.view(np.int32).reshape(-1).copy(), "dpbusd")
    np.testing.assert_array_equal(got, _dpbusd_ref(acc, u, w, saturate=True))
    exact = _dpbusd_ref(acc, u, w, saturate=False)
    np.testing.assert_array_equal(got[:2], exact[:2])  # pairs of 128 / -128 at u = 255: exact
    assert (got[2:5] != exact[2:5]).all()  # 129 / -129 / -256 at u = 255: saturated


def test_dpbusd_is_exact_where_pack_says_the_pairs_fit() -> None:
    """7-bit weights (and any whose byte pairs sum within +-128) give VPDPBUSD's exact sums on the AVX2 form."""
    if "avx2" not in HOST:
        pytest.skip("host has no AVX2: vpmaddubsw cannot run here")
    rng = np.random.default_rng(7)
    u = rng.integers(0, 256, (16, 4)).astype(np.uint8)
    u[:4] = 255
    w = rng.integers(-64, 64, (16, 4)).astype(np.int8)
    w[0], w[1] = [63, 63, -64, -64], [64, 64, 0, -128]
    assert pack.pairs_fit_i16(w.astype(np.int64))
    acc = rng.integers(-10 ** 6, 10 ** 6, 16).astype(np.int32)
    got = _run(HOST - {"avx512vnni", "avxvnni"}, acc, u.view(np.int32).reshape(-1).copy(),
               w.view(np.int32).reshape(-1).copy(), "dpbusd")
    np.testing.assert_array_equal(got, _dpbusd_ref(acc, u, w, saturate=False))


def test_dpbusd_portable_form_is_exact() -> None:
    acc, u, w = _edge_operands(8, 3)
    got = _run(frozenset({"sse2"}), acc, u.view(np.int32).reshape(-1).copy(), w.view(np.int32).reshape(-1).copy(), "dpbusd")
    np.testing.assert_array_equal(got, _dpbusd_ref(acc, u, w, saturate=False))


def test_pairs_fit_i16_at_the_edge() -> None:
    assert pack.pairs_fit_i16(np.array([[64, 64, -64, -64, 127]]))  # the odd k pairs with a zero pad
    assert pack.pairs_fit_i16(np.array([[127, 1], [-128, 0], [100, -128]]))
    assert not pack.pairs_fit_i16(np.array([[65, 64]]))
    assert not pack.pairs_fit_i16(np.array([[-1, -128]]))
    assert pack.pairs_fit_i16(np.array([[1, 0, 0, 127]]))  # k 1 and 2 are in different pairs
    assert pack.choose_group(np.array([[65, 64]]), vnni=False, avx2=True) == 2
    assert pack.choose_group(np.array([[64, 64]]), vnni=False, avx2=True) == 4
    assert pack.choose_group(np.array([[65, 64]]), vnni=True) == 4
