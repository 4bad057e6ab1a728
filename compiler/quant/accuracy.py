"""The accuracy a quantization costs: per quantized layer and for the whole model, against the FP32
model on the same inputs.

SQNR (signal-to-quantization-noise ratio) in dB is ``20 * log10(||x|| / ||x - y||)`` with ``x`` the FP32
tensor and ``y`` the dequantized one, over all samples together (``onnxruntime.quantization.
qdq_loss_debug.compute_signal_to_quantization_noice_ratio``); ``inf`` when they are equal. For the whole
model, per output: max absolute error, max relative error (``|x - y| / max(|x|, 1e-6)``), SQNR, and, for
an output shaped like class scores (``[N, C]`` with ``C >= 2``, or ``[N, C, 1, 1]``), the share of samples
whose top-1 class (``argmax``) is the FP32 one and whose top-5 set contains it (top-5 where C >= 5).

The criterion (``passes``): every output at least ``min_sqnr_db`` and top-1 agreement at least
``min_top1`` where it applies.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np


def sqnr_db(x: np.ndarray, y: np.ndarray) -> float:
    """``20 log10(||x|| / ||x - y||)`` in dB (float64 norms); ``inf`` when ``x == y``, ``-inf`` when ``x == 0``
    or when ``y`` is not finite where ``x`` is (a float16 overflow: no signal is left)."""
    x64, y64 = np.asarray(x, np.float64).ravel(), np.asarray(y, np.float64).ravel()
    with np.errstate(invalid="ignore", over="ignore"):
        noise = float(np.linalg.norm(x64 - y64))
    signal = float(np.linalg.norm(x64))
    if noise == 0.0:
        return math.inf
    if signal == 0.0 or not math.isfinite(noise) or signal / noise == 0.0:
        return -math.inf
    return 20.0 * math.log10(signal / noise)


def class_scores(shape: tuple[int, ...]) -> bool:
    """True for ``[N, C]`` (C >= 2) or ``[N, C, 1, 1]``: a tensor of class scores."""
    return (len(shape) == 2 and shape[1] >= 2) or (len(shape) == 4 and shape[1] >= 2 and shape[2:] == (1, 1))


def topk_agreement(x: np.ndarray, y: np.ndarray, k: int) -> float:
    """Share of rows whose FP32 top-1 class is among ``y``'s top-``k`` (``k = 1``: the same argmax)."""
    x2, y2 = x.reshape(x.shape[0], -1), y.reshape(y.shape[0], -1)
    ref = np.argmax(x2, axis=1)
    top = np.argsort(-y2, axis=1, kind="stable")[:, :k]
    return float(np.mean([ref[i] in top[i] for i in range(len(ref))]))


def compare(x: np.ndarray, y: np.ndarray) -> dict[str, Any]:
    """Per-tensor figures: ``sqnr_db``, ``max_abs_error``, ``max_rel_error`` (and ``top1``/``top5`` for
    class scores, computed per sample along the leading axis)."""
    x64, y64 = np.asarray(x, np.float64), np.asarray(y, np.float64)
    err = np.abs(x64 - y64)
    with np.errstate(invalid="ignore"):
        rel = float((err / np.maximum(np.abs(x64), 1e-6)).max(initial=0.0))
    out: dict[str, Any] = {"sqnr_db": _num(sqnr_db(x64, y64)), "max_abs_error": finite(float(err.max(initial=0.0))),
                           "max_rel_error": finite(rel)}
    if x64.ndim >= 3 and class_scores(tuple(x64.shape[1:])):
        out["top1"] = topk_agreement(x64, y64, 1)
        if x64.reshape(x64.shape[0], -1).shape[1] >= 5:
            out["top5"] = topk_agreement(x64, y64, 5)
    return out


def finite(v: float) -> float | None:
    """``v``, or None (JSON null) for an error that is inf or NaN (an overflowed reduced-precision tensor)."""
    return v if math.isfinite(v) else None


def fmt_error(v: float | None) -> str:
    """An error for a remark: ``3.2e-05``, or "not finite" for the None of :func:`finite`."""
    return "not finite" if v is None else f"{v:.3g}"


def _num(v: float) -> float | None:
    """JSON-safe: ``inf`` as a large number is misleading, so +inf -> None is avoided: kept as 999.0 dB."""
    if math.isinf(v):
        return 999.0 if v > 0 else -999.0
    return round(v, 3)


def criterion(outputs: dict[str, dict[str, Any]], min_sqnr_db: float, min_top1: float) -> tuple[bool, list[str]]:
    """``(passed, reasons)`` of the whole-model criterion (see module docstring)."""
    why = []
    for name, o in outputs.items():
        if o["sqnr_db"] is not None and o["sqnr_db"] < min_sqnr_db:
            why.append(f"output {name}: SQNR {o['sqnr_db']:.1f} dB < {min_sqnr_db:g} dB")
        if "top1" in o and o["top1"] < min_top1:
            why.append(f"output {name}: top-1 agreement {100 * o['top1']:.1f}% < {100 * min_top1:g}%")
    return not why, why


def stack(samples: list[dict[str, np.ndarray]], name: str) -> np.ndarray:
    """One tensor over all samples, samples along a new leading axis."""
    return np.stack([s[name] for s in samples])
