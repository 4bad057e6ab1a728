"""The driver's ``dim-range`` stage: one artifact for every size of a ranged input dim.

With ``dim_ranges`` (``--dim-range N=1..8``; ``compiler.frontend.dim_range`` checks the request) the
dim is first made a run-time argument (``compiler.driver.batch``: one set of kernels compiled for
``N = 1``, called per sample, for a model whose samples are independent). Where that does not apply,
the model is compiled once per size of the dim, each through every stage of the driver, into one
:class:`~compiler.runtime.dim_range.DimRangeProgram` that picks the compilation of the inputs' size
when it is bound; the ``memory.planned`` event's ``dim_range`` remark says why. The events are then
the largest size's (its passes, fusion, memory plan at the maximum, kernels); the run and
verification stages run it at the maximum. Two ranged dims (a batch dim and one more:
``compiler.frontend.dim_range``) are served by ``compiler.driver.two_dims``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from ..errors import CompileError
from ..events import EventStream
from ..frontend.dim_range import check_dim_ranges, ranged_axes, shapes_at
from ..runtime.dim_range import DimRangeProgram
from ..runtime.pool import check_threads
from .batch import compile_batch
from .stages import run_stages
from .state import Compilation
from .two_dims import compile_two_dims

_OWN = ("compile.started", "compile.finished", "compile.failed")


def _check_fixed_dims(comp: Compilation, shapes: Mapping[str, Sequence[Any]], name: str, lo: int, hi: int) -> None:
    """Raise CompileError(stage="request") when the range sets a dim the model fixes to another size
    (the range named, not only the size that failed: light_shufflenet's input is [1, 3, 224, 224])."""
    if comp.proto is None:
        return
    declared = {v.name: v.type.tensor_type.shape.dim for v in comp.proto.graph.input
                if v.type.HasField("tensor_type") and v.type.tensor_type.HasField("shape")}
    for inp, axes in ranged_axes(shapes, name).items():
        dims = declared.get(inp)
        for i in axes:
            if dims is not None and i < len(dims) and dims[i].HasField("dim_value") and (lo, hi) != (dims[i].dim_value,) * 2:
                raise CompileError("request", f"dim range {name}={lo}..{hi} sets dim {i} of input {inp!r}, which the "
                                   f"model fixes at {dims[i].dim_value}")


def _check_names(comp: Compilation, shapes: Mapping[str, Sequence[Any]]) -> None:
    """Raise CompileError(stage="request") for an ``input_shapes`` name that is no model input, before
    any size is compiled (as ``compiler.frontend.specialize`` words it; not "N=3: ..." at the first size)."""
    if comp.proto is None:
        return
    inits = {t.name for t in comp.proto.graph.initializer}
    names = [v.name for v in comp.proto.graph.input if v.name not in inits]
    for name in shapes:
        if name not in names:
            const = " (it is an initializer, a constant)" if name in inits else ""
            raise CompileError("request", f"input_shapes names {name!r}, which is not a model input{const}; "
                               f"inputs: {', '.join(names) or 'none'}")


def compile_dim_range(comp: Compilation) -> None:
    """Stage ``dim-range``: nothing without a ranged dim; else ``comp.program`` (a DimRangeProgram),
    and ``comp.reference``/``trims``/``flat_outputs``/``sequence_layout`` of the largest size. Raises
    CompileError(stage="request") for a bad range (``compiler.frontend.dim_range``) and the first
    size's CompileError, its message prefixed with the size (``N=3: ...``)."""
    req = comp.request
    shapes = req.input_shapes or {}
    if not req.dim_ranges and not any(isinstance(d, str) for s in shapes.values() for d in s):
        return
    names = check_dim_ranges(shapes, req.dim_ranges)
    assert req.dim_ranges is not None
    _check_names(comp, shapes)
    for d in names:
        _check_fixed_dims(comp, shapes, d, *(int(x) for x in req.dim_ranges[d]))
    if len(names) == 2:
        compile_two_dims(comp, shapes, names)
        return
    (name,) = names
    lo, hi = (int(x) for x in req.dim_ranges[name])
    why = compile_batch(comp, name, lo, hi)
    if why is None:
        return
    remark = {"dim": name, "min": lo, "max": hi, "mode": "specialized",
              "message": f"specialized: one compilation per size of {name} ({hi - lo + 1}), every kernel for its size; "
                         f"{name} is not a run-time argument because {why}"}
    programs: dict[int, Any] = {}
    top: Compilation | None = None
    for n in range(hi, lo - 1, -1):  # the maximum first: its events are the compilation's
        def forward(e: dict[str, Any], n: int = n) -> None:
            if n == hi and e["type"] not in _OWN:
                extra = {"dim_range": remark} if e["type"] == "memory.planned" else {}
                comp.events.emit(e["type"], **{k: v for k, v in e.items() if k not in ("seq", "type", "ts")} | extra)

        assert comp.proto is not None
        sub_req = dataclasses.replace(req, model=comp.proto, input_shapes=shapes_at(shapes, name, n), dim_ranges=None,
                                      input_values=None, verify=False, benchmark=False, link=True,
                                      kernel_events=req.kernel_events and n == hi, check_passes=req.check_passes and n == hi)
        sub = Compilation(sub_req, EventStream(forward), stage_ms={})
        try:
            run_stages(sub)
        except CompileError as e:
            raise CompileError(e.stage, f"{name}={n}: {e.message}", node=e.node, op=e.op, pass_name=e.pass_name,
                               kernel=e.kernel, attribute=e.attribute) from None
        for k, v in sub.stage_ms.items():
            comp.stage_ms[k] = comp.stage_ms.get(k, 0.0) + v
        programs[n] = sub.program
        top = top or sub
    assert top is not None and comp.pipeline is not None
    comp.program = DimRangeProgram(programs=programs, dim=name, lo=lo, hi=hi, axes=ranged_axes(shapes, name),
                                   pipeline=comp.pipeline.text(), threads=check_threads(req.threads))
    comp.reference, comp.trims, comp.checks[:] = top.reference, top.trims, top.checks
    comp.flat_outputs, comp.sequence_layout = top.flat_outputs, top.sequence_layout
    comp.graph, comp.kernels, comp.ctx = top.graph, top.kernels, top.ctx
