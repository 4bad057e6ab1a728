"""The pass manager: runs a pipeline with instruments around every pass.

After each pass: an IR snapshot (``print_graph``), the wall time (ms), the changed flag, the
verifier (``compiler.passes.verify``) and the stats; each becomes a ``pass.finished`` event
(DESIGN.md "Events"). After ``fuse-ops`` it emits ``graph.fused``; after ``plan-memory``
``memory.planned`` from ``ctx.artifacts["memory_plan"]``. Models: MLIR's PassInstrumentation,
TVM's ``PassTimingInstrument`` and ``PrintAfterAll``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from ..errors import CompileError
from ..events import EventStream
from ..ir import FusedGroup, Graph, IRError, Node, print_graph
from .base import PassContext
from .pipeline import PassSpec, Pipeline
from .verify import verify_graph

#: called after each pass with (index, spec, graph); may raise CompileError (e.g. --check-passes)
AfterPass = Callable[[int, PassSpec, Graph], None]


def graph_stats(graph: Graph) -> dict[str, int]:
    """``nodes`` (top level, a group counts once), ``ops`` (every op node incl. group bodies and
    subgraphs), ``groups``, ``constants``, ``constant_bytes`` (top-level constants), ``values``."""
    consts = list(graph.constants.values())
    ops = sum(1 for n in graph.walk() if not isinstance(n, FusedGroup))
    return {
        "nodes": len(graph.nodes),
        "ops": ops,
        "groups": len(graph.groups()),
        "constants": len(consts),
        "constant_bytes": int(sum(v.const.nbytes for v in consts if v.const is not None)),
        "values": sum(1 for _ in graph.values()),
    }


def _node_id(n: Node) -> str:
    return n.label


def fusion_payload(graph: Graph) -> dict[str, Any]:
    """The ``graph.fused`` payload: every op node with its group, the edges between op nodes
    (through group boundaries) with the value's dtype and shape, and the groups."""
    nodes: list[dict[str, Any]] = []
    groups: list[dict[str, Any]] = []
    # outer value -> the inner op node producing it / inner consumers
    producer_of: dict[int, Node] = {}
    consumers_of: dict[int, list[Node]] = {}
    for n in graph.nodes:
        if isinstance(n, FusedGroup):
            gid = n.name or n.kernel
            members = [m for m in n.body.nodes]
            groups.append({"id": gid, "kernel": n.kernel, "kind": n.kind, "nodes": [_node_id(m) for m in members]})
            for m in members:
                nodes.append({"id": _node_id(m), "name": m.name, "op_type": m.op_type, "group": gid})
            for outer, inner in zip(n.outputs, n.body.outputs, strict=True):
                if inner.producer is not None:
                    producer_of[id(outer)] = inner.producer
            for outer_in, inner_in in zip(n.inputs, n.body.inputs, strict=True):
                if outer_in is not None:
                    consumers_of.setdefault(id(outer_in), []).extend(inner_in.consumers())
        else:
            nodes.append({"id": _node_id(n), "name": n.name, "op_type": n.op_type, "group": None})
            for v in n.outputs:
                producer_of[id(v)] = n
            for u in n.inputs:
                if u is not None:
                    consumers_of.setdefault(id(u), []).append(n)
    edges: list[dict[str, Any]] = []
    values = {id(v): v for n in graph.nodes for v in n.outputs}
    for g in graph.groups():  # edges inside each group
        for m in g.body.nodes:
            for v in m.outputs:
                for c in v.consumers():
                    edges.append(_edge(m, c, v))
    for vid, src in producer_of.items():
        v = values[vid]
        seen: set[int] = set()
        for dst in consumers_of.get(vid, []):
            if id(dst) not in seen:
                seen.add(id(dst))
                edges.append(_edge(src, dst, v))
    return {"nodes": nodes, "edges": edges, "groups": groups}


def _edge(src: Node, dst: Node, v: Any) -> dict[str, Any]:
    t = v.type
    return {"source": _node_id(src), "target": _node_id(dst), "value": v.name,
            "dtype": t.short if t is not None else None,
            "shape": list(t.shape) if t is not None and t.shape is not None else None}


def memory_payload(plan: Any) -> dict[str, Any] | None:
    """The ``memory.planned`` payload from plan-memory's artifact (a dict or an object with
    ``to_dict()``); None if there is none."""
    if plan is None:
        return None
    data = plan.to_dict() if hasattr(plan, "to_dict") else dict(plan)
    out = {k: data.get(k) for k in ("arena_bytes", "no_sharing_bytes", "lower_bound_bytes", "buffers")}
    out.update({k: v for k, v in data.items() if k not in out})
    return out


def run_pipeline(
    graph: Graph,
    pipeline: Pipeline,
    ctx: PassContext,
    events: EventStream,
    *,
    after_pass: AfterPass | None = None,
    verify: bool = True,
) -> list[dict[str, Any]]:
    """Run every pass of ``pipeline`` on ``graph`` in place, emitting events.

    Returns the ``pass.finished`` payloads. Raises CompileError(stage="passes", pass_name=...)
    when a pass raises or leaves IR the verifier rejects.
    """
    finished: list[dict[str, Any]] = []
    before = print_graph(graph)
    for index, spec in enumerate(pipeline.passes):
        options = spec.effective_options()
        events.emit("pass.started", index=index, name=spec.name, options=options)
        instance = spec.create()
        t0 = time.perf_counter()
        try:
            result = instance.run(graph, ctx)
        except CompileError as exc:
            exc.pass_name = exc.pass_name or spec.name
            exc.stage = "passes"
            raise
        except Exception as exc:
            raise CompileError("passes", f"pass {spec.name} failed: {type(exc).__name__}: {exc}",
                               pass_name=spec.name) from exc
        duration_ms = (time.perf_counter() - t0) * 1000.0
        if verify:
            try:
                verify_graph(graph)
            except IRError as exc:
                raise CompileError("passes", f"IR verification failed after pass {spec.name}: {exc}",
                                   pass_name=spec.name) from None
        ir = print_graph(graph)
        stats = graph_stats(graph)
        stats.update(result.stats)
        stats["ir_changed"] = ir != before
        payload = {
            "index": index, "name": spec.name, "options": options, "duration_ms": round(duration_ms, 3),
            "changed": bool(result.changed), "ir": ir, "stats": stats,
            "remarks": [r.to_dict() for r in result.remarks],
        }
        events.emit("pass.finished", **payload)
        finished.append(payload)
        before = ir
        if spec.name == "fuse-ops":
            events.emit("graph.fused", **fusion_payload(graph))
        if spec.name == "plan-memory":
            mem = memory_payload(ctx.artifacts.get("memory_plan"))
            if mem is not None:
                events.emit("memory.planned", **mem)
        if after_pass is not None:
            after_pass(index, spec, graph)
    return finished
