"""The driver's ``import``, ``specialize`` and ``passes`` stages: graph IR, shapes, graph pipeline.

``import`` builds the graph IR from the model the model passes left (``compiler.frontend.importer``);
``specialize`` binds the request's input shapes and infers every type (``compiler.frontend.
specialize``); ``passes`` runs the pipeline's graph passes under the pass manager
(``compiler.passes.manager``), with the ``--check-passes`` translation validation after every pass
when asked (:func:`pass_checker`).
"""

from __future__ import annotations

from typing import Any

from onnx import ModelProto

from ..frontend import import_model, specialize
from ..ir import Graph
from ..ops.narrow import DOMAIN
from ..passes.check import PassChecker
from ..passes.instruments import CheckPassesInstrument
from .state import Compilation


def import_graph(comp: Compilation) -> None:
    """Stage ``import``: ``comp.graph`` from ``comp.proto``; the narrow storage types of a legalized
    model go to ``graph.metadata["storage_types"]``."""
    assert comp.proto is not None
    comp.graph = import_model(comp.proto)
    if comp.storage is not None:
        comp.graph.metadata["storage_types"] = comp.storage["io"]


def specialize_graph(comp: Compilation) -> None:
    """Stage ``specialize``: bind the input shapes and infer every type of ``comp.graph``."""
    assert comp.graph is not None
    specialize(comp.graph, comp.request.input_shapes)


def pass_checker(reference: ModelProto, compiled: ModelProto, graph: Graph, input_shapes: Any,
                 records: list[dict[str, Any]], trims: list[tuple[int, str, int]],
                 storage: dict[str, Any] | None) -> PassChecker | None:
    """The ``check_passes`` checker (``compiler.passes.check.PassChecker``), or None when it cannot run.

    A legalized model (``storage``) is checked against its legalized form (``compiled``: the same
    float32 compute, which is what the passes must preserve) when ONNX Runtime can run that: when it
    has no ``prism.NarrowCast`` step (float16). With rounding steps the checks are skipped, and one
    record says why (``{"after": "import", "passed": None, "problem": None, "skipped": reason}``).
    """
    if storage is None:
        return PassChecker(reference, graph, input_shapes, records=records, trims=trims)
    if any(n.domain == DOMAIN for n in compiled.graph.node):
        records.append({"after": "import", "passed": None, "problem": None,
                        "skipped": "the legalized model has prism.NarrowCast rounding steps, which ONNX Runtime "
                                   "cannot run; the passes were not checked"})
        return None
    return PassChecker(compiled, graph, input_shapes, records=records, trims=trims)


def run_graph_passes(comp: Compilation) -> None:
    """Stage ``passes``: the pipeline's graph passes on ``comp.graph`` in place, under the pass
    manager of the ``onnx-passes`` stage (``pass.started`` and ``pass.finished`` per pass,
    ``graph.fused``, ``memory.planned``), with the ``--check-passes`` instrument in front when asked;
    ``comp.ctx`` holds what later stages read (the memory plan). Then ``model.accuracy`` when the
    quantize pass left its report."""
    assert comp.graph is not None and comp.pipeline is not None and comp.reference is not None
    assert comp.passes is not None and comp.ctx is not None
    if comp.request.check_passes:
        assert comp.unbounded is not None
        checker = pass_checker(comp.reference, comp.unbounded, comp.graph, comp.request.input_shapes, comp.checks,
                               comp.trims, comp.storage)
        if checker is not None:
            comp.passes.instruments.insert(0, CheckPassesInstrument(checker.after_pass))
    comp.passes.run_graph(comp.graph, comp.pipeline)
    if comp.ctx.artifacts.accuracy is not None:  # the quantize pass's report (compiler.quant.session)
        comp.events.emit("model.accuracy", **comp.ctx.artifacts.accuracy)
