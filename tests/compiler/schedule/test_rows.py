"""Row kernels (Softmax, LogSoftmax, LayerNormalization in both forms) and attention, against ONNX
Runtime through the real O2 pipeline, with the chosen schedule asserted."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

from compiler import synthetic
from tests.compiler.schedule.model_check import check_model, model, tensor

R = np.random.default_rng(11)


def _rows(c) -> list:  # type: ignore[no-untyped-def]
    return [k for k in c.kernels if any("row kernel(" in s for s in k.func.attrs.get("schedule", []))]


@pytest.mark.parametrize("op,shape,axis,opset", [
    ("Softmax", (2, 3, 37), -1, 13), ("Softmax", (4, 128), 1, 13), ("LogSoftmax", (3, 5, 20), -1, 13),
    ("Softmax", (2, 3, 4, 5), 1, 11),  # opset < 13: the last three axes are one row of 60
    ("Softmax", (1, 6), -1, 13),  # a row shorter than one vector
    ("Softmax", (1, 9, 9), -1, 13), ("LogSoftmax", (2, 17), -1, 13),  # 8k + 1 columns: a one-lane last vector
])
def test_softmax_row_kernel(op, shape, axis, opset) -> None:  # type: ignore[no-untyped-def]
    x = (3 * R.standard_normal(shape)).astype(np.float32)
    c = check_model(model([helper.make_node(op, ["x"], ["y"], axis=axis)], [tensor("x", shape)], ["y"], opset=opset),
                    {"x": x}, rtol=1e-5, atol=1e-6)
    assert len(_rows(c)) == 1


@pytest.mark.parametrize("masked", [False, True])
def test_attention_scale_and_mask_in_the_first_matmul(masked: bool) -> None:
    """``MatMul -> Div -> Add(mask) -> Softmax -> MatMul``: two GEMM kernels and a row kernel; the
    scale and the mask are the first MatMul's epilogue."""
    nodes = [helper.make_node("MatMul", ["q", "kt"], ["s"]), helper.make_node("Div", ["s", "scale"], ["sd"])]
    last = "sd"
    if masked:
        nodes.append(helper.make_node("Add", ["sd", "mask"], ["sm"]))
        last = "sm"
    nodes += [helper.make_node("Softmax", [last], ["p"], axis=-1), helper.make_node("MatMul", ["p", "v"], ["y"])]
    ins = [tensor("q", (1, 2, 24, 8)), tensor("kt", (1, 2, 8, 24)), tensor("v", (1, 2, 24, 8))]
    feeds = {n: R.standard_normal(tuple(d.dim_value for d in t.type.tensor_type.shape.dim)).astype(np.float32)
             for n, t in zip("q kt v".split(), ins, strict=True)}
    if masked:
        ins.append(tensor("mask", (1, 1, 1, 24)))
        feeds["mask"] = np.where(R.random((1, 1, 1, 24)) < 0.3, -10000.0, 0.0).astype(np.float32)
    c = check_model(model(nodes, ins, ["y"], {"scale": np.array(np.sqrt(8.0), np.float32)}), feeds)
    assert len(c.kernels) == 3 and len(_rows(c)) == 1
    first = c.kernels[0].func.attrs["ops"]
    assert first == ["MatMul", "Div"] + (["Add"] if masked else [])


@pytest.mark.parametrize("shape,axis", [((2, 7, 48), -1), ((3, 20), -1), ((2, 4, 6, 5), 2), ((1, 9, 13), 1), ((2, 5, 9), -1)])
def test_layer_normalization_op_row_kernel(shape, axis) -> None:  # type: ignore[no-untyped-def]
    n = int(np.prod(shape[axis:]))
    norm = shape[axis:]
    inits = {"g": (1 + 0.1 * R.standard_normal(norm)).astype(np.float32), "b": R.standard_normal(norm).astype(np.float32)}
    c = check_model(model([helper.make_node("LayerNormalization", ["x", "g", "b"], ["y"], axis=axis, epsilon=1e-3)],
                          [tensor("x", shape)], ["y"], inits), rtol=1e-5, atol=1e-5)
    assert len(_rows(c)) == 1 and n > 0


def test_layer_normalization_with_mean_output_uses_the_generic_lowering() -> None:
    nodes = [helper.make_node("LayerNormalization", ["x", "g"], ["y", "mean", "rstd"], axis=-1)]
    c = check_model(model(nodes, [tensor("x", (3, 10))], ["y", "mean", "rstd"], {"g": np.ones(10, np.float32)}))
    assert not _rows(c)


@pytest.mark.parametrize("gelu", ["erf", "tanh"])
def test_encoder_layer_norms_recognised_and_gelu_in_the_epilogue(gelu: str) -> None:
    """A small BERT-class encoder (decomposed LayerNormalization, GELU in both forms) matches ONNX
    Runtime; every layer norm is one row kernel and GELU is in the FFN MatMul's epilogue."""
    m = synthetic.bert_encoder(seq=16, hidden=32, heads=2, ffn=64, layers=1, gelu=gelu)
    feeds = {"x": R.standard_normal((1, 16, 32)).astype(np.float32),
             "mask": np.where(R.random((1, 1, 1, 16)) < 0.25, -10000.0, 0.0).astype(np.float32)}
    c = check_model(m, feeds, rtol=1e-4, atol=1e-5)
    lns = [k for k in c.kernels if k.name.startswith("fused_layer_norm")]
    assert len(lns) == 2 and all(k in _rows(c) for k in lns)
    assert sum(1 for r in c.remarks if r["pass"] == "fuse-layer-norm" and r["kind"] == "applied") == 2
    ffn = [k for k in c.kernels if ("Erf" if gelu == "erf" else "Tanh") in k.func.attrs["ops"]]
    assert len(ffn) == 1 and ffn[0].func.attrs["ops"][0] == "MatMul"


def test_layer_normalization_op_form_encoder() -> None:
    m = synthetic.bert_encoder(seq=8, hidden=24, heads=2, ffn=48, layers=1, gelu="tanh", layernorm_op=True,
                               mask=False)
    c = check_model(m, rtol=1e-4, atol=1e-5)
    assert len([k for k in _rows(c) if "LayerNormalization" in k.func.attrs["ops"]]) == 2
