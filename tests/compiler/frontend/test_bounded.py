"""Bounded outputs (compiler.frontend.bounded): data-dependent lengths, padded then trimmed.

Expected values come from ``onnx.reference.ReferenceEvaluator`` on the same model.
"""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator

from compiler.backend import PrismBackend


def _unique_model(shape: list[int], elem: int, **attrs: int):
    node = helper.make_node("Unique", ["x"], ["y", "indices", "inverse_indices", "counts"], **attrs)
    outs = [helper.make_tensor_value_info("y", elem, None)] + \
        [helper.make_tensor_value_info(o, TensorProto.INT64, None) for o in ("indices", "inverse_indices", "counts")]
    graph = helper.make_graph([node], "u", [helper.make_tensor_value_info("x", elem, shape)], outs)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _oracle(m, ort_: bool):
    """onnx.reference, or ONNX Runtime for ``sorted=0`` with an axis other than 0, where
    onnx.reference (1.2x) takes Y along axis 0 instead of ``axis`` (the spec: slices along ``axis``)."""
    if not ort_:
        ev = ReferenceEvaluator(m)
        return lambda feeds: ev.run(None, feeds)
    import onnxruntime as ort

    m.ir_version = min(m.ir_version, 8)
    sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    return lambda feeds: sess.run(None, feeds)


@pytest.mark.parametrize(("shape", "axis", "sorted_"), [
    ([5, 3], 0, 1), ([5, 3], 0, 0), ([3, 6], 1, 1), ([3, 6], -1, 0), ([2, 5, 2], 1, 1), ([4, 2, 3], 2, 1),
    ([7], 0, 1), ([6, 2], None, 1),
])
def test_unique_with_axis_matches_reference(shape, axis, sorted_):
    attrs = {"sorted": sorted_} if axis is None else {"axis": axis, "sorted": sorted_}
    m = _unique_model(shape, TensorProto.FLOAT, **attrs)
    rep = PrismBackend.prepare(m, isolate=False)
    ev = _oracle(m, ort_=bool(axis) and not sorted_)
    for seed in range(3):
        # few distinct values, so that whole slices repeat and ties are broken later in the slice
        x = np.random.default_rng(seed).integers(-1, 2, shape).astype(np.float32)
        if axis is not None:  # make some slices exact duplicates
            x = np.take(x, np.random.default_rng(seed + 10).integers(0, shape[axis], shape[axis]), axis=axis)
        got = rep.run([x])
        ref = ev({"x": x})
        for g, r in zip(got, ref, strict=True):
            assert g.shape == r.shape
            np.testing.assert_array_equal(g, r)
    assert len(rep.programs) == 1


def test_unique_with_axis_int64_lexicographic_order():
    x = np.array([[3, 1], [1, 9], [3, 0], [1, 9], [1, 2]], np.int64)
    m = _unique_model([5, 2], TensorProto.INT64, axis=0)
    got = PrismBackend.prepare(m, isolate=False).run([x])
    ref = ReferenceEvaluator(m).run(None, {"x": x})
    for g, r in zip(got, ref, strict=True):
        np.testing.assert_array_equal(g, r)
