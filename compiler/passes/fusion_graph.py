"""The dataflow analysis behind ``fuse-ops``: an indexed forward graph with edge patterns, its
post-dominator tree, and the fusion groups (union-find). A port of TVM's ``FuseOps``
(``src/relay/transforms/fuse_ops.cc``: ``IndexedForwardGraph``, ``DominatorTree``,
``GraphPartitioner``) to Prism's graph IR; the pass itself and its decisions live in
``fuse_ops.py``.

Patterns are ordered as in TVM: elementwise < broadcast < injective < reduction <
out-elementwise-fusable < opaque. The pattern of an edge ``producer -> consumer`` is the
consumer's pattern, except that a broadcast consumer whose output has exactly the shape of the
producer's value is an elementwise edge for that operand (TVM's rule): a bias add on a Conv
output is elementwise, an ``Add`` that broadcasts a ``[3, 1]`` MatMul result to ``[3, 4]`` is not.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..ir import FusedGroup, Graph, Node, Value, implicit_inputs
from ..ops import op_kind

PATTERNS = ("elementwise", "broadcast", "injective", "reduction", "out-elementwise-fusable")
ELEMWISE, BROADCAST, INJECTIVE, REDUCTION, OUT_EWISE, OPAQUE = 0, 1, 2, 3, 4, 8
KIND_NAMES = {i: name for i, name in enumerate(PATTERNS)} | {OPAQUE: "opaque"}


def pattern_of(node: Node) -> int:
    """The TVM op pattern of a node; fused groups and nodes with subgraphs are opaque."""
    if isinstance(node, FusedGroup) or node.subgraphs():
        return OPAQUE
    kind = op_kind(node)
    return PATTERNS.index(kind) if kind in PATTERNS else OPAQUE


@dataclass
class FNode:
    """A node of the forward graph: ``outputs`` are (consumer index, edge pattern) pairs."""

    index: int
    node: Node
    pattern: int
    outputs: list[tuple[int, int]] = field(default_factory=list)
    extern_ref: bool = False


@dataclass
class DomNode:
    """A post-dominator tree node: ``parent`` index (None: the exit), depth, path pattern."""

    parent: int | None
    depth: int
    pattern: int


def _static_shape(v: Value | None) -> tuple | None:
    if v is None or v.type is None or not v.type.is_static:
        return None
    return v.type.shape


def edge_pattern(value: Value, consumer: Node, consumer_pattern: int) -> int:
    """TVM's edge rule: a broadcast consumer is elementwise for an operand of its output shape."""
    if consumer_pattern == BROADCAST:
        out = _static_shape(consumer.outputs[0]) if consumer.outputs else None
        if out is not None and _static_shape(value) == out:
            return ELEMWISE
    return consumer_pattern


def build_forward_graph(graph: Graph) -> list[FNode]:
    """One FNode per node of ``graph`` in its (topological) order."""
    index = {id(n): i for i, n in enumerate(graph.nodes)}
    fnodes = [FNode(i, n, pattern_of(n)) for i, n in enumerate(graph.nodes)]
    outputs = {id(v) for v in graph.outputs}
    readers: dict[int, list[int]] = {}
    for i, n in enumerate(graph.nodes):
        for v in implicit_inputs(n):
            readers.setdefault(id(v), []).append(i)
    for f in fnodes:
        for v in f.node.outputs:
            if id(v) in outputs:
                f.extern_ref = True
            seen: set[int] = set()
            for user, _ in v.uses():
                j = index.get(id(user))
                if j is None or j in seen:
                    continue
                seen.add(j)
                f.outputs.append((j, edge_pattern(v, user, fnodes[j].pattern)))
            for j in readers.get(id(v), []):
                if j not in seen:
                    seen.add(j)
                    f.outputs.append((j, OPAQUE))
    return fnodes


def post_dominators(fnodes: list[FNode]) -> list[DomNode]:
    """TVM's ``DominatorTree::PostDom``: for each node, the nearest node every path to the exit
    passes through, and the largest pattern on the way there."""
    tree: list[DomNode | None] = [None] * len(fnodes)

    def lca(a: int | None, b: int | None, pattern: int) -> tuple[int | None, int]:
        while a != b:
            if a is None or b is None:
                return None, pattern
            da, db = tree[a], tree[b]
            assert da is not None and db is not None
            if da.depth < db.depth:
                pattern, b = max(pattern, db.pattern), db.parent
            elif db.depth < da.depth:
                pattern, a = max(pattern, da.pattern), da.parent
            else:
                pattern = max(pattern, da.pattern, db.pattern)
                a, b = da.parent, db.parent
        return a, pattern

    for f in reversed(fnodes):
        if f.extern_ref or not f.outputs:
            tree[f.index] = DomNode(None, 1, OPAQUE)
            continue
        parent: int | None = f.outputs[0][0]
        pattern = f.outputs[0][1]
        for j, p in f.outputs[1:]:
            parent, pattern = lca(parent, j, pattern)
            pattern = max(pattern, p)
        depth = tree[parent].depth + 1 if parent is not None else 1  # type: ignore[union-attr]
        tree[f.index] = DomNode(parent, depth, pattern)
    return tree  # type: ignore[return-value]


class Groups:
    """Union-find over node indices; each root carries the group's pattern, size and anchor."""

    def __init__(self, fnodes: list[FNode]) -> None:
        self.parent = list(range(len(fnodes)))
        self.pattern = [f.pattern for f in fnodes]
        self.size = [1] * len(fnodes)
        self.anchor: list[int | None] = [f.index if f.pattern == OUT_EWISE else None for f in fnodes]

    def find(self, i: int) -> int:
        root = i
        while self.parent[root] != root:
            root = self.parent[root]
        while self.parent[i] != root:
            self.parent[i], i = root, self.parent[i]
        return root

    def merge(self, child: int, parent: int) -> None:
        c, p = self.find(child), self.find(parent)
        if c == p:
            return
        self.parent[c] = p
        self.size[p] += self.size[c]
        if self.anchor[c] is not None:
            self.anchor[p] = self.anchor[c]
        self.pattern[p] = max(self.pattern[p], self.pattern[c])


def path_nodes(fnodes: list[FNode], src: int, sink: int) -> list[int] | None:
    """Every node on a path from ``src`` to ``sink`` (excluding src, including sink), or None
    when some path from ``src`` reaches the exit without passing ``sink``."""
    seen: set[int] = set()
    order: list[int] = []
    stack = [j for j, _ in fnodes[src].outputs]
    while stack:
        j = stack.pop()
        if j in seen:
            continue
        seen.add(j)
        order.append(j)
        if j == sink:
            continue
        if fnodes[j].extern_ref or not fnodes[j].outputs:
            return None
        stack.extend(k for k, _ in fnodes[j].outputs)
    return sorted(order)
