"""The squeeze of squeeze-excitation (compiler.schedule.conv_se): GlobalAveragePool as vectorized row
sums, against ONNX Runtime, for rows that are a multiple of the vector width, have a tail, are shorter
than a vector or a single element, with batch > 1, with a fused producer (the default schedule), and inside a
MobileNetV3-class SE block."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

from compiler.synthetic import mobilenet_block
from tests.compiler.schedule.model_check import check_model, model, tensor


def _pool_kernel(chk):  # type: ignore[no-untyped-def]
    ks = [k for k in chk.kernels if "GlobalAveragePool" in k.func.attrs.get("ops", [])]
    assert len(ks) == 1
    return ks[0]


@pytest.mark.parametrize("shape", [(1, 8, 8, 8), (1, 5, 7, 7), (2, 3, 3, 5), (1, 4, 1, 1), (1, 16, 56, 56)])
def test_global_average_pool_rows_match_onnxruntime(shape: tuple[int, ...]) -> None:
    m = model([helper.make_node("GlobalAveragePool", ["x"], ["y"])], [tensor("x", shape)], ["y"])
    chk = check_model(m, rtol=1e-5)
    sched = "\n".join(_pool_kernel(chk).func.attrs["schedule"])
    assert f"rows of {shape[2] * shape[3]} contiguous floats" in sched and "parallel(r)" in sched


def test_pool_with_a_fused_producer_keeps_the_default_schedule() -> None:
    """Relu -> GlobalAveragePool is one group whose pool input is an expression, not a buffer."""
    nodes = [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("GlobalAveragePool", ["r"], ["y"])]
    chk = check_model(model(nodes, [tensor("x", [1, 6, 9, 9])], ["y"]))
    k = _pool_kernel(chk)
    assert k.func.attrs["ops"] == ["Relu", "GlobalAveragePool"]
    assert "contiguous floats" not in "\n".join(k.func.attrs["schedule"])


def test_mobilenet_v3_class_model_matches_onnxruntime() -> None:
    """Stem, depthwise blocks (stride 1 and 2, 3x3 and 5x5), SE blocks, HardSwish, head."""
    blocks = [(16, 16, 3, 2, True, "re"), (48, 24, 3, 2, False, "re"), (72, 24, 5, 1, True, "hs")]
    chk = check_model(mobilenet_block(64, blocks), rtol=1e-4)
    sched = chk.schedules()
    assert sched.count("depthwise Conv") == 3 and sched.count("contiguous floats") >= 3, sched
