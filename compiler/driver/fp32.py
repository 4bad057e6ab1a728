"""Prism's own FP32 compilation of a quantized model, timed in the ``run`` stage beside it, kernel by kernel.

A ``quantize`` pass (int8, bf16, fp16) is worth its accuracy cost only where its kernels are faster than the
FP32 kernels they replace. When ``Request.compare_fp32`` allows it (None: whenever a quantize pass ran and
the compilation is benchmarked), the FP32 model (``Compilation.reference``, the model ONNX Runtime runs
in FP32) is compiled again through the same driver (:func:`compiler.driver.compile_model`) with the
pipeline less its ``quantize`` pass, the same target, shapes and threads, and benchmarked without
verification. Its kernels are matched to the quantized ones by node name (``graph.fused`` of both
compilations): a kernel that computes a quantized layer (``model.accuracy`` names them) is compared with
the FP32 kernels that compute any of its nodes (its layers and what it fused with them, as the FP32 model
names them; the Q/DQ nodes have no FP32 counterpart), their times summed, each counted once.

Results (:func:`compare`): ``prism_fp32_ms`` for ``model.timed`` and, per quantized kernel, the FP32 time and
a ``missed`` remark (pass ``quantize``) when the quantized kernel is the slower, naming its nodes with both
times. The FP32 compilation's own events are not emitted; a failure of it leaves the comparison out and
says why in a note.
"""

from __future__ import annotations

from typing import Any

from ..passes.pipeline import Pipeline
from . import compile_model
from .state import Compilation, Request


def wanted(comp: Compilation) -> bool:
    """True when this compilation quantized its model and ``compare_fp32`` (None: benchmark) asks for it."""
    arts = comp.ctx.artifacts if comp.ctx is not None else None
    quantized = arts is not None and (arts.qdq_model is not None or arts.reduced_model is not None)
    flag = comp.request.compare_fp32
    return quantized and comp.request.benchmark and (flag is None or bool(flag)) and comp.reference is not None


def _last(events: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    return next((e for e in reversed(events) if e["type"] == kind), {})


def _node_kernels(events: list[dict[str, Any]]) -> dict[str, str]:
    """``{node name: kernel}`` from a compilation's ``graph.fused``."""
    fused = _last(events, "graph.fused")
    kernel = {g["id"]: g["kernel"] for g in fused.get("groups", [])}
    return {n["name"]: kernel[n["group"]] for n in fused.get("nodes", []) if n.get("group") in kernel}


def compare(comp: Compilation, kernel_us: dict[str, float]) -> dict[str, Any] | None:
    """The FP32 comparison of a quantized compilation whose kernels took ``kernel_us`` ({kernel: median µs}):
    ``{"prism_fp32_ms", "kernels": {kernel: {"fp32_median_us", "fp32_kernels", "remarks"}}, "notes"}``, or
    None when :func:`wanted` is False."""
    if not wanted(comp):
        return None
    req = comp.request
    assert comp.pipeline is not None and comp.reference is not None
    pipeline = Pipeline(tuple(p for p in comp.pipeline.passes if p.name != "quantize")).text()
    r = compile_model(Request(comp.reference, target=req.target, pipeline=pipeline, input_shapes=req.input_shapes,
                              input_values=req.input_values, verify=False, benchmark=True, kernel_events=False,
                              threads=req.threads, codegen_threads=req.codegen_threads), None)
    if not r.ok:
        return {"kernels": {}, "notes": [f"Prism FP32 not compiled for the comparison: {(r.error or {}).get('message')}"]}
    ft = _last(r.events, "model.timed")
    return {"prism_fp32_ms": ft.get("prism_ms"), "kernels": kernel_rows(comp.events.events, r.events, kernel_us),
            "notes": []}


def kernel_rows(q_events: list[dict[str, Any]], f_events: list[dict[str, Any]],
                kernel_us: dict[str, float]) -> dict[str, dict[str, Any]]:
    """Per quantized kernel (of the compilation whose events are ``q_events`` and kernel times ``kernel_us``
    µs) that computes a quantized layer: ``fp32_median_us`` (the summed times of the FP32 compilation's
    kernels, ``f_events``, computing any of its nodes), ``fp32_kernels`` and ``remarks`` (a ``missed``
    remark when it is the slower)."""
    f_us = {e["kernel"]: float(e["median_us"]) for e in f_events if e["type"] == "kernel.timed"}
    f_of = _node_kernels(f_events)
    q_of = _node_kernels(q_events)
    acc = _last(q_events, "model.accuracy")
    layers = [x["node"] for x in acc.get("layers", []) if x.get("precision") != "fp32"]
    precision = str(acc.get("dtype", "int8"))
    quantized = {q_of[n] for n in layers if n in q_of}
    mine: dict[str, list[str]] = {}
    for n, k in q_of.items():  # every node of a kernel that computes a quantized layer, as the FP32 model names it
        if k in quantized and n in f_of:
            mine.setdefault(k, []).append(n)
    out: dict[str, Any] = {}
    for k, nodes in mine.items():
        fks = sorted({f_of[n] for n in nodes if f_of[n] in f_us})
        if k not in kernel_us or not fks:
            continue
        fus = sum(f_us[x] for x in fks)
        row: dict[str, Any] = {"fp32_median_us": round(fus, 3), "fp32_kernels": fks, "remarks": []}
        if kernel_us[k] > fus:
            row["remarks"].append({
                "kind": "missed", "pass": "quantize", "nodes": nodes,
                "message": f"{precision} kernel {k} ({', '.join(nodes)}) takes {kernel_us[k]:.1f} us, slower than "
                           f"Prism FP32's {', '.join(fks)} for the same layers ({fus:.1f} us): the layer gains "
                           "nothing from quantization here",
                "data": {"us": round(kernel_us[k], 3), "fp32_us": round(fus, 3), "fp32_kernels": fks}})
        out[k] = row
    return out
