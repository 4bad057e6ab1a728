"""Graph IR: values, nodes and graphs with use-def links kept by the IR.

A :class:`Graph` holds :class:`Node` s in topological order, its input and output
:class:`Value` s, and constants (ONNX initializers and folded values). Producer and consumer links
are maintained here, never by passes: passes call :meth:`Graph.add_node`, :meth:`Node.set_input`,
:meth:`Value.replace_all_uses_with` and :meth:`Graph.remove_node`.

A node is an ONNX op (``op_type``, ``domain``, attributes as plain Python values, ``numpy`` arrays
for tensor attributes and :class:`Graph` for subgraph attributes of ``If``/``Loop``/``Scan``) or a
:class:`FusedGroup` whose ``body`` is a closed graph that becomes one kernel.

Scoping: ``If``/``Loop`` subgraphs share the name table of their outer graph (they may read outer
values by name, as in ONNX); a fused group's body is a function with a name table of its own.
Model: onnx-ir's ``Value.producer()/consumers()/replace_all_uses_with()``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import numpy as np

from .scope import IRError, Scope
from .types import TensorType


def as_text(v: Any) -> str:
    """An ONNX STRING attribute value as ``str``: bytes (as ``onnx.helper.get_attribute_value``
    returns them) decoded as UTF-8, anything else through ``str``."""
    return v.decode() if isinstance(v, bytes) else str(v)


class Value:
    """A tensor value: graph input, constant, or a node output.

    Attributes:
        name: unique within its scope; comes from the ONNX model where it has one.
        type: its :class:`TensorType`, or ``None`` before inference.
        const: the data (``numpy.ndarray``) for a constant, else ``None``.
        producer: the node that computes it (``None`` for inputs and constants).
    """

    __slots__ = ("name", "type", "const", "producer", "_uses", "graph")

    def __init__(self, name: str, type: TensorType | None = None, const: np.ndarray | None = None):
        self.name = name
        self.type = type
        self.const = const
        self.producer: Node | None = None
        self._uses: list[tuple[Node, int]] = []
        self.graph: Graph | None = None

    @property
    def is_constant(self) -> bool:
        return self.const is not None

    def uses(self) -> list[tuple[Node, int]]:
        """(consumer node, input index) pairs, in the order they were made."""
        return list(self._uses)

    def consumers(self) -> list[Node]:
        """Distinct consumer nodes, in first-use order."""
        seen: dict[int, Node] = {}
        for node, _ in self._uses:
            seen.setdefault(id(node), node)
        return list(seen.values())

    def replace_all_uses_with(self, other: Value) -> None:
        """Make every consumer (and graph output slot) read ``other`` instead of this value."""
        for node, idx in list(self._uses):
            node.set_input(idx, other)
        if self.graph is not None:
            self.graph.outputs = [other if v is self else v for v in self.graph.outputs]

    def __repr__(self) -> str:
        return f"Value(%{self.name}: {self.type})"


class Node:
    """One operation. ``inputs`` may hold ``None`` for an omitted optional input."""

    def __init__(
        self,
        op_type: str,
        inputs: Sequence[Value | None],
        outputs: Sequence[Value],
        attrs: dict[str, Any] | None = None,
        *,
        name: str = "",
        domain: str = "",
    ) -> None:
        self.op_type = op_type
        self.domain = domain
        self.name = name
        self.attrs: dict[str, Any] = dict(attrs or {})
        self._inputs: list[Value | None] = []
        self.outputs: list[Value] = []
        self.graph: Graph | None = None
        for v in inputs:
            self._append_input(v)
        for v in outputs:
            if v.producer is not None:
                raise IRError(f"value %{v.name} already has a producer ({v.producer.name})")
            v.producer = self
            self.outputs.append(v)

    # inputs -----------------------------------------------------------------------------
    @property
    def inputs(self) -> tuple[Value | None, ...]:
        return tuple(self._inputs)

    def _append_input(self, v: Value | None) -> None:
        self._inputs.append(v)
        if v is not None:
            v._uses.append((self, len(self._inputs) - 1))

    def set_input(self, index: int, value: Value | None) -> None:
        old = self._inputs[index]
        if old is value:
            return
        if old is not None:
            old._uses.remove((self, index))
        self._inputs[index] = value
        if value is not None:
            value._uses.append((self, index))

    def set_inputs(self, values: Sequence[Value | None]) -> None:
        self.drop_inputs()
        for v in values:
            self._append_input(v)

    def drop_inputs(self) -> None:
        for i, v in enumerate(self._inputs):
            if v is not None:
                v._uses.remove((self, i))
        self._inputs = []

    def input(self, index: int) -> Value | None:
        """The input at ``index``, or ``None`` if it is omitted or past the end."""
        return self._inputs[index] if index < len(self._inputs) else None

    # attributes ---------------------------------------------------------------------------
    def attr(self, name: str, default: Any = None) -> Any:
        return self.attrs.get(name, default)

    def attr_str(self, name: str, default: str = "") -> str:
        """A STRING attribute (``mode``, ``auto_pad``, ``equation`` ...) as ``str``: the ONNX proto
        holds bytes, UTF-8 by the spec (``as_text``); ``default`` when the node has none."""
        return as_text(self.attrs.get(name, default))

    def subgraphs(self) -> list[Graph]:
        out: list[Graph] = []
        for v in self.attrs.values():
            if isinstance(v, Graph):
                out.append(v)
            elif isinstance(v, list) and v and all(isinstance(x, Graph) for x in v):
                out.extend(v)
        return out

    @property
    def label(self) -> str:
        """The node's name, or ``op_type`` plus its first output for nameless nodes."""
        return self.name or f"{self.op_type}:{self.outputs[0].name if self.outputs else '?'}"

    def __repr__(self) -> str:
        return f"Node({self.label}, {self.op_type})"


class FusedGroup(Node):
    """A fused group: a closed subgraph (``body``) that becomes one kernel.

    ``inputs``/``outputs`` are the outer values; ``body.inputs``/``body.outputs`` are the matching
    inner values, position by position. ``kind`` is the fusion kind of the group's anchor op
    (``out-elementwise-fusable``, ``elementwise``, ``broadcast``, ``injective``, ``reduction``,
    ``opaque``) and ``kernel`` the kernel's name.
    """

    def __init__(
        self,
        body: Graph,
        inputs: Sequence[Value],
        outputs: Sequence[Value],
        *,
        kind: str,
        kernel: str,
        name: str = "",
    ) -> None:
        super().__init__("FusedGroup", inputs, outputs, {"kind": kind, "kernel": kernel}, name=name, domain="prism")
        self.body = body

    @property
    def kind(self) -> str:
        return str(self.attrs["kind"])

    @property
    def kernel(self) -> str:
        return str(self.attrs["kernel"])


_NAME_OK = re.compile(r"^[A-Za-z0-9_.:/\-]+$")


class Graph(Scope):
    """A graph in topological order.

    Attributes:
        name: the ONNX graph name.
        nodes: nodes in topological order.
        inputs: runtime inputs (not constants).
        outputs: output values, in model order.
        constants: constant values by name (initializers and folded results).
        opset_imports: ``{domain: version}``; only meaningful on the top graph.
        parent: the enclosing graph of an ``If``/``Loop``/``Scan`` body, else ``None``.
    """

    def __init__(self, name: str = "main", *, parent: Graph | None = None) -> None:
        self.name = name
        self.nodes: list[Node] = []
        self.inputs: list[Value] = []
        self.outputs: list[Value] = []
        self.constants: dict[str, Value] = {}
        self.opset_imports: dict[str, int] = dict(parent.opset_imports) if parent else {}
        self.parent = parent
        self.metadata: dict[str, Any] = {}
        super().__init__(parent)

    # building --------------------------------------------------------------------------------
    def add_input(self, name: str, type: TensorType | None) -> Value:
        v = self.define(Value(name, type), exact=True)
        self.inputs.append(v)
        return v

    def add_constant(self, name: str, data: np.ndarray) -> Value:
        """Add a constant; the name is made unique if taken. ``data`` keeps its dtype and shape."""
        data = np.asarray(data)
        v = self.define(Value(name, TensorType.of(data.dtype, data.shape), data))
        self.constants[v.name] = v
        return v

    def new_value(self, name: str, type: TensorType | None = None) -> Value:
        """A fresh (unproduced) value with a unique name derived from ``name``."""
        return self.define(Value(name, type))

    def add_node(
        self,
        op_type: str,
        inputs: Sequence[Value | None],
        outputs: int | Sequence[str | Value] = 1,
        attrs: dict[str, Any] | None = None,
        *,
        name: str | None = None,
        domain: str = "",
        before: Node | None = None,
        after: Node | None = None,
    ) -> Node:
        """Create a node, its output values (fresh names) and insert it.

        ``outputs`` is a count, or names / existing unproduced values. Inserted at the end, or
        before/after a given node. Returns the node; its results are ``node.outputs``.
        """
        outs: list[Value] = []
        if isinstance(outputs, int):
            base = name or op_type.lower()
            outs = [self.new_value(base if outputs == 1 else f"{base}_{i}") for i in range(outputs)]
        else:
            for o in outputs:
                outs.append(o if isinstance(o, Value) else self.new_value(o))
        node = Node(op_type, inputs, outs, attrs, name=self.fresh_node_name(name or op_type), domain=domain)
        self.insert(node, before=before, after=after)
        return node

    def insert(self, node: Node, *, before: Node | None = None, after: Node | None = None) -> Node:
        """Insert an existing node (its outputs are registered in this scope)."""
        node.graph = self
        if node.name:
            node.name = self.claim_node_name(node.name)
        for v in node.outputs:
            self.define(v)
        if before is not None:
            self.nodes.insert(self.nodes.index(before), node)
        elif after is not None:
            self.nodes.insert(self.nodes.index(after) + 1, node)
        else:
            self.nodes.append(node)
        return node

    def remove_node(self, node: Node, *, force: bool = False) -> None:
        """Remove ``node``. Raises IRError if an output is still used, unless ``force``."""
        if not force:
            for v in node.outputs:
                if v._uses or v in self.outputs:
                    users = ", ".join(n.label for n in v.consumers()) or "graph output"
                    raise IRError(f"cannot remove {node.label}: %{v.name} is used by {users}")
        node.drop_inputs()
        self.nodes.remove(node)
        self.release_node_name(node.name)
        for v in node.outputs:
            if not v._uses:
                self.release_name(v)
            v.producer = None
        node.graph = None

    def remove_constant(self, v: Value) -> None:
        if v._uses or v in self.outputs:
            raise IRError(f"cannot remove constant %{v.name}: still used")
        self.constants.pop(v.name, None)
        self.release_name(v)

    # queries ---------------------------------------------------------------------------------
    def values(self) -> Iterator[Value]:
        """Inputs, constants, then node outputs in order."""
        yield from self.inputs
        yield from self.constants.values()
        for n in self.nodes:
            yield from n.outputs

    def walk(self) -> Iterator[Node]:
        """Every node, descending into subgraphs and fused-group bodies (pre-order)."""
        for n in self.nodes:
            yield n
            for g in n.subgraphs():
                yield from g.walk()
            if isinstance(n, FusedGroup):
                yield from n.body.walk()

    def groups(self) -> list[FusedGroup]:
        return [n for n in self.nodes if isinstance(n, FusedGroup)]

    def topological_sort(self) -> None:
        """Reorder ``nodes`` topologically, keeping the current order where it is already valid.

        Raises IRError naming a node on a cycle.
        """
        order: list[Node] = []
        state: dict[int, int] = {}
        index = {id(n): i for i, n in enumerate(self.nodes)}

        def deps(n: Node) -> Iterable[Node]:
            for v in list(n.inputs) + _captured(n):
                if v is not None and v.producer is not None and id(v.producer) in index:
                    yield v.producer

        for root in self.nodes:
            if state.get(id(root)):
                continue
            stack: list[tuple[Node, Iterator[Node]]] = [(root, iter(deps(root)))]
            state[id(root)] = 1
            while stack:
                n, it = stack[-1]
                for d in it:
                    s = state.get(id(d), 0)
                    if s == 1:
                        raise IRError(f"cycle through node {d.label} ({d.op_type})")
                    if s == 0:
                        state[id(d)] = 1
                        stack.append((d, iter(deps(d))))
                        break
                else:
                    stack.pop()
                    state[id(n)] = 2
                    order.append(n)
        self.nodes = order

    def check_name(self, name: str) -> bool:
        return bool(_NAME_OK.match(name))


def _captured(node: Node) -> list[Value | None]:
    """Outer-scope values read by a node's subgraphs (implicit inputs)."""
    inner_graphs: set[int] = set()
    todo = list(node.subgraphs())
    while todo:
        g = todo.pop()
        inner_graphs.add(id(g))
        for n in g.nodes:
            todo.extend(n.subgraphs())
    out: list[Value | None] = []
    for g in node.subgraphs():
        for inner in g.walk():
            for v in inner.inputs:
                if v is not None and id(v.graph) not in inner_graphs:
                    out.append(v)
    return out


def implicit_inputs(node: Node) -> list[Value]:
    """Values from enclosing scopes read inside ``node``'s subgraphs (deduplicated, in order)."""
    seen: dict[int, Value] = {}
    for v in _captured(node):
        if v is not None:
            seen.setdefault(id(v), v)
    return list(seen.values())
