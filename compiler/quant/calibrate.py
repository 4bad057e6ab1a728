"""Calibration for post-training quantization: the user's calibration inputs, the FP32 activations
they produce, and the activation ranges chosen from them.

Calibration data is one array per graph input with the samples along a leading axis (an ``.npz``
file, or a mapping of arrays): ``[S, *input shape]``, the input shape itself for a single sample, or,
for an input of batch 1, ``[S, *input shape[1:]]`` (S images of batch 1).
The FP32 model (the graph IR at the point of the ``quantize`` pass, exported to ONNX) is run on every
sample by ONNX Runtime (CPU, graph optimizations off so every tensor keeps its value) with the
tensors to calibrate as extra outputs. Range methods (per tensor):

- ``minmax``: the smallest and largest value seen (ONNX Runtime's ``CalibrationMethod.MinMax``);
- ``percentile``: ``|x|`` clipped at the given percentile of its histogram over all samples (2048 bins);
- ``entropy``: the threshold of ``|x|`` whose quantized distribution (128 levels) is closest in
  Kullback-Leibler divergence to the observed one (TensorRT's entropy calibration, Migacz, "8-bit
  Inference with TensorRT", GTC 2017).
For ``percentile`` and ``entropy`` the range is ``[max(min, -t), min(max, t)]``. A range always
includes 0 (so that zero padding is exact).
"""

from __future__ import annotations

import io
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import onnx

from ..errors import CompileError
from ..ir import Graph
from ..passes.check import ort_form

BINS = 2048
RANDOM_SAMPLES = 8


def load_calibration(source: Any, graph: Graph) -> dict[str, np.ndarray]:
    """``{input: array [S, *shape]}`` from ``source`` (a path to an ``.npz``, its bytes, or a mapping),
    checked against ``graph``'s inputs. Raises CompileError(stage="request") naming the first input
    that is missing, extra, or of another shape or dtype kind, or a file that is not an ``.npz``."""
    if isinstance(source, str | os.PathLike | bytes | bytearray):
        try:
            raw = np.load(io.BytesIO(bytes(source)) if isinstance(source, bytes | bytearray) else Path(source),
                          allow_pickle=False)
            arrays = {k: raw[k] for k in raw.files}
        except (OSError, ValueError) as e:
            raise CompileError("request", f"calibration data: not a readable .npz file ({e})") from None
    else:
        arrays = {k: np.asarray(v) for k, v in dict(source).items()}
    names = [v.name for v in graph.inputs]
    for k in arrays:
        if k not in names:
            raise CompileError("request", f"calibration data: array {k!r} names no graph input (inputs: "
                               f"{', '.join(names)})")
    out: dict[str, np.ndarray] = {}
    for v in graph.inputs:
        if v.name not in arrays:
            raise CompileError("request", f"calibration data: no array for graph input {v.name!r} ({v.type})")
        a = arrays[v.name]
        shape = tuple(int(d) for d in v.type.shape)  # type: ignore[union-attr]
        if tuple(a.shape) == shape:
            a = a[None]
        elif shape and shape[0] == 1 and a.ndim == len(shape) and tuple(a.shape[1:]) == shape[1:]:
            a = a[:, None]  # [S, C, H, W] for a batch-1 input [1, C, H, W]: S samples of batch 1
        if tuple(a.shape[1:]) != shape or a.shape[0] < 1:
            raise CompileError("request", f"calibration data: input {v.name!r} has shape {list(a.shape)}; expected "
                               f"[samples, {', '.join(map(str, shape))}] or {list(shape)}")
        want = np.dtype(v.type.dtype)  # type: ignore[union-attr]
        if (a.dtype.kind == "f") != (want.kind == "f") or a.dtype.kind not in "fiub":
            raise CompileError("request", f"calibration data: input {v.name!r} is {a.dtype}; the graph input is {want}")
        out[v.name] = a.astype(want, copy=False)
    counts = {k: a.shape[0] for k, a in out.items()}
    if len(set(counts.values())) > 1:
        raise CompileError("request", f"calibration data: inputs have different sample counts {counts}")
    return out


def random_calibration(graph: Graph, samples: int = RANDOM_SAMPLES, seed: int = 0) -> dict[str, np.ndarray]:
    """Seeded standard-normal samples (zeros for integer inputs) for every graph input."""
    rng = np.random.default_rng(seed)
    out = {}
    for v in graph.inputs:
        shape = (samples, *(int(d) for d in v.type.shape))  # type: ignore[union-attr]
        dt = np.dtype(v.type.dtype)  # type: ignore[union-attr]
        out[v.name] = rng.standard_normal(shape).astype(dt) if dt.kind == "f" else np.zeros(shape, dt)
    return out


def samples_of(data: Mapping[str, np.ndarray]) -> list[dict[str, np.ndarray]]:
    n = min(a.shape[0] for a in data.values()) if data else 0
    return [{k: a[i] for k, a in data.items()} for i in range(n)]


def run_fp32(model: Any, tensors: list[str], data: Mapping[str, np.ndarray]):  # type: ignore[no-untyped-def]
    """Yield ``{tensor: array}`` per sample: ``model`` (ModelProto) run by ONNX Runtime with ``tensors``
    added as graph outputs, optimizations off."""
    import onnxruntime as ort  # deferred: loads ORT's shared library, needed only when calibrating


    m = onnx.ModelProto()
    m.CopyFrom(model)
    have = {o.name for o in m.graph.output}
    for t in tensors:
        if t not in have:
            m.graph.output.append(onnx.helper.make_value_info(t, onnx.TypeProto()))
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    so.log_severity_level = 3
    sess = ort.InferenceSession(ort_form(m).SerializeToString(), so, providers=["CPUExecutionProvider"])
    names = [o.name for o in sess.get_outputs()]
    for feed in samples_of(data):
        yield dict(zip(names, sess.run(names, feed), strict=True))


def activation_ranges(model: Any, tensors: list[str], data: Mapping[str, np.ndarray], method: str,
                      percentile: float) -> dict[str, tuple[float, float]]:
    """``{tensor: (lo, hi)}`` over the calibration samples by ``method`` (see the module docstring)."""
    lo = {t: np.inf for t in tensors}
    hi = {t: -np.inf for t in tensors}
    for outs in run_fp32(model, tensors, data):
        for t in tensors:
            a = outs[t]
            lo[t], hi[t] = min(lo[t], float(a.min())), max(hi[t], float(a.max()))
    if method == "minmax":
        return {t: (min(lo[t], 0.0), max(hi[t], 0.0)) for t in tensors}
    amax = {t: max(abs(lo[t]), abs(hi[t]), 1e-12) for t in tensors}
    hist = {t: np.zeros(BINS, np.int64) for t in tensors}
    for outs in run_fp32(model, tensors, data):
        for t in tensors:
            hist[t] += np.histogram(np.abs(outs[t]), bins=BINS, range=(0.0, amax[t]))[0]
    out = {}
    for t in tensors:
        th = percentile_threshold(hist[t], amax[t], percentile) if method == "percentile" else \
            entropy_threshold(hist[t], amax[t])
        out[t] = (min(max(lo[t], -th), 0.0), max(min(hi[t], th), 0.0))
    return out


def percentile_threshold(hist: np.ndarray, amax: float, percentile: float) -> float:
    """The upper edge of the bin where the cumulative count of ``|x|`` reaches ``percentile`` %."""
    c = np.cumsum(hist)
    if c[-1] == 0:
        return amax
    k = int(np.searchsorted(c, c[-1] * percentile / 100.0))
    return amax * (k + 1) / len(hist)


def entropy_threshold(hist: np.ndarray, amax: float, levels: int = 128) -> float:
    """TensorRT's KL-divergence threshold of a histogram of ``|x|`` over [0, amax] (see module)."""
    h = hist.astype(np.float64)
    if h.sum() == 0:
        return amax
    best, best_i = np.inf, len(h)
    for i in range(levels, len(h) + 1, 16):
        p = h[:i].copy()
        p[i - 1] += h[i:].sum()
        nz = p > 0
        chunks = np.array_split(np.arange(i), levels)
        q = np.zeros(i)
        for ch in chunks:
            m = nz[ch]
            if m.any():
                q[ch[m]] = p[ch].sum() / m.sum()
        ps, qs = p / p.sum(), q / max(q.sum(), 1e-30)
        valid = nz & (qs > 0)
        kl = float(np.sum(ps[valid] * np.log(ps[valid] / qs[valid]))) + (np.inf if (nz & ~valid).any() else 0.0)
        if kl < best:
            best, best_i = kl, i
    return amax * best_i / len(h)
