"""Run a compiled model in a child process: verify against ONNX Runtime, time kernels and model.

:func:`run_model` links the kernels into a :class:`~compiler.runtime.program.Program` (the same
description the ONNX backend executes: ``compiler.runtime.program``), writes it with seeded random
inputs, the settings and the ONNX model for ONNX Runtime into a temporary directory, runs the child
(``python -m compiler.runtime.child``, started by ``compiler.runtime.process.run_child``) and reads
back ``result.json``. A crash of generated code (a signal, a non-zero exit) becomes
``CompileError(stage="run", kernel=...)`` naming the kernel that was running, read from the child's
progress markers; the calling process carries on.

Verification (fp32): with ``o`` ONNX Runtime's output and ``p`` Prism's, ``scale = max|o|`` and
``atol_eff = max(atol * scale, 1e-6)``, an output passes when every element has ``|p - o| <= atol_eff + rtol *
|o|`` (defaults ``rtol = 1e-3``, ``atol = 1e-4``) and both are finite at the same places.
``max_abs_error = max |p - o|``; ``max_rel_error = max |p - o| / max(|o|, atol_eff)``. The 1e-6
floor matters only for outputs whose largest magnitude is below 1e-2: ONNX Runtime's own fp32
activations (MLAS logistic, tanh) are approximations off by up to 1.2e-7 absolute (measured on
PP-OCRv4's sigmoid output, whose values are all below 6e-5 on random input).

Narrow storage types (``storage``, a legalized float16/bfloat16/float8 ... model: ``compiler.driver.request.legalize_model``):
the random inputs are values of the declared type, ONNX Runtime runs the original model in that type
(``compiler.runtime.narrow_io.ort_boundary`` makes its inputs and outputs numpy-readable), Prism's
outputs are encoded to the type before the comparison, and the type's tolerance replaces ``rtol``/``atol``
(``compiler.runtime.narrow_io``: float16 rtol 1e-3, atol 2.5e-3, as ONNX Runtime's own tests). When
ONNX Runtime cannot load or run the model (no CPU kernel for a bfloat16 op ...), the result says so
(``ort_error``) and nothing is compared.

Timing: one warm-up run, then ``repeats`` runs (enough for about ``budget_s / 2`` seconds, clamped
to [``min_repeats``, ``max_repeats``]); each kernel's time is the median of its calls (µs), the model's
the median of whole runs (ms), single thread. ONNX Runtime runs in the same child process with
one intra-op thread, sequential execution, the same inputs and the same number of repeats.
"""

from __future__ import annotations

import json
import pickle
from pathlib import Path
from typing import Any

import numpy as np
import onnx

from ..ir import Graph
from .limits import check_program
from .narrow_io import ort_boundary, storage_inputs, tolerance
from .process import ReferenceFailed, run_child, run_dir
from .program import NP_DTYPES, Program, link


def make_inputs(graph: Graph, seed: int = 0, storage: dict[str, int] | None = None) -> dict[str, np.ndarray]:
    """Seeded inputs: standard normal floats, zeros for integer inputs (shapes and dtypes from the
    graph IR). ``storage`` ({input: ONNX elem type}): inputs of a legalized model whose declared type
    is narrow; their values are rounded to that format (``compiler.runtime.narrow_io.storage_inputs``)
    and kept in the IR's compute dtype."""
    specs = []
    for v in graph.inputs:
        assert v.type is not None and v.type.is_static
        specs.append((v.name, NP_DTYPES[v.type.short], tuple(int(d) for d in v.type.shape)))  # type: ignore[union-attr]
    return random_inputs(specs, seed, storage)


def random_inputs(specs: list[tuple[str, str, tuple[int, ...]]], seed: int = 0,
                  storage: dict[str, int] | None = None) -> dict[str, np.ndarray]:
    """:func:`make_inputs` for ``specs`` ``[(name, numpy dtype, shape)]`` (``Program.inputs``): each
    float input drawn from the standard normal distribution in its own dtype (float32 draws for
    float32 and narrower, float64 for float64), zeros for the others. The runner's child draws them
    (``compiler.runtime.child``), so that the calling process never holds them."""
    rng = np.random.default_rng(seed)
    out = {}
    for name, dtype, shape in specs:
        dt = np.dtype(dtype)
        if dt.kind == "f":  # drawn in float32 (float64 for float64): never a float64 copy of a big input
            draw = np.float64 if dt == np.float64 else np.float32
            x = rng.standard_normal(shape, dtype=draw)
            out[name] = x if x.dtype == dt else x.astype(dt)
        else:
            out[name] = np.zeros(shape, dt)
    if storage:
        out = storage_inputs(out, storage)
    return out


def run_model(kernels: list[dict[str, Any]], graph: Graph, plan: Any, model_bytes: bytes, *, verify: bool,
              benchmark: bool, rtol: float = 1e-3, atol: float = 1e-4, budget_s: float = 4.0,
              min_repeats: int = 5, max_repeats: int = 50, timeout_s: float = 900.0,
              trims: list[tuple[int, str, int]] | None = None,
              storage: dict[str, dict[str, int]] | None = None) -> dict[str, Any]:
    """Run ``kernels`` (dicts with ``name``, ``symbol``, ``obj``, ``args``: list of KernelArg) in order.

    The kernels, ``graph`` and ``plan`` are linked into the same :class:`~compiler.runtime.program.Program`
    the ONNX backend executes (``compiler.runtime.program.link``): a graph output may be written by a
    kernel, be a graph input or a constant (folded), or be listed twice; each is compared.

    ``storage`` (``compiler.driver.request.legalize_model``): ``{"inputs": {name: elem}, "outputs": {name: elem}}``,
    the declared narrow types of a legalized model's graph inputs and outputs. Their random inputs are
    values of the storage type, given to ONNX Runtime in it and to Prism widened; Prism's outputs are
    encoded to it before the comparison, at the type's tolerance (``compiler.runtime.narrow_io``,
    which replaces ``rtol``/``atol`` for those outputs).

    ``trims`` (``compiler.frontend.bounded.bound_outputs``): the graph has bounded outputs followed
    by their counts; the child cuts them to the counts (``trim_outputs``) and compares the model's
    own outputs, one per output of ``model_bytes``.

    Returns the child's result: ``kernels`` [{name, median_us}], ``prism_ms``, ``onnxruntime_ms``,
    ``repeats``, ``outputs`` {name: {passed, max_abs_error, max_rel_error, rtol, atol, ...}} and, when
    ONNX Runtime cannot load or run the model, ``ort_error`` (a sentence; then no ``outputs`` and no
    ``onnxruntime_ms``). Raises CompileError(stage="run") on a crash (naming the kernel) or a timeout,
    CompileError(stage="lowering") for a graph output that has no source (``link``).
    """
    return measure_program(link(graph, kernels, plan), model_bytes, verify=verify, benchmark=benchmark, rtol=rtol,
                           atol=atol, budget_s=budget_s, min_repeats=min_repeats, max_repeats=max_repeats,
                           timeout_s=timeout_s, trims=trims, storage=storage)


def measure_program(prog: Program, model_bytes: bytes, *, verify: bool, benchmark: bool, rtol: float = 1e-3,
                    atol: float = 1e-4, budget_s: float = 4.0, min_repeats: int = 5, max_repeats: int = 50,
                    timeout_s: float = 900.0, trims: list[tuple[int, str, int]] | None = None,
                    storage: dict[str, dict[str, int]] | None = None,
                    steps: dict[str, float] | None = None, ort_no_opt: bool = False,
                    timing_models: dict[str, bytes] | None = None) -> dict[str, Any]:
    """Verify and time the linked ``prog`` (``compiler.driver.run.link_program``) against ONNX Runtime
    running ``model_bytes``, in the child process, on seeded random inputs (:func:`random_inputs`).
    Arguments, result and errors as :func:`run_model`'s; ``steps`` ({output: quantization step},
    ``compiler.quant.qdq.output_steps``) lets a dequantized output differ by one step. ``ort_no_opt``
    runs ``model_bytes`` with ONNX Runtime's graph optimizations off (a QDQ reference as written);
    ``timing_models`` ({result key: model bytes}, e.g. ``onnxruntime_ms`` FP32 and ``onnxruntime_int8_ms``
    QDQ) are timed instead of ``model_bytes``, each fully optimized, alternating with Prism. The program is
    checked against the limits of ``compiler.runtime.limits`` first (CompileError(stage="run") naming
    the tensor, its size and the limit)."""
    storage = storage or {"inputs": {}, "outputs": {}}
    check_program(prog)  # before the child allocates anything

    ort_model = onnx.load_model_from_string(model_bytes)
    ort_feeds = {n: n for n, _, _ in prog.inputs}
    if storage["inputs"] or storage["outputs"]:  # numpy-readable boundary for ONNX Runtime (narrow_io)
        ort_model, feeds, _ = ort_boundary(ort_model, storage)
        ort_feeds.update(feeds)
        model_bytes = ort_model.SerializeToString()
    outputs = [name for name, _, _ in prog.outputs]
    man = {"ort_outputs": [o.name for o in ort_model.graph.output], "verify": verify, "benchmark": benchmark,
           "rtol": rtol, "atol": atol, "budget_s": budget_s, "min_repeats": min_repeats, "max_repeats": max_repeats,
           "trims": [list(t) for t in trims or []], "storage": storage, "ort_feeds": ort_feeds,
           "tolerance": _tolerances(outputs, storage["outputs"], rtol, atol), "steps": dict(steps or {}),
           "ort_no_opt": ort_no_opt, "timing_models": {k: f"timing_{k}.onnx" for k in timing_models or {}}}
    with run_dir("run") as d:
        (d / "model.onnx").write_bytes(model_bytes)
        for k, data in (timing_models or {}).items():
            (d / f"timing_{k}.onnx").write_bytes(data)
        _write_job(d, prog, storage, man)
        try:
            run_child(d, timeout_s, after="the measurement process")
        except ReferenceFailed as failed:  # Prism's result is kept: measured again without ONNX Runtime
            man["ort_failed"] = failed.message
            (d / "progress").unlink(missing_ok=True)
            _write_job(d, prog, storage, man)
            run_child(d, timeout_s, after="the measurement process")
        return json.loads((d / "result.json").read_text())


def _write_job(d: Path, prog: Program, storage: dict[str, dict[str, int]], man: dict[str, Any]) -> None:
    """``d/job.pkl`` for the child: the program, its random inputs' seed and storage, the settings."""
    with open(d / "job.pkl", "wb") as f:
        pickle.dump({"program": prog, "inputs": None, "random_inputs": {"seed": 0, "storage": storage["inputs"]},
                     "measure": man}, f, protocol=pickle.HIGHEST_PROTOCOL)


def _tolerances(outputs: list[str], storage: dict[str, int], rtol: float, atol: float) -> dict[str, list[float]]:
    """``{output: [rtol, atol]}``: ``rtol``/``atol`` or, for a narrow output, its storage type's."""
    return {o: list(tolerance(storage[o])) if o in storage else [rtol, atol] for o in outputs}

