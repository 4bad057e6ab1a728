"""Dim ranges (issue 13 item 3): one artifact for N = 1..8, checked against ONNX Runtime at the
minimum, a middle value and the maximum; bad ranges and sizes outside the range are one-line errors
naming the dim or the input."""

from __future__ import annotations

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
from compiler.driver import Request, compile_model
from compiler.driver.stages import run_stages
from compiler.driver.state import Compilation
from compiler.events import EventStream
from compiler.frontend.dim_range import parse_dim_range
from compiler.runtime.batch import BatchProgram
from compiler.runtime.execute import run_program
from compiler.runtime.program import bind


def _c(name, arr):
    return numpy_helper.from_array(np.asarray(arr, np.float32), name)


def conv_net() -> onnx.ModelProto:
    """Conv -> Relu -> GlobalAveragePool -> Flatten -> Gemm, batch dim 'N' (as exporters declare it)."""
    rng = np.random.default_rng(0)
    nodes = [h.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]), h.make_node("Relu", ["c"], ["r"]),
             h.make_node("GlobalAveragePool", ["r"], ["p"]), h.make_node("Flatten", ["p"], ["f"]),
             h.make_node("Gemm", ["f", "fc", "fb"], ["y"], transB=1)]
    inits = [_c("w", rng.standard_normal((8, 3, 3, 3)) * 0.2), _c("b", rng.standard_normal(8) * 0.1),
             _c("fc", rng.standard_normal((5, 8))), _c("fb", rng.standard_normal(5))]
    g = h.make_graph(nodes, "convnet", [h.make_tensor_value_info("x", T.FLOAT, ["N", 3, 8, 8])],
                     [h.make_tensor_value_info("y", T.FLOAT, ["N", 5])], inits)
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 17)])
    m.ir_version = 8
    return m


def encoder() -> onnx.ModelProto:
    """One self-attention block over [N, 4 tokens, 8]: MatMul Q/K/V, Softmax over keys, residual,
    LayerNormalization; the head reshape takes N from Shape, as exported encoders do."""
    rng = np.random.default_rng(1)
    d = 8
    nodes = [h.make_node("MatMul", ["x", "wq"], ["q"]), h.make_node("MatMul", ["x", "wk"], ["k"]),
             h.make_node("MatMul", ["x", "wv"], ["v"]), h.make_node("Transpose", ["k"], ["kt"], perm=[0, 2, 1]),
             h.make_node("MatMul", ["q", "kt"], ["s"]), h.make_node("Mul", ["s", "scale"], ["ss"]),
             h.make_node("Softmax", ["ss"], ["a"], axis=-1), h.make_node("MatMul", ["a", "v"], ["o"]),
             h.make_node("Add", ["o", "x"], ["res"]),
             h.make_node("LayerNormalization", ["res", "gamma", "beta"], ["ln"], axis=-1),
             h.make_node("Shape", ["ln"], ["shp"]), h.make_node("Gather", ["shp", "zero"], ["n"], axis=0),
             h.make_node("Unsqueeze", ["n", "axes0"], ["n1"]), h.make_node("Concat", ["n1", "flat"], ["to"], axis=0),
             h.make_node("Reshape", ["ln", "to"], ["y"])]
    inits = [_c(n, rng.standard_normal((d, d)) * 0.3) for n in ("wq", "wk", "wv")]
    inits += [_c("scale", 1 / np.sqrt(d)), _c("gamma", np.ones(d)), _c("beta", np.zeros(d)),
              numpy_helper.from_array(np.array(0, np.int64), "zero"), numpy_helper.from_array(np.array([0], np.int64), "axes0"),
              numpy_helper.from_array(np.array([-1], np.int64), "flat")]
    g = h.make_graph(nodes, "encoder", [h.make_tensor_value_info("x", T.FLOAT, ["N", 4, d])],
                     [h.make_tensor_value_info("y", T.FLOAT, ["N", 4 * d])], inits)
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 17)])
    m.ir_version = 8
    return m


def _program(m: onnx.ModelProto, shape: list, lo: int, hi: int) -> BatchProgram:
    comp = Compilation(Request(m, input_shapes={"x": shape}, dim_ranges={"N": (lo, hi)}, verify=False,
                               benchmark=False, link=True, kernel_events=False), EventStream(None))
    run_stages(comp)
    assert isinstance(comp.program, BatchProgram)  # samples independent: N a run-time argument
    return comp.program


@pytest.mark.parametrize(("make", "shape"), [(conv_net, ["N", 3, 8, 8]), (encoder, ["N", 4, 8])])
def test_one_artifact_serves_every_size(make, shape) -> None:
    m = make()
    prog = _program(m, shape, 1, 8)
    assert prog.lo == 1 and prog.hi == 8 and prog.unit.inputs[0][2][0] == 1  # the kernels of N=1
    sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    for n in (1, 3, 8):
        x = np.random.default_rng(n).standard_normal([n, *shape[1:]]).astype(np.float32)
        (got,) = run_program(prog, [x])
        (ref,) = sess.run(None, {"x": x})
        assert got.shape == ref.shape
        np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-5)
    with pytest.raises(CompileError) as info:
        run_program(prog, [np.zeros([9, *shape[1:]], np.float32)])
    assert info.value.stage == "request" and "input 'x' has N = 9 (axis 0), outside the compiled range N=1..8" \
        in info.value.message


def test_compile_reports_the_maximum_and_verifies() -> None:
    res = compile_model(Request(conv_net(), input_shapes={"x": ["N", 3, 8, 8]}, dim_ranges={"N": (2, 4)},
                                benchmark=False))
    assert res.ok, res.error
    assert next(e for e in res.events if e["type"] == "model.verified")["passed"] is True
    mem = next(e for e in res.events if e["type"] == "memory.planned")
    assert mem["dim_range"] == {"dim": "N", "min": 2, "max": 4, "mode": "run-time", "message": mem["dim_range"]["message"]}
    # the arena at the maximum: the N=1 plan's, its offsets times N (at least a plan made for N=4)
    one = compiler.compile(conv_net(), input_shapes={"x": [1, 3, 8, 8]}, verify=False, benchmark=False)
    four = compiler.compile(conv_net(), input_shapes={"x": [4, 3, 8, 8]}, verify=False, benchmark=False)
    arena = [next(e for e in r.events if e["type"] == "memory.planned")["arena_bytes"] for r in (one, four)]
    assert mem["arena_bytes"] == 4 * arena[0] >= arena[1]
    assert [e["type"] for e in res.events].count("compile.started") == 1


@pytest.mark.parametrize(("text", "needle"), [
    ("N=0..8", "N=0..8: the minimum must be at least 1"), ("N=5..2", "the minimum is above the maximum"),
    ("N=1..40", "40 sizes, above the limit of 16"), ("N=1-8", "expected NAME=MIN..MAX"),
])
def test_bad_ranges_are_one_line_errors(text, needle) -> None:
    with pytest.raises(CompileError) as info:
        parse_dim_range(text)
    assert info.value.stage == "request" and needle in info.value.message


def test_unranged_or_unused_dims_are_named() -> None:
    res = compiler.compile(conv_net(), input_shapes={"x": ["N", 3, 8, 8]}, verify=False, benchmark=False)
    assert res.error["stage"] == "request" and "dim 'N' is neither an integer nor a dim with a range" in res.error["message"]
    res = compiler.compile(conv_net(), input_shapes={"x": ["N", 3, 8, 8]}, dim_ranges={"M": (1, 2)},
                           verify=False, benchmark=False)
    assert res.error["stage"] == "request" and "dim 'N' is neither" in res.error["message"]
    res = compiler.compile(conv_net(), input_shapes={"x": ["N", 3, 8, 8]}, dim_ranges={"N": (1, 2), "M": (1, 2)},
                           verify=False, benchmark=False)
    assert "no input shape names 'M'" in res.error["message"]
    assert "--" not in res.error["message"] and 'input_shapes={"images": ["M", 3, 224, 224]}' in res.error["message"]


def test_a_range_over_a_dim_the_model_fixes_names_the_range() -> None:
    """A new user's --dim-range N=1..3 on light_shufflenet (input [1, 3, 224, 224]) was told 'dim 0 is 1
    in the model, but input_shapes gives 3', without the range they typed."""
    m = conv_net()
    m.graph.input[0].type.tensor_type.shape.dim[0].dim_value = 1  # the batch fixed at 1, as that model's
    res = compiler.compile(m, input_shapes={"x": ["N", 3, 8, 8]}, dim_ranges={"N": (1, 3)}, verify=False,
                           benchmark=False)
    assert res.error["stage"] == "request"
    assert res.error["message"] == "dim range N=1..3 sets dim 0 of input 'x', which the model fixes at 1"
    res = compiler.compile(m, input_shapes={"x": ["N", 3, 8, 8]}, dim_ranges={"N": (1, 1)}, verify=False,
                           benchmark=False)
    assert res.error is None  # a range of the one size the model fixes is that size


def test_a_range_over_an_input_the_model_lacks_is_a_request_error() -> None:
    """A new user's --input-shape gpu_0/data_0=N,... on light_inception_v1 (whose input is data_0) was told
    'shape: N=3: input_shapes names ...' from the first size compiled; it is the request's error, before
    any size compiles, naming the model's inputs (an initializer's name says so)."""
    m = conv_net()
    res = compiler.compile(m, input_shapes={"gpu_0/x": ["N", 3, 8, 8]}, dim_ranges={"N": (1, 3)}, verify=False,
                           benchmark=False)
    assert res.error["stage"] == "request"
    assert res.error["message"] == "input_shapes names 'gpu_0/x', which is not a model input; inputs: x"
    init = m.graph.initializer[0].name
    res = compiler.compile(m, input_shapes={"x": ["N", 3, 8, 8], init: ["N"]}, dim_ranges={"N": (1, 3)},
                           verify=False, benchmark=False)
    assert res.error["stage"] == "request" and f"names {init!r}, which is not a model input (it is an initializer" \
        in res.error["message"]


def test_cli_dim_range(tmp_path, capsys) -> None:
    path = tmp_path / "conv.onnx"
    onnx.save(conv_net(), str(path))
    assert cli_main(["compile", str(path), "--input-shape", "x=N,3,8,8", "--dim-range", "N=1..2", "--verify"]) == 0
    out = capsys.readouterr().out
    assert "verification: passed" in out and "dim range N=1..2 (run-time): one set of kernels compiled for N=1" in out
    assert cli_main(["compile", str(path), "--input-shape", "x=N,3,8,8", "--dim-range", "N=3..1"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "N=3..1: the minimum is above the maximum" in err[0]
    assert cli_main(["compile", str(path), "--input-shape", "x=N,3,8,8"]) == 2  # the command line's own options
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "give one with --dim-range N=MIN..MAX" in err[0] and "dim_ranges=" not in err[0]


def attention() -> onnx.ModelProto:
    """Self-attention over S tokens of width 8, a residual and a mean over the tokens: [N, S, 8] ->
    ([N, S, 8], [N, 1, 8]); valid at every N and S."""
    rng = np.random.default_rng(2)
    nodes = [h.make_node("MatMul", ["x", "wq"], ["q"]), h.make_node("MatMul", ["x", "wk"], ["k"]),
             h.make_node("Transpose", ["k"], ["kt"], perm=[0, 2, 1]), h.make_node("MatMul", ["q", "kt"], ["s"]),
             h.make_node("Softmax", ["s"], ["a"], axis=-1), h.make_node("MatMul", ["a", "x"], ["o"]),
             h.make_node("Add", ["o", "x"], ["y"]), h.make_node("ReduceMean", ["y", "ax"], ["m"], keepdims=1)]
    inits = [_c("wq", rng.standard_normal((8, 8)) * 0.3), _c("wk", rng.standard_normal((8, 8)) * 0.3),
             numpy_helper.from_array(np.array([1], np.int64), "ax")]
    g = h.make_graph(nodes, "attention", [h.make_tensor_value_info("x", T.FLOAT, ["N", "S", 8])],
                     [h.make_tensor_value_info("y", T.FLOAT, ["N", "S", 8]),
                      h.make_tensor_value_info("m", T.FLOAT, ["N", 1, 8])], inits)
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 18)])
    m.ir_version = 8
    return m


def test_two_ranged_dims_the_batch_at_run_time_and_the_tokens_per_size() -> None:
    m = attention()
    events: list[dict] = []
    comp = Compilation(Request(m, input_shapes={"x": ["N", "S", 8]}, dim_ranges={"N": (1, 4), "S": (3, 5)},
                               verify=True, benchmark=False), EventStream(events.append))
    run_stages(comp)
    prog = comp.program
    assert prog.dim == "S" and sorted(prog.programs) == [3, 4, 5]
    assert all(isinstance(p, BatchProgram) and (p.lo, p.hi) == (1, 4) for p in prog.programs.values())
    plan = next(e for e in events if e["type"] == "memory.planned")["dim_range"]
    assert plan["dim"] == "N" and plan["message"].startswith("S=3..5 specialized: one compilation per size of S (3), "
                                                             "each serving N=1..4; one set of kernels")
    assert next(e for e in events if e["type"] == "model.verified")["passed"] is True  # at N=4, S=5
    sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    bound = None
    for n, s in ((1, 3), (4, 5), (2, 4), (3, 3), (4, 4)):
        x = np.random.default_rng(10 * n + s).standard_normal([n, s, 8]).astype(np.float32)
        refs = sess.run(None, {"x": x})
        for got, ref in zip(run_program(prog, [x]), refs, strict=True):
            np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-5)
        if bound is None:
            bound = bind(prog, [x])
        else:
            bound.set_inputs([x])  # one binding across both dims' sizes
        bound.run()
        for got, ref in zip(bound.outputs(), refs, strict=True):
            np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-5)
    with pytest.raises(CompileError) as info:
        run_program(prog, [np.zeros([2, 6, 8], np.float32)])
    assert "input 'x' has S = 6 (axis 1), outside the compiled range S=3..5" in info.value.message


@pytest.mark.parametrize(("shape", "ranges", "needle"), [
    (["N", "S", "T"], {"N": (1, 2), "S": (1, 2), "T": (1, 2)}, "dim ranges N, S, T: at most two ranged dims"),
    ([1, "S", "T"], {"S": (1, 2), "T": (1, 2)}, "dim ranges S, T: two ranged dims are served when one of them is the "
                                               "batch, axis 0 alone of every input that names it; neither 'S' nor 'T' is"),
])
def test_two_dims_without_a_batch_or_three_dims_are_named(shape, ranges, needle) -> None:
    res = compiler.compile(attention(), input_shapes={"x": shape}, dim_ranges=ranges, verify=False, benchmark=False)
    assert res.error["stage"] == "request" and needle in res.error["message"]
    with pytest.raises(CompileError, match=needle.split(":")[0]):
        compiler.validate_request(attention(), target="host", pipeline="O2", input_shapes={"x": shape},
                                  dim_ranges=ranges)
    out = compiler.validate_request(attention(), target="host", pipeline="O2", input_shapes={"x": ["N", "S", 8]},
                                    dim_ranges={"N": (1, 4), "S": (3, 5)})
    assert out["dim_ranges"] == {"N": [1, 4], "S": [3, 5]} and out["input_shapes"] == {"x": ["N", "S", 8]}


def test_silero_vad_one_artifact_for_batches_1_to_3(silero_path) -> None:
    """A real model with an If (on the sample rate) and an LSTM, its state's batch on axis 1: one
    artifact for N=1..3 (specialized per size, the remark says why), two chunks with the state
    carried, against ONNX Runtime at every N."""
    m = onnx.load(str(silero_path))
    events: list[dict] = []
    comp = Compilation(Request(m, input_shapes={"input": ["N", 512], "state": [2, "N", 128]}, dim_ranges={"N": (1, 3)},
                               verify=False, benchmark=False, link=True, kernel_events=False), EventStream(events.append))
    run_stages(comp)
    plan = next(e for e in events if e["type"] == "memory.planned")["dim_range"]
    assert plan["mode"] == "specialized" and "N is not axis 0 alone of input 'state' (axes [1])" in plan["message"]
    sess = ort.InferenceSession(str(silero_path), providers=["CPUExecutionProvider"])
    names = [i.name for i in m.graph.input]
    for n in (1, 3, 2):
        rng = np.random.default_rng(n)
        state = np.zeros((2, n, 128), np.float32)
        for _ in range(2):
            feeds = {"input": (rng.standard_normal((n, 512)) * 0.3).astype(np.float32), "state": state,
                     "sr": np.array(16000, np.int64)}
            refs = sess.run(None, feeds)
            for got, ref in zip(run_program(comp.program, [feeds[k] for k in names]), refs, strict=True):
                assert got.shape == ref.shape
                np.testing.assert_allclose(got, ref, rtol=1e-3, atol=1e-5)
            state = refs[1]


def test_a_sequence_length_range_is_served_per_length_and_says_why() -> None:
    """--dim-range S=7..9 on a transformer encoder's token axis: S sets every buffer's layout inside a
    sample (attention's rows over keys), so each length is its own compilation in one artifact, the
    remark says why; verified against ONNX Runtime at each length (9 tokens: rows of 8k + 1 columns,
    whose softmax once failed in codegen); a length outside the range is an error naming the input."""
    from tests.compiler.schedule.test_batch import encoder as attention_encoder

    m = attention_encoder(9)
    for vi in (m.graph.input[0], m.graph.output[0]):
        vi.type.tensor_type.shape.dim[1].dim_param = "S"
    events: list[dict] = []
    comp = Compilation(Request(m, input_shapes={"x": [1, "S", 16]}, dim_ranges={"S": (7, 9)}, verify=False,
                               benchmark=False, link=True), EventStream(events.append))
    run_stages(comp)
    plan = next(e for e in events if e["type"] == "memory.planned")["dim_range"]
    assert plan["mode"] == "specialized" and "S is not axis 0 alone of input 'x'" in plan["message"]
    assert "the extents of its rows and reductions, such as attention's over keys" in plan["message"]
    sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    bound = None
    for s in (7, 9, 8):
        x = np.random.default_rng(s).standard_normal([1, s, 16]).astype(np.float32)
        if bound is None:
            bound = bind(comp.program, [x])
        else:
            bound.set_inputs([x])
        bound.run()
        for got, ref in zip(bound.outputs(), sess.run(None, {"x": x}), strict=True):
            np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-5)
    with pytest.raises(CompileError) as info:
        bound.set_inputs([np.zeros([1, 10, 16], np.float32)])
    assert info.value.message == "input 'x' has S = 10 (axis 1), outside the compiled range S=7..9"
