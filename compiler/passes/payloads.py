"""The payloads instruments build from the IR and from typed pass results (DESIGN.md "Events").

:func:`graph_stats` (``pass.finished``'s ``stats`` of a graph pass), :func:`fusion_payload`
(``graph.fused``, after a pass that returns a :class:`~compiler.passes.base.FusionResult`) and
:func:`memory_payload` (``memory.planned``, from a :class:`~compiler.passes.base.MemoryPlanResult`).
"""

from __future__ import annotations

from typing import Any

from ..ir import FusedGroup, Graph, Node


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
