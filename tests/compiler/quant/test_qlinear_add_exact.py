"""QLinearAdd's requantization ``((a - za) as + (b - zb) bs) / cs`` (the float32 DequantizeLinear -> Add ->
QuantizeLinear that fold-qdq folds into it; ``compiler.loops.ops_qlinear``): for every pair of input bytes and
several scale triples (ResNet-50's residual among them), equal to a numpy float32 reference (each product
rounded, IEEE division), rounded half to even and saturated as ONNX QuantizeLinear says. A faster quotient
(a reciprocal multiply: 8 of 65536 pairs differ for one of these triples) must keep this exact."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh

from compiler import backend

NP = {"u8": np.uint8, "i8": np.int8}
ELEM = {"u8": T.UINT8, "i8": T.INT8}
RANGE = {"u8": (0, 255), "i8": (-128, 127)}


def _model(dt: str, scales: tuple[float, float, float], zps: tuple[int, int, int]):  # type: ignore[no-untyped-def]
    names = ["as", "az", "bs", "bz", "cs", "cz"]
    vals = [np.array(scales[0], np.float32), np.array(zps[0], NP[dt]), np.array(scales[1], np.float32),
            np.array(zps[1], NP[dt]), np.array(scales[2], np.float32), np.array(zps[2], NP[dt])]
    node = h.make_node("QLinearAdd", ["a", "as", "az", "b", "bs", "bz", "cs", "cz"], ["c"], domain="com.microsoft")
    g = h.make_graph([node], "qadd", [h.make_tensor_value_info(x, ELEM[dt], [256, 256]) for x in ("a", "b")],
                     [h.make_tensor_value_info("c", ELEM[dt], [256, 256])],
                     [nh.from_array(v, n) for n, v in zip(names, vals, strict=True)])
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 17), h.make_opsetid("com.microsoft", 1)])
    m.ir_version = 8
    return m


@pytest.mark.parametrize("dt,scales,zps", [
    ("u8", (0.03493853658437729, 0.03999236598610878, 0.02575160749256611), (127, 122, 0)),  # ResNet-50's
    ("u8", (0.1, 0.3, 0.7), (0, 255, 3)),
    ("i8", (0.0123, 0.00731, 0.0111), (-3, 5, 0)),
    ("i8", (1.7e-3, 2.9e-2, 3.3e-3), (-128, 127, -7)),
])
def test_every_byte_pair_equals_the_float32_division(dt, scales, zps) -> None:  # type: ignore[no-untyped-def]
    lo, hi = RANGE[dt]
    grid = np.arange(lo, hi + 1)
    a = np.repeat(grid, 256).reshape(256, 256).astype(NP[dt])
    b = np.tile(grid, 256).reshape(256, 256).astype(NP[dt])
    (got,) = backend.prepare(_model(dt, scales, zps), pipeline="O2").run([a, b])
    s = [np.float32(x) for x in scales]
    fa = (a.astype(np.int32) - zps[0]).astype(np.float32) * s[0]
    fb = (b.astype(np.int32) - zps[1]).astype(np.float32) * s[1]
    q = (fa + fb) / s[2]
    assert q.dtype == np.float32
    ref = np.clip(np.rint(q) + np.float32(zps[2]), lo, hi).astype(NP[dt])
    np.testing.assert_array_equal(got, ref)
