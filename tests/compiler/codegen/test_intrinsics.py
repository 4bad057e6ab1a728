"""The inline f32 exp against numpy's float64 exp: within 2 ulp-ish relative error on the whole
finite range; special values (underflow, overflow to +inf, NaN, +-inf) as numpy's float32 exp."""

from __future__ import annotations

import numpy as np
import pytest

from tests.compiler.backend_helpers import onnx_node_case, run_node


def test_exp_accuracy_and_specials() -> None:
    x = np.concatenate([np.linspace(-87.0, 88.5, 4000), [-1e-8, 0.0, 1e-8, 1.0, -1.0, 20.5]]).astype(np.float32)
    x = np.concatenate([x, np.zeros(16 - len(x) % 16, np.float32)]).reshape(1, -1)
    _, node = onnx_node_case("Exp", {"x": x})
    (got,), _, _ = run_node(node, {"x": x})
    want = np.exp(x.astype(np.float64))
    rel = np.abs(got - want) / want
    assert rel.max() < 3e-7, rel.max()
    sp = np.array([[-200.0, -88.0, 89.0, 500.0, np.nan, np.inf, -np.inf, 0.0] * 2], np.float32)
    _, node = onnx_node_case("Exp", {"x": sp})
    (got,), _, _ = run_node(node, {"x": sp})
    with np.errstate(over="ignore"):
        want = np.exp(sp)  # numpy's float32 exp: denormals below -87.3 may flush to 0 here (error < 1.2e-38)
    np.testing.assert_allclose(got, want, rtol=3e-7, atol=1.2e-38, equal_nan=True)


def _grid() -> np.ndarray:
    """2.4 million float32 points: [-10, 10] evenly and +-[1e-8, 10] log-spaced (the docstring's grid)."""
    x = np.concatenate([np.linspace(-10, 10, 2_000_001), np.logspace(-8, 1, 200_001), -np.logspace(-8, 1, 200_001)])
    x = x.astype(np.float32)
    return np.concatenate([x, np.zeros(-len(x) % 16, np.float32)]).reshape(1, -1)


@pytest.mark.parametrize("op,attrs,bound,kind", [
    ("Erf", {}, 4e-7, "abs"), ("Tanh", {}, 5e-7, "abs"), ("Sigmoid", {}, 5e-7, "rel"),
    ("Gelu", {}, 5e-7, "gelu"), ("Gelu", {"approximate": "tanh"}, 5e-7, "gelu"),
])
def test_polynomial_error_bounds_against_onnx_reference(op, attrs, bound, kind) -> None:  # type: ignore[no-untyped-def]
    """The bounds stated in ``compiler.codegen.intrinsics`` hold against onnx.reference on the grid
    (GELU: relative to max(1, |x|))."""
    x = _grid()
    ref, node = onnx_node_case(op, {"x": x}, attrs, opset=20)
    (got,), _, _ = run_node(node, {"x": x}, opset=20)
    err = np.abs(got.astype(np.float64) - ref[0].astype(np.float64))
    if kind == "rel":
        err = err / np.maximum(np.abs(ref[0].astype(np.float64)), 1e-30)
    elif kind == "gelu":
        err = err / np.maximum(np.abs(x.astype(np.float64)), 1.0)
    assert err.max() <= bound, (op, attrs, float(err.max()), float(x.reshape(-1)[err.argmax()]))
    specials = np.array([[np.nan, np.inf, -np.inf, 0.0, -0.0, 1e30, -1e30, 3e-39] * 2], np.float32)
    sref, snode = onnx_node_case(op, {"x": specials}, attrs, opset=20)
    (sgot,), _, _ = run_node(snode, {"x": specials}, opset=20)
    np.testing.assert_allclose(sgot, sref[0], rtol=1e-6, atol=1e-30, equal_nan=True)
