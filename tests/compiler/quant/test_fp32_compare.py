"""A quantized compilation timed beside Prism's own FP32 compilation of the model (compiler.driver.fp32):
model.timed's prism_fp32_ms, each quantized kernel's FP32 time for the same layers, and the missed remark
of a quantized kernel slower than them."""

from __future__ import annotations

import numpy as np
from qmodels import calibration, small_cnn

import compiler
from compiler.driver.fp32 import kernel_rows


def test_quantized_kernels_carry_the_fp32_time_of_their_layers() -> None:
    m = small_cnn()
    cal = {"x": np.stack([d["x"] for d in calibration(m, 4)])}
    r = compiler.compile(m, pipeline="O2,quantize{dtype=int8}", calibration_data=cal, verify=False)
    assert r.ok, r.error
    t = r.of_type("model.timed")[-1]
    assert t["prism_fp32_ms"] > 0
    timed = {e["kernel"]: e for e in r.of_type("kernel.timed")}
    conv = [e for k, e in timed.items() if "qlinear_conv" in k]
    assert len(conv) == 2 and all(e["fp32_median_us"] > 0 and e["fp32_kernels"] for e in conv)
    for e in timed.values():
        for rem in e.get("remarks", []):  # timing decides whether there is one; when there is, it is consistent
            assert rem["kind"] == "missed" and rem["data"]["us"] > rem["data"]["fp32_us"] and rem["nodes"]
    off = compiler.compile(m, pipeline="O2,quantize{dtype=int8}", calibration_data=cal, verify=False,
                           compare_fp32=False)
    assert "prism_fp32_ms" not in off.of_type("model.timed")[-1]
    assert not any("fp32_median_us" in e for e in off.of_type("kernel.timed"))


def _events(groups: dict[str, list[str]], times: dict[str, float], layers: list[str]) -> list[dict]:
    nodes = [{"name": n, "group": g} for g, ns in groups.items() for n in ns]
    ev = [{"type": "graph.fused", "nodes": nodes, "groups": [{"id": g, "kernel": "k_" + g} for g in groups]}]
    ev += [{"type": "kernel.timed", "kernel": k, "median_us": us} for k, us in times.items()]
    if layers:
        ev.append({"type": "model.accuracy", "dtype": "int8",
                   "layers": [{"node": n, "precision": "int8"} for n in layers] + [{"node": "fc", "precision": "fp32"}]})
    return ev


def test_slower_integer_kernel_gets_a_missed_remark_with_both_times() -> None:
    """conv1+relu1 in one INT8 kernel (150 us) against FP32's conv1 (60) and relu1 (30) kernels: slower, a remark
    with 150 vs 90; conv2 (40 us) against 80: faster, no remark; fc stayed in FP32: not compared."""
    q = _events({"a": ["conv1", "relu1"], "b": ["conv2"], "c": ["fc"]}, {}, ["conv1", "conv2"])
    f = _events({"x": ["conv1"], "y": ["relu1"], "z": ["conv2"], "w": ["fc"]},
                {"k_x": 60.0, "k_y": 30.0, "k_z": 80.0, "k_w": 5.0}, [])
    rows = kernel_rows(q, f, {"k_a": 150.0, "k_b": 40.0, "k_c": 50.0})
    assert set(rows) == {"k_a", "k_b"}
    assert rows["k_a"]["fp32_median_us"] == 90.0 and rows["k_a"]["fp32_kernels"] == ["k_x", "k_y"]
    (rem,) = rows["k_a"]["remarks"]
    assert rem["kind"] == "missed" and rem["pass"] == "quantize" and rem["nodes"] == ["conv1", "relu1"]
    assert "150.0 us" in rem["message"] and "90.0 us" in rem["message"] and "k_x, k_y" in rem["message"]
    assert rows["k_b"]["remarks"] == [] and rows["k_b"]["fp32_median_us"] == 80.0
