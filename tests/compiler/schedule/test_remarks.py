"""A kernel that gets the default schedule although a special one exists for an op it holds carries a
``missed`` remark on its ``kernel.lowered`` event naming the node and the reason (and a ``# missed:``
schedule line); outputs stay correct (ONNX Runtime)."""

from __future__ import annotations

import numpy as np
from onnx import helper

import compiler
from tests.compiler.schedule.model_check import check_model, model, tensor


def _lowered(m):  # type: ignore[no-untyped-def]
    events: list[dict] = []
    r = compiler.compile(m, benchmark=False, verify=False, on_event=events.append)
    assert r.ok, r.error
    return [e for e in events if e["type"] == "kernel.lowered"]


def _missed(m):  # type: ignore[no-untyped-def]
    return [r for e in _lowered(m) for r in e.get("remarks", [])]


def test_conv_with_a_runtime_weight() -> None:
    m = model([helper.make_node("Conv", ["x", "w"], ["y"], pads=[1, 1, 1, 1], name="conv_rt")],
              [tensor("x", (1, 8, 10, 10)), tensor("w", (16, 8, 3, 3))], ["y"])
    check_model(m)
    (r,) = _missed(m)
    assert r["kind"] == "missed" and r["pass"] == "schedule" and r["nodes"] == ["conv_rt"]
    assert r["data"]["schedule"] == "GEMM micro-kernel" and "not a constant" in r["data"]["reason"]
    assert "conv_rt (Conv)" in r["message"]
    (ev,) = [e for e in _lowered(m) if e.get("remarks")]
    assert "# missed: GEMM micro-kernel not applied to conv_rt (Conv)" in ev["schedule"]


def test_depthwise_conv_with_a_runtime_weight() -> None:
    m = model([helper.make_node("Conv", ["x", "w"], ["y"], group=8, pads=[1, 1, 1, 1], name="dw")],
              [tensor("x", (1, 8, 10, 10)), tensor("w", (8, 1, 3, 3))], ["y"])
    check_model(m)
    (r,) = _missed(m)
    assert r["nodes"] == ["dw"] and r["data"]["schedule"].startswith("grouped-Conv") and "not a constant" in r["message"]


def test_pools_the_direct_schedule_does_not_take() -> None:
    m3 = model([helper.make_node("MaxPool", ["x"], ["y"], kernel_shape=[2, 2, 2], name="pool3d")],
               [tensor("x", (1, 2, 6, 6, 6))], ["y"])
    check_model(m3)
    (r,) = _missed(m3)
    assert r["nodes"] == ["pool3d"] and "only 2-D pools" in r["data"]["reason"]
    m2 = model([helper.make_node("AveragePool", ["x"], ["y"], kernel_shape=[2, 2], strides=[2, 2], name="avg")],
               [tensor("x", (1, 4, 8, 8))], ["y"])
    check_model(m2)
    (r,) = _missed(m2)
    assert r["nodes"] == ["avg"] and "do not overlap" in r["data"]["reason"]


def test_kernels_on_their_special_schedule_have_no_remark() -> None:
    w = np.random.default_rng(0).standard_normal((16, 8, 3, 3)).astype(np.float32)
    m = model([helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
               helper.make_node("MaxPool", ["c"], ["y"], kernel_shape=[3, 3], strides=[2, 2])],
              [tensor("x", (1, 8, 12, 12))], ["y"], {"w": w})
    assert _missed(m) == []
