"""Run a compiled model in a child process: verify against ONNX Runtime, time kernels and model.

:func:`run_model` writes everything the measurement needs into a temporary directory (kernel
objects, constants as ``.npy``, seeded random inputs, the ONNX model for ONNX Runtime and a JSON
manifest with the arena plan and the kernel call list), starts ``python -m compiler.runtime.child``
as a fresh interpreter with ``subprocess`` (Celery's prefork workers are daemonic and
``multiprocessing`` refuses to start children there), and reads back ``result.json``. A crash of
generated code (a signal, a non-zero exit) becomes ``CompileError(stage="run", kernel=...)`` naming the
kernel that was running, read from the child's progress markers; the calling process carries on.

Verification (fp32): with ``o`` ONNX Runtime's output and ``p`` Prism's, ``scale = max|o|`` and
``atol_eff = max(atol * scale, 1e-6)``, an output passes when every element has ``|p - o| <= atol_eff + rtol *
|o|`` (defaults ``rtol = 1e-3``, ``atol = 1e-4``) and both are finite at the same places.
``max_abs_error = max |p - o|``; ``max_rel_error = max |p - o| / max(|o|, atol_eff)``. The 1e-6
floor matters only for outputs whose largest magnitude is below 1e-2: ONNX Runtime's own fp32
activations (MLAS logistic, tanh) are approximations off by up to 1.2e-7 absolute (measured on
PP-OCRv4's sigmoid output, whose values are all below 6e-5 on random input).

Narrow storage types (``storage``, a legalized float16/bfloat16/float8 ... model: ``compiler.api.legalize_model``):
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
import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import CompileError
from ..ir import Graph
from ..loops.lower import KernelArg
from .buffers import running_kernel as _running


def _np_dtype(short: str) -> str:
    return {"f32": "float32", "f64": "float64", "i64": "int64", "i32": "int32", "i8": "int8", "u8": "uint8",
            "bool": "bool"}[short]


def make_inputs(graph: Graph, seed: int = 0, storage: dict[str, int] | None = None) -> dict[str, np.ndarray]:
    """Seeded inputs: standard normal floats, zeros for integer inputs (shapes and dtypes from the
    graph IR). ``storage`` ({input: ONNX elem type}): inputs of a legalized model whose declared type
    is narrow; their values are rounded to that format (``compiler.runtime.narrow_io.storage_inputs``)
    and kept in the IR's compute dtype."""
    rng = np.random.default_rng(seed)
    out = {}
    for v in graph.inputs:
        assert v.type is not None and v.type.is_static
        shape = tuple(int(d) for d in v.type.shape)  # type: ignore[union-attr]
        dt = np.dtype(_np_dtype(v.type.short))
        out[v.name] = rng.standard_normal(shape).astype(dt) if dt.kind == "f" else np.zeros(shape, dt)
    if storage:
        from .narrow_io import storage_inputs

        out = storage_inputs(out, storage)
    return out


def run_model(kernels: list[dict[str, Any]], graph: Graph, plan: Any, model_bytes: bytes, *, verify: bool,
              benchmark: bool, rtol: float = 1e-3, atol: float = 1e-4, budget_s: float = 4.0,
              min_repeats: int = 5, max_repeats: int = 50, timeout_s: float = 900.0,
              trims: list[tuple[int, str, int]] | None = None,
              storage: dict[str, dict[str, int]] | None = None) -> dict[str, Any]:
    """Run ``kernels`` (dicts with ``name``, ``symbol``, ``obj``, ``args``: list of KernelArg) in order.

    ``storage`` (``compiler.api.legalize_model``): ``{"inputs": {name: elem}, "outputs": {name: elem}}``,
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
    ``onnxruntime_ms``). Raises CompileError(stage="run") on a crash (naming the kernel) or a timeout.
    """
    offsets = {b.value: b.offset for b in plan.buffers} if plan is not None else {}
    arena_bytes = int(plan.arena_bytes) if plan is not None else 0
    graph_inputs = {v.name for v in graph.inputs}
    with tempfile.TemporaryDirectory(prefix="prism-run-") as tmp:
        d = Path(tmp)
        symbols: dict[str, bytes] = {}
        values: dict[str, dict[str, Any]] = {}
        consts: dict[str, str] = {}
        const_ids: dict[int, str] = {}
        calls = []
        for k in kernels:
            symbols.setdefault(k["symbol"], k["obj"])
            args = []
            for a in k["args"]:
                a: KernelArg  # type: ignore[no-redef]
                if a.kind == "value":
                    if a.name not in values:
                        kind = "input" if a.name in graph_inputs else "arena" if a.name in offsets else "heap"
                        values[a.name] = {"kind": kind, "dtype": _np_dtype(a.buffer.dtype),
                                          "shape": list(a.buffer.shape), "offset": offsets.get(a.name, 0)}
                    args.append({"kind": "value", "name": a.name})
                elif a.kind == "const":
                    key = const_ids.get(id(a.data))
                    if key is None:
                        key = f"const_{len(const_ids)}.npy"
                        const_ids[id(a.data)] = key
                        np.save(d / key, np.ascontiguousarray(a.data))
                        consts[key] = key
                    args.append({"kind": "const", "file": key})
                else:
                    args.append({"kind": "scratch", "dtype": _np_dtype(a.buffer.dtype), "shape": list(a.buffer.shape)})
            calls.append({"name": k["name"], "symbol": k["symbol"], "args": args})
        for s, obj in symbols.items():
            (d / f"{s}.o").write_bytes(obj)
        storage = storage or {"inputs": {}, "outputs": {}}
        inputs = make_inputs(graph, storage=storage["inputs"])
        for i, (_n, arr) in enumerate(inputs.items()):
            np.save(d / f"input_{i}.npy", arr)
        import onnx

        ort_model = onnx.load_model_from_string(model_bytes)
        ort_feeds = {n: n for n in inputs}
        if storage["inputs"] or storage["outputs"]:  # numpy-readable boundary for ONNX Runtime (narrow_io)
            from .narrow_io import ort_boundary

            ort_model, feeds, _ = ort_boundary(ort_model, storage)
            ort_feeds.update(feeds)
            model_bytes = ort_model.SerializeToString()
        (d / "model.onnx").write_bytes(model_bytes)
        ort_outputs = [o.name for o in ort_model.graph.output]
        outputs = [v.name for v in graph.outputs]
        for o in outputs:
            if o not in values:
                raise CompileError("run", f"graph output %{o} is not written by any kernel")
        man = {"symbols": list(symbols), "arena_bytes": arena_bytes, "values": values, "consts": consts,
               "kernels": calls, "inputs": list(inputs), "outputs": outputs, "ort_outputs": ort_outputs,
               "verify": verify, "benchmark": benchmark, "rtol": rtol, "atol": atol, "budget_s": budget_s,
               "min_repeats": min_repeats, "max_repeats": max_repeats, "trims": [list(t) for t in trims or []],
               "storage": storage, "ort_feeds": ort_feeds, "tolerance": _tolerances(outputs, storage["outputs"], rtol, atol)}
        (d / "manifest.json").write_text(json.dumps(man))
        env = dict(os.environ)
        root = str(Path(__file__).resolve().parents[2])
        env["PYTHONPATH"] = root + os.pathsep + env.get("PYTHONPATH", "")
        try:
            proc = subprocess.run([sys.executable, "-m", "compiler.runtime.child", str(d)], env=env,
                                  capture_output=True, text=True, timeout=timeout_s, cwd=root)
        except subprocess.TimeoutExpired:
            raise CompileError("run", f"the run did not finish within {timeout_s:.0f} s",
                               kernel=_running(d)) from None
        if proc.returncode != 0:
            kernel = _running(d)
            how = (f"killed by {signal.Signals(-proc.returncode).name}" if proc.returncode < 0
                   else f"exited with status {proc.returncode}")
            tail = (proc.stderr.strip().splitlines() or [""])[-1][:300]
            if kernel is None and _finished(d):
                raise CompileError("run", f"the kernels ran, then the measurement process failed ({how}): {tail}")
            where = f"in kernel {kernel}" if kernel else "before the first kernel"
            raise CompileError("run", f"generated code crashed {where}: {how} {tail}".strip(), kernel=kernel)
        return json.loads((d / "result.json").read_text())


def _tolerances(outputs: list[str], storage: dict[str, int], rtol: float, atol: float) -> dict[str, list[float]]:
    """``{output: [rtol, atol]}``: ``rtol``/``atol`` or, for a narrow output, its storage type's."""
    from .narrow_io import tolerance

    return {o: list(tolerance(storage[o])) if o in storage else [rtol, atol] for o in outputs}


def _finished(d: Path) -> bool:
    p = d / "progress"
    return p.exists() and p.read_text().splitlines()[-1:] == ["done"]


