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
from compiler.runtime.dim_range import DimRangeProgram
from compiler.runtime.execute import run_program


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


def _program(m: onnx.ModelProto, shape: list, lo: int, hi: int) -> DimRangeProgram:
    comp = Compilation(Request(m, input_shapes={"x": shape}, dim_ranges={"N": (lo, hi)}, verify=False,
                               benchmark=False, link=True, kernel_events=False), EventStream(None))
    run_stages(comp)
    assert isinstance(comp.program, DimRangeProgram)
    return comp.program


@pytest.mark.parametrize(("make", "shape"), [(conv_net, ["N", 3, 8, 8]), (encoder, ["N", 4, 8])])
def test_one_artifact_serves_every_size(make, shape) -> None:
    m = make()
    prog = _program(m, shape, 1, 8)
    assert sorted(prog.programs) == list(range(1, 9))
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
    single = compiler.compile(conv_net(), input_shapes={"x": [4, 3, 8, 8]}, verify=False, benchmark=False)
    assert mem["arena_bytes"] == next(e for e in single.events if e["type"] == "memory.planned")["arena_bytes"]
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


def test_cli_dim_range(tmp_path, capsys) -> None:
    path = tmp_path / "conv.onnx"
    onnx.save(conv_net(), str(path))
    assert cli_main(["compile", str(path), "--input-shape", "x=N,3,8,8", "--dim-range", "N=1..2", "--verify"]) == 0
    assert "verification: passed" in capsys.readouterr().out
    assert cli_main(["compile", str(path), "--input-shape", "x=N,3,8,8", "--dim-range", "N=3..1"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "N=3..1: the minimum is above the maximum" in err[0]
