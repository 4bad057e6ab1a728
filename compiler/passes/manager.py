"""The pass manager: runs a pipeline's passes with instruments around every pass.

One :class:`PassManager` serves one compilation: :meth:`PassManager.run_model` runs the pipeline's
model passes (level ``onnx``) on the ModelProto before import, :meth:`PassManager.run_graph` its
graph passes on the graph IR, numbering the passes across both, with the same instruments
(``compiler.passes.instruments``: events, IR snapshot, verifier, timing, check-passes). A
``fixed-point`` group (``compiler.passes.pipeline.PassGroup``) runs its passes round after round
until a round changes nothing. Models: MLIR's ``PassManager`` with ``PassInstrumentation``, TVM's
``PassContext(instruments=...)``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from onnx import ModelProto

from ..errors import CompileError
from ..events import EventStream
from ..ir import Graph
from .base import ModelPassResult, PassContext, PassResult
from .instruments import EventInstrument, PassInstrument, PassRun, default_instruments, find
from .payloads import fusion_payload, graph_stats, memory_payload
from .pipeline import PassGroup, PassSpec, Pipeline

__all__ = ["PassManager", "fusion_payload", "graph_stats", "memory_payload", "run_pipeline"]


class PassManager:
    """Runs passes on one compilation's IR with ``instruments`` (outermost first).

    ``ctx`` is shared by every pass; ``index`` is the next pass run's index.
    """

    def __init__(self, ctx: PassContext, instruments: Sequence[PassInstrument]) -> None:
        self.ctx = ctx
        self.instruments = list(instruments)
        self.index = 0

    def run_model(self, model: ModelProto, pipeline: Pipeline) -> ModelProto:
        """Run the model passes (level ``onnx``) of ``pipeline`` on ``model``; returns the model
        they leave (``model`` itself when none changed it; ``model`` is never modified). Raises
        CompileError(pass_name=...) when a pass fails (with the stage its rewrite names, ``import`` or
        ``shape``; ``import`` for an unexpected error) or leaves a broken model (``import``)."""
        ir: Any = model
        for item in pipeline.level("onnx").passes:
            ir = self._run_item(item, ir)
        out: ModelProto = ir
        return out

    def run_graph(self, graph: Graph, pipeline: Pipeline) -> None:
        """Run the graph passes of ``pipeline`` on ``graph`` in place. Raises
        CompileError(stage="passes", pass_name=...) when a pass raises or leaves IR the verifier
        rejects."""
        for item in pipeline.level("graph").passes:
            self._run_item(item, graph)

    def _run_item(self, item: PassSpec | PassGroup, ir: Any) -> Any:
        if isinstance(item, PassSpec):
            return self._run_pass(item, ir, None)[0]
        for rnd in range(1, item.max_iterations + 1):
            changed = False
            for spec in item.passes:
                ir, did = self._run_pass(spec, ir, rnd)
                changed = changed or did
            if not changed:
                break
        return ir

    def _run_pass(self, spec: PassSpec, ir: Any, iteration: int | None) -> tuple[Any, bool]:
        run = PassRun(self.index, spec, spec.effective_options(), spec.level, ir, iteration)
        self.index += 1
        for inst in self.instruments:
            inst.run_before_pass(run)
        result = self._call(spec, ir)
        run.result = result
        if isinstance(result, ModelPassResult):
            run.ir = result.model
        for inst in reversed(self.instruments):
            inst.run_after_pass(run)
        return run.ir, bool(result.changed)

    def _call(self, spec: PassSpec, ir: Any) -> PassResult:
        stage = "import" if spec.level == "onnx" else "passes"
        try:
            instance: Any = spec.create()  # a Pass (ir: Graph) or a ModelPass (ir: ModelProto), as spec.level says
            result: PassResult = instance.run(ir, self.ctx)
        except CompileError as exc:  # a model pass's rewrite names its own stage (import, shape)
            exc.pass_name = exc.pass_name or spec.name
            if spec.level == "graph":
                exc.stage = stage
            raise
        except Exception as exc:
            raise CompileError(stage, f"pass {spec.name} failed: {type(exc).__name__}: {exc}",
                               pass_name=spec.name) from exc
        return result


def run_pipeline(graph: Graph, pipeline: Pipeline, ctx: PassContext, events: EventStream, *,
                 after_pass: Any = None, verify: bool = True) -> list[dict[str, Any]]:
    """Run the graph passes of ``pipeline`` on ``graph`` in place with the default instruments
    (``compiler.passes.instruments.default_instruments``; ``after_pass(index, spec, graph)`` as the
    check-passes hook); the model passes are not run (they rewrite a ModelProto before import).
    Returns the ``pass.finished`` payloads. Raises CompileError as :meth:`PassManager.run_graph`."""
    instruments = default_instruments(events, verify=verify, check=after_pass)
    PassManager(ctx, instruments).run_graph(graph, pipeline)
    emitter = find(instruments, EventInstrument)
    assert isinstance(emitter, EventInstrument)
    return emitter.finished
