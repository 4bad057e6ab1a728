"""compiler.quant.bench: the layers whose reduced-precision kernel is slower than Prism's FP32 kernel for
the same node, matched through each compilation's graph.fused groups and kernel.timed medians."""

from __future__ import annotations

from typing import Any

from compiler.quant.bench import format_table, slower_layers


class _Result:
    """The two event types slower_layers reads, as a compilation result carries them."""

    def __init__(self, groups: dict[str, list[str]], us: dict[str, float]) -> None:
        nodes = [{"id": n, "name": n, "op_type": "Conv", "group": g} for g, ns in groups.items() for n in ns]
        self.events = {"graph.fused": [{"nodes": nodes, "groups": [{"id": g, "kernel": f"k_{g}"} for g in groups]}],
                       "kernel.timed": [{"kernel": f"k_{g}", "median_us": t} for g, t in us.items()]}

    def of_type(self, t: str) -> list[dict[str, Any]]:
        return self.events.get(t, [])


def test_slower_layers_match_nodes_across_the_two_fusions() -> None:
    q = _Result({"a": ["conv1", "relu1"], "b": ["conv2"], "c": ["fc"]}, {"a": 50.0, "b": 300.0, "c": 12.0})
    f = _Result({"x": ["conv1"], "y": ["relu1", "conv2"], "z": ["fc"]}, {"x": 80.0, "y": 100.0, "z": 3.0})
    rows = slower_layers(q, f, ["conv1", "conv2", "fc"])
    assert [(r["node"], r["kernel"], r["fp32_kernel"]) for r in rows] == [("fc", "k_c", "k_z"), ("conv2", "k_b", "k_y")]
    row = {"model": "m", "dtype": "int8", "ok": True, "prism_ms": 2.0, "prism_fp32_ms": 1.5, "onnxruntime_ms": 3.0,
           "onnxruntime_int8_ms": 2.5, "ratio_fp32": 0.67, "ratio_int8": 0.8, "sqnr_db": 30.0, "top1": None,
           "criterion": True, "verified": True, "slower_layers": rows}
    text = format_table([row])
    assert "warning: m: Prism INT8 2.00 ms is slower than Prism FP32 1.50 ms" in text
    assert "warning: m: 2 INT8 kernels slower than Prism FP32's for the same layer: fc 12 vs 3 us" in text
