"""fold-qdq: ONNX Runtime's QDQ and QOperator models compile to integer ops and verify against ONNX
Runtime running the same quantized model (dequantized outputs within one quantization step)."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh
from qmodels import ort_quantized, small_cnn

import compiler


def _ops(result: compiler.CompileResult) -> list[str]:
    assert result.graph is not None
    return [n.op_type for n in result.graph.walk()]


def _remarks(result: compiler.CompileResult, pass_name: str) -> list[dict]:
    return [r for e in result.of_type("pass.finished") if e["name"] == pass_name for r in e["remarks"]]


@pytest.mark.parametrize("fmt,per_channel,act", [("qdq", True, "s8"), ("qdq", False, "u8"), ("qop", False, "u8"),
                                                 ("qop", True, "s8")])
def test_ort_quantized_model_verifies_against_ort(fmt: str, per_channel: bool, act: str) -> None:
    q = ort_quantized(small_cnn(), fmt=fmt, per_channel=per_channel, activation=act)
    r = compiler.compile(q, pipeline="O2", benchmark=False)
    assert r.ok, r.error
    v = r.of_type("model.verified")[-1]
    assert v["passed"], v
    ops = _ops(r)
    assert "QLinearConv" in ops and "QGemm" in ops
    assert "Conv" not in ops and "Gemm" not in ops
    if fmt == "qdq":
        applied = [x["message"] for x in _remarks(r, "fold-qdq") if x["kind"] == "applied"]
        assert sum("QLinearConv" in m for m in applied) == 2
        assert any("QLinearAdd" in m for m in applied) and any("MaxPool" in m for m in applied)


def test_dequantized_output_allows_one_step_only() -> None:
    """The tolerance of a dequantized output is its quantization step, not the float rtol/atol."""
    q = ort_quantized(small_cnn(), fmt="qdq")
    r = compiler.compile(q, pipeline="O2", benchmark=False)
    out = r.of_type("model.verified")[-1]["outputs"]["y"]
    scale = [nh.to_array(t) for t in q.graph.initializer if t.name == "y_scale"][0]
    assert out["quantization_step"] == pytest.approx(float(scale))
    assert out["max_abs_error"] <= float(scale) * (1 + 1e-5)


def _qdq_conv(scale_is_input: bool, relu: bool = False) -> onnx.ModelProto:
    rng = np.random.default_rng(0)
    w = rng.integers(-60, 60, (4, 3, 3, 3)).astype(np.int8)
    inits = [nh.from_array(np.array(0.05, np.float32), "xs"), nh.from_array(np.array(0, np.uint8), "xz"),
             nh.from_array(w, "wq"), nh.from_array(np.full(4, 0.01, np.float32), "ws"),
             nh.from_array(np.zeros(4, np.int8), "wz"), nh.from_array(np.array(0.1, np.float32), "ys"),
             nh.from_array(np.array(128, np.uint8), "yz")]
    ins = [h.make_tensor_value_info("x", T.FLOAT, [1, 3, 8, 8])]
    if scale_is_input:
        inits = [i for i in inits if i.name != "xs"]
        ins.append(h.make_tensor_value_info("xs", T.FLOAT, []))
    nodes = [h.make_node("QuantizeLinear", ["x", "xs", "xz"], ["xq"], name="qx"),
             h.make_node("DequantizeLinear", ["xq", "xs", "xz"], ["xd"], name="dqx"),
             h.make_node("DequantizeLinear", ["wq", "ws", "wz"], ["wd"], axis=0, name="dqw"),
             h.make_node("Conv", ["xd", "wd"], ["c"], pads=[1, 1, 1, 1], name="conv")]
    last = "c"
    if relu:
        nodes.append(h.make_node("Relu", ["c"], ["r"], name="relu"))
        last = "r"
    nodes += [h.make_node("QuantizeLinear", [last, "ys", "yz"], ["yq"], name="qy"),
              h.make_node("DequantizeLinear", ["yq", "ys", "yz"], ["y"], name="dqy")]
    g = h.make_graph(nodes, "qdq_conv", ins, [h.make_tensor_value_info("y", T.FLOAT, [1, 4, 8, 8])], inits)
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 17)])
    m.ir_version = 9
    return m


def test_relu_between_conv_and_q_becomes_a_clip_of_the_integers() -> None:
    r = compiler.compile(_qdq_conv(False, relu=True), pipeline="O2", benchmark=False)
    assert r.ok, r.error
    assert r.of_type("model.verified")[-1]["passed"]
    applied = [x["message"] for x in _remarks(r, "fold-qdq") if x["kind"] == "applied"]
    assert any("relu as Clip[128, 255]" in m for m in applied), applied
    assert "Relu" not in _ops(r)


def test_non_constant_scale_is_a_missed_remark_and_stays_float() -> None:
    r = compiler.compile(_qdq_conv(True), pipeline="O2", backend=False)
    assert r.ok, r.error
    missed = [x["message"] for x in _remarks(r, "fold-qdq") if x["kind"] == "missed"]
    assert any("qx (QuantizeLinear) has a scale or zero point that is not a constant" in m for m in missed), missed
    assert any("dqx (DequantizeLinear) has a scale or zero point" in m for m in missed), missed
    assert any(m.startswith("not folded: conv (Conv)") and "not a constant" in m for m in missed), missed
    assert "QLinearConv" not in _ops(r) and "Conv" in _ops(r)
