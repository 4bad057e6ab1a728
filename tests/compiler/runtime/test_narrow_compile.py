"""Narrow element types through ``compiler.compile`` (the CLI and explorer path).

A float16 / bfloat16 / float8 model is legalized (``compiler.frontend.narrow_types``: float32 compute,
``prism.NarrowCast`` rounding steps), compiled, run on the runner's seeded inputs (values of the
storage type) and compared with ONNX Runtime (the oracle) running the original model in the storage
types, at the storage type's tolerance (``compiler.runtime.narrow_io``). Where ONNX Runtime has no CPU
kernel (bfloat16 Relu ...), the compilation finishes and says "not verified".
"""

from __future__ import annotations

import json

import ml_dtypes
import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import compiler
from compiler.cli import main
from compiler.driver.lower import lower_graph
from compiler.errors import CompileError
from compiler.frontend import import_model, specialize
from compiler.runtime.narrow_io import storage_inputs, storage_io, tolerance
from compiler.runtime.runner import make_inputs
from compiler.targets import get_target

F16, BF16, F32 = TensorProto.FLOAT16, TensorProto.BFLOAT16, TensorProto.FLOAT


def _model(nodes, inputs, outputs, inits=(), opset: int = 17) -> onnx.ModelProto:
    graph = helper.make_graph(nodes, "g", inputs, outputs, initializer=list(inits))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=9)


def conv_relu_f16() -> onnx.ModelProto:
    """float16 Conv (3x3, pad 1, bias) + Relu on [1, 3, 8, 8] -> [1, 4, 8, 8]."""
    rng = np.random.default_rng(1)
    w = numpy_helper.from_array((rng.standard_normal((4, 3, 3, 3)) * 0.3).astype(np.float16), "w")
    b = numpy_helper.from_array(rng.standard_normal(4).astype(np.float16), "b")
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1], name="conv"),
             helper.make_node("Relu", ["c"], ["y"], name="relu")]
    return _model(nodes, [helper.make_tensor_value_info("x", F16, [1, 3, 8, 8])],
                  [helper.make_tensor_value_info("y", F16, [1, 4, 8, 8])], [w, b])


def cast_in_middle_f16() -> onnx.ModelProto:
    """float16 MatMul + Relu, Cast to float32, float32 Softmax: a float32 output of a float16 model."""
    rng = np.random.default_rng(2)
    w = numpy_helper.from_array((rng.standard_normal((8, 6)) * 0.5).astype(np.float16), "w")
    nodes = [helper.make_node("MatMul", ["x", "w"], ["m"], name="mm"),
             helper.make_node("Relu", ["m"], ["r"], name="relu"),
             helper.make_node("Cast", ["r"], ["r32"], to=F32, name="cast"),
             helper.make_node("Softmax", ["r32"], ["y"], axis=-1, name="softmax")]
    return _model(nodes, [helper.make_tensor_value_info("x", F16, [4, 8])],
                  [helper.make_tensor_value_info("y", F32, [4, 6])], [w])


def relu_sigmoid_bf16() -> onnx.ModelProto:
    """bfloat16 Relu, Sigmoid, Add: ONNX Runtime (CPU) has no bfloat16 Relu kernel."""
    nodes = [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Sigmoid", ["r"], ["s"]),
             helper.make_node("Add", ["s", "x"], ["y"])]
    return _model(nodes, [helper.make_tensor_value_info("x", BF16, [2, 8])],
                  [helper.make_tensor_value_info("y", BF16, [2, 8])])


def cast_roundtrip(to: int) -> onnx.ModelProto:
    """float32 -> Cast(to) -> Mul by 3 in float32 -> Cast(to): ONNX Runtime has these Cast kernels."""
    three = numpy_helper.from_array(np.array(3.0, np.float32), "three")
    nodes = [helper.make_node("Cast", ["x"], ["n"], to=to), helper.make_node("Cast", ["n"], ["w"], to=F32),
             helper.make_node("Mul", ["w", "three"], ["m"]), helper.make_node("Cast", ["m"], ["y"], to=to)]
    return _model(nodes, [helper.make_tensor_value_info("x", F32, [3, 5])],
                  [helper.make_tensor_value_info("y", to, [3, 5])], [three], opset=19)


def _verified(r: compiler.CompileResult) -> dict:
    assert r.ok, r.error
    (v,) = r.of_type("model.verified")
    return v


def test_float16_conv_relu_verifies_against_onnxruntime() -> None:
    r = compiler.compile(conv_relu_f16(), benchmark=False)
    v = _verified(r)
    assert v["verified"] is True and v["passed"] is True, v
    out = v["outputs"]["y"]
    assert out["storage"] == "float16" and (out["rtol"], out["atol"]) == tolerance(F16) == (1e-3, 2.5e-3)
    # the declared storage types stay visible; the IR computes in float32
    assert r.model["inputs"][0]["dtype"] == "float16" and r.model["outputs"][0]["dtype"] == "float16"
    assert r.model["storage"]["values"] == [
        {"name": "x", "role": "input", "storage": "float16", "compute": "float32"},
        {"name": "y", "role": "output", "storage": "float16", "compute": "float32"}]
    assert r.model["storage"]["notes"][0].startswith("float16 storage computed in float32")
    assert r.of_type("compile.started")[0]["model"]["storage"] == r.model["storage"]
    passes = r.of_type("pass.finished")
    legal = next(e for e in passes if e["name"] == "legalize-narrow-types")
    assert legal["changed"] and "float16 ×" in legal["remarks"][0]["message"]
    assert "g (float16[1,3,8,8] x)" in passes[legal["index"] - 1]["ir"] and "g (float[1,3,8,8] x)" in legal["ir"]
    ir = next(e for e in passes if e["level"] == "graph")["ir"]
    assert "graph @g(%x: f32[1, 3, 8, 8])" in ir and "f16" not in ir
    assert r.graph is not None and r.graph.metadata["storage_types"] == {"inputs": {"x": F16}, "outputs": {"y": F16}}
    json.loads(r.to_json())


def test_float16_runner_inputs_are_float16_values_and_match_onnxruntime() -> None:
    """The runner's inputs are on the float16 grid; ONNX Runtime run on them in float16 gives what the
    child compared with (recomputed here, independently of the child)."""
    model = conv_relu_f16()
    r = compiler.compile(model, benchmark=False)
    assert r.graph is not None
    feeds = make_inputs(r.graph, storage=storage_io(model)["inputs"])
    x = feeds["x"]
    assert x.dtype == np.float32 and np.array_equal(x.astype(np.float16).astype(np.float32), x)
    assert not np.array_equal(make_inputs(r.graph)["x"], x)  # the rounding did something
    (want,) = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(
        None, {"x": x.astype(np.float16)})
    assert want.dtype == np.float16 and float(np.abs(want.astype(np.float32)).max()) > 0.5
    assert _verified(r)["outputs"]["y"]["scale"] == pytest.approx(float(np.abs(want.astype(np.float64)).max()))


def test_float16_model_with_cast_to_float32_in_the_middle() -> None:
    r = compiler.compile(cast_in_middle_f16(), benchmark=False)
    v = _verified(r)
    assert v["verified"] is True and v["passed"] is True, v
    y = v["outputs"]["y"]
    assert "storage" not in y and (y["rtol"], y["atol"]) == (1e-3, 1e-4)  # a float32 output: the fp32 rule
    assert r.model["storage"]["values"] == [{"name": "x", "role": "input", "storage": "float16",
                                              "compute": "float32"}]


def squeezenet_f16() -> onnx.ModelProto:
    """``light_squeezenet`` (``compiler.samples``, random weights) converted to float16: every float32
    initializer cast, every float32 input/output/value type declared float16, no node inserted."""
    from compiler import samples

    m = samples.randomized(str(samples.fetch("light_squeezenet")))
    for t in m.graph.initializer:
        if t.data_type == F32:
            t.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(t).astype(np.float16), t.name))
    for vi in [*m.graph.input, *m.graph.output, *m.graph.value_info]:
        if vi.type.tensor_type.elem_type == F32:
            vi.type.tensor_type.elem_type = F16
    onnx.checker.check_model(m)
    return m


def test_float16_squeezenet_verifies_against_onnxruntime() -> None:
    r = compiler.compile(squeezenet_f16(), benchmark=False)
    v = _verified(r)
    assert v["verified"] is True and v["passed"] is True, v
    (out,) = v["outputs"].values()
    assert out["storage"] == "float16" and out["scale"] > 0.01  # softmax over 1000 classes, not all zeros
    assert r.model["storage"]["values"][0] == {"name": "data_0", "role": "input", "storage": "float16",
                                               "compute": "float32"}


def test_model_newer_than_onnxruntime_reads_is_verified_with_a_note() -> None:
    """``helper.make_model`` writes the newest IR version, which ONNX Runtime may not read yet."""
    m = _model([helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Sigmoid", ["r"], ["y"])],
               [helper.make_tensor_value_info("x", F16, [1, 3, 8, 8])],
               [helper.make_tensor_value_info("y", F16, [1, 3, 8, 8])])
    m.ir_version = onnx.IR_VERSION
    v = _verified(compiler.compile(m, benchmark=False))
    assert v["verified"] is True and v["passed"] is True, v
    if onnx.IR_VERSION > 13:  # this ONNX Runtime reads up to 13 (it names its maximum in the error)
        assert any("ir_version" in n for n in v["notes"]), v


def test_float16_check_passes_runs_on_the_legalized_model() -> None:
    r = compiler.compile(conv_relu_f16(), backend=False, check_passes=True)
    assert r.ok, r.error
    assert r.checks and all(c["passed"] for c in r.checks), r.checks


def test_bfloat16_without_onnxruntime_kernel_is_reported_not_verified() -> None:
    r = compiler.compile(relu_sigmoid_bf16())
    v = _verified(r)
    assert v["verified"] is False and v["passed"] is None and v["max_abs_error"] is None
    assert v["message"].startswith("not verified: ONNX Runtime has no CPU kernel for Relu(14) in bfloat16"), v
    assert r.of_type("model.timed")[0]["onnxruntime_ms"] is None  # Prism was still timed
    last = r.of_type("pass.finished")[-1]["ir"]
    assert last.count('prism.NarrowCast') == 2 and 'to = "bfloat16"' in last
    assert r.model["storage"]["notes"][0] == "bfloat16 storage computed in float32, rounded to bfloat16 by " \
                                             "prism.NarrowCast steps"
    json.loads(r.to_json())


def test_bfloat16_check_passes_is_skipped_with_a_reason() -> None:
    r = compiler.compile(relu_sigmoid_bf16(), backend=False, check_passes=True)
    assert r.ok, r.error
    assert r.checks == [{"after": "import", "passed": None, "problem": None, "skipped": pytest.approx(
        r.checks[0]["skipped"])}] and "prism.NarrowCast" in r.checks[0]["skipped"]


@pytest.mark.parametrize("to", [BF16, TensorProto.FLOAT8E4M3FN, TensorProto.FLOAT8E5M2])
def test_narrow_casts_verify_where_onnxruntime_has_kernels(to: int) -> None:
    r = compiler.compile(cast_roundtrip(to), benchmark=False)
    v = _verified(r)
    assert v["verified"] is True and v["passed"] is True, v
    name = {BF16: "bfloat16", TensorProto.FLOAT8E4M3FN: "float8e4m3fn", TensorProto.FLOAT8E5M2: "float8e5m2"}[to]
    assert v["outputs"]["y"]["storage"] == name
    assert v["max_abs_error"] == 0.0  # the same rounding of the same values: exact


def test_storage_inputs_are_on_each_format_grid() -> None:
    rng = np.random.default_rng(0)
    a = {"x": rng.standard_normal(64).astype(np.float32)}
    for elem, dt in [(BF16, ml_dtypes.bfloat16), (TensorProto.FLOAT8E4M3FN, ml_dtypes.float8_e4m3fn),
                     (TensorProto.FLOAT8E8M0, ml_dtypes.float8_e8m0fnu)]:
        x = storage_inputs(a, {"x": elem})["x"]
        assert x.dtype == np.float32 and np.array_equal(x.astype(dt).astype(np.float32), x) and np.all(np.isfinite(x))


def test_unlegalized_float16_value_is_a_clear_compile_error() -> None:
    graph = import_model(conv_relu_f16())
    specialize(graph, None)
    with pytest.raises(CompileError) as e:
        lower_graph(graph, get_target("host"))
    assert e.value.stage == "lowering"
    assert "%x has element type float16" in str(e.value) and "legalize" in str(e.value)


def test_cli_float16_and_bfloat16(tmp_path, capsys) -> None:
    onnx.save(conv_relu_f16(), tmp_path / "f16.onnx")
    onnx.save(relu_sigmoid_bf16(), tmp_path / "bf16.onnx")
    assert main(["compile", str(tmp_path / "f16.onnx"), "--verify"]) == 0
    out = capsys.readouterr().out
    assert "storage: float16 storage computed in float32" in out and "verification: passed" in out
    assert main(["compile", str(tmp_path / "bf16.onnx"), "--verify"]) == 0
    out = capsys.readouterr().out
    assert "verification: not verified: ONNX Runtime has no CPU kernel for Relu(14) in bfloat16" in out


def test_validate_request_accepts_a_bfloat16_model() -> None:
    """The IR has no bfloat16: the request check legalizes as compile() does."""
    got = compiler.validate_request(relu_sigmoid_bf16(), target="host", pipeline="O1", input_shapes=None)
    assert got["input_shapes"] == {"x": [2, 8]}
