"""``compiler.backend``: the ``onnx.backend.base.Backend`` interface over the real compiler path.

Expected values come from ``onnx.reference.ReferenceEvaluator`` or are the inputs/constants
themselves (identity-like graphs), never from the code under test.
"""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx.backend.base import Backend, BackendRep
from onnx.reference import ReferenceEvaluator

from compiler import backend
from compiler.backend import PrismBackend, PrismRep
from compiler.errors import CompileError
from compiler.passes.pipeline import ONNX_PASSES


def _model(nodes, inputs, outputs, inits=(), opset=17):
    g = helper.make_graph(nodes, "t", inputs, outputs, [numpy_helper.from_array(v, k) for k, v in inits])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])


def _dyn_relu_add():
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", 4])
    b = np.arange(4, dtype=np.float32)
    return _model([helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Add", ["r", "b"], ["y"])], [x], [y],
                  inits=[("b", b)])


def test_is_an_onnx_backend():
    assert issubclass(PrismBackend, Backend)
    assert PrismBackend.supports_device("CPU")
    assert not PrismBackend.supports_device("CUDA")
    assert backend.supports_device("CPU")


def test_prepare_run_matches_reference_and_returns_named_outputs():
    m = _dyn_relu_add()
    rep = PrismBackend.prepare(m, "CPU")
    assert isinstance(rep, PrismRep) and isinstance(rep, BackendRep)
    x = np.random.default_rng(0).standard_normal((3, 4)).astype(np.float32)
    out = rep.run([x])
    ref = ReferenceEvaluator(m).run(None, {"x": x})[0]
    np.testing.assert_allclose(out[0], ref, rtol=1e-6)
    np.testing.assert_allclose(out.y, ref, rtol=1e-6)
    np.testing.assert_allclose(rep.run({"x": x})[0], ref, rtol=1e-6)


def test_a_new_shape_compiles_again_and_the_same_shape_does_not():
    m = _dyn_relu_add()
    rep = PrismBackend.prepare(m, isolate=False)
    ev = ReferenceEvaluator(m)
    for n in (2, 5, 2):
        x = np.random.default_rng(n).standard_normal((n, 4)).astype(np.float32)
        np.testing.assert_allclose(rep.run([x])[0], ev.run(None, {"x": x})[0], rtol=1e-6)
    assert sorted(k[0][1] for k in rep.programs) == [(2, 4), (5, 4)]


def test_pipeline_option_is_used():
    m = _dyn_relu_add()
    x = np.ones((2, 4), np.float32)
    rep = PrismBackend.prepare(m, pipeline="O0", isolate=False)
    np.testing.assert_allclose(rep.run([x])[0], ReferenceEvaluator(m).run(None, {"x": x})[0])
    assert next(iter(rep.programs.values())).pipeline == ONNX_PASSES  # O0: no graph passes


def test_outputs_that_are_inputs_or_constants():
    x = helper.make_tensor_value_info("x", TensorProto.INT64, [3])
    c = np.array([[True, False]], bool)
    m = _model([helper.make_node("Constant", [], ["k"], value=numpy_helper.from_array(c)),
                helper.make_node("Identity", ["x"], ["xi"])], [x],
               [helper.make_tensor_value_info("x", TensorProto.INT64, [3]),
                helper.make_tensor_value_info("k", TensorProto.BOOL, [1, 2]),
                helper.make_tensor_value_info("xi", TensorProto.INT64, [3])])
    xv = np.array([7, -1, 2**40], np.int64)
    out = PrismBackend.run_model(m, [xv], isolate=False)
    assert [o.dtype for o in out] == [np.int64, np.bool_, np.int64]
    np.testing.assert_array_equal(out[0], xv)
    np.testing.assert_array_equal(out[1], c)
    np.testing.assert_array_equal(out[2], xv)


@pytest.mark.parametrize("dtype", [np.int64, np.int32, np.int8, np.uint8, np.float64, np.bool_])
def test_non_float_dtypes_round_trip(dtype):
    rng = np.random.default_rng(5)
    a = (rng.standard_normal((2, 3)) * 50).astype(dtype)
    b = (rng.standard_normal((2, 3)) * 50).astype(dtype)
    op = "Or" if dtype is np.bool_ else "Max"
    t = helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
    m = _model([helper.make_node(op, ["a", "b"], ["y"])], [helper.make_tensor_value_info("a", t, [2, 3]),
               helper.make_tensor_value_info("b", t, [2, 3])], [helper.make_tensor_value_info("y", t, [2, 3])])
    (y,) = PrismBackend.run_model(m, [a, b], isolate=False)
    ref = ReferenceEvaluator(m).run(None, {"a": a, "b": b})[0]
    assert y.dtype == ref.dtype
    np.testing.assert_array_equal(y, ref)


def test_run_node():
    node = helper.make_node("Gather", ["d", "i"], ["y"], axis=1)
    d = np.arange(12, dtype=np.float32).reshape(3, 4)
    i = np.array([[-1, 0]], np.int64)
    (y,) = PrismBackend.run_node(node, [d, i])
    np.testing.assert_array_equal(y, np.take(d, [[3, 0]], axis=1))


def test_isolated_run_matches_in_process_run():
    m = _dyn_relu_add()
    x = np.random.default_rng(7).standard_normal((4, 4)).astype(np.float32)
    a = PrismBackend.prepare(m, isolate=True).run([x])[0]
    b = PrismBackend.prepare(m, isolate=False).run([x])[0]
    np.testing.assert_array_equal(a, b)


def test_errors_are_compile_errors_naming_the_node():
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])
    m = _model([helper.make_node("NoSuchOp", ["x"], ["y"])], [x], [helper.make_tensor_value_info("y",
               TensorProto.FLOAT, [2])])
    with pytest.raises(CompileError) as e:
        PrismBackend.prepare(m).run([np.zeros(2, np.float32)])
    assert "NoSuchOp" in str(e.value)
    with pytest.raises(CompileError, match="device"):
        PrismBackend.prepare(_dyn_relu_add(), "CUDA")
    with pytest.raises(CompileError, match="1 inputs"):
        PrismBackend.prepare(_dyn_relu_add()).run([np.zeros((1, 4), np.float32)] * 2)


def test_onnx_backend_test_runner_accepts_the_backend():
    """The ONNX package's own backend test runner, on a few node cases, drives PrismBackend."""
    import unittest

    import onnx.backend.test

    bt = onnx.backend.test.BackendTest(PrismBackend, __name__)
    bt.include(r"^test_(relu|gather_0|add_bcast|transpose_default)_cpu$")
    suite = unittest.TestSuite()
    for case in bt.test_cases.values():
        suite.addTests(unittest.defaultTestLoader.loadTestsFromTestCase(case))
    res = unittest.TextTestRunner(verbosity=0).run(suite)
    assert res.testsRun - len(res.skipped) == 4 and res.wasSuccessful(), res.failures + res.errors


_ = onnx


@pytest.mark.parametrize("batch", [1, 3])
def test_silero_vad_with_if_and_lstm_matches_onnxruntime(batch):
    """Issue 6 item 5: silero_vad (If, LSTM, dynamic shapes) through the backend vs ONNX Runtime,
    two consecutive 512-sample chunks with the state carried between them; at batch 3 its LSTM's
    unbatched-input branch (which would Squeeze the batch) is the untaken one (issue 13)."""
    import onnxruntime as ort

    from compiler import samples

    try:
        path = samples.fetch("silero_vad")
    except Exception as e:  # the wheel comes from the package registry
        pytest.skip(f"silero_vad sample not available: {e}")
    rep = PrismBackend.prepare(onnx.load(str(path)), isolate=False)
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(batch)
    state = np.zeros((2, batch, 128), np.float32)
    for _ in range(2):
        feeds = {"input": (rng.standard_normal((batch, 512)) * 0.3).astype(np.float32), "state": state,
                 "sr": np.array(16000, np.int64)}
        ours = rep.run(feeds)
        ref = sess.run(None, feeds)
        for a, b in zip(ours, ref, strict=True):
            assert a.shape == b.shape
            np.testing.assert_allclose(a, b, rtol=1e-3, atol=1e-5)
        state = ref[1]


def test_float16_is_computed_in_float32_and_returned_as_float16():
    x = (np.random.default_rng(8).standard_normal((3, 5)) * 4).astype(np.float16)
    t = helper.make_tensor_value_info
    m = _model([helper.make_node("Abs", ["x"], ["a"]), helper.make_node("Max", ["a", "c"], ["y"])],
               [t("x", TensorProto.FLOAT16, [3, 5])], [t("y", TensorProto.FLOAT16, [3, 5])],
               inits=[("c", np.array(1.5, np.float16))])
    (y,) = PrismBackend.prepare(m, isolate=False).run([x])
    ref = ReferenceEvaluator(m).run(None, {"x": x})[0]
    assert y.dtype == np.float16
    np.testing.assert_array_equal(y, ref)


def test_nonzero_output_length_follows_the_data_with_one_program():
    t = helper.make_tensor_value_info
    m = _model([helper.make_node("NonZero", ["x"], ["y"])], [t("x", TensorProto.FLOAT, [3, 4])],
               [t("y", TensorProto.INT64, None)])
    rep = PrismBackend.prepare(m, isolate=False)
    ev = ReferenceEvaluator(m)
    for seed in (0, 1, 2):
        x = np.random.default_rng(seed).integers(0, 2, (3, 4)).astype(np.float32)
        (y,) = rep.run([x])
        np.testing.assert_array_equal(y, ev.run(None, {"x": x})[0])
    assert len(rep.programs) == 1


def test_float16_input_bound_as_a_value_is_widened_like_the_other_inputs():
    # s decides y's shape (Reshape through Cast), so the backend binds its values into the program;
    # it is float16 while the promoted model computes in float32 (and s is also read arithmetically).
    t = helper.make_tensor_value_info
    m = _model([helper.make_node("Cast", ["s"], ["si"], to=TensorProto.INT64),
                helper.make_node("Reshape", ["x", "si"], ["r"]),
                helper.make_node("ReduceMax", ["s"], ["sm"], keepdims=0),
                helper.make_node("Mul", ["r", "sm"], ["y"])],
               [t("x", TensorProto.FLOAT16, [2, 6]), t("s", TensorProto.FLOAT16, [2])],
               [t("y", TensorProto.FLOAT16, None)], opset=17)
    x = np.random.default_rng(9).standard_normal((2, 6)).astype(np.float16)
    s = np.array([3, 4], np.float16)
    (y,) = PrismBackend.prepare(m, isolate=False).run([x, s])
    ref = ReferenceEvaluator(m).run(None, {"x": x, "s": s})[0]
    assert y.dtype == np.float16 and y.shape == (3, 4)
    np.testing.assert_array_equal(y, ref)
