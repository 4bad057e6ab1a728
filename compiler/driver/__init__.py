"""The one compile driver (CONVENTIONS 13): every entry point runs :data:`STAGES` through
:func:`run_stages` (``compiler.driver.stages`` lists them and says where each lives).

:func:`compile_model` is ``compiler.compile`` (events, a :class:`~compiler.result.CompileResult`,
never raises for a compile error); :func:`compile_program` is the ONNX backend's compile (no run:
the linked :class:`~compiler.runtime.program.Program`, which the backend executes on its inputs).
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

from ..errors import CompileError
from ..events import STAGE_KEYS, EventCallback, EventStream
from ..frontend import ModelSource
from ..result import CompileResult
from .stages import STAGES, Stage, run_stages
from .state import Compilation, Request

__all__ = ["STAGES", "STAGE_KEYS", "Compilation", "Request", "Stage", "compile_model", "compile_program",
           "run_stages"]


def compile_model(request: Request, on_event: EventCallback | None = None) -> CompileResult:
    """Run every stage for ``request``, emitting the events of DESIGN.md "Events" through ``on_event``.

    Never raises a CompileError: a failure ends in ``compile.failed`` (its stage, message and, where
    known, pass, node, op, kernel) and ``result.error``; the result always holds exactly one terminal
    event. ``result.stage_ms`` has every key of :data:`STAGE_KEYS` (0.0 for a stage that did not run).
    """
    events = EventStream(on_event)
    comp = Compilation(request, events, stage_ms={k: 0.0 for k in STAGE_KEYS})
    result = CompileResult(events=events.events, target=request.target, stage_ms=comp.stage_ms,
                           checks=comp.checks)
    t_start = time.perf_counter()
    try:
        run_stages(comp)
    except CompileError as exc:
        payload: dict[str, Any] = exc.to_dict()
        _collect(result, comp)
        result.error = payload
        result.duration_ms = round((time.perf_counter() - t_start) * 1000.0, 3)
        events.emit("compile.failed", **payload)
        return result
    _collect(result, comp)
    result.duration_ms = round((time.perf_counter() - t_start) * 1000.0, 3)
    events.emit("compile.finished", duration_ms=result.duration_ms,
                stage_ms={k: round(v, 3) for k, v in comp.stage_ms.items()})
    result.ok = True
    return result


def _collect(result: CompileResult, comp: Compilation) -> None:
    result.pipeline = comp.pipeline.text() if comp.pipeline is not None else ""
    result.model = comp.model
    result.graph = comp.graph


def compile_program(model: ModelSource, input_shapes: Mapping[str, Sequence[int]] | None, *, pipeline: str = "O2",
                    target: str = "host", input_values: Mapping[str, Any] | None = None) -> Compilation:
    """Compile ``model`` (ModelProto, bytes or path) for ``input_shapes`` ({input: shape}) up to a linked
    Program, as the ONNX backend needs it: no run or verification, no kernel events, one codegen
    thread, models below opset 7 upgraded; ``input_values`` binds inputs to constants as
    ``compiler.compile`` does (the Program no longer takes them). Returns the :class:`Compilation`: ``.program``, ``.trims``
    (bounded outputs to cut to their counts), ``.flat_outputs`` and ``.sequence_layout`` (sequence
    outputs to rebuild, ``compiler.frontend.sequence_io``).

    Raises CompileError with the failing stage (``import``, ``shape``, ``passes``, ``lowering``,
    ``codegen``); an unexpected internal error is wrapped as CompileError with its type and message.
    """
    request = Request(model, target=target, pipeline=pipeline, input_shapes=input_shapes,
                      input_values=input_values, verify=False,
                      benchmark=False, link=True, upgrade_opset=True, kernel_events=False, codegen_threads=1)
    comp = Compilation(request, EventStream(None))
    run_stages(comp)
    return comp
