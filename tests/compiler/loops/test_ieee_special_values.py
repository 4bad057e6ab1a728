"""NaN and +-Inf through the lowerings, whole programs (O2: fusion, row kernels, GEMM epilogues) against
``onnx.reference`` (issue 13 item 4).

The oracle is ``onnx.reference.ReferenceEvaluator`` on the same model: NaN where it has NaN, each
infinity with its sign where it has one, the finite values to float32 rounding. numpy's
``maximum``/``minimum`` (Max, Min, Relu, Clip, ReduceMax ...) propagate NaN; ``argmax``/``argmin`` return
the first NaN; the reference pools leave NaN taps out (MaxPool with strides 1, AveragePool with
``count_include_pad=0``) or, for a strided MaxPool, keep a NaN that is the window's first tap.
"""

from __future__ import annotations

import warnings

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator

from compiler.backend import PrismBackend

V = helper.make_tensor_value_info
NAN, INF = np.nan, np.inf


def special(shape: tuple[int, ...], seed: int = 0) -> np.ndarray:
    """Normal values with a tenth of the elements NaN, +inf or -inf (at least three of them)."""
    rng = np.random.default_rng(seed)
    a = rng.standard_normal(shape).astype(np.float32)
    flat = a.reshape(-1)
    picks = rng.choice(flat.size, size=max(3, flat.size // 10), replace=False)
    for j, i in enumerate(picks):
        flat[i] = (NAN, INF, -INF)[j % 3]
    return a


def _model(nodes: list, inputs: dict[str, np.ndarray], opset: int = 17, inits: dict | None = None,
           out_type: int = TensorProto.FLOAT) -> onnx.ModelProto:
    vis = [V(k, helper.np_dtype_to_tensor_dtype(v.dtype), v.shape) for k, v in inputs.items()]
    init = [onnx.numpy_helper.from_array(np.asarray(v), k) for k, v in (inits or {}).items()]
    graph = helper.make_graph(nodes, "ieee", vis, [V("y", out_type, None)], initializer=init)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def _one(op: str, inputs: dict[str, np.ndarray], *, inits: dict | None = None, opset: int = 17,
         out_type: int = TensorProto.FLOAT, **attrs) -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    names = list(inputs) + list(inits or {})
    return _model([helper.make_node(op, names, ["y"], **attrs)], inputs, opset, inits, out_type), inputs


def assert_same_specials(got: np.ndarray, ref: np.ndarray) -> None:
    assert got.shape == ref.shape and got.dtype == ref.dtype
    if got.dtype.kind != "f":
        np.testing.assert_array_equal(got, ref)
        return
    np.testing.assert_array_equal(np.isnan(got), np.isnan(ref), err_msg="NaN positions differ")
    np.testing.assert_array_equal(np.isposinf(got), np.isposinf(ref), err_msg="+inf positions differ")
    np.testing.assert_array_equal(np.isneginf(got), np.isneginf(ref), err_msg="-inf positions differ")
    fin = np.isfinite(ref)
    np.testing.assert_allclose(got[fin], ref[fin], rtol=1e-5, atol=1e-6)


X = {"x": special((4, 64))}
XY = {"a": special((4, 64), 1), "b": special((4, 64), 2)}
ROWS = {"x": np.array([[INF, 1, 2, 3], [-INF] * 4, [INF, INF, 0, 0], [1, 2, -INF, 3], [1, NAN, 2, 3]],
                      np.float32)}
IMG = {"x": special((1, 2, 9, 9), 3)}
BOOL, I64 = TensorProto.BOOL, TensorProto.INT64

CASES = {
    "Relu": _one("Relu", X),
    "LeakyRelu": _one("LeakyRelu", X, alpha=0.2),
    "Clip": _one("Clip", X, inits={"lo": np.float32(-0.5), "hi": np.float32(0.5)}),
    "HardSigmoid": _one("HardSigmoid", X),
    "Max": _one("Max", XY),
    "Min": _one("Min", {**XY, "c": special((64,), 4)}),
    "Sum": _one("Sum", {**XY, "c": special((64,), 5)}),
    "Mean": _one("Mean", XY),
    "Greater": _one("Greater", XY, out_type=BOOL),
    "Less": _one("Less", XY, out_type=BOOL),
    "Equal": _one("Equal", XY, out_type=BOOL),
    "GreaterOrEqual": _one("GreaterOrEqual", XY, out_type=BOOL),
    "LessOrEqual": _one("LessOrEqual", XY, out_type=BOOL),
    "ReduceMax": _one("ReduceMax", X, axes=[1]),
    "ReduceMax-axis0": _one("ReduceMax", X, axes=[0], keepdims=0),
    "ReduceMin": _one("ReduceMin", X, axes=[1]),
    "ReduceLogSumExp": _one("ReduceLogSumExp", ROWS, axes=[1]),
    "ArgMax": _one("ArgMax", X, out_type=I64, axis=1),
    "ArgMin": _one("ArgMin", X, out_type=I64, axis=0),
    "ArgMax-last": _one("ArgMax", X, out_type=I64, axis=1, select_last_index=1),
    "ArgMin-last": _one("ArgMin", X, out_type=I64, axis=0, select_last_index=1),
    "Softmax": _one("Softmax", X),
    "Softmax-rows": _one("Softmax", ROWS),
    "Softmax-opset11": _one("Softmax", ROWS, opset=11, axis=1),
    "LogSoftmax-rows": _one("LogSoftmax", ROWS),
    "MaxPool": _one("MaxPool", IMG, kernel_shape=[2, 2]),
    "MaxPool-pads": _one("MaxPool", IMG, kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
    "MaxPool-strided": _one("MaxPool", IMG, kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]),
    "MaxPool-dilated": _one("MaxPool", IMG, kernel_shape=[2, 2], dilations=[2, 2]),
    "AveragePool": _one("AveragePool", IMG, kernel_shape=[2, 2]),
    "AveragePool-pads": _one("AveragePool", IMG, kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
    "AveragePool-count-pad": _one("AveragePool", IMG, kernel_shape=[3, 3], pads=[1, 1, 1, 1], count_include_pad=1),
    "GlobalMaxPool": _one("GlobalMaxPool", IMG),
    "GlobalAveragePool": _one("GlobalAveragePool", IMG),
}


def _conv_relu() -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    """A NaN through a Conv whose Relu is the GEMM micro-kernel's epilogue."""
    w = np.random.default_rng(6).standard_normal((16, 8, 3, 3)).astype(np.float32)
    x = {"x": special((1, 8, 10, 10), 7)}
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]), helper.make_node("Relu", ["c"], ["y"])]
    return _model(nodes, x, inits={"w": w}), x


CASES["Conv+Relu"] = _conv_relu()

TIES = {"x": np.array([[0.1, NAN, 0.6, 0.1, NAN, -INF], [INF, 2, NAN, INF, -1, 2], [NAN] * 6, [3, 1, 3, -INF, 1, 0]],
                      np.float32)}


def _topk(largest: int, output: int) -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    """TopK (k=4 of 6) with NaNs, infinities and ties: NaN ranks above every number, NaNs tie, ties go to
    the lower index (the reference sorts with numpy's lexsort); ``output`` 0 the values, 1 the indices."""
    outs = ["y", "i"] if output == 0 else ["v", "y"]
    node = helper.make_node("TopK", ["x", "k"], outs, axis=1, largest=largest)
    return _model([node], TIES, inits={"k": np.array([4], np.int64)}, out_type=(TensorProto.FLOAT, I64)[output]), TIES


for _largest in (0, 1):
    for _out in (0, 1):
        CASES[f"TopK-{'largest' if _largest else 'smallest'}-{('values', 'indices')[_out]}"] = _topk(_largest, _out)
CASES["Sign"] = _one("Sign", X)
CASES["Hardmax"] = _one("Hardmax", X)  # a row with NaN: 1 at its first NaN (it marked nothing)
CASES["Hardmax-ties"] = _one("Hardmax", TIES)


@pytest.mark.parametrize("name", sorted(CASES))
def test_special_values_match_the_reference(name: str) -> None:
    model, inputs = CASES[name]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # numpy warns on inf - inf in the oracle
        ref = ReferenceEvaluator(model).run(None, inputs)[0]
    got = PrismBackend.prepare(model, isolate=False).run(list(inputs.values()))[0]
    assert_same_specials(np.asarray(got), np.asarray(ref))


def test_every_listed_case_has_special_values_that_matter() -> None:
    """The oracle's result holds NaN for the float ops (so the cases are not vacuous)."""
    for name in ("Relu", "Max", "Min", "ReduceMax", "Clip", "Softmax", "MaxPool-strided", "GlobalMaxPool"):
        model, inputs = CASES[name]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            assert np.isnan(ReferenceEvaluator(model).run(None, inputs)[0]).any(), name


def test_nan_check_only_where_an_operand_may_be_nan() -> None:
    """Relu's ``max(x, 0)``: 0 is proven not NaN, so the kernel is one compare-and-select (x86
    ``maxps 0, x`` keeps a NaN x); ``Max(a, b)`` of two inputs also tests ``isnan(b)``."""
    from tests.compiler.backend_helpers import onnx_node_case, run_node

    _, relu = onnx_node_case("Relu", {"x": np.zeros((4, 64), np.float32)})
    _, _, ck = run_node(relu, {"x": np.zeros((4, 64), np.float32)})
    assert "fcmp uno" not in ck.llvm_ir
    ab = {"a": np.zeros((4, 64), np.float32), "b": np.zeros((4, 64), np.float32)}
    _, mx = onnx_node_case("Max", ab)
    _, _, ck = run_node(mx, ab)
    assert "fcmp uno" in ck.llvm_ir
