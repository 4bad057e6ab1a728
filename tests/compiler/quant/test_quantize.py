"""The quantize pass: calibration input checks, exclude, the accuracy report and its numbers, the
accuracy-driven fallback, and calibration range methods."""

from __future__ import annotations

import math

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh
from onnxruntime.quantization.quant_utils import quantize_data
from qmodels import calibration, small_cnn

import compiler
from compiler.ir import FusedGroup
from compiler.quant import accuracy, calibrate, evaluate, insert
from compiler.targets import get_target


def _cal(model: onnx.ModelProto, n: int = 8) -> dict[str, np.ndarray]:
    return {"x": np.stack([d["x"] for d in calibration(model, n)])}


def test_ptq_reports_accuracy_and_times_fp32_and_int8() -> None:
    m = small_cnn()
    r = compiler.compile(m, pipeline="O2,quantize{dtype=int8}", calibration_data=_cal(m))
    assert r.ok, r.error
    acc = r.of_type("model.accuracy")[-1]
    assert acc["criterion"]["passed"] and acc["samples"] == 8 and not acc["calibration"]["random"]
    layers = {x["node"]: x for x in acc["layers"]}
    assert {"conv1", "conv2", "add", "fc"} <= set(layers) and layers["conv1"]["sqnr_db"] > 20
    assert acc["outputs"]["y"]["top1"] == 1.0 and acc["outputs"]["y"]["sqnr_db"] > 20
    t = r.of_type("model.timed")[-1]
    assert t["precision"] == "int8" and t["onnxruntime_int8_ms"] > 0 and t["onnxruntime_ms"] > 0
    assert r.of_type("model.verified")[-1]["passed"]
    ops = [n.op_type for n in r.graph.walk()]
    assert "QLinearConv" in ops and "Conv" not in ops
    assert r.to_dict()["accuracy"]["criterion"]["passed"]


def test_random_calibration_warns() -> None:
    r = compiler.compile(small_cnn(), pipeline="O2,quantize{dtype=int8}", backend=False)
    assert r.ok, r.error
    msgs = [x["message"] for e in r.of_type("pass.finished") if e["name"] == "quantize" for x in e["remarks"]]
    assert any("no calibration data was given" in m and "mean little" in m for m in msgs)
    assert r.of_type("model.accuracy")[-1]["calibration"]["random"] is True


@pytest.mark.parametrize("data,needle", [
    ({"images": np.zeros((2, 1, 8, 16, 16), np.float32)}, "'images' names no graph input"),
    ({"x": np.zeros((2, 1, 8, 15, 16), np.float32)}, "input 'x' has shape [2, 1, 8, 15, 16]"),
    ({"x": np.zeros((2, 1, 8, 16, 16), np.int64)}, "input 'x' is int64"),
    ({}, "no array for graph input 'x'"),
])
def test_calibration_data_not_matching_the_inputs_is_one_line_naming_the_input(data, needle) -> None:
    r = compiler.compile(small_cnn(), pipeline="O2,quantize{dtype=int8}", calibration_data=data, backend=False)
    assert not r.ok
    assert needle in r.error["message"] and "\n" not in r.error["message"]


def test_exclude_naming_no_node_lists_close_names() -> None:
    r = compiler.compile(small_cnn(), pipeline="O2,quantize{dtype=int8 exclude=conv3}", backend=False)
    assert not r.ok
    assert "exclude='conv3' names no node" in r.error["message"] and "conv1" in r.error["message"]


def test_exclude_keeps_the_layer_in_fp32() -> None:
    m = small_cnn()
    r = compiler.compile(m, pipeline="O2,quantize{dtype=int8 exclude=conv2}", calibration_data=_cal(m), backend=False)
    assert r.ok, r.error
    body = [n for n in r.graph.walk() if n.name == "conv2"]
    assert [n.op_type for n in body] == ["Conv"]
    acc = r.of_type("model.accuracy")[-1]
    assert {x["node"]: x["precision"] for x in acc["layers"]}["conv2"] == "fp32"


def test_sqnr_matches_an_independent_numpy_computation() -> None:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((4, 100)).astype(np.float32)
    y = x + rng.standard_normal((4, 100)).astype(np.float32) * 0.01
    want = 10 * np.log10(np.sum(x.astype(np.float64) ** 2) / np.sum((x.astype(np.float64) - y) ** 2))
    assert accuracy.sqnr_db(x, y) == pytest.approx(want, rel=1e-9)
    assert accuracy.sqnr_db(x, x) == math.inf
    over = y.copy()
    over[0, 0] = np.inf  # a float16 overflow in the reduced model: no signal is left, not a crash
    assert accuracy.sqnr_db(x, over) == -math.inf
    assert evaluate._db(float(np.sum(x.astype(np.float64) ** 2)), math.inf) == -999.0
    assert accuracy.topk_agreement(np.array([[1.0, 2, 3], [3, 2, 1]]), np.array([[1.0, 3, 2], [3, 2, 1]]), 1) == 0.5


def _outlier_model() -> onnx.ModelProto:
    """x -> Conv(a) -> Conv(b) where Conv(a) ignores channel 0 of x, which carries an outlier of 1000 in
    calibration: the 8-bit range of x then has a step of about 4, every other value of x quantizes to the
    zero point, and the output is lost (a model built to fail the criterion at its first layer)."""
    rng = np.random.default_rng(2)
    wa = (rng.standard_normal((4, 4, 1, 1)) * 0.5).astype(np.float32)
    wa[:, 0] = 0.0
    inits = [nh.from_array(wa, "wa"), nh.from_array((rng.standard_normal((4, 4, 1, 1)) * 0.5).astype(np.float32), "wb")]
    nodes = [h.make_node("Conv", ["x", "wa"], ["a"], name="conv_a"), h.make_node("Conv", ["a", "wb"], ["y"], name="conv_b")]
    g = h.make_graph(nodes, "outlier", [h.make_tensor_value_info("x", T.FLOAT, [1, 4, 8, 8])],
                     [h.make_tensor_value_info("y", T.FLOAT, [1, 4, 8, 8])], inits)
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 17)])
    m.ir_version = 9
    return m


def test_fallback_returns_worst_layers_to_fp32_until_the_criterion_holds() -> None:
    rng = np.random.default_rng(3)
    x = rng.standard_normal((6, 1, 4, 8, 8)).astype(np.float32)
    x[:, :, 0, 0, 0] = 1000.0  # one outlier per sample, in the channel conv_a ignores
    base = "O2,quantize{dtype=int8"
    r0 = compiler.compile(_outlier_model(), pipeline=base + "}", calibration_data={"x": x}, backend=False)
    assert r0.ok and not r0.of_type("model.accuracy")[-1]["criterion"]["passed"]
    r = compiler.compile(_outlier_model(), pipeline=base + " fallback=true}", calibration_data={"x": x}, backend=False)
    assert r.ok, r.error
    acc = r.of_type("model.accuracy")[-1]
    steps = acc["fallbacks"]
    assert steps and steps[-1]["passed"] and acc["criterion"]["passed"]
    assert all(s["output_sqnr_db_after"] >= s["output_sqnr_db_before"] - 1e-6 for s in steps)
    msgs = [x["message"] for e in r.of_type("pass.finished") if e["name"] == "quantize" for x in e["remarks"]]
    assert sum(m.startswith("fallback: ") for m in msgs) == len(steps)
    fp32 = {x["node"] for x in acc["layers"] if x["precision"] == "fp32"}
    assert fp32 == {s["node"] for s in steps} and "conv_a" in fp32


def test_percentile_and_entropy_clip_a_heavy_tail() -> None:
    rng = np.random.default_rng(0)
    a = np.abs(rng.standard_normal(200_000))
    a[:20] = 80.0
    hist = np.histogram(a, bins=calibrate.BINS, range=(0.0, float(a.max())))[0]
    t = calibrate.percentile_threshold(hist, float(a.max()), 99.9)
    assert abs(t - float(np.percentile(a, 99.9))) <= float(a.max()) / calibrate.BINS
    e = calibrate.entropy_threshold(hist, float(a.max()))
    assert 2.0 < e < 20.0


@pytest.mark.parametrize("qmax,reduce_range", [(127, False), (64, True)])
def test_weight_params_match_onnxruntime_quantize_data(qmax: int, reduce_range: bool) -> None:
    """Symmetric per-channel int8 weights, full range and ORT's reduce_range (7 bits), against ONNX Runtime's
    own ``quantize_data`` per channel (values and scales)."""
    w = (np.random.default_rng(3).standard_normal((6, 4, 3, 3)) * 0.3).astype(np.float32)
    q, s = insert.weight_params(w, 0, qmax)
    for c in range(w.shape[0]):
        zp, scale, want = quantize_data(w[c].reshape(-1), T.INT8, True, reduce_range)
        assert int(zp) == 0 and np.float32(scale) == pytest.approx(s[c], rel=1e-6)
        np.testing.assert_array_equal(q[c].reshape(-1), want)
    assert np.abs(q).max() == qmax


def test_reduce_range_auto_follows_the_target_and_the_kernels_take_the_u8s8_step() -> None:
    """reduce-range=auto: 7-bit weights on an AVX2 target without VNNI (the remark says why), 8-bit on an
    AVX-512 VNNI one; true/false force it; a bad value is a request error naming the option."""
    m = small_cnn()
    host = get_target("host").features.split(",")
    avx2_only = "+avx2" in host and "+avx512vnni" not in host
    for opt, want in (("", 64 if avx2_only else 127), (" reduce-range=true", 64), (" reduce-range=false", 127)):
        r = compiler.compile(m, pipeline=f"O2,quantize{{dtype=int8{opt}}}", calibration_data=_cal(m))
        assert r.ok, r.error
        rem = [x for e in r.of_type("pass.finished") if e["name"] == "quantize" for x in e["remarks"]
               if "weight_qmax" in x["data"]]
        assert rem[0]["data"]["weight_qmax"] == want and f"[-{want}, {want}]" in rem[0]["message"]
        assert r.of_type("model.accuracy")[-1]["calibration"]["weight_qmax"] == want
        assert r.of_type("model.verified")[-1]["passed"]
        g = next(n for n in r.graph.nodes if isinstance(n, FusedGroup) and any(b.op_type == "QLinearConv"
                                                                                for b in n.body.nodes))
        conv = next(b for b in g.body.nodes if b.op_type == "QLinearConv")
        w = g.inputs[g.body.inputs.index(conv.input(3))].const  # the weight, read through the group's input
        assert int(np.abs(w).max()) == want
        if avx2_only:
            steps = [s for e in r.of_type("kernel.lowered") for s in e["schedule"].splitlines() if "int8 dot step" in s]
            assert steps and all(("vpmaddubsw + vpmaddwd" in s) == (want == 64) for s in steps)
    bad = compiler.compile(m, pipeline="O2,quantize{dtype=int8 reduce-range=maybe}", backend=False)
    assert not bad.ok and bad.error["stage"] == "request"
    assert "'reduce-range' = maybe" in bad.error["message"] and "auto, true, false" in bad.error["message"]
