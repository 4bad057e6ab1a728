"""quantize{dtype=bf16|fp16}: Conv/MatMul/Gemm on operands rounded to bfloat16/float16 with float32
accumulation, against a numpy reference that rounds the same way (``ml_dtypes.bfloat16`` / numpy
``float16`` ``astype``: round to nearest even) and accumulates in float64; on the host's vdpbf16ps kernel
and on the portable path (x86-64-v3: the float32 kernels); the accuracy rows against an independent
numpy SQNR."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh

import compiler
from compiler import backend
from compiler.schedule.reduced import has_bf16
from compiler.targets import get_target

ROUND = {"bf16": ml_dtypes.bfloat16, "fp16": np.float16}
HOST_BF16 = has_bf16(get_target("host"))


def _rd(x: np.ndarray, dt: str) -> np.ndarray:
    return np.asarray(x, np.float32).astype(ROUND[dt]).astype(np.float64)


def _conv_gemm_model(seed: int = 0):  # type: ignore[no-untyped-def]
    """x [1, 8, 9, 9] -> Conv 3x3 pad 1 (12 ch, bias) -> Relu -> Flatten -> Gemm (transB, 5 outputs)."""
    rng = np.random.default_rng(seed)
    w = rng.standard_normal((12, 8, 3, 3)).astype(np.float32) * 0.3
    b = rng.standard_normal(12).astype(np.float32)
    wf = rng.standard_normal((5, 12 * 81)).astype(np.float32) * 0.05
    bf = rng.standard_normal(5).astype(np.float32)
    nodes = [h.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1], name="conv"),
             h.make_node("Relu", ["c"], ["r"], name="relu"),
             h.make_node("Flatten", ["r"], ["f"], name="flat"),
             h.make_node("Gemm", ["f", "wf", "bf"], ["y"], transB=1, name="fc")]
    g = h.make_graph(nodes, "cg", [h.make_tensor_value_info("x", T.FLOAT, [1, 8, 9, 9])],
                     [h.make_tensor_value_info("y", T.FLOAT, [1, 5])],
                     [nh.from_array(a, n) for a, n in ((w, "w"), (b, "b"), (wf, "wf"), (bf, "bf"))])
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 17)])
    m.ir_version = 9
    return m, (w, b, wf, bf)


def _reference(x: np.ndarray, params, dt: str | None):  # type: ignore[no-untyped-def]
    """The model in float64 numpy; ``dt``: Conv/Gemm operands rounded to that format first. Returns (c, y)."""
    w, b, wf, bf = params
    r = (lambda a: _rd(a, dt)) if dt else (lambda a: np.asarray(a, np.float64))
    xp = np.pad(r(x), ((0, 0), (0, 0), (1, 1), (1, 1)))
    wr = r(w)
    c = np.zeros((1, 12, 9, 9))
    for dy in range(3):
        for dx in range(3):
            c += np.einsum("nchw,oc->nohw", xp[:, :, dy:dy + 9, dx:dx + 9], wr[:, :, dy, dx])
    c += b.reshape(1, -1, 1, 1)
    f = np.maximum(c, 0).reshape(1, -1).astype(np.float32)
    return c, r(f) @ r(wf).T + bf


@pytest.mark.parametrize("dt,target", [("bf16", "host"), ("bf16", "x86-64-v3"), ("fp16", "host")])
def test_reduced_layers_match_a_numpy_reference_that_rounds_the_same_way(dt: str, target: str) -> None:
    m, params = _conv_gemm_model()
    x = np.random.default_rng(1).standard_normal((1, 8, 9, 9)).astype(np.float32)
    rep = backend.prepare(m, pipeline=f"O2,quantize{{dtype={dt}}}", target=target)
    (got,) = rep.run([x])
    _, ref = _reference(x, params, dt)
    _, ref32 = _reference(x, params, None)
    scale = float(np.abs(ref).max())
    err = float(np.abs(got - ref).max())
    assert err <= 2e-5 * scale, (err, scale)  # float32 accumulation of 72 and 972 exact products
    assert float(np.abs(ref32 - ref).max()) > 50 * max(err, 1e-7 * scale)  # the rounding is there


def _remarks(r, kind: str | None = None) -> list[dict]:  # type: ignore[no-untyped-def]
    (p,) = [e for e in r.of_type("pass.finished") if e["name"] == "quantize"]
    return [x for x in p["remarks"] if kind is None or x["kind"] == kind]


def test_bf16_path_remark_and_kernel_on_each_target() -> None:
    m, _ = _conv_gemm_model()
    r = compiler.compile(m, pipeline="O2,quantize{dtype=bf16}", target="x86-64-v3", benchmark=False)
    assert r.ok, r.error
    (miss,) = [x for x in _remarks(r, "missed") if "layers on x86-64-v3" in x["message"]]
    assert "no AVX-512 BF16" in miss["message"] and miss["data"]["warning"]
    asm = "".join(k["asm"] for k in r.of_type("kernel.compiled"))
    assert "vfmadd" in asm and "vdpbf16ps" not in asm and r.of_type("model.verified")[-1]["passed"]
    if not HOST_BF16:
        pytest.skip("host has no AVX-512 BF16: the vdpbf16ps kernel cannot be checked here")
    r = compiler.compile(m, pipeline="O2,quantize{dtype=bf16}", target="host", benchmark=False)
    assert any("vdpbf16ps" in x["message"] for x in _remarks(r, "analysis"))
    conv = [k for k in r.of_type("kernel.compiled") if "conv" in k["kernel"]]
    gemm = [k for k in r.of_type("kernel.compiled") if "gemm" in k["kernel"]]
    assert conv and gemm and all("vdpbf16ps" in k["asm"] and "zmm" in k["asm"] for k in conv + gemm)


def test_accuracy_rows_sqnr_against_numpy() -> None:
    m, params = _conv_gemm_model()
    xs = np.random.default_rng(2).standard_normal((3, 1, 8, 9, 9)).astype(np.float32)
    r = compiler.compile(m, pipeline="O2,quantize{dtype=bf16}", calibration_data={"x": xs})
    assert r.ok, r.error
    acc = r.of_type("model.accuracy")[-1]
    assert acc["dtype"] == "bf16"
    rows = {x["node"]: x for x in acc["layers"]}
    assert {rows["conv"]["precision"], rows["fc"]["precision"]} == {"bf16"}
    ref = [_reference(x, params, "bf16") for x in xs]
    f32 = [_reference(x, params, None) for x in xs]
    for node, k in (("conv", 0), ("fc", 1)):
        sig = sum(float(np.sum(a[k] ** 2)) for a in f32)
        noise = sum(float(np.sum((a[k] - b[k]) ** 2)) for a, b in zip(f32, ref, strict=True))
        assert rows[node]["sqnr_db"] == pytest.approx(10 * np.log10(sig / noise), abs=0.2)
    (out,) = acc["outputs"].values()
    y32, ybf = np.stack([a[1] for a in f32]), np.stack([b[1] for b in ref])
    assert out["sqnr_db"] == pytest.approx(20 * np.log10(np.linalg.norm(y32) / np.linalg.norm(y32 - ybf)), abs=0.2)
    verified = r.of_type("model.verified")[-1]
    assert verified["passed"]
    # the verification says what it compared: the reduced model's ONNX form, not FP32 (the report above is)
    assert any("reduced-precision ONNX form" in n for n in verified.get("notes", [])), verified.get("notes")
    assert r.of_type("model.timed")[-1]["precision"] == "bf16"


def test_fallback_and_exclude_keep_layers_in_fp32() -> None:
    m, _ = _conv_gemm_model()
    r = compiler.compile(m, pipeline="O2,quantize{dtype=fp16 exclude=fc}", benchmark=False)
    rows = {x["node"]: x["precision"] for x in r.of_type("model.accuracy")[-1]["layers"]}
    assert rows == {"conv": "fp16", "fc": "fp32"}
    r = compiler.compile(m, pipeline="O2,quantize{dtype=bf16 fallback=true min-sqnr=200}", benchmark=False)
    acc = r.of_type("model.accuracy")[-1]
    steps = acc["fallbacks"]  # no bf16 layer reaches 200 dB: both return, the worst first, then FP32 passes
    assert sorted(f["node"] for f in steps) == ["conv", "fc"] and [f["passed"] for f in steps] == [False, True]
    assert {x["precision"] for x in acc["layers"]} == {"fp32"} and acc["criterion"]["passed"]
