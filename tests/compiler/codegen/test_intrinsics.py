"""The inline f32 exp against numpy's float64 exp: within 2 ulp-ish relative error on the whole
finite range; special values (underflow, overflow to +inf, NaN, +-inf) as numpy's float32 exp."""

from __future__ import annotations

import numpy as np

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
