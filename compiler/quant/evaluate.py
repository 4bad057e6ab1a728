"""Evaluating a quantization plan: the FP32 model against its QDQ form on the same inputs, per
quantized layer and per graph output (figures: ``compiler.quant.accuracy``).

The QDQ model is run by ONNX Runtime with graph optimizations off: every DequantizeLinear, float op and
QuantizeLinear runs as written, so the result is the integer computation up to the rounding of float
accumulation (ONNX Runtime's ``qdq_loss_debug`` evaluates the same way). Per-layer figures are
accumulated sample by sample (squared norms, max errors), so no activation is kept for longer than one
sample.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from .accuracy import compare, criterion, finite
from .calibrate import run_fp32


def evaluate(fp32: Any, qdq: Any, layers: list[tuple[str, str, str]], outputs: list[str],
             data: Mapping[str, np.ndarray], min_sqnr_db: float, min_top1: float,
             inputs: Mapping[str, list[tuple[str, str]]] | None = None) -> dict[str, Any]:
    """``{"layers": [{"node", "sqnr_db", "max_abs_error", "input_sqnr_db"}], "outputs": {name: compare(...)},
    "passed", "reasons"}``; ``layers`` are ``(node, FP32 tensor, dequantized tensor)`` at each layer's output,
    ``inputs`` {node: [(FP32 tensor, dequantized tensor)]} its quantized inputs: ``input_sqnr_db`` is the
    lowest SQNR among them (None without any), so that ``input_sqnr_db - sqnr_db`` is the noise the layer
    itself adds (its weight and output rounding), not the noise it receives."""
    pairs = {(t, d) for _, t, d in layers} | {p for ps in (inputs or {}).values() for p in ps}
    acc = {p: [0.0, 0.0, 0.0] for p in pairs}  # ||x||^2, ||x - y||^2, max |x - y|
    xs: dict[str, list[np.ndarray]] = {o: [] for o in outputs}
    ys: dict[str, list[np.ndarray]] = {o: [] for o in outputs}
    ref = run_fp32(fp32, sorted({t for t, _ in pairs}), data)
    got = run_fp32(qdq, sorted({d for _, d in pairs}), data)
    for a, b in zip(ref, got, strict=True):
        for (t, d), s in acc.items():
            x, y = a[t].astype(np.float64), b[d].astype(np.float64)
            s[0] += float(np.sum(x * x))
            s[1] += float(np.sum((x - y) ** 2))
            s[2] = max(s[2], float(np.abs(x - y).max(initial=0.0)))
        for o in outputs:
            xs[o].append(a[o])
            ys[o].append(b[o])
    rows = []
    for node, t, d in layers:
        ins = [_db(*acc[p][:2]) for p in (inputs or {}).get(node, [])]
        rows.append({"node": node, "sqnr_db": _db(*acc[(t, d)][:2]), "max_abs_error": finite(acc[(t, d)][2]),
                     "input_sqnr_db": min(ins) if ins else None})
    outs = {o: compare(np.stack(xs[o]), np.stack(ys[o])) for o in outputs}
    passed, reasons = criterion(outs, min_sqnr_db, min_top1)
    return {"layers": rows, "outputs": outs, "passed": passed, "reasons": reasons}


def _db(sig: float, noise: float) -> float:
    """``10 log10(sig / noise)`` (energies); 999 for no noise, -999 for no signal or a noise that is not finite
    (the quantized tensor overflowed: float16's range is +-65504)."""
    if noise == 0:
        return 999.0
    if sig == 0 or not math.isfinite(noise) or sig / noise == 0:
        return -999.0
    return round(10 * math.log10(sig / noise), 3)
