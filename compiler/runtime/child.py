"""The runtime's child process: ``python -m compiler.runtime.child DIR``.

Runs in a fresh interpreter started by ``compiler.runtime.process.run_child`` (never imported by the
compiler process), under the rlimits of ``compiler.runtime.limits`` and dying with its parent
(``apply_child_limits``). Reads ``DIR/job.pkl``: ``{"program": Program, "inputs": [arrays] | None,
"random_inputs": {"seed", "storage"}, "measure": dict | None}`` (inputs None: seeded random inputs
drawn here, ``compiler.runtime.runner.random_inputs``), binds the program (``compiler.runtime.program.Bound``: kernel objects in one MCJIT engine,
the arena, inputs, constants, scratch) and runs its kernels once, appending ``start <kernel>`` before
each to ``DIR/progress`` so that if generated code kills the process the parent knows which kernel
was running. Without ``measure`` (the ONNX backend's executor, ``compiler.runtime.execute``) it
writes the graph outputs to ``DIR/outputs.pkl``. With it (``compiler.runtime.runner``) it runs ONNX
Runtime (``DIR/model.onnx``, CPU, as many intra-op threads as the program's parallel loops, sequential) on the same inputs, compares (bounded
outputs cut to their counts first: ``compiler.frontend.bounded.trim_outputs``), times (warm-up,
repeats, medians; Prism and ONNX Runtime runs alternate so that both see the same load:
``compiler.runtime.timing``) and writes ``DIR/result.json``.
"""

from __future__ import annotations

import json
import os
import pickle
import re
import sys
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto

from compiler.errors import CompileError, one_line
from compiler.frontend.bounded import trim_outputs
from compiler.runtime.buffers import mark
from compiler.runtime.limits import apply_child_limits
from compiler.runtime.narrow_io import encode, type_name
from compiler.runtime.program import bind
from compiler.runtime.runner import random_inputs
from compiler.runtime.timing import one_thread, ort_options, repeats_for, time_rounds

# ONNX Runtime's fp32 activations are approximations (MLAS logistic/tanh): measured on PP-OCRv4's
# sigmoid tail (logits -55..-10) its output is off the float64 value by up to 1.2e-7 absolute (ours:
# 2e-12). An output whose whole scale is that small cannot be compared more tightly against it.
ATOL_FLOOR = 1e-6


def main(d: Path) -> int:
    parent = os.environ.get("PRISM_PARENT_PID", "")
    apply_child_limits(int(parent) if parent.isdigit() else None)  # before anything big is allocated

    with open(d / "job.pkl", "rb") as f:
        job = pickle.load(f)
    inputs = job["inputs"]
    if inputs is None:  # drawn here, in their own dtypes: the parent never holds them
        drawn = random_inputs(job["program"].inputs, **job["random_inputs"])
        inputs = [drawn[n] for n, _, _ in job["program"].inputs]
    bound = bind(job["program"], inputs)  # a Program, or a ControlProgram (compiler.runtime.control)
    bound.run(progress=d / "progress")
    man = job.get("measure")
    if man is None:
        with open(d / "outputs.pkl", "wb") as f:
            pickle.dump(bound.outputs(), f, protocol=pickle.HIGHEST_PROTOCOL)
        return 0
    (d / "result.json").write_text(json.dumps(measure(d, bound, man)))
    return 0


def measure(d: Path, bound: Any, man: dict[str, Any]) -> dict[str, Any]:
    """Verify and time ``bound`` (whose kernels ran once) as the runner's settings ``man`` ask:
    ``verify``, ``benchmark``, ``rtol``/``atol``, ``tolerance`` {output: [rtol, atol]}, ``budget_s``,
    ``min_repeats``, ``max_repeats``, ``trims``, ``storage``, ``ort_outputs``, ``ort_feeds``
    (``compiler.runtime.runner.run_model``). Returns the result dict the runner documents."""
    names = [n for n, _, _ in bound.prog.outputs]
    outs = bound.outputs()  # by position: an output may be listed twice
    inputs = bound.inputs
    result: dict = {"kernels": [], "outputs": {}}
    ort_outs = None
    ort_int: dict[str, np.ndarray] = {}
    sess = None
    storage = man.get("storage") or {"inputs": {}, "outputs": {}}
    ort_feed = _storage_feed(inputs, list(inputs), man.get("ort_feeds", {}), storage["inputs"])
    if man.get("ort_failed"):  # a first run died inside ONNX Runtime: Prism's result without it
        result["ort_error"] = man["ort_failed"]
    elif man["verify"] or man["benchmark"]:
        import onnxruntime as ort  # deferred: heavy, and only a verifying or timing run needs it

        mark(d, "onnxruntime")  # a crash from here on is ONNX Runtime's (compiler.runtime.process)

        so = ort_options(ort, bound.threads)
        if man.get("ort_no_opt"):  # a QDQ reference run as written (compiler.quant.evaluate)
            so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
        try:  # a narrow type may have no CPU kernel there (bfloat16, float8 ...): not verified, said so
            sess = _session(ort, d / "model.onnx", so, result)
            ort_outs = dict(zip(man["ort_outputs"], sess.run(man["ort_outputs"], ort_feed), strict=True))
        except Exception as exc:  # onnxruntime's errors have no common public base class
            sess, ort_outs = None, None
            result["ort_error"] = _ort_problem(exc, storage)
        if man.get("ort_no_opt") and man["verify"] and ort_outs is not None:
            ort_int = _ort_integer_outputs(ort, d / "model.onnx", man["ort_outputs"], ort_feed)
    if man["verify"] and ort_outs is not None:
        n_out = len(man["ort_outputs"])  # bounded outputs: cut to their counts, which follow
        ours = trim_outputs(outs, [tuple(t) for t in man.get("trims", [])], n_out)
        tol = man.get("tolerance", {})
        for name, got, theirs in zip(names[:n_out], ours, man["ort_outputs"], strict=True):
            rtol, atol = tol.get(name, (man["rtol"], man["atol"]))[:2]
            elem = storage["outputs"].get(name)
            if elem is not None:  # compared in the declared storage type (compiler.runtime.narrow_io)
                got = encode(got, elem)
            result["outputs"][name] = _compare(got, ort_outs[theirs], rtol, atol, man.get("steps", {}).get(name, 0.0))
            if man.get("ort_no_opt"):  # a QDQ reference: rounding ties may flip a step and propagate
                _quantized_verdict(result["outputs"][name], got, ort_outs[theirs], ort_int.get(theirs))
            if elem is not None:
                result["outputs"][name]["storage"] = type_name(elem)
    if man["benchmark"]:
        mark(d, "timing")
        repeats = repeats_for(bound.run, man)
        timed = _timing_sessions(d, man, sess, bound.threads)  # [(key, session)]: the model, or FP32 and INT8
        result.update(time_rounds(bound, timed, ort_feed, repeats))
        if bound.threads > 1:  # each kernel's and the model's time at 1 thread beside them
            result.update(one_thread(bound, max(3, repeats // 3), result["kernels"]))
    return result


def _timing_sessions(d: Path, man: dict[str, Any], sess: Any, threads: int) -> list[tuple[str, Any]]:
    """The ONNX Runtime sessions timed beside Prism: ``[("onnxruntime_ms", the verified model)]``, or, when
    ``man["timing_models"]`` names files (a quantized compilation: ``{"onnxruntime_ms": FP32 model,
    "onnxruntime_int8_ms": QDQ model}``), one fully optimized session (``threads`` intra-op threads) per file."""
    models = man.get("timing_models") or {}
    if man.get("ort_failed"):
        return []
    if not models:
        return [("onnxruntime_ms", sess)] if sess is not None else []
    import onnxruntime as ort  # deferred: heavy, and only a timing run needs it

    out = []
    for key, name in models.items():
        so = ort_options(ort, threads)
        try:
            out.append((key, _session(ort, d / name, so, {})))
        except Exception:  # onnxruntime's errors have no common base class; that figure is then absent
            continue
    return out


def _session(ort: Any, path: Path, so: Any, result: dict) -> Any:
    """ONNX Runtime's CPU session for the model at ``path``. A model whose IR version is newer than
    this ONNX Runtime reads (``onnx.helper.make_model`` writes the newest) is loaded with its
    ``ir_version`` lowered to the one ONNX Runtime names, noted in ``result["notes"]``; the opsets
    decide the semantics, and ONNX Runtime still checks them."""
    try:
        return ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])
    except Exception as exc:  # onnxruntime's errors have no common public base class
        m = re.search(r"Unsupported model IR version: (\d+), max supported IR version: (\d+)", str(exc))
        if m is None:
            raise

        model = onnx.load_model(str(path))
        model.ir_version = int(m.group(2))
        result.setdefault("notes", []).append(f"ONNX Runtime ran the model with ir_version {m.group(2)} "
                                              f"(declared {m.group(1)}, newer than it reads)")
        return ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])


def _storage_feed(inputs: dict[str, np.ndarray], names: list[str], feeds: dict[str, str],
                  storage: dict[str, int]) -> dict[str, np.ndarray]:
    """ONNX Runtime's inputs, by its input names (``feeds``: {input: feed name}, ``narrow_io.ort_boundary``):
    a float16 input in numpy's float16 (exact: the runner drew it on the grid), the others as they
    are (the other narrow types are cast to their format by ONNX Runtime itself)."""
    out = {}
    for n in names:
        a = inputs[n]
        if storage.get(n) == TensorProto.FLOAT16 and feeds.get(n, n) == n:
            a = a.astype(np.float16)
        out[feeds.get(n, n)] = a
    return out


def _ort_problem(exc: BaseException, storage: dict[str, dict[str, int]]) -> str:
    """A sentence for ONNX Runtime failing to load or run the model (``ort_error`` of the result)."""
    msg = one_line(exc) or type(exc).__name__
    types = sorted({type_name(e) for e in (*storage["inputs"].values(), *storage["outputs"].values())})
    kinds = f" in {', '.join(types)}" if types else ""
    m = re.search(r"Could not find an implementation for (\S+) node with name '([^']*)'", msg)
    if m is not None:
        return f"ONNX Runtime has no CPU kernel for {m.group(1)}{kinds} (node {m.group(2)!r})"
    if len(msg) > 300:  # cut at a word, and say so: ONNX Runtime's messages can run to kilobytes
        msg = msg[:300].rsplit(" ", 1)[0] + " …"
    return f"ONNX Runtime failed{kinds} ({msg})"


QUANTIZED_MIN_SQNR_DB = 40.0
ORT_INTEGER_MARGIN_DB = 6.02  # 20 log10(2): Prism's disagreement at most twice ONNX Runtime's own


def _ort_integer_outputs(ort: Any, path: Path, names: list[str], feed: dict[str, Any]) -> dict[str, np.ndarray]:
    """ONNX Runtime's fully optimized run of a QDQ model (its fused integer kernels: QLinearConv,
    QLinearAdd, ...), by output name; ``{}`` where it cannot run it."""
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    try:
        s = ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])
        return dict(zip(names, s.run(names, feed), strict=True))
    except Exception:  # onnxruntime's errors have no common public base class; the bound is then 40 dB
        return {}


def _sqnr_db(p: np.ndarray, o: np.ndarray) -> float:
    noise, signal = float(np.linalg.norm(p - o)), float(np.linalg.norm(o))
    return 999.0 if noise == 0 else (-999.0 if signal == 0 else 20.0 * float(np.log10(signal / noise)))


def _quantized_verdict(out: dict, p: np.ndarray, o: np.ndarray, ort_int: np.ndarray | None = None) -> None:
    """For a quantized model compared with ONNX Runtime running its QDQ form (float accumulation, then
    rounding): a value near a .5 boundary may round to the other integer there, and a one-step change
    propagates through later layers. The output then also passes when Prism's SQNR against the reference,
    ``20 log10(||o|| / ||p - o||)`` (``sqnr_db``), is at least 40 dB (the disagreement 1% of the signal,
    well below int8 quantization noise, typically 20-40 dB against FP32), or at most 6 dB below the SQNR of
    ONNX Runtime's own integer kernels (``ort_int``: the same model fully optimized) against that reference
    (``ort_integer_sqnr_db``): in a deep network (ResNet-50) the two ONNX Runtime runs themselves agree only
    to 25-30 dB, so no integer implementation can reach 40 dB there."""
    o64, p64 = np.asarray(o, np.float64).ravel(), np.asarray(p, np.float64).ravel()
    if o64.shape != p64.shape:
        return
    db = _sqnr_db(p64, o64)
    out["sqnr_db"] = round(db, 3)
    bound = QUANTIZED_MIN_SQNR_DB
    if ort_int is not None and np.asarray(ort_int).size == o64.size:
        ort_db = _sqnr_db(np.asarray(ort_int, np.float64).ravel(), o64)
        out["ort_integer_sqnr_db"] = round(ort_db, 3)
        bound = min(bound, ort_db - ORT_INTEGER_MARGIN_DB)
    out["min_sqnr_db"] = round(bound, 3)
    if not out["passed"] and db >= bound and bool(np.all(np.isfinite(p64) == np.isfinite(o64))):
        out["passed"] = True
        out["passed_by"] = "sqnr"


def _compare(p: np.ndarray, o: np.ndarray, rtol: float, atol: float, step: float = 0.0) -> dict:
    """``p`` against ``o`` (see the module docstring of ``compiler.runtime.runner``); ``step`` > 0 (a
    dequantized output's quantization step) lets each element differ by one step: integer kernels and
    ONNX Runtime's may round a value on a .5 boundary to neighbouring integers."""
    p64, o64 = p.astype(np.float64), np.asarray(o).astype(np.float64)
    if p64.shape != o64.shape:
        return {"passed": False, "max_abs_error": float("inf"), "max_rel_error": float("inf"),
                "message": f"shape {p64.shape} != {o64.shape}"}
    both = np.isfinite(p64) & np.isfinite(o64)
    scale = float(np.max(np.abs(o64[both]))) if both.any() else 0.0
    atol_eff = max(atol * scale, ATOL_FLOOR, step * (1 + 1e-5))
    err = np.where(both, np.abs(p64 - o64), 0.0)
    # NaN where the reference has NaN, the same infinity where it has one (numpy's equal_nan, as onnx's runner)
    special = bool(np.all(both | (p64 == o64) | (np.isnan(p64) & np.isnan(o64))))
    ok = special and bool(np.all(err <= atol_eff + rtol * np.where(both, np.abs(o64), 0.0)))
    rel = np.where(both, err / np.maximum(np.abs(np.where(both, o64, 1.0)), max(atol_eff, 1e-30)), 0.0)
    return {"passed": ok, "max_abs_error": float(err.max(initial=0.0)), "max_rel_error": float(rel.max(initial=0.0)),
            "scale": scale, "atol_effective": atol_eff, "rtol": rtol, "atol": atol,
            **({"quantization_step": step} if step else {})}


def run(d: Path) -> int:
    """``main``, with a CompileError (a run-time check of the kernels: ``compiler.runtime.faults``)
    written to ``DIR/error.json`` for the parent to raise again (``compiler.runtime.process``), exit 3."""
    try:
        return main(d)
    except CompileError as exc:
        (d / "error.json").write_text(json.dumps({"stage": exc.stage, "message": exc.message, "node": exc.node,
                                                  "op": exc.op, "kernel": exc.kernel}))
        return 3


if __name__ == "__main__":
    sys.exit(run(Path(sys.argv[1])))
