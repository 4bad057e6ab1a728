"""Models of the INT8 set quantized by ONNX Runtime's quantize_static (QDQ, per-channel and per-tensor)
compile to integer kernels and verify against ONNX Runtime running the same quantized model (dequantized
outputs within one quantization step, float outputs at rtol 1e-3)."""

from __future__ import annotations

import onnx
import pytest
from qmodels import ort_quantized

import compiler
from compiler.quant.models import dwcnn, encoder


def _check(q: onnx.ModelProto, integer_ops: set[str]) -> None:
    r = compiler.compile(q, pipeline="O2", benchmark=False)
    assert r.ok, r.error
    v = r.of_type("model.verified")[-1]
    assert v["passed"], {k: x for k, x in v.items() if k != "outputs"}
    ops = {n.op_type for n in r.graph.walk()}
    assert integer_ops <= ops, ops


@pytest.mark.parametrize("per_channel", [True, False])
def test_depthwise_separable_cnn(per_channel: bool) -> None:
    _check(ort_quantized(dwcnn(size=32, blocks=2), per_channel=per_channel), {"QLinearConv", "QGemm"})


def test_transformer_encoder() -> None:
    _check(ort_quantized(encoder(layers=1, tokens=8, dim=32, heads=2), per_channel=True), {"QLinearMatMul"})


@pytest.mark.slow  # make test-all; CI keeps the small CNN and encoder above (and QLinearAdd in test_fold_qdq)
def test_resnet50() -> None:
    from compiler import samples

    q = ort_quantized(onnx.load(samples.fetch("light_resnet50")), per_channel=True, samples=2, prepare=True)
    _check(q, {"QLinearConv", "QLinearAdd"})
