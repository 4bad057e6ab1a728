"""``python -m compiler.bench --precision int8``: Prism INT8 beside ONNX Runtime FP32 and INT8, with the
accuracy it costs, over the INT8 set, in one run (``--precision bf16`` / ``fp16``: the same set and
columns with ``quantize{dtype=bf16|fp16}``, against ONNX Runtime FP32 only).

For each model the FP32 model is compiled with ``O2,quantize{dtype=int8 ...}`` and real calibration
images (``compiler.quant.images``: scikit-image's sample photographs, normalized as the model expects;
seeded random inputs for the encoder, whose input is not an image). The compilation's child process
times Prism's INT8 code, ONNX Runtime on the FP32 model and ONNX Runtime on the equivalent QDQ model (the
same quantization; fully optimized, so its integer kernels run), alternating run by run, one thread
each; then Prism's FP32 compilation of the same model, whose kernels are matched to the quantized ones
by node, and a warning line names the model or the layers slower than in Prism FP32. A row: Prism INT8 ms, ORT FP32 ms, ORT INT8 ms, Prism / ORT FP32, Prism / ORT INT8, the worst
output SQNR against FP32 (dB), top-1 agreement where the output is class scores, the accuracy criterion
and the verification against ONNX Runtime on the QDQ model. The last lines are the geometric mean of
Prism / ORT INT8 and the issue's targets (ResNet-50 at most 0.5x ORT FP32 and at most ORT INT8; the
geometric mean at most 1.0). Times are medians and noisy on a shared machine: compare the ratios.
"""

from __future__ import annotations

import math
import time
from typing import Any

import onnx

import compiler

from .. import samples
from . import models
from .images import calibration_images

INT8_MODELS = ["light_resnet50", "yolov8n", "ppocr_v4_det", "encoder", "dwcnn"]
NORMALIZE = {"light_resnet50": "imagenet", "yolov8n": "unit", "ppocr_v4_det": "imagenet", "dwcnn": "imagenet"}


def _model(name: str) -> tuple[Any, dict[str, list[int]]]:
    if name == "encoder":
        return models.encoder(), {}
    if name == "dwcnn":
        return models.dwcnn(), {}
    s = samples.get(name)
    return str(samples.fetch(name)), dict(s.input_shapes)


def calibration_for(name: str, model: Any, shapes: dict[str, list[int]], count: int) -> dict[str, Any] | None:
    """Calibration inputs for ``name``: images for image models, None (seeded random) otherwise."""
    if name not in NORMALIZE:
        return None
    proto = model if isinstance(model, onnx.ModelProto) else onnx.load(model)
    inits = {t.name for t in proto.graph.initializer}
    (inp,) = [i for i in proto.graph.input if i.name not in inits]
    dims = shapes.get(inp.name) or [d.dim_value for d in inp.type.tensor_type.shape.dim]
    return {inp.name: calibration_images(int(dims[2]), int(dims[3]), count, NORMALIZE[name])}


def bench_int8(name: str, *, samples: int = 8, options: str = "", target: str = "host",
               dtype: str = "int8", compare_fp32: bool = True, threads: int = 1) -> dict[str, Any]:
    """Quantize (``dtype``: int8, bf16 or fp16), compile, verify and time one model; its row (see the module
    docstring; bf16/fp16 rows have no ONNX Runtime INT8 figures). ``compare_fp32`` also compiles and times
    the FP32 model with Prism (the compilation's ``compare_fp32``): ``prism_fp32_ms`` and ``slower_layers``
    (:func:`slower_layers`). ``threads``:
    Prism's and ONNX Runtime's (the targets are at one thread)."""
    model, shapes = _model(name)
    cal = calibration_for(name, model, shapes, samples)
    pipeline = f"O2,quantize{{dtype={dtype}" + (f" {options}" if options else "") + "}"
    t0 = time.perf_counter()
    r = compiler.compile(model, target=target, pipeline=pipeline, input_shapes=shapes or None, calibration_data=cal,
                         threads=threads, compare_fp32=compare_fp32)
    row: dict[str, Any] = {"model": name, "dtype": dtype, "ok": r.ok, "error": r.error, "wall_s": round(time.perf_counter() - t0, 1),
                           "calibration": "images" if cal is not None else "random"}
    if not r.ok:
        return row
    t = (r.of_type("model.timed") or [{}])[-1]
    a = (r.of_type("model.accuracy") or [{}])[-1]
    v = (r.of_type("model.verified") or [{}])[-1]
    outs = a.get("outputs", {})
    sq = [o["sqnr_db"] for o in outs.values() if o.get("sqnr_db") is not None]
    top1 = [o["top1"] for o in outs.values() if "top1" in o]
    i8, f32 = t.get("onnxruntime_int8_ms"), t.get("onnxruntime_ms")
    row.update(prism_ms=t.get("prism_ms"), onnxruntime_ms=f32, onnxruntime_int8_ms=i8,
               ratio_fp32=t.get("ratio"), ratio_int8=t.get("ratio_int8"), sqnr_db=min(sq) if sq else None,
               top1=min(top1) if top1 else None, criterion=(a.get("criterion") or {}).get("passed"),
               verified=v.get("passed"), fp32_layers=sum(1 for x in a.get("layers", []) if x["precision"] == "fp32"))
    if compare_fp32:  # Prism's own FP32 compilation, timed in the same compile (compiler.driver.fp32)
        row["prism_fp32_ms"] = t.get("prism_fp32_ms")
        row["slower_layers"] = slower_layers(r)
    return row


def slower_layers(r: Any) -> list[dict[str, Any]]:
    """The quantized kernels of compilation ``r`` slower than Prism FP32's kernels for the same layers (their
    ``kernel.timed`` remarks, ``compiler.driver.fp32``): ``[{node, kernel, us, fp32_kernel, fp32_us}]``
    (node / fp32_kernel: the names joined by ", "), slowest ratio first."""
    rows = [{"node": ", ".join(x["nodes"]), "kernel": e["kernel"], "us": x["data"]["us"],
             "fp32_kernel": ", ".join(x["data"]["fp32_kernels"]), "fp32_us": x["data"]["fp32_us"]}
            for e in r.of_type("kernel.timed") for x in e.get("remarks", []) if x.get("pass") == "quantize"]
    return sorted(rows, key=lambda x: -x["us"] / max(x["fp32_us"], 1e-9))


def _f(x: Any, spec: str, width: int) -> str:
    return f"{x:>{width}{spec}}" if isinstance(x, int | float) else f"{'-':>{width}}"


def format_table(rows: list[dict[str, Any]]) -> str:
    dt = str(rows[0].get("dtype", "int8")).upper() if rows else "INT8"
    head = (f"{'model':<16} {'Prism ' + dt + ' ms':>13} {'ORT FP32 ms':>11} {'ORT INT8 ms':>11} {'/FP32':>6} {'/INT8':>6} "
            f"{'SQNR dB':>8} {'top-1':>6} {'crit.':>5} {'verified':>8}")
    lines = [head, "-" * len(head)]
    for r in rows:
        if not r["ok"]:
            err = r["error"] or {}
            lines.append(f"{r['model']:<16} FAILED ({err.get('stage')}): {str(err.get('message'))[:80]}")
            continue
        top1 = f"{100 * r['top1']:.0f}%" if r.get("top1") is not None else "-"
        lines.append(f"{r['model']:<16} {_f(r['prism_ms'], '.2f', 13)} {_f(r['onnxruntime_ms'], '.2f', 11)} "
                     f"{_f(r['onnxruntime_int8_ms'], '.2f', 11)} {_f(r['ratio_fp32'], '.2f', 6)} "
                     f"{_f(r['ratio_int8'], '.2f', 6)} {_f(r['sqnr_db'], '.1f', 8)} {top1:>6} "
                     f"{'pass' if r['criterion'] else 'FAIL':>5} {'pass' if r['verified'] else 'FAIL':>8}")
    if dt != "INT8":  # ONNX Runtime has no bf16/fp16 Conv on CPU: against FP32 only
        fp = [r["ratio_fp32"] for r in rows if r["ok"] and r.get("ratio_fp32")]
        if fp:
            g = math.exp(sum(math.log(x) for x in fp) / len(fp))
            lines.append(f"geometric-mean Prism {dt} / ORT FP32 over {len(fp)} models: {g:.2f}")
        return "\n".join(lines + _slower_lines(rows, dt))
    ratios = [r["ratio_int8"] for r in rows if r["ok"] and r.get("ratio_int8")]
    if ratios:
        g = math.exp(sum(math.log(x) for x in ratios) / len(ratios))
        lines.append(f"geometric-mean Prism INT8 / ORT INT8 over {len(ratios)} models: {g:.2f} (target <= 1.0)")
    lines += _slower_lines(rows, dt)
    r50 = next((r for r in rows if r["model"] == "light_resnet50" and r["ok"]), None)
    if r50 is not None:
        lines.append(f"ResNet-50 INT8, 1 thread: {_f(r50['ratio_fp32'], '.2f', 0)}x ORT FP32 (target <= 0.5), "
                     f"{_f(r50['ratio_int8'], '.2f', 0)}x ORT INT8 (target <= 1.0); top-1 agreement "
                     f"{_f(100 * r50['top1'] if r50.get('top1') is not None else None, '.0f', 0)}%, "
                     f"SQNR {_f(r50['sqnr_db'], '.1f', 0)} dB")
    return "\n".join(lines)


def _slower_lines(rows: list[dict[str, Any]], dt: str) -> list[str]:
    """Warnings: a model or a layer slower at the reduced precision than in Prism's own FP32."""
    out = []
    for r in rows:
        if not r["ok"] or r.get("prism_fp32_ms") is None:
            continue
        if r["prism_ms"] is not None and r["prism_ms"] > r["prism_fp32_ms"]:
            out.append(f"warning: {r['model']}: Prism {dt} {r['prism_ms']:.2f} ms is slower than Prism FP32 "
                       f"{r['prism_fp32_ms']:.2f} ms")
        slow = r.get("slower_layers") or []
        if slow:
            worst = ", ".join(f"{x['node']} {x['us']:.0f} vs {x['fp32_us']:.0f} us" for x in slow[:4])
            out.append(f"warning: {r['model']}: {len(slow)} {dt} kernels slower than Prism FP32's for the same "
                       f"layer: {worst}{' ...' if len(slow) > 4 else ''}")
    return out
