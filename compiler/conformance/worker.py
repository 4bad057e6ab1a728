"""A conformance worker process: ``python -m compiler.conformance.worker``.

Started by :mod:`compiler.conformance.runner` as a fresh interpreter; reads one JSON line per case
from stdin (``{"file": path of a pickled job}``), runs the case through :class:`compiler.backend.
PrismBackend` in this process (``isolate=False``: the runner isolates whole cases; a crash of
generated code kills this worker, and the runner reports that case as ``crash`` and starts a new
worker), and writes one JSON result line to its result stream (the original stdout; ``sys.stdout``
is redirected to stderr so that nothing else can corrupt the protocol).

A job is ``{"name", "suite", "path", "model": bytes | None, "data_sets", "rtol", "atol"}``.
A result is ``{"status": "passed" | "failed" | "error", "stage", "message", "seconds"}``: ``failed``
is a numerical or shape/dtype mismatch against the expected outputs, ``error`` a CompileError (with
its stage) or an unexpected exception in the compiler.

Comparison: exactly as ``onnx.backend.test.runner.Runner.assert_similar_outputs``: same number of
outputs, same shapes, same dtypes, strings equal, ``numpy.testing.assert_allclose(out, ref, rtol,
atol)`` with the case's own tolerances; sequences compared element by element. Values of ``ml_dtypes``
types (bfloat16, float8, float4e2m1, int4 ...) are compared after an exact widening to float64, so
that the tolerance arithmetic is not itself rounded to the narrow type; bfloat16 outputs take
``rtol = max(rtol, 2**-6)`` (two bfloat16 ULPs), as the upstream runner does (onnx 1.23
``Runner.assert_similar_outputs``).
"""

from __future__ import annotations

import json
import os
import pickle
import sys
import time
import traceback
import warnings
from typing import Any

import numpy as np

from compiler.backend import PrismBackend
from compiler.conformance.cases import Case
from compiler.errors import CompileError


def compare(outputs: list[Any], expected: list[Any], rtol: float, atol: float) -> str | None:
    """None when ``outputs`` match ``expected``; else one line saying where and how they differ."""
    if len(outputs) != len(expected):
        return f"{len(outputs)} outputs, expected {len(expected)}"
    for i, (out, ref) in enumerate(zip(outputs, expected, strict=True)):
        if isinstance(ref, list | tuple):
            if not isinstance(out, list | tuple):
                return f"output {i}: got a tensor, expected a sequence"
            msg = compare(list(out), list(ref), rtol, atol)
            if msg:
                return f"output {i}: {msg}"
            continue
        out, ref = np.asarray(out), np.asarray(ref)
        if out.shape != ref.shape:
            return f"output {i}: shape {out.shape}, expected {ref.shape}"
        if ref.dtype == object:
            if not np.array_equal(out, ref):
                return f"output {i}: strings differ"
            continue
        if out.dtype != ref.dtype:
            return f"output {i}: dtype {out.dtype}, expected {ref.dtype}"
        if ref.dtype.kind == "V":  # ml_dtypes (bfloat16, float8, int4 ...): compared exactly widened to float64
            if ref.dtype.name == "bfloat16":
                rtol = max(rtol, 2**-6)  # the upstream runner's rule: two bfloat16 ULPs
            out, ref = out.astype(np.float64), ref.astype(np.float64)
        try:
            np.testing.assert_allclose(out, ref, rtol=rtol, atol=atol)
        except AssertionError as e:
            lines = [x.strip() for x in str(e).splitlines() if x.strip()]
            detail = "; ".join(x for x in lines if x.startswith(("Mismatched", "Max absolute", "Max relative")))
            return f"output {i}: values differ (rtol={rtol:g}, atol={atol:g}): {detail or lines[:3]}"
    return None


def run_job(job: dict[str, Any]) -> dict[str, Any]:
    """Run one case; never raises."""
    # deferred until main() has pointed sys.stdout at stderr: nothing the compiler's imports print
    # can reach the result stream
    import onnx

    t0 = time.perf_counter()
    res: dict[str, Any] = {"status": "passed", "stage": None, "message": ""}
    try:
        if job.get("model") is None:
            c = Case(job["name"], job["suite"], "", path=job["path"])
            c.load()
            model, data_sets = c.model, c.data_sets
        else:
            model, data_sets = onnx.load_model_from_string(job["model"]), job["data_sets"]
        assert model is not None, "Case.load sets the model"
        data_sets = data_sets or []
        rep = PrismBackend.prepare(model, "CPU", pipeline=job.get("pipeline", "O2"), isolate=False)
        for k, (ins, outs) in enumerate(data_sets):
            got = list(rep.run(list(ins)))
            msg = compare(got, list(outs), job["rtol"], job["atol"])
            if msg:
                res.update(status="failed", message=(f"data set {k}: " if len(data_sets) > 1 else "") + msg)
                break
    except CompileError as e:
        res.update(status="error", stage=e.stage, message=e.message[:600])
    except Exception as e:  # a bug of the compiler: reported, never fatal to the worker
        tb = traceback.extract_tb(e.__traceback__)[-1]
        res.update(status="error", stage="internal",
                   message=f"{type(e).__name__}: {str(e)[:400]} (at {os.path.basename(tb.filename)}:{tb.lineno})")
    res["seconds"] = round(time.perf_counter() - t0, 3)
    return res


def main() -> int:
    out = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    warnings.simplefilter("ignore")
    np.seterr(all="ignore")
    for line in sys.stdin:
        line = line.strip()
        if not line:
            continue
        req = json.loads(line)
        with open(req["file"], "rb") as f:
            job = pickle.load(f)
        res = run_job(job)
        out.write(json.dumps(res) + "\n")
        out.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
