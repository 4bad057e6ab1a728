"""The IR verifier the pass manager runs after every pass.

Checks, for the graph and recursively for ``If``/``Loop``/``Scan`` bodies and fused-group bodies:
- SSA: every value has at most one producer and its ``producer`` link points at that node; no
  value name is defined twice in a scope;
- use-def links: each node input lists the node among its uses, and vice versa;
- def before use: each input is a graph input, a constant, an output of an earlier node of the
  same graph, or (subgraphs only) a value of an enclosing scope; fused-group bodies are closed;
- types: every input, constant and node output has a type;
- fused groups: body inputs/outputs match the group's inputs/outputs in number and type, and the
  body has at least one node.
Raises :class:`compiler.ir.IRError` with a one-line message naming the node and value.
"""

from __future__ import annotations

from ..ir import FusedGroup, Graph, IRError, Node, Value


def verify_graph(graph: Graph, *, closed: bool = False, outer: set[int] | None = None) -> None:
    """Verify ``graph`` (see module docstring). ``closed``: no outer-scope reads (fused bodies)."""
    defined: set[int] = set(outer or ())
    names: dict[str, Value] = {}

    def define(v: Value, what: str) -> None:
        if v.type is None:
            raise IRError(f"{what} %{v.name} has no type")
        prev = names.get(v.name)
        if prev is not None and prev is not v:
            raise IRError(f"value name %{v.name} is defined twice in @{graph.name}")
        names[v.name] = v
        defined.add(id(v))

    for v in graph.inputs:
        if v.producer is not None:
            raise IRError(f"graph input %{v.name} has a producer ({v.producer.label})")
        define(v, "input")
    for name, v in graph.constants.items():
        if v.const is None:
            raise IRError(f"constant %{name} has no data")
        if v.name != name:
            raise IRError(f"constant table key {name!r} does not match value name %{v.name}")
        if v.producer is not None:
            raise IRError(f"constant %{name} has a producer ({v.producer.label})")
        define(v, "constant")
    for node in graph.nodes:
        _check_node(node, graph, defined, closed)
        for v in node.outputs:
            if v.producer is not node:
                other = v.producer.label if v.producer is not None else "none"
                raise IRError(f"%{v.name} is an output of {node.label} but its producer is {other}")
            if id(v) in defined:
                raise IRError(f"%{v.name} is defined twice (again by {node.label})")
            define(v, f"output of {node.label}:")
    for v in graph.outputs:
        if id(v) not in defined:
            raise IRError(f"graph output %{v.name} of @{graph.name} is not defined in it")


def _check_node(node: Node, graph: Graph, defined: set[int], closed: bool) -> None:
    if node.graph is not None and node.graph is not graph:
        raise IRError(f"{node.label} belongs to @{node.graph.name} but is listed in @{graph.name}")
    for i, v in enumerate(node.inputs):
        if v is None:
            continue
        if (node, i) not in v._uses:
            raise IRError(f"{node.label} input {i} (%{v.name}) is missing from the value's uses")
        if id(v) in defined:
            continue
        if not closed and graph.parent is not None and _in_outer(v, graph):
            continue
        where = "later in the graph" if v.producer is not None and v.producer in graph.nodes else "nowhere in scope"
        raise IRError(f"{node.label} ({node.op_type}) reads %{v.name}, which is defined {where}")
    for u, i in [(n, k) for v in node.outputs for n, k in v._uses]:
        if u.input(i) is None:
            raise IRError(f"stale use of {node.label}'s output by {u.label}")
    for sub in node.subgraphs():
        verify_graph(sub, outer=defined | _outer_ids(graph))
    if isinstance(node, FusedGroup):
        body = node.body
        if not body.nodes:
            raise IRError(f"fused group {node.label} has an empty body")
        if len(body.inputs) != len(node.inputs) or len(body.outputs) != len(node.outputs):
            raise IRError(f"fused group {node.label}: body has {len(body.inputs)} inputs/{len(body.outputs)} outputs "
                          f"for {len(node.inputs)}/{len(node.outputs)} operands")
        for outer_v, inner in list(zip(node.inputs, body.inputs, strict=True)) + list(
                zip(node.outputs, body.outputs, strict=True)):
            if outer_v is not None and outer_v.type != inner.type:
                raise IRError(f"fused group {node.label}: %{inner.name} is {inner.type} but the operand "
                              f"%{outer_v.name} is {outer_v.type}")
        verify_graph(body, closed=True)


def _outer_ids(graph: Graph) -> set[int]:
    out: set[int] = set()
    g = graph.parent
    while g is not None:
        out.update(id(v) for v in g.values())
        g = g.parent
    return out


def _in_outer(v: Value, graph: Graph) -> bool:
    g = graph.parent
    while g is not None:
        if v.graph is g:
            return True
        g = g.parent
    return False
