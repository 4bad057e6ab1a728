"""INT8 micro-kernels (compiler.schedule.int8) against a numpy integer reference of the ONNX
QLinearConv / QLinearMatMul formulas, and the VNNI code path's instructions."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh

from compiler import backend
from compiler.codegen.compile import compile_kernel
from compiler.ir import FusedGroup
from compiler.schedule.int8 import try_int8, vnni
from compiler.targets import Target, get_target

NP = {"u8": np.uint8, "i8": np.int8}
ELEM = {"u8": T.UINT8, "i8": T.INT8}


def _requant(acc: np.ndarray, mult: np.ndarray, zp: int, dt: str) -> np.ndarray:
    lo, hi = (0, 255) if dt == "u8" else (-128, 127)
    return np.clip(np.rint(acc.astype(np.float32) * mult) + zp, lo, hi).astype(NP[dt])


def _conv_ref(x, xz, w, wz, b, stride, pad):  # type: ignore[no-untyped-def]
    xi = np.pad(x.astype(np.int64) - xz, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    wi = w.astype(np.int64) - np.asarray(wz, np.int64).reshape(-1, 1, 1, 1)
    co, ci, kh, kw = w.shape
    oh = (xi.shape[2] - kh) // stride + 1
    ow = (xi.shape[3] - kw) // stride + 1
    out = np.zeros((x.shape[0], co, oh, ow), np.int64)
    for dy in range(kh):
        for dx in range(kw):
            patch = xi[:, :, dy:dy + stride * oh:stride, dx:dx + stride * ow:stride]
            out += np.einsum("nchw,oc->nohw", patch, wi[:, :, dy, dx])
    return out + b.reshape(1, -1, 1, 1)


def _qlinear_conv_model(x_dt, y_dt, ci, co, k, stride, pad, size, seed, wmax=127):  # type: ignore[no-untyped-def]
    rng = np.random.default_rng(seed)
    w = rng.integers(-wmax, wmax + 1, (co, ci, k, k)).astype(np.int8)
    ws = (rng.random(co) * 0.01 + 0.001).astype(np.float32)
    xz = np.array(rng.integers(0, 255) if x_dt == "u8" else rng.integers(-20, 20), NP[x_dt])
    yz = np.array(128 if y_dt == "u8" else -3, NP[y_dt])
    b = rng.integers(-5000, 5000, co).astype(np.int32)
    inits = [nh.from_array(np.array(0.02, np.float32), "xs"), nh.from_array(xz, "xz"), nh.from_array(w, "w"),
             nh.from_array(ws, "ws"), nh.from_array(np.zeros(co, np.int8), "wz"),
             nh.from_array(np.array(0.07, np.float32), "ys"), nh.from_array(yz, "yz"), nh.from_array(b, "b")]
    node = h.make_node("QLinearConv", ["x", "xs", "xz", "w", "ws", "wz", "ys", "yz", "b"], ["y"],
                       pads=[pad] * 4, strides=[stride, stride])
    oh = (size + 2 * pad - k) // stride + 1
    g = h.make_graph([node], "qconv", [h.make_tensor_value_info("x", ELEM[x_dt], [1, ci, size, size])],
                     [h.make_tensor_value_info("y", ELEM[y_dt], [1, co, oh, oh])], inits)
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 17)])
    m.ir_version = 9
    x = (rng.integers(0, 256, (1, ci, size, size)) if x_dt == "u8" else
         rng.integers(-128, 128, (1, ci, size, size))).astype(NP[x_dt])
    mult = ((np.float32(0.02) * ws) / np.float32(0.07)).astype(np.float32).reshape(1, -1, 1, 1)
    ref = _requant(_conv_ref(x, int(xz), w, np.zeros(co), b, stride, pad), mult, int(yz), y_dt)
    return m, x, ref


@pytest.mark.parametrize("x_dt,y_dt,ci,co,k,stride,pad,size", [
    ("u8", "u8", 8, 16, 3, 1, 1, 10), ("i8", "i8", 5, 12, 3, 2, 1, 9), ("u8", "i8", 16, 8, 1, 1, 0, 7),
    ("i8", "u8", 3, 6, 5, 1, 2, 8), ("i8", "i8", 64, 24, 1, 2, 0, 14)])
def test_qlinear_conv_kernel_matches_integer_reference(x_dt, y_dt, ci, co, k, stride, pad, size) -> None:
    m, x, ref = _qlinear_conv_model(x_dt, y_dt, ci, co, k, stride, pad, size, seed=ci + co)
    rep = backend.prepare(m, pipeline="O2")
    (got,) = rep.run([x])
    np.testing.assert_array_equal(got, ref)


def test_depthwise_qlinear_conv_matches_integer_reference() -> None:
    rng = np.random.default_rng(7)
    c, size = 12, 11
    for stride, pad in ((1, 1), (2, 1)):
        w = rng.integers(-127, 128, (c, 1, 3, 3)).astype(np.int8)
        ws = (rng.random(c) * 0.01 + 0.001).astype(np.float32)
        b = rng.integers(-3000, 3000, c).astype(np.int32)
        inits = [nh.from_array(np.array(0.02, np.float32), "xs"), nh.from_array(np.array(-7, np.int8), "xz"),
                 nh.from_array(w, "w"), nh.from_array(ws, "ws"), nh.from_array(np.zeros(c, np.int8), "wz"),
                 nh.from_array(np.array(0.05, np.float32), "ys"), nh.from_array(np.array(3, np.int8), "yz"),
                 nh.from_array(b, "b")]
        oh = (size + 2 * pad - 3) // stride + 1
        node = h.make_node("QLinearConv", ["x", "xs", "xz", "w", "ws", "wz", "ys", "yz", "b"], ["y"], group=c,
                           pads=[pad] * 4, strides=[stride] * 2)
        g = h.make_graph([node], "dw", [h.make_tensor_value_info("x", T.INT8, [1, c, size, size])],
                         [h.make_tensor_value_info("y", T.INT8, [1, c, oh, oh])], inits)
        m = h.make_model(g, opset_imports=[h.make_opsetid("", 17)])
        m.ir_version = 9
        x = rng.integers(-128, 128, (1, c, size, size)).astype(np.int8)
        acc = np.concatenate([_conv_ref(x[:, k:k + 1], -7, w[k:k + 1], np.zeros(1), b[k:k + 1], stride, pad)
                              for k in range(c)], axis=1)
        mult = ((np.float32(0.02) * ws) / np.float32(0.05)).astype(np.float32).reshape(1, -1, 1, 1)
        (got,) = backend.prepare(m, pipeline="O2").run([x])
        np.testing.assert_array_equal(got, _requant(acc, mult, 3, "i8"))


def _qlinear_matmul_model(a_dt, m_, k_, n_, seed, wmax=127):  # type: ignore[no-untyped-def]
    rng = np.random.default_rng(seed)
    b = rng.integers(-wmax, wmax + 1, (k_, n_)).astype(np.int8)
    az = np.array(7 if a_dt == "u8" else -9, NP[a_dt])
    inits = [nh.from_array(np.array(0.03, np.float32), "as"), nh.from_array(az, "az"), nh.from_array(b, "b"),
             nh.from_array(np.array(0.004, np.float32), "bs"), nh.from_array(np.array(0, np.int8), "bz"),
             nh.from_array(np.array(0.5, np.float32), "ys"), nh.from_array(np.array(-1, np.int8), "yz")]
    node = h.make_node("QLinearMatMul", ["a", "as", "az", "b", "bs", "bz", "ys", "yz"], ["y"])
    g = h.make_graph([node], "qmm", [h.make_tensor_value_info("a", ELEM[a_dt], [m_, k_])],
                     [h.make_tensor_value_info("y", T.INT8, [m_, n_])], inits)
    mdl = h.make_model(g, opset_imports=[h.make_opsetid("", 17)])
    mdl.ir_version = 9
    a = (rng.integers(0, 256, (m_, k_)) if a_dt == "u8" else rng.integers(-128, 128, (m_, k_))).astype(NP[a_dt])
    acc = (a.astype(np.int64) - int(az)) @ b.astype(np.int64)
    mult = np.float32(np.float32(0.03) * np.float32(0.004)) / np.float32(0.5)
    return mdl, a, _requant(acc, np.array(mult, np.float32), -1, "i8")


@pytest.mark.parametrize("a_dt,m_,k_,n_", [("u8", 1, 64, 40), ("i8", 4, 30, 33), ("i8", 8, 128, 16)])
def test_qlinear_matmul_kernel_matches_integer_reference(a_dt, m_, k_, n_) -> None:
    mdl, a, ref = _qlinear_matmul_model(a_dt, m_, k_, n_, seed=k_)
    (got,) = backend.prepare(mdl, pipeline="O2").run([a])
    np.testing.assert_array_equal(got, ref)


def _vnni_target() -> Target:
    host = get_target("x86-64-v4")
    return Target("x86-64-v4-vnni", host.triple, "icelake-server", host.features + ",+avx512vnni", 16, False)


def _lowered(model: onnx.ModelProto, target: Target):  # type: ignore[no-untyped-def]
    import compiler

    r = compiler.compile(model, pipeline="O2", backend=False)
    (grp,) = [n for n in r.graph.nodes if isinstance(n, FusedGroup)]
    return try_int8(grp, "k", 17, target)


def test_vnni_target_emits_vpdpbusd_and_host_path_pmaddwd() -> None:
    m, _, _ = _qlinear_conv_model("i8", "i8", 16, 16, 3, 1, 1, 8, seed=3)
    lk = _lowered(m, _vnni_target())
    assert lk is not None and any("vpdpbusd" in s for s in lk.func.attrs["schedule"])
    asm = compile_kernel(lk.func, _vnni_target()).asm
    assert "vpdpbusd" in asm and "zmm" in asm
    v3 = get_target("x86-64-v3")
    lk2 = _lowered(m, v3)
    assert lk2 is not None and not vnni(v3)
    assert "vpmaddwd" in compile_kernel(lk2.func, v3).asm


AVX2_ONLY = "+avx2" in get_target("host").features.split(",") and not vnni(get_target("host"))


@pytest.mark.parametrize("wmax,step", [(64, "vpmaddubsw"), (127, "pmaddwd")])
@pytest.mark.parametrize("case", [("u8", "u8", 8, 16, 3, 1, 1, 10), ("i8", "i8", 5, 12, 3, 2, 1, 9),
                                  ("i8", "u8", 64, 24, 1, 1, 0, 14)])
def test_avx2_u8s8_step_only_where_no_pair_saturates(case, wmax, step) -> None:  # type: ignore[no-untyped-def]
    """7-bit weights (every byte pair within +-128) take the vpmaddubsw + vpmaddwd step, full-range ones the
    exact s16 pmaddwd step; both equal the integer reference (the input bytes cover 0..255 / -128..127)."""
    m, x, ref = _qlinear_conv_model(*case, seed=11, wmax=wmax)
    v3 = get_target("x86-64-v3")
    lk = _lowered(m, v3)
    assert lk is not None and any(step in s for s in lk.func.attrs["schedule"])
    assert ("vpmaddubsw" in compile_kernel(lk.func, v3).asm) == (step == "vpmaddubsw")
    if not AVX2_ONLY:
        pytest.skip("host has VNNI or no AVX2: the AVX2 step is only compiled here, not run")
    (got,) = backend.prepare(m, pipeline="O2").run([x])
    np.testing.assert_array_equal(got, ref)


@pytest.mark.parametrize("a_dt,m_,k_,n_", [("u8", 1, 64, 40), ("i8", 4, 30, 33), ("i8", 8, 128, 16)])
def test_avx2_u8s8_matmul_matches_integer_reference(a_dt, m_, k_, n_) -> None:  # type: ignore[no-untyped-def]
    mdl, a, ref = _qlinear_matmul_model(a_dt, m_, k_, n_, seed=k_ + 1, wmax=64)
    if AVX2_ONLY:
        assert any("vpmaddubsw" in s for s in _lowered(mdl, get_target("host")).func.attrs["schedule"])
    (got,) = backend.prepare(mdl, pipeline="O2").run([a])
    np.testing.assert_array_equal(got, ref)


@pytest.mark.skipif(not vnni(get_target("host")), reason="host has no AVX-512 VNNI: the vpdpbusd kernels cannot run here")
def test_vnni_kernel_runs_on_host() -> None:
    m, x, ref = _qlinear_conv_model("i8", "i8", 16, 32, 3, 1, 1, 12, seed=5)
    (got,) = backend.prepare(m, pipeline="O2").run([x])
    np.testing.assert_array_equal(got, ref)


def test_bias_at_the_int32_limit_keeps_the_int8_kernel() -> None:
    """A channel whose int32 bias is clipped near 2^31 (tiny weight scale), plus the zero-point compensation,
    leaves int32: the excess goes to the float32 requantization instead of refusing the VNNI kernel."""
    m, x, _ = _qlinear_conv_model("u8", "u8", 16, 8, 1, 1, 0, 7, seed=5)
    b = [t for t in m.graph.initializer if t.name == "b"][0]
    bias = nh.to_array(b).astype(np.int64)
    bias[[0, 3]] = [2 ** 31 - 1, -(2 ** 31) + 1]
    b.CopyFrom(nh.from_array(bias.astype(np.int32), "b"))
    lk = _lowered(m, get_target("host"))
    assert lk is not None  # the integer micro-kernel, not the generic lowering
    (got,) = backend.prepare(m, pipeline="O2").run([x])
    w = nh.to_array([t for t in m.graph.initializer if t.name == "w"][0])
    ws = nh.to_array([t for t in m.graph.initializer if t.name == "ws"][0])
    xz = int(nh.to_array([t for t in m.graph.initializer if t.name == "xz"][0]))
    acc = _conv_ref(x, xz, w, np.zeros(8), bias, 1, 0)  # int64: no overflow in the reference
    mult = ((np.float32(0.02) * ws) / np.float32(0.07)).astype(np.float32).reshape(1, -1, 1, 1)
    ref = np.clip(np.rint(acc.astype(np.float64) * mult) + 128, 0, 255).astype(np.uint8)
    assert np.abs(got.astype(int) - ref.astype(int)).max() <= 1  # float32 rounding of a 2^31 sum: one step at most
    np.testing.assert_array_equal(got[:, [0, 3]], ref[:, [0, 3]])  # those channels saturate
