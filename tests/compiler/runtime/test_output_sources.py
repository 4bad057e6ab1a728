"""Graph outputs that no kernel writes: a constant (folded), a graph input, an output listed twice.

Both runtime paths map each graph output to its source through one linker
(``compiler.runtime.program.link``): ``compiler.compile(..., verify=True)`` compares every output with
ONNX Runtime in its child, and the ONNX backend returns them. Expected values come from ONNX Runtime
(the verification) and ``onnx.reference``.
"""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

import compiler
from compiler.backend import PrismBackend
from compiler.cli import main
from compiler.errors import CompileError
from compiler.frontend import import_model, specialize
from compiler.ir import Graph
from compiler.runtime.program import link
from compiler.runtime.runner import run_model

F = TensorProto.FLOAT
A = np.array([[0.5, -1.0, 2.0], [3.0, -4.5, 0.25]], np.float32)


def _model(nodes: list, inputs: list, outputs: list, inits: list, opset: int = 17) -> onnx.ModelProto:
    m = helper.make_model(helper.make_graph(nodes, "m", inputs, outputs, inits),
                          opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    return m


def _vi(name: str, elem: int = F, shape: list | None = None) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, elem, [2, 3] if shape is None else shape)


def constant_model() -> onnx.ModelProto:
    """``y = Add(a, a)``, ``a`` an initializer, no graph inputs."""
    return _model([helper.make_node("Add", ["a", "a"], ["y"])], [], [_vi("y")], [numpy_helper.from_array(A, "a")])


def mixed_model() -> onnx.ModelProto:
    """A constant output ``c = Add(a, a)`` and a computed one ``y = Relu(x)`` (``x`` unrelated to ``a``)."""
    return _model([helper.make_node("Add", ["a", "a"], ["c"]), helper.make_node("Relu", ["x"], ["y"])],
                  [_vi("x")], [_vi("c"), _vi("y")], [numpy_helper.from_array(A, "a")])


def identity_model() -> onnx.ModelProto:
    """``y = Identity(x)``: the output is the input once Identity is simplified away."""
    return _model([helper.make_node("Identity", ["x"], ["y"])], [_vi("x")], [_vi("y")], [])


def passthrough_model() -> onnx.ModelProto:
    """No nodes: the graph output is the graph input ``x`` itself."""
    return _model([], [_vi("x")], [_vi("x")], [])


def twice_model() -> onnx.ModelProto:
    """``y = Relu(x)`` listed twice among the graph outputs."""
    return _model([helper.make_node("Relu", ["x"], ["y"])], [_vi("x")], [_vi("y"), _vi("y")], [])


def nms_model() -> onnx.ModelProto:
    """NonMaxSuppression whose boxes, scores and thresholds are all initializers (folded to a constant)."""
    boxes = np.array([[[0, 0, 1, 1], [0, 0.1, 1, 1.1], [0, -0.1, 1, 0.9], [0, 10, 1, 11], [0, 10.1, 1, 11.1],
                       [0, 100, 1, 101]]], np.float32)
    scores = np.array([[[0.9, 0.75, 0.6, 0.95, 0.5, 0.3]]], np.float32)
    inits = [numpy_helper.from_array(boxes, "boxes"), numpy_helper.from_array(scores, "scores"),
             numpy_helper.from_array(np.array([3], np.int64), "max_boxes"),
             numpy_helper.from_array(np.array([0.5], np.float32), "iou"),
             numpy_helper.from_array(np.array([0.0], np.float32), "score_min")]
    node = helper.make_node("NonMaxSuppression", ["boxes", "scores", "max_boxes", "iou", "score_min"], ["selected"])
    return _model([node], [], [helper.make_tensor_value_info("selected", TensorProto.INT64, None)], inits, opset=11)


MODELS = {"constant": constant_model, "mixed": mixed_model, "identity": identity_model,
          "passthrough": passthrough_model, "twice": twice_model, "nms": nms_model}


def _verified(model: onnx.ModelProto, pipeline: str, benchmark: bool = False) -> dict:
    r = compiler.compile(model, pipeline=pipeline, verify=True, benchmark=benchmark)
    assert r.ok, r.error
    (ver,) = r.of_type("model.verified")
    assert ver["verified"] and ver["passed"], ver
    return ver


@pytest.mark.parametrize("pipeline", ["O1", "O2"])
@pytest.mark.parametrize("name", list(MODELS))
def test_compile_verifies_outputs_no_kernel_writes(name: str, pipeline: str) -> None:
    model = MODELS[name]()
    ver = _verified(model, pipeline)
    assert set(ver["outputs"]) == {o.name for o in model.graph.output}
    assert all(o["max_abs_error"] == 0.0 for o in ver["outputs"].values())


def test_constant_outputs_need_no_kernel_and_are_timed() -> None:
    r = compiler.compile(constant_model(), pipeline="O2", verify=True, benchmark=True)
    assert r.ok, r.error
    assert r.of_type("kernel.lowered") == []  # folded: the output is the constant itself
    assert r.of_type("model.verified")[0]["passed"]
    timed = r.of_type("model.timed")[0]
    assert timed["prism_ms"] >= 0 and timed["onnxruntime_ms"] > 0
    # the mixed model: one kernel for the computed output, the constant beside it
    ver = _verified(mixed_model(), "O2", benchmark=True)
    assert set(ver["outputs"]) == {"c", "y"}


def test_a_wrong_constant_output_fails_verification() -> None:
    """The constant is compared, not skipped: a graph whose folded output differs from the ONNX model's."""
    model = constant_model()
    g = Graph("m")
    g.opset_imports = {"": 17}
    g.outputs = [g.add_constant("y", 2 * A + np.float32(0.5))]  # the model's y is 2 * A
    res = run_model([], g, None, model.SerializeToString(), verify=True, benchmark=False)
    assert res["outputs"]["y"]["passed"] is False
    assert res["outputs"]["y"]["max_abs_error"] == pytest.approx(0.5)


def test_link_names_an_output_without_a_source() -> None:
    g = import_model(identity_model())
    specialize(g, {})
    g.nodes[0].op_type = "Relu"  # a node output no kernel writes (no kernels are given)
    with pytest.raises(CompileError) as ei:
        link(g, [], None)
    assert ei.value.stage == "lowering" and "%y" in ei.value.message and "not written by any kernel" in ei.value.message


@pytest.mark.parametrize("name", list(MODELS))
def test_backend_returns_outputs_no_kernel_writes(name: str) -> None:
    model = MODELS[name]()
    feeds = {i.name: np.linspace(-1, 1, 6, dtype=np.float32).reshape(2, 3) for i in model.graph.input}
    expected = ReferenceEvaluator(model).run(None, feeds)
    got = PrismBackend.run_model(model, list(feeds.values()))
    assert len(got) == len(expected) == len(model.graph.output)
    for g_, e in zip(got, expected, strict=True):
        assert g_.dtype == e.dtype and g_.shape == e.shape
        np.testing.assert_array_equal(g_, e)


def test_cli_verifies_a_constant_output_model(tmp_path, capsys) -> None:
    path = tmp_path / "const.onnx"
    onnx.save(constant_model(), path)
    rc = main(["compile", str(path), "--pipeline", "O2", "--verify"])
    out = capsys.readouterr()
    assert rc == 0, out.err
    assert "verification: passed" in out.out
