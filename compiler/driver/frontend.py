"""The driver's ``import``, ``specialize`` and ``passes`` stages: graph IR, shapes, graph pipeline.

``import`` builds the graph IR from the rewritten model (``compiler.frontend.importer``);
``specialize`` binds the request's input shapes and infers every type (``compiler.frontend.
specialize``), then rewrites data-dependent graph outputs into their bounded form (:func:`bound_model`);
``passes`` runs the graph pipeline under the pass manager (``compiler.passes.manager``), with the
``--check-passes`` translation validation after every pass when asked (:func:`pass_checker`).
"""

from __future__ import annotations

from typing import Any

from onnx import ModelProto

from ..frontend import import_model, specialize
from ..frontend.bounded import BOUNDED_OPS, bound_outputs
from ..frontend.bounded_flow import bound_flow
from ..ir import Graph
from ..ops.narrow import DOMAIN
from ..passes import PassContext
from ..passes.check import PassChecker
from ..passes.manager import run_pipeline
from .state import Compilation


def import_graph(comp: Compilation) -> None:
    """Stage ``import``: ``comp.graph`` from ``comp.proto``; the narrow storage types of a legalized
    model go to ``graph.metadata["storage_types"]``."""
    assert comp.proto is not None
    comp.graph = import_model(comp.proto)
    if comp.storage is not None:
        comp.graph.metadata["storage_types"] = comp.storage["io"]


def bound_model(proto: ModelProto, graph: Graph) -> tuple[ModelProto, list[tuple[int, str, int]]]:
    """``proto`` with its data-dependent graph outputs in bounded form (``compiler.frontend.bounded``).

    A NonZero, Compress, Unique or NonMaxSuppression whose results are graph outputs read by no other
    node becomes its result padded to an upper bound plus an int64 count output (appended after the
    graph outputs); ``graph`` is ``proto`` imported and specialized, read for the shapes and dtypes of
    its values. When such a result is read by further nodes, the padding is carried through them
    (``compiler.frontend.bounded_flow``), and the graph outputs still padded are trimmed alike (a
    result whose shape inference found static, its input being known, is left to constant folding).
    Returns ``(model, trims)`` as :func:`compiler.frontend.bounded.bound_outputs` (the
    model unchanged and ``[]`` when no node applies); the runtime cuts each output to its count with
    :func:`compiler.frontend.bounded.trim_outputs`. Raises CompileError(stage="shape") naming a node
    that reads a padded result in a way that cannot be kept exact.
    """
    outs = {o.name for o in proto.graph.output}
    bounded = [n for n in proto.graph.node if n.op_type in BOUNDED_OPS]
    read = {i for n in proto.graph.node for i in n.input}
    if not any(o in outs or o in read for n in bounded for o in n.output):
        return proto, []
    shapes, dtypes = static_types(graph)
    if any(o in read and o not in shapes for n in bounded for o in n.output):  # data-dependent results read further
        return bound_flow(proto, shapes, dtypes, value_types)
    return bound_outputs(proto, shapes, dtypes)


def static_types(graph: Graph) -> tuple[dict[str, list[int]], dict[str, Any]]:
    """``({value: static shape}, {value: numpy dtype})`` of ``graph``'s statically typed values."""
    typed = [v for v in graph.values() if v.type is not None and v.type.is_static]
    return ({v.name: [int(d) for d in v.type.shape] for v in typed},  # type: ignore[union-attr]
            {v.name: v.type.dtype for v in typed})  # type: ignore[union-attr]


def value_types(proto: ModelProto) -> dict[str, tuple[list[Any], Any]]:
    """``{value: (shape, numpy dtype)}`` of every value of ``proto`` with a known rank (dims int, or
    str where symbolic), from Prism's import and specialization; the inputs' shapes are those the model
    declares (``compiler.driver.prepare`` writes the request's into it)."""
    graph = import_model(proto)
    specialize(graph, None)
    return {v.name: (list(v.type.shape), v.type.dtype) for v in graph.values()
            if v.type is not None and v.type.shape is not None}


def specialize_graph(comp: Compilation) -> None:
    """Stage ``specialize``: bind the input shapes and infer every type of ``comp.graph``; bounded
    outputs (:func:`bound_model`) replace ``comp.proto`` and ``comp.graph`` and set ``comp.trims``."""
    assert comp.graph is not None and comp.proto is not None
    shapes = comp.request.input_shapes
    specialize(comp.graph, shapes)
    comp.unbounded = comp.proto
    comp.proto, comp.trims = bound_model(comp.proto, comp.graph)
    if comp.trims:  # the padded form is what the passes, the IR printer and the back end see
        import_graph(comp)
        specialize(comp.graph, shapes)


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
    """Stage ``passes``: ``comp.pipeline`` on ``comp.graph`` in place (``pass.started`` and
    ``pass.finished`` per pass, ``graph.fused``, ``memory.planned``); ``comp.ctx`` holds what later
    stages read (the memory plan)."""
    assert comp.graph is not None and comp.pipeline is not None and comp.reference is not None
    comp.ctx = PassContext(target=comp.request.target)
    if comp.request.calibration_data is not None:
        comp.ctx.artifacts["calibration_data"] = comp.request.calibration_data
    after = None
    if comp.request.check_passes:
        assert comp.unbounded is not None
        checker = pass_checker(comp.reference, comp.unbounded, comp.graph, comp.request.input_shapes, comp.checks,
                               comp.trims, comp.storage)
        after = checker.after_pass if checker is not None else None
    run_pipeline(comp.graph, comp.pipeline, comp.ctx, comp.events, after_pass=after)
    if comp.ctx.artifacts.get("accuracy") is not None:  # the quantize pass's report (compiler.quant.session)
        comp.events.emit("model.accuracy", **comp.ctx.artifacts["accuracy"])
