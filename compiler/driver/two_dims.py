"""Two ranged dims in one artifact: the batch a run-time argument, the other dim specialized.

``--input-shape x=N,S,64 --dim-range N=1..8 --dim-range S=16..32`` (``compiler.frontend.dim_range``
accepts two ranged dims when one is the batch: axis 0 alone of every input naming it) compiles the
model once per size of the other dim ``S``, each compilation itself a ranged one over ``N``
(``compiler.driver.dim_range``: ``N`` a run-time argument where the samples are independent), into
one :class:`~compiler.runtime.dim_range.DimRangeProgram` keyed by ``S`` whose programs serve every
``N`` (as TensorRT's optimization profiles cover a sequence length per profile). Kernels taking
``S`` as a run-time parameter are not implemented: ``S`` changes the shapes every kernel is
specialized to (attention's S x S scores, the token rows of each GEMM).

When ``N`` cannot be a run-time argument, each size of ``S`` compiles once per ``N``: more than
:data:`~compiler.frontend.dim_range.MAX_SIZES` compilations in all is refused, naming both ranges.
The events are those of the largest ``S`` (its memory plan's ``dim_range`` remark says how both
dims are served); the run and verification stages run it at the maximum of both.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from ..errors import CompileError
from ..events import EventStream
from ..frontend.dim_range import MAX_SIZES, batch_dim, ranged_axes, sizes_at
from ..runtime.batch import BatchProgram
from ..runtime.dim_range import DimRangeProgram
from ..runtime.pool import check_threads
from .stages import run_stages
from .state import Compilation

_OWN = ("compile.started", "compile.finished", "compile.failed")


def compile_two_dims(comp: Compilation, shapes: Mapping[str, Sequence[Any]], names: Sequence[str]) -> None:
    """Serve the two ranged dims ``names`` (module docstring): sets ``comp.program`` and what the run
    and verify stages read. Raises a size's CompileError prefixed with it (``S=16: ...``), and
    CompileError(stage="request") when the compilations would be more than MAX_SIZES."""
    req = comp.request
    assert req.dim_ranges is not None and comp.proto is not None and comp.pipeline is not None
    batch = batch_dim(shapes, names)
    assert batch is not None  # check_dim_ranges refused the request otherwise
    (other,) = (d for d in names if d != batch)
    lo, hi = (int(x) for x in req.dim_ranges[other])
    blo, bhi = (int(x) for x in req.dim_ranges[batch])
    programs: dict[int, Any] = {}
    top: Compilation | None = None
    for s in range(hi, lo - 1, -1):  # the maximum first: its events are the compilation's
        def forward(e: dict[str, Any], s: int = s) -> None:
            if s != hi or e["type"] in _OWN:
                return
            payload = {k: v for k, v in e.items() if k not in ("seq", "type", "ts")}
            if e["type"] == "memory.planned" and "dim_range" in payload:
                inner = payload["dim_range"]
                payload["dim_range"] = dict(inner, message=f"{other}={lo}..{hi} specialized: one compilation per size "
                                            f"of {other} ({hi - lo + 1}), each serving {batch}={blo}..{bhi}; "
                                            f"{inner['message']}")
            comp.events.emit(e["type"], **payload)

        sub_req = dataclasses.replace(req, model=comp.proto, input_shapes=sizes_at(shapes, {other: s}),
                                      dim_ranges={batch: (blo, bhi)}, input_values=None, verify=False, benchmark=False,
                                      link=True, kernel_events=req.kernel_events and s == hi,
                                      check_passes=req.check_passes and s == hi)
        sub = Compilation(sub_req, EventStream(forward), stage_ms={})
        try:
            run_stages(sub)
        except CompileError as e:
            raise CompileError(e.stage, f"{other}={s}: {e.message}", node=e.node, op=e.op, pass_name=e.pass_name,
                               kernel=e.kernel, attribute=e.attribute) from None
        count = (hi - lo + 1) * (1 if isinstance(sub.program, BatchProgram) else bhi - blo + 1)
        if count > MAX_SIZES and not isinstance(sub.program, BatchProgram):
            raise CompileError("request", f"dim ranges {batch}={blo}..{bhi}, {other}={lo}..{hi}: at {other}={s} {batch} "
                               f"is not a run-time argument (its samples are not independent), and one compilation "
                               f"per pair of sizes would be {count}, above the limit of {MAX_SIZES}")
        for k, v in sub.stage_ms.items():
            comp.stage_ms[k] = comp.stage_ms.get(k, 0.0) + v
        programs[s] = sub.program
        top = top or sub
    assert top is not None
    comp.program = DimRangeProgram(programs=programs, dim=other, lo=lo, hi=hi, axes=ranged_axes(shapes, other),
                                   pipeline=comp.pipeline.text(), threads=check_threads(req.threads))
    comp.reference, comp.trims, comp.checks[:] = top.reference, top.trims, top.checks
    comp.flat_outputs, comp.sequence_layout = top.flat_outputs, top.sequence_layout
    comp.graph, comp.kernels, comp.ctx = top.graph, top.kernels, top.ctx
