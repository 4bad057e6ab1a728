"""Pass instruments: objects the pass manager calls around every pass (MLIR's
``PassInstrumentation``, TVM's ``PassContext(instruments=[...])``).

An instrument implements :meth:`PassInstrument.run_before_pass` and/or
:meth:`PassInstrument.run_after_pass`; both get the :class:`PassRun` of one pass (its index, spec,
level, the IR, and what the instruments before it recorded). The manager calls ``run_before_pass``
in the order the instruments are given and ``run_after_pass`` in the reverse order (the first
instrument wraps all the others, as MLIR nests them), so :func:`default_instruments` lists the
event emitter before the snapshot, the verifier and the timer: the pass's time excludes the
snapshot and the verification, and ``pass.finished`` carries all three. The instruments:

- :class:`TimingInstrument`: the pass's wall time (``duration_ms``); keeps every pass's time.
- :class:`VerifierInstrument`: the IR verifier (``compiler.passes.verify`` for the graph IR,
  ``compiler.passes.model_ir.verify_model`` for an ONNX model); raises CompileError naming the pass.
- :class:`SnapshotInstrument`: the printed IR after the pass (graph IR printer or
  ``onnx.printer`` text), its stats and whether the text changed.
- :class:`EventInstrument`: ``pass.started`` / ``pass.finished``, and the events of typed results:
  ``graph.fused`` after a :class:`~compiler.passes.base.FusionResult`, ``memory.planned`` after a
  :class:`~compiler.passes.base.MemoryPlanResult`.
- :class:`CheckPassesInstrument`: ``--check-passes`` translation validation after each graph pass
  (``compiler.passes.check.PassChecker``).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from onnx import ModelProto

from ..errors import CompileError
from ..events import EventStream
from ..ir import Graph, IRError, print_graph
from .base import FusionResult, MemoryPlanResult, PassResult
from .model_ir import model_stats, print_model, verify_model
from .payloads import fusion_payload, graph_stats, memory_payload
from .pipeline import PassSpec
from .verify import verify_graph


@dataclass
class PassRun:
    """One run of one pass, as the instruments see it.

    Attributes:
        index: the run's position in the whole pipeline (0-based; a fixed-point group's passes get
            one index per round they run in).
        spec: the pass and its options; ``options`` every option with its value.
        level: ``onnx`` (``ir`` is a ModelProto) or ``graph`` (``ir`` is the Graph).
        ir: before the pass, its input; after it, the IR it left (the new ModelProto of a model pass).
        iteration: the round of the fixed-point group the run belongs to (None outside a group).
        result: the pass's result (after it).
        duration_ms: the pass's wall time (set by :class:`TimingInstrument`).
        text: the printed IR after the pass; ``stats`` its stats (set by :class:`SnapshotInstrument`).
    """

    index: int
    spec: PassSpec
    options: dict[str, Any]
    level: str
    ir: Graph | ModelProto
    iteration: int | None = None
    result: PassResult | None = None
    duration_ms: float = 0.0
    text: str = ""
    stats: dict[str, Any] = field(default_factory=dict)


class PassInstrument:
    """Base class: both hooks do nothing. Raise CompileError from a hook to stop the pipeline."""

    def run_before_pass(self, run: PassRun) -> None:
        """Called before the pass runs."""

    def run_after_pass(self, run: PassRun) -> None:
        """Called after the pass ran (``run.result`` and ``run.ir`` set)."""


class TimingInstrument(PassInstrument):
    """Times each pass (wall clock, ms) into ``run.duration_ms``; ``timings`` keeps
    ``[(index, name, ms)]`` (TVM's ``PassTimingInstrument``, MLIR's ``-mlir-timing``)."""

    def __init__(self) -> None:
        self.timings: list[tuple[int, str, float]] = []
        self._t0 = 0.0

    def run_before_pass(self, run: PassRun) -> None:
        self._t0 = time.perf_counter()

    def run_after_pass(self, run: PassRun) -> None:
        run.duration_ms = (time.perf_counter() - self._t0) * 1000.0
        self.timings.append((run.index, run.spec.name, run.duration_ms))


class VerifierInstrument(PassInstrument):
    """Verifies the IR after each pass; raises CompileError(stage ``passes`` for a graph pass,
    ``import`` for a model pass) naming the pass and the broken value."""

    def run_after_pass(self, run: PassRun) -> None:
        try:
            if isinstance(run.ir, ModelProto):
                verify_model(run.ir)
            else:
                verify_graph(run.ir)
        except IRError as exc:
            stage = "import" if run.level == "onnx" else "passes"
            raise CompileError(stage, f"IR verification failed after pass {run.spec.name}: {exc}",
                               pass_name=run.spec.name) from None


class SnapshotInstrument(PassInstrument):
    """Prints the IR after each pass into ``run.text`` with its stats (``run.stats``: the IR's
    counts, the pass's own stats, ``ir_changed``: the text differs from the snapshot before, of
    the same level). An unchanged model (the pass returned its input) is not printed again."""

    def __init__(self) -> None:
        self._last: dict[str, tuple[Any, str]] = {}  # level -> (IR object, text)

    def run_before_pass(self, run: PassRun) -> None:
        if run.level not in self._last:
            self._last[run.level] = (run.ir, self._print(run.ir))

    def run_after_pass(self, run: PassRun) -> None:
        obj, before = self._last[run.level]
        text = before if isinstance(run.ir, ModelProto) and run.ir is obj else self._print(run.ir)
        self._last[run.level] = (run.ir, text)
        run.text = text
        stats: dict[str, Any] = model_stats(run.ir) if isinstance(run.ir, ModelProto) else graph_stats(run.ir)
        stats.update(run.result.stats if run.result is not None else {})
        stats["ir_changed"] = text != before
        run.stats = stats

    @staticmethod
    def _print(ir: Graph | ModelProto) -> str:
        return print_model(ir) if isinstance(ir, ModelProto) else print_graph(ir)


#: typed result -> (event type, payload builder): the events a result brings (not pass names)
RESULT_EVENTS: tuple[tuple[type[PassResult], str, Callable[[PassRun], dict[str, Any] | None]], ...] = (
    (FusionResult, "graph.fused", lambda run: fusion_payload(run.ir)),  # type: ignore[arg-type]
    (MemoryPlanResult, "memory.planned", lambda run: memory_payload(getattr(run.result, "plan", None))),
)


class EventInstrument(PassInstrument):
    """Emits ``pass.started`` before and ``pass.finished`` after each pass (DESIGN.md "Events"; with
    ``level`` and, in a fixed-point group, ``iteration``), then the events of its typed result
    (:data:`RESULT_EVENTS`). ``finished`` keeps the ``pass.finished`` payloads."""

    def __init__(self, events: EventStream) -> None:
        self.events = events
        self.finished: list[dict[str, Any]] = []

    def _head(self, run: PassRun) -> dict[str, Any]:
        head = {"index": run.index, "name": run.spec.name, "options": run.options, "level": run.level}
        if run.iteration is not None:
            head["iteration"] = run.iteration
        return head

    def run_before_pass(self, run: PassRun) -> None:
        self.events.emit("pass.started", **self._head(run))

    def run_after_pass(self, run: PassRun) -> None:
        result = run.result
        assert result is not None
        payload = {**self._head(run), "duration_ms": round(run.duration_ms, 3), "changed": bool(result.changed),
                   "ir": run.text, "stats": run.stats, "remarks": [r.to_dict() for r in result.remarks]}
        self.events.emit("pass.finished", **payload)
        self.finished.append(payload)
        for cls, etype, build in RESULT_EVENTS:
            if isinstance(result, cls):
                data = build(run)
                if data is not None:
                    self.events.emit(etype, **data)


class CheckPassesInstrument(PassInstrument):
    """``--check-passes``: after each graph pass, ``check(index, spec, graph)`` (a
    ``compiler.passes.check.PassChecker.after_pass``), which raises CompileError on a mismatch; with
    ``model_check``, after each model pass ``model_check(index, spec, model, changed)``
    (``compiler.passes.check.ModelChecker.after_pass``). Either may be None."""

    def __init__(self, check: Callable[[int, PassSpec, Graph], None] | None,
                 model_check: Callable[[int, PassSpec, ModelProto, bool], None] | None = None) -> None:
        self.check = check
        self.model_check = model_check

    def run_after_pass(self, run: PassRun) -> None:
        if isinstance(run.ir, Graph) and self.check is not None:
            self.check(run.index, run.spec, run.ir)
        elif isinstance(run.ir, ModelProto) and self.model_check is not None:
            self.model_check(run.index, run.spec, run.ir, bool(run.result is not None and run.result.changed))


def default_instruments(events: EventStream, *, verify: bool = True,
                        check: Callable[[int, PassSpec, Graph], None] | None = None) -> list[PassInstrument]:
    """The instruments of a compilation, outermost first: check-passes (when ``check``), events,
    snapshot, verifier (when ``verify``), timing."""
    out: list[PassInstrument] = [CheckPassesInstrument(check)] if check is not None else []
    out += [EventInstrument(events), SnapshotInstrument()]
    if verify:
        out.append(VerifierInstrument())
    out.append(TimingInstrument())
    return out


def find(instruments: Sequence[PassInstrument], kind: type[PassInstrument]) -> PassInstrument | None:
    """The first instrument of type ``kind``."""
    return next((i for i in instruments if isinstance(i, kind)), None)
