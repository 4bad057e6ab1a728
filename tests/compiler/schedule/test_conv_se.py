"""The squeeze of squeeze-excitation (compiler.schedule.conv_se): GlobalAveragePool as vectorized row
sums, against ONNX Runtime, for rows that are a multiple of the vector width, have a tail, are shorter
than a vector or a single element, with batch > 1, with a fused producer (the default schedule), and inside a
MobileNetV3-class SE block; the excitation's Mul fused into the project 1x1 Conv as its operand scale."""

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
    # both SE blocks' Mul is the project Conv's operand scale: no kernel of its own
    assert sched.count("prologue(B row k *=") == 2, sched
    assert not any(k.func.attrs["ops"] == ["Mul"] for k in chk.kernels)
    assert sum("as its operand scale" in r["message"] for r in chk.remarks if r["pass"] == "fuse-ops") == 2


def test_scale_that_varies_along_space_is_not_a_prologue() -> None:
    """Mul by a [1, C, H, W] tensor before a 1x1 Conv stays a kernel of its own (it is no channel scale)."""
    rng = np.random.default_rng(2)
    nodes = [helper.make_node("Mul", ["x", "s"], ["m"]), helper.make_node("Conv", ["m", "W"], ["y"])]
    m = model(nodes, [tensor("x", [1, 8, 6, 6]), tensor("s", [1, 8, 6, 6])], ["y"],
              {"W": rng.standard_normal((16, 8, 1, 1)).astype(np.float32)})
    chk = check_model(m)
    assert any(k.func.attrs["ops"] == ["Mul"] for k in chk.kernels)
    assert "prologue(B row" not in chk.schedules()


@pytest.mark.parametrize("batch", [1, 2])
def test_excitation_scale_fused_into_the_project_conv(batch: int) -> None:
    """Mul(x, s[N, C, 1, 1]) -> 1x1 Conv (+ bias, Relu): one micro-kernel that scales B's rows."""
    rng = np.random.default_rng(3)
    nodes = [helper.make_node("Mul", ["s", "x"], ["m"]), helper.make_node("Conv", ["m", "W", "B"], ["c"]),
             helper.make_node("Relu", ["c"], ["y"])]
    m = model(nodes, [tensor("x", [batch, 24, 7, 9]), tensor("s", [batch, 24, 1, 1])], ["y"],
              {"W": rng.standard_normal((20, 24, 1, 1)).astype(np.float32),
               "B": rng.standard_normal(20).astype(np.float32)})
    chk = check_model(m)
    assert len(chk.kernels) == 1 and "prologue(B row k *=" in chk.schedules()
