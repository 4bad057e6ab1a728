"""Rewrite helpers for passes: turn a value into a constant, forward a value to another while
keeping graph-output names, drop a node with its subgraphs, and move nodes into a fused group.

These keep the IR's invariants (use-def links, name tables, graph-output names) so that passes
do not touch ``Graph`` internals. Every helper documents which names it keeps.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .graph import FusedGroup, Graph, IRError, Node, Value
from .types import TensorType


def set_constant(graph: Graph, value: Value, data: np.ndarray) -> None:
    """Make ``value`` (a node output of ``graph``) a constant holding ``data``, in place.

    The producing node must already have been removed. The value keeps its name, its uses and its
    place among the graph outputs; its type becomes ``data``'s dtype and shape.
    """
    if value.producer is not None:
        raise IRError(f"%{value.name} is still produced by {value.producer.label}")
    data = np.asarray(data)
    value.const = data
    value.type = TensorType.of(data.dtype, data.shape)
    graph.bind_name(value)
    graph.constants[value.name] = value


def rename_value(graph: Graph, value: Value, new_name: str) -> None:
    """Rename ``value`` in ``graph``'s scope, re-keying ``graph.constants`` for a constant."""
    if value.name == new_name:
        return
    was_const = graph.constants.get(value.name) is value
    if was_const:
        del graph.constants[value.name]
    graph.rename(value, new_name)
    if was_const:
        graph.constants[new_name] = value


def is_interface(graph: Graph, value: Value) -> bool:
    """True for a graph input or output of ``graph`` (its name is part of the model's interface)."""
    return any(v is value for v in graph.inputs) or any(v is value for v in graph.outputs)


def forward_value(graph: Graph, old: Value, new: Value) -> bool:
    """Replace every use of ``old`` by ``new`` (``old``'s producer is about to be removed).

    If ``old`` is a graph output, the output keeps its name: ``new`` is renamed to it, which is
    only possible when ``new`` is neither a graph input nor already a graph output. Returns False
    (and changes nothing) when the output name cannot be kept.
    """
    if any(v is old for v in graph.outputs):
        if is_interface(graph, new) or new.graph is not graph:
            return False
        name = old.name
        old.replace_all_uses_with(new)
        # free the name: the old value's producer is removed by the caller right after
        graph.release_name(old)
        old.name = f"{name}.dead"
        rename_value(graph, new, name)
        return True
    old.replace_all_uses_with(new)
    return True


def drop_deep(node: Node) -> None:
    """Drop the inputs of ``node`` and of every node in its subgraphs (releases outer uses)."""
    for g in node.subgraphs():
        for inner in list(g.nodes):
            drop_deep(inner)
    node.drop_inputs()


def remove_node_deep(graph: Graph, node: Node) -> None:
    """Remove a node whose outputs are unused, releasing uses made inside its subgraphs."""
    for g in node.subgraphs():
        for inner in list(g.nodes):
            drop_deep(inner)
    graph.remove_node(node)


def group_nodes(graph: Graph, nodes: Sequence[Node], *, kind: str, kernel: str) -> FusedGroup:
    """Move ``nodes`` (of ``graph``, any order) into a new :class:`FusedGroup` named ``kernel``.

    The body is a closed graph named ``kernel`` with its own name table. Its inputs are the values
    the nodes read from outside the group (graph inputs, constants and other nodes' outputs), under
    the same names; its outputs are the values used outside the group or returned by the graph.
    Inside the body, nodes keep their names and attributes, in the graph's topological order. The
    outer values keep their identity and names: the group becomes their producer, so their other
    consumers are untouched. The group is placed where its last node was; the caller runs
    ``graph.topological_sort()`` once all groups are made.
    """
    order = {id(n): i for i, n in enumerate(graph.nodes)}
    members = sorted(nodes, key=lambda n: order[id(n)])
    member_ids = {id(n) for n in members}
    for n in members:
        if n.subgraphs() or isinstance(n, FusedGroup):
            raise IRError(f"cannot fuse {n.label}: it holds a subgraph or is already a group")
    produced = {id(v) for n in members for v in n.outputs}
    outputs_set = {id(v) for v in graph.outputs}

    body = Graph(kernel)
    body.opset_imports = dict(graph.opset_imports)
    inner: dict[int, Value] = {}
    outer_inputs: list[Value] = []
    for n in members:
        for v in n.inputs:
            if v is not None and id(v) not in produced and id(v) not in inner:
                inner[id(v)] = body.add_input(v.name, v.type)
                outer_inputs.append(v)

    exposed: list[Value] = []
    for n in members:
        for v in n.outputs:
            used_outside = any(id(c) not in member_ids for c, _ in v.uses())
            if used_outside or id(v) in outputs_set:
                exposed.append(v)

    last = members[-1]
    anchor_index = order[id(last)]
    for n in members:
        ins = [None if v is None else inner[id(v)] for v in n.inputs]
        outs = [Value(v.name, v.type) for v in n.outputs]
        for v, o in zip(n.outputs, outs, strict=True):
            inner[id(v)] = o
        clone = Node(n.op_type, ins, outs, n.attrs, name=n.name, domain=n.domain)
        body.insert(clone)
    body.outputs = [inner[id(v)] for v in exposed]

    for n in members:
        n.drop_inputs()
    exposed_ids = {id(v) for v in exposed}
    position = sum(1 for n in graph.nodes[:anchor_index] if id(n) not in member_ids)
    for n in members:
        graph.nodes.remove(n)
        graph.release_node_name(n.name)
        for v in n.outputs:
            v.producer = None
            if id(v) not in exposed_ids:
                graph.release_name(v)
        n.graph = None
    group = FusedGroup(body, outer_inputs, exposed, kind=kind, kernel=kernel, name=kernel)
    group.graph = graph
    group.name = graph.claim_node_name(kernel)
    for v in exposed:
        graph.bind_name(v)
    graph.nodes.insert(position, group)
    return group
