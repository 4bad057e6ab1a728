"""The compiled model as a standalone shared library (compiler.standalone): loaded with ctypes.CDLL
and called through its documented signature, ``int prism_run(const void *const *inputs, void *const
*outputs)``, it computes what ONNX Runtime computes (the oracle), at one thread and at two."""

from __future__ import annotations

import ctypes
import json

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from compiler.artifacts import ArtifactUnavailable
from compiler.bench_models import mobilenet_v2ish
from compiler.standalone import program_for, shared_library

pytestmark = pytest.mark.timeout(900)


def _load(tmp_path, model: onnx.ModelProto, **kw) -> ctypes.CDLL:
    path = tmp_path / "model.onnx"
    onnx.save(model, path)
    so = tmp_path / "module.so"
    so.write_bytes(shared_library(program_for(str(path), target="host", pipeline="O2", **kw), "host"))
    lib = ctypes.CDLL(str(so))
    lib.prism_run.argtypes, lib.prism_run.restype = [ctypes.c_void_p, ctypes.c_void_p], ctypes.c_int
    return lib


def _signature(lib: ctypes.CDLL) -> dict:
    return json.loads(ctypes.string_at(ctypes.addressof(ctypes.c_char.in_dll(lib, "prism_signature"))))


def _run(lib: ctypes.CDLL, xs: list[np.ndarray]) -> list[np.ndarray]:
    sig = _signature(lib)
    ys = [np.full(o["shape"], np.nan, o["dtype"]) for o in sig["outputs"]]
    ins = (ctypes.c_void_p * len(xs))(*[x.ctypes.data for x in xs])
    outs = (ctypes.c_void_p * len(ys))(*[y.ctypes.data for y in ys])
    assert lib.prism_run(ins, outs) == 0
    return ys


def _ort(model: onnx.ModelProto, feeds: dict) -> list[np.ndarray]:
    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)


def test_a_convnet_runs_through_prism_run_as_onnx_runtime_does(tmp_path):
    model = mobilenet_v2ish()  # seeded weights: depthwise and pointwise Convs, ReLU6, the Gemm head
    lib = _load(tmp_path, model)
    sig = _signature(lib)
    assert [i["name"] for i in sig["inputs"]] == [i.name for i in model.graph.input]
    assert [o["name"] for o in sig["outputs"]] == [o.name for o in model.graph.output]
    x = np.random.default_rng(1).standard_normal(sig["inputs"][0]["shape"]).astype(np.float32)
    (want,) = _ort(model, {sig["inputs"][0]["name"]: x})
    (got,) = _run(lib, [x])
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
    # the kernels' parallel loops call the library's own thread pool
    lib.prism_pool_set_threads.argtypes, lib.prism_pool_set_threads.restype = [ctypes.c_int64], ctypes.c_int64
    lib.prism_pool_set_threads(2)
    (got2,) = _run(lib, [x])
    np.testing.assert_allclose(got2, want, rtol=1e-4, atol=1e-5)


def test_every_kind_of_output_is_written(tmp_path):
    """Outputs that live in the arena, one that is also read by a later kernel, one that is a graph
    input, and two inputs: each lands in its caller-owned buffer."""
    rng = np.random.default_rng(2)
    w = numpy_helper.from_array(rng.standard_normal((16, 32)).astype(np.float32), "w")
    nodes = [helper.make_node("MatMul", ["x", "w"], ["h"], name="mm"),
             helper.make_node("Add", ["h", "b"], ["a"], name="add"),
             helper.make_node("Tanh", ["a"], ["t"], name="tanh"),
             helper.make_node("ReduceSum", ["t"], ["s"], name="sum", keepdims=1)]
    f32 = TensorProto.FLOAT
    graph = helper.make_graph(nodes, "outs", [helper.make_tensor_value_info("x", f32, [4, 16]),
                                             helper.make_tensor_value_info("b", f32, [4, 32])],
                              [helper.make_tensor_value_info("a", f32, [4, 32]), helper.make_tensor_value_info("s", f32, [1, 1]),
                               helper.make_tensor_value_info("b", f32, [4, 32])], initializer=[w])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    lib = _load(tmp_path, model)
    x, b = rng.standard_normal((4, 16)).astype(np.float32), rng.standard_normal((4, 32)).astype(np.float32)
    want = _ort(model, {"x": x, "b": b})
    got = _run(lib, [x, b])
    assert len(got) == 3
    for g, e in zip(got, want, strict=True):
        np.testing.assert_allclose(g, e, rtol=1e-5, atol=1e-5)


def test_a_cross_target_gets_no_library(tmp_path):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [8])
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g", [x],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [8])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, tmp_path / "relu.onnx")
    prog = program_for(str(tmp_path / "relu.onnx"), target="aarch64", pipeline="O2")
    with pytest.raises(ArtifactUnavailable, match="cross target"):
        shared_library(prog, "aarch64")
