"""Input values (issue 13 item 1): an input bound to a value is a constant of the compiled model.

Expected outputs come from ONNX Runtime running the original model with the value fed as an input.
"""

from __future__ import annotations

import json

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper

import compiler
from compiler import CompileError
from compiler.cli import main as cli_main
from compiler.driver import compile_program
from compiler.frontend.input_values import bind_input_values, parse_input_value, value_inputs
from compiler.runtime.execute import run_program


def _model(nodes, inputs, outputs, inits=(), opset=17) -> onnx.ModelProto:
    m = h.make_model(h.make_graph(nodes, "g", inputs, outputs, list(inits)), opset_imports=[h.make_opsetid("", opset)])
    m.ir_version = 8  # what the installed ONNX Runtime reads
    onnx.checker.check_model(m)
    return m


def if_on_mode() -> onnx.ModelProto:
    """``y = x * 2`` (2x3) when ``mode > 0`` else ``transpose(x)`` (3x2): the branches' shapes differ."""
    then = h.make_graph([h.make_node("Mul", ["x", "two"], ["t"])], "then", [],
                        [h.make_tensor_value_info("t", T.FLOAT, [2, 3])], [numpy_helper.from_array(np.float32(2), "two")])
    els = h.make_graph([h.make_node("Transpose", ["x"], ["e"], perm=[1, 0])], "else", [],
                       [h.make_tensor_value_info("e", T.FLOAT, [3, 2])])
    return _model([h.make_node("Greater", ["mode", "zero"], ["c"]),
                   h.make_node("If", ["c"], ["y"], then_branch=then, else_branch=els, name="select")],
                  [h.make_tensor_value_info("x", T.FLOAT, [2, 3]), h.make_tensor_value_info("mode", T.INT64, [])],
                  [h.make_tensor_value_info("y", T.FLOAT, ["a", "b"])], [numpy_helper.from_array(np.int64(0), "zero")])


def loop_n_times() -> onnx.ModelProto:
    """``acc = x; repeat n: acc = acc * 1.5 + i`` with the trip count ``n`` an input; scan output of acc."""
    body = h.make_graph(
        [h.make_node("Cast", ["i"], ["fi"], to=T.FLOAT), h.make_node("Mul", ["a", "k"], ["m"]),
         h.make_node("Add", ["m", "fi"], ["a2"]), h.make_node("Identity", ["c"], ["c2"]),
         h.make_node("Identity", ["a2"], ["s"])], "body",
        [h.make_tensor_value_info("i", T.INT64, []), h.make_tensor_value_info("c", T.BOOL, []),
         h.make_tensor_value_info("a", T.FLOAT, [4])],
        [h.make_tensor_value_info("c2", T.BOOL, []), h.make_tensor_value_info("a2", T.FLOAT, [4]),
         h.make_tensor_value_info("s", T.FLOAT, [4])], [numpy_helper.from_array(np.float32(1.5), "k")])
    return _model([h.make_node("Loop", ["n", "", "x"], ["acc", "steps"], body=body, name="repeat")],
                  [h.make_tensor_value_info("x", T.FLOAT, [4]), h.make_tensor_value_info("n", T.INT64, [])],
                  [h.make_tensor_value_info("acc", T.FLOAT, [4]), h.make_tensor_value_info("steps", T.FLOAT, ["n", 4])])


def reshape_to() -> onnx.ModelProto:
    return _model([h.make_node("Reshape", ["x", "shape"], ["r"]), h.make_node("Relu", ["r"], ["y"])],
                  [h.make_tensor_value_info("x", T.FLOAT, [6]), h.make_tensor_value_info("shape", T.INT64, [2])],
                  [h.make_tensor_value_info("y", T.FLOAT, ["a", "b"])])


def _ort(m: onnx.ModelProto, feeds: dict) -> list[np.ndarray]:
    return ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)


def _compiled(m: onnx.ModelProto, values: dict, *arrays: np.ndarray) -> list[np.ndarray]:
    comp = compile_program(m, None, input_values=values)
    assert comp.program is not None
    assert [n for n, _, _ in comp.program.inputs] == [i.name for i in m.graph.input if i.name not in values]
    return run_program(comp.program, list(arrays))


@pytest.mark.parametrize("mode", [1, 7, 0, -3])
def test_bound_mode_folds_the_if_both_ways(mode: int) -> None:
    m = if_on_mode()
    x = np.arange(6, dtype=np.float32).reshape(2, 3) - 2.5
    (got,) = _compiled(m, {"mode": [mode]}, x)
    (ref,) = _ort(m, {"x": x, "mode": np.array(mode, np.int64)})
    assert got.shape == ref.shape == ((2, 3) if mode > 0 else (3, 2))
    np.testing.assert_array_equal(got, ref)


@pytest.mark.parametrize("n", [0, 1, 3])
def test_bound_trip_count_unrolls_the_loop(n: int) -> None:
    m = loop_n_times()
    x = np.array([1.0, -2.0, 0.5, 3.0], np.float32)
    got = _compiled(m, {"n": n}, x)
    ref = _ort(m, {"x": x, "n": np.array(n, np.int64)})
    for g, r in zip(got, ref, strict=True):
        assert g.shape == r.shape
        np.testing.assert_allclose(g, r, rtol=1e-6)


def test_bound_shape_slot() -> None:
    m = reshape_to()
    x = np.linspace(-1, 1, 6, dtype=np.float32)
    (got,) = _compiled(m, {"shape": [3, 2]}, x)
    (ref,) = _ort(m, {"x": x, "shape": np.array([3, 2], np.int64)})
    assert got.shape == (3, 2)
    np.testing.assert_array_equal(got, ref)


def test_value_inputs_offers_small_integer_control_inputs() -> None:
    assert value_inputs(if_on_mode()) == [{"name": "mode", "dtype": "int64", "shape": [],
                                           "uses": ["the condition of If 'select'"]}]
    assert value_inputs(loop_n_times()) == [{"name": "n", "dtype": "int64", "shape": [],
                                             "uses": ["the trip count of Loop 'repeat'"]}]
    assert [v["name"] for v in value_inputs(reshape_to())] == ["shape"]
    big = _model([h.make_node("Reshape", ["x", "shape"], ["y"])],
                 [h.make_tensor_value_info("x", T.FLOAT, [6]), h.make_tensor_value_info("shape", T.INT64, [32])],
                 [h.make_tensor_value_info("y", T.FLOAT, ["a"])])
    assert value_inputs(big) == []  # 32 elements: data, not a size
    info = compiler.inspect_model(if_on_mode())
    assert [v["name"] for v in info["value_inputs"]] == ["mode"]


def test_unbound_if_condition_is_decided_at_run_time_never_guessed() -> None:
    res = compiler.compile(if_on_mode(), verify=True, benchmark=False)
    assert res.ok, res.error
    (decision,) = next(e for e in res.events if e["type"] == "graph.fused")["control"]
    assert decision["node"] == "select" and "evaluated at run time" in decision["decision"]
    assert "input 'mode'" in decision["decision"] and "input_values={'mode': [V]}" in decision["decision"]
    assert "--input-value" not in decision["decision"]  # the API's caller is told its field, not a CLI flag
    # a data-dependent condition (from a float input): decided at run time, no value to bind
    m = if_on_mode()
    m.graph.node[0].CopyFrom(h.make_node("ReduceSum", ["x"], ["c0"], keepdims=0))
    m.graph.node.insert(1, h.make_node("Greater", ["c0", "fzero"], ["c"]))
    m.graph.initializer.append(numpy_helper.from_array(np.float32(0), "fzero"))
    res = compiler.compile(m, verify=True, benchmark=False, input_values={"mode": 1})
    assert res.ok, res.error
    (decision,) = next(e for e in res.events if e["type"] == "graph.fused")["control"]
    assert "--input-value" not in decision["decision"]
    assert next(e for e in res.events if e["type"] == "model.verified")["passed"] is True


def test_compile_reports_and_verifies_the_bound_value() -> None:
    res = compiler.compile(if_on_mode(), input_values={"mode": [-1]}, benchmark=False)
    assert res.ok, res.error
    started = next(e for e in res.events if e["type"] == "compile.started")
    assert started["model"]["input_values"] == {"mode": [-1]} == res.model["input_values"]
    verified = next(e for e in res.events if e["type"] == "model.verified")
    assert verified["passed"] is True


def test_validate_request_returns_the_values() -> None:
    out = compiler.validate_request(loop_n_times(), target="host", pipeline="O1", input_shapes=None,
                                    input_values={"n": 2})
    assert out["input_values"] == {"n": [2]} and out["input_shapes"] == {"x": [4]}


@pytest.mark.parametrize(("values", "needle"), [
    ({"mod": [1]}, "'mod': not a model input; inputs: x, mode"),
    ({"mode": [1, 2]}, "'mode': the input has shape [] (1 element), 2 values given"),
    ({"mode": [1.5]}, "'mode': 1.5 is not a value of type int64"),
    ({"mode": ["one"]}, "'mode': 'one' is not a value of type int64"),
    ({"mode": [2**70]}, "is not a value of type int64"),
])
def test_bad_values_name_the_input(values: dict, needle: str) -> None:
    with pytest.raises(CompileError) as info:
        bind_input_values(if_on_mode(), values)
    assert info.value.stage == "request" and needle in info.value.message
    res = compiler.compile(if_on_mode(), input_values=values, verify=False, benchmark=False)
    assert res.error["stage"] == "request" and needle in res.error["message"]


def test_bool_and_uint8_ranges() -> None:
    m = _model([h.make_node("Identity", ["b"], ["y"])], [h.make_tensor_value_info("b", T.BOOL, [2])],
               [h.make_tensor_value_info("y", T.BOOL, [2])])
    _, vals = bind_input_values(m, {"b": [1, 0]})
    assert vals["b"].dtype == np.bool_ and vals["b"].tolist() == [True, False]
    with pytest.raises(CompileError, match="2 is not a value of type bool"):
        bind_input_values(m, {"b": [2, 0]})
    u = _model([h.make_node("Identity", ["u"], ["y"])], [h.make_tensor_value_info("u", T.UINT8, ["n"])],
               [h.make_tensor_value_info("y", T.UINT8, ["n"])])
    _, vals = bind_input_values(u, {"u": [0, 255, 7]})
    assert vals["u"].shape == (3,)  # a symbolic rank-1 input takes the count given
    with pytest.raises(CompileError, match="256 is not a value of type uint8"):
        bind_input_values(u, {"u": [256]})


def test_parse_input_value() -> None:
    assert parse_input_value("mode=1") == ("mode", [1])
    assert parse_input_value("s=2,-3.5,true") == ("s", [2, -3.5, 1])
    for bad in ("mode", "=1", "mode=", "mode=a"):
        with pytest.raises(CompileError) as info:
            parse_input_value(bad)
        assert info.value.stage == "request" and "--input-value" in info.value.message


def test_cli_input_value(tmp_path, capsys) -> None:
    path = tmp_path / "if.onnx"
    onnx.save(if_on_mode(), str(path))
    assert cli_main(["compile", str(path), "--input-value", "mode=1", "--verify", "--pipeline", "O1"]) == 0
    out = capsys.readouterr().out
    assert "input value: mode = 1" in out and "verification: passed" in out
    assert cli_main(["compile", str(path), "--pipeline", "O1", "--json"]) == 0  # unbound: decided at run time
    (decision,) = json.loads(capsys.readouterr().out)["fusion"]["control"]
    assert "bind it with --input-value mode=V" in decision["decision"] and "input_values" not in decision["decision"]
    assert cli_main(["compile", str(path), "--input-value", "mode=1,2", "--no-backend"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "input value for 'mode'" in err[0]
