"""compiler.quant.bench: the layers whose reduced-precision kernel is slower than Prism's FP32 kernels for
the same nodes (compiler.driver.fp32's kernel_rows on two compilations' graph.fused and kernel.timed), as
the bench table's warning lines."""

from __future__ import annotations

from typing import Any

from compiler.driver.fp32 import kernel_rows
from compiler.quant.bench import format_table, slower_layers


def _events(groups: dict[str, list[str]], us: dict[str, float], layers: list[str]) -> list[dict[str, Any]]:
    nodes = [{"id": n, "name": n, "op_type": "Conv", "group": g} for g, ns in groups.items() for n in ns]
    ev: list[dict[str, Any]] = [{"type": "graph.fused", "nodes": nodes,
                                 "groups": [{"id": g, "kernel": f"k_{g}"} for g in groups]}]
    ev += [{"type": "kernel.timed", "kernel": f"k_{g}", "median_us": t} for g, t in us.items()]
    return ev + [{"type": "model.accuracy", "dtype": "int8", "layers": [{"node": n, "precision": "int8"} for n in layers]}]


class _Result:
    """A quantized compilation's kernel.timed events, as the run stage writes them with the FP32 comparison."""

    def __init__(self, q: list[dict[str, Any]], f: list[dict[str, Any]]) -> None:
        us = {e["kernel"]: e["median_us"] for e in q if e["type"] == "kernel.timed"}
        rows = kernel_rows(q, f, us)
        self.timed = [{"kernel": k, "median_us": t, **rows.get(k, {})} for k, t in us.items()]

    def of_type(self, t: str) -> list[dict[str, Any]]:
        return self.timed if t == "kernel.timed" else []


def test_slower_layers_match_nodes_across_the_two_fusions() -> None:
    q = _events({"a": ["conv1", "relu1"], "b": ["conv2"], "c": ["fc"]}, {"a": 50.0, "b": 300.0, "c": 12.0},
                ["conv1", "conv2", "fc"])
    f = _events({"x": ["conv1"], "y": ["relu1", "conv2"], "z": ["fc"]}, {"x": 80.0, "y": 100.0, "z": 3.0}, [])
    rows = slower_layers(_Result(q, f))
    assert [(r["node"], r["kernel"], r["fp32_kernel"]) for r in rows] == [("fc", "k_c", "k_z"), ("conv2", "k_b", "k_y")]
    row = {"model": "m", "dtype": "int8", "ok": True, "prism_ms": 2.0, "prism_fp32_ms": 1.5, "onnxruntime_ms": 3.0,
           "onnxruntime_int8_ms": 2.5, "ratio_fp32": 0.67, "ratio_int8": 0.8, "sqnr_db": 30.0, "top1": None,
           "criterion": True, "verified": True, "slower_layers": rows}
    text = format_table([row])
    assert "warning: m: Prism INT8 2.00 ms is slower than Prism FP32 1.50 ms" in text
    assert "warning: m: 2 INT8 kernels slower than Prism FP32's for the same layer: fc 12 vs 3 us" in text
