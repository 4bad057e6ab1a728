"""The ``dim-range`` stage's first choice: the batch size as a run-time argument.

For ``--dim-range N=LO..HI`` where ``N`` is axis 0 of every input that names it, the model is
compiled once for ``N = 1`` through lowering (its kernels' loop IR, the ``N = 1`` memory plan) and
once for ``N = HI`` through the graph passes only; :func:`compiler.frontend.batch_split.batch_split`
compares the two graphs. When no node computes across samples, one
:class:`~compiler.runtime.batch.BatchProgram` serves every ``N``: the ``N = 1`` kernels called by the
batch entry function (``compiler.codegen.batch_entry``) in loops bounded by its ``n`` argument.
Otherwise the stage falls back to one compilation per size (``compiler.driver.dim_range``), with
the reason in the ``memory.planned`` event's ``dim_range`` remark.

Kernels take ``N`` inside their loops instead wherever they can (``compiler.driver.batch_kernels``:
lowered from the ``N = HI`` graph and called once; Gemm and MatMul as one GEMM over every sample's
rows, Conv, pooling, normalization and the rest with their loops over samples bounded by ``N``).
Only then is the ``N = 1`` compilation's code generated: the kernels without such a form alone, and
no ``N = 1`` entry function (the batch entry function calls the kernels), so the artifact holds one
object per call plus the batch entry function and nothing is compiled that does not run.

Events: the ``N = 1`` compilation's (its passes, fusion graph, kernels: the kernels that run), its
``memory.planned`` scaled to the maximum (arena and buffer offsets times ``HI``, per-sample buffer
sizes times ``HI``) with ``dim_range`` {dim, min, max, mode "run-time", message}.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from ..codegen.batch_entry import compile_batch_entry
from ..errors import CompileError
from ..events import EventStream
from ..frontend.batch_split import batch_split
from ..frontend.dim_range import ranged_axes, shapes_at
from ..runtime.batch import BatchProgram
from ..runtime.pool import check_threads
from ..targets import get_target
from .batch_kernels import batched_calls, batched_event, batched_kernels
from .lower import codegen
from .run import link_program
from .stages import STAGES, run_stages
from .state import Compilation

_OWN = ("compile.started", "compile.finished", "compile.failed")
_FRONT = tuple(s for s in STAGES if s.name not in ("codegen", "link", "run", "verify"))  # the N = 1 compilation's


def _scaled_plan(e: dict[str, Any], per: frozenset[str], hi: int, message: str) -> dict[str, Any]:
    """The ``N = 1`` ``memory.planned`` payload at ``N = hi`` (module docstring)."""
    bufs = [dict(b, offset=int(b["offset"]) * hi, size=int(b["size"]) * (hi if b["value"] in per else 1))
            for b in e.get("buffers", [])]
    out = {k: v for k, v in e.items() if k not in ("seq", "type", "ts")}
    out.update(arena_bytes=int(e["arena_bytes"]) * hi, buffers=bufs,
               no_sharing_bytes=int(e["no_sharing_bytes"]) * hi, lower_bound_bytes=int(e["lower_bound_bytes"]) * hi)
    out["dim_range"] = {"dim": "", "min": 0, "max": hi, "mode": "run-time", "message": message}
    return out


def _steps(call: dict[str, Any], values: dict[str, dict[str, Any]], per: frozenset[str]) -> list[int]:
    """Bytes of one sample of each argument of an ``N = 1`` call: a per-sample value's size; 0 for a
    shared value or constant; a scratch buffer's size when the call is per-sample (each sample its own
    copy, so that samples may run on several threads at once), else 0."""
    def size(shape: Any, dtype: Any) -> int:
        return int(np.prod(shape, dtype=np.int64)) * np.dtype(dtype).itemsize

    out = [size(values[a["name"]]["shape"], values[a["name"]]["dtype"]) if a["kind"] == "value" and a["name"] in per
           else 0 for a in call["args"]]
    if any(out):
        out = [size(a["shape"], a["dtype"]) if a["kind"] == "scratch" else s for a, s in zip(call["args"], out, strict=True)]
    return out


def _sub(comp: Compilation, shapes: dict[str, list[int]], forward: Callable[[dict[str, Any]], None] | None,
         backend: bool) -> Compilation:
    """``comp`` compiled at ``shapes`` alone: through the graph passes (``backend`` False), or through
    lowering (``backend`` True: :func:`_finish` compiles and links it once the batched kernels are
    known, so that no ``N = 1`` object is built for a kernel its batched form replaces)."""
    req = comp.request
    assert comp.proto is not None
    sub_req = dataclasses.replace(req, model=comp.proto, input_shapes=shapes, dim_ranges=None, input_values=None,
                                  verify=False, benchmark=False, link=backend, backend=backend,
                                  kernel_events=req.kernel_events and backend, check_passes=False)
    sub = Compilation(sub_req, EventStream(forward), stage_ms={})
    run_stages(sub, _FRONT if backend else STAGES)
    for k, v in sub.stage_ms.items():
        comp.stage_ms[k] = comp.stage_ms.get(k, 0.0) + v
    return sub


def _finish(comp: Compilation, unit: Compilation, batched: dict[int, Any]) -> None:
    """``unit.compiled`` and ``unit.program`` (the N = 1 Program): every kernel compiled but those of
    ``batched`` (call index: their batched form's object stands in, and :func:`batched_calls` replaces
    the call), linked without the N = 1 entry function (the batch entry function runs the calls)."""
    assert unit.target is not None and unit.graph is not None and unit.pipeline is not None
    t0 = time.perf_counter()
    codegen(unit, {ci: ck for ci, (_, ck) in batched.items()})
    t1 = time.perf_counter()
    unit.program = link_program(unit.graph, unit.ctx, unit.kernels, unit.compiled, unit.pipeline.text(), unit.target,
                                entry=False)
    comp.stage_ms["codegen"] = comp.stage_ms.get("codegen", 0.0) + (t1 - t0) * 1e3
    comp.stage_ms["run"] = comp.stage_ms.get("run", 0.0) + (time.perf_counter() - t1) * 1e3


def _control_nodes(*comps: Compilation) -> str:
    """The run-time control-flow nodes of the control-flow stage's decisions, by name and op."""
    names = {f"{d.get('op', '')} {d.get('node', '')!r}".strip() for c in comps for d in (c.control or [])}
    return ", ".join(sorted(names)) or "If/Loop/Scan"


def _inside(name: str, batched: dict[int, Any], refused: dict[str, str]) -> str:
    """The remark's words for which kernels take ``name`` inside their loops and which loop per sample."""
    gemm = [lk.name for lk, _ in batched.values() if "batch_loops" not in lk.func.attrs]
    one = len(batched) == 1
    words = (f"{len(batched)} kernel{'' if one else 's'} take{'s' if one else ''} {name} inside {'its' if one else 'their'} "
             f"loops, {len(gemm)} of them GEMM-class (one GEMM over every sample's rows"
             f"{': ' + ', '.join(gemm) if gemm else ''}), the others with their loops over samples bounded by {name}")
    if refused:
        k, why = next(iter(refused.items()))
        words += (f"; {len(refused)} kernel{'s' if len(refused) != 1 else ''} over per-sample buffers loop {name} "
                  f"times ({k}: {why})")
    return words


def compile_batch(comp: Compilation, name: str, lo: int, hi: int) -> str | None:
    """Compile ``comp`` for every ``name`` in ``lo..hi`` as one BatchProgram (module docstring): sets
    ``comp.program`` and the fields the run and verify stages read, emits the events, returns None.
    Returns the reason, emitting nothing, when the model is not separable along ``name`` (then the
    caller compiles per size). Raises the CompileError of the ``N = 1`` or ``N = hi`` compilation."""
    shapes = comp.request.input_shapes or {}
    axes = ranged_axes(shapes, name)
    off = [f"{i!r} (axes {a})" for i, a in axes.items() if a != [0]]
    if off:
        return (f"{name} is not axis 0 alone of input {off[0]}: a dim inside each sample (a sequence length, an "
                "image size) sets the layout of every buffer that holds it (row strides, the extents of its rows and "
                "reductions, such as attention's over keys), which the kernels fix when compiled")
    if hi < 2:
        return f"the range {name}={lo}..{hi} has one size"
    held: list[dict[str, Any]] = []
    try:
        top = _sub(comp, shapes_at(shapes, name, hi), None, backend=False)
        unit = _sub(comp, shapes_at(shapes, name, 1), lambda e: held.append(e) if e["type"] not in _OWN else None,
                    backend=True)
    except CompileError as e:
        return f"compiling N=1 and N={hi} apart: {e.message}"
    if unit.graph is None or top.graph is None:  # the control-flow stage compiled it in parts around an If/Loop/Scan
        return (f"the model has run-time control flow ({_control_nodes(unit, top)}), compiled in parts around it: "
                f"the parts are not one call list that {name} can bound")
    split = batch_split(unit.graph, top.graph, hi)
    if split.reason is not None:
        return split.reason
    not_calls = "the N=1 program is not one call list over tensors (no kernels, run-time control flow, bounded or sequence outputs)"
    if unit.program is not None or not unit.kernels or unit.trims or unit.sequence_layout:
        return not_calls
    target = comp.target or get_target("host")
    refused: dict[str, str] = {}
    t0 = time.perf_counter()
    batched = batched_kernels(unit.kernels, top.graph, split.per_sample, lo, hi, target, refused,
                              comp.request.codegen_threads)
    comp.stage_ms["codegen"] = comp.stage_ms.get("codegen", 0.0) + (time.perf_counter() - t0) * 1e3  # lowering included
    _finish(comp, unit, batched)
    prog = unit.program
    assert prog is not None
    if any(v not in split.per_sample and v not in {x.name for x in unit.graph.values()} for v in prog.values):
        return not_calls
    prog = batched_calls(prog, batched)
    steps = [_steps(c, prog.values, split.per_sample) if ci not in batched else [0] * len(c["args"])
             for ci, c in enumerate(prog.calls)]
    sym, _, obj = compile_batch_entry(prog.calls, prog.values, steps, lo, hi, target)
    batch = BatchProgram(unit=prog, per_sample=split.per_sample, dim=name, lo=lo, hi=hi, batch_entry=sym, steps=steps,
                         pipeline=prog.pipeline, threads=check_threads(comp.request.threads))
    batch.objects[sym] = obj
    message = (f"one set of kernels compiled for {name}=1 serves {name}={lo}..{hi}: {name} is a run-time argument of "
               f"the entry function ({_inside(name, batched, refused)}); arena offsets the {name}=1 plan's times "
               f"{name}; the arena is sized for {name}={hi}")
    by_name = {lk.name: (lk, ck) for lk, ck in batched.values()}
    for ev in held:
        payload = {k: v for k, v in batched_event(ev, by_name).items() if k not in ("seq", "type", "ts")}
        if ev["type"] == "kernel.lowered" and ev.get("kernel") in refused:
            payload["schedule"] += f"\n# batch: one call per sample ({name} calls): {refused[ev['kernel']]}"
        if ev["type"] == "memory.planned":
            payload = _scaled_plan(ev, split.per_sample, hi, message)
            payload["dim_range"].update(dim=name, min=lo)
        comp.events.emit(ev["type"], **payload)
    comp.program = batch
    comp.reference, comp.trims, comp.checks[:] = top.reference, top.trims, top.checks
    comp.flat_outputs, comp.sequence_layout = top.flat_outputs, top.sequence_layout
    comp.graph, comp.ctx = unit.graph, unit.ctx
    comp.kernels = [batched[ci][0] if ci in batched else lk for ci, lk in enumerate(unit.kernels)]
    return None
