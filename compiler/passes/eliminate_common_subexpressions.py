"""``eliminate-common-subexpressions``: compute each distinct expression once.

Rewrites:
- two nodes with the same ``op_type``, domain, attributes (tensor attributes compared by dtype,
  shape and contents) and the same input values become one: the later node's outputs are
  replaced by the earlier node's and the later node is removed. For commutative ops (``Add``,
  ``Mul``, ``Sum``, ``Max``, ``Min``, ``Mean``, ``And``, ``Or``, ``Xor``, ``Equal``) the order of
  the inputs does not matter. Nodes are visited in topological order, so merged inputs make
  their consumers equal in turn and whole duplicated chains collapse in one run;
- constants with equal dtype, shape and contents are merged into the one whose name sorts
  first.
Graph outputs keep their names: when the removed value is a graph output and the kept value is
not, the kept value takes the output's name.

Left alone, and why:
- random ops (``RandomNormal``, ``RandomUniform``, ``Bernoulli``, ...): two draws differ;
- nodes with subgraphs (``If``/``Loop``/``Scan``): comparing bodies is not worth it, and fused
  groups (fusion runs after this pass);
- two values that are both graph outputs (each output needs its own name);
- expressions in different scopes: each ``If``/``Loop`` body is processed on its own.
"""

from __future__ import annotations

import hashlib
from typing import Any

import numpy as np

from ..ir import FusedGroup, Graph, Node, Value
from ..ir.rewrite import forward_value, is_interface, rename_value
from .base import Pass, PassContext, PassResult, Remark, register

SKIP_OPS = frozenset(
    {"RandomNormal", "RandomUniform", "RandomNormalLike", "RandomUniformLike", "Multinomial",
     "Bernoulli", "Dropout"}
)
COMMUTATIVE = frozenset({"Add", "Mul", "Sum", "Max", "Min", "Mean", "And", "Or", "Xor", "Equal"})


def _array_key(a: np.ndarray) -> tuple:
    raw = repr(a.tolist()).encode() if a.dtype == object else np.ascontiguousarray(a).tobytes()
    return ("tensor", str(a.dtype), a.shape, hashlib.sha256(raw).hexdigest())


def attr_key(value: Any) -> Any:
    """A hashable key for an attribute value; tensors by dtype, shape and contents."""
    if isinstance(value, np.ndarray):
        return _array_key(value)
    if isinstance(value, list | tuple):
        return ("list", tuple(attr_key(v) for v in value))
    if isinstance(value, float):
        return ("float", value if value == value else "nan")
    return (type(value).__name__, value)


def node_key(node: Node) -> tuple | None:
    """The key under which equal nodes collide, or None for nodes that must not be merged."""
    if isinstance(node, FusedGroup) or node.subgraphs() or node.op_type in SKIP_OPS:
        return None
    if not node.outputs:
        return None
    ins = [id(v) if v is not None else None for v in node.inputs]
    if node.op_type in COMMUTATIVE and node.domain in ("", "ai.onnx") and None not in ins:
        ins = sorted(ins)  # type: ignore[type-var]
    attrs = tuple(sorted((k, attr_key(v)) for k, v in node.attrs.items()))
    return (node.domain, node.op_type, tuple(ins), attrs, len(node.outputs))


def _replace(graph: Graph, dup: Value, kept: Value) -> bool:
    """Point uses of ``dup`` at ``kept``; False if both are graph outputs."""
    outs = {id(v) for v in graph.outputs}
    if id(dup) in outs and (id(kept) in outs or is_interface(graph, kept)):
        return False
    return forward_value(graph, dup, kept)


def _merge_constants(graph: Graph, merged: list[tuple[str, str, int]]) -> bool:
    changed = False
    seen: dict[tuple, Value] = {}
    for name in sorted(graph.constants):
        v = graph.constants[name]
        key = _array_key(np.asarray(v.const))
        kept = seen.get(key)
        if kept is None:
            seen[key] = v
            continue
        outs = {id(x) for x in graph.outputs}
        if id(v) in outs:
            if id(kept) in outs:
                continue
            name = v.name
            v.replace_all_uses_with(kept)
            graph.remove_constant(v)
            rename_value(graph, kept, name)
        else:
            v.replace_all_uses_with(kept)
            graph.remove_constant(v)
        merged.append((v.name, kept.name, int(np.asarray(v.const).nbytes)))
        changed = True
    return changed


def _cse(graph: Graph, merged: list[tuple[str, str]], consts: list[tuple[str, str, int]],
         stats: dict[str, int]) -> bool:
    changed = _merge_constants(graph, consts)
    table: dict[tuple, Node] = {}
    for node in list(graph.nodes):
        for sub in node.subgraphs():
            changed |= _cse(sub, merged, consts, stats)
        key = node_key(node)
        if key is None:
            continue
        kept = table.get(key)
        if kept is None:
            table[key] = node
            continue
        pairs = list(zip(node.outputs, kept.outputs, strict=True))
        outs = {id(v) for v in graph.outputs}
        if any(id(d) in outs and (id(k) in outs or is_interface(graph, k)) for d, k in pairs):
            continue
        for dup, keep in pairs:
            _replace(graph, dup, keep)
        graph.remove_node(node)
        merged.append((node.label, kept.label))
        stats["nodes_merged"] += 1
        changed = True
    return changed


@register
class EliminateCommonSubexpressions(Pass):
    """Merge equal nodes and equal constants (see module docstring)."""

    name = "eliminate-common-subexpressions"
    options = ()

    def run(self, graph: Graph, ctx: PassContext) -> PassResult:
        merged: list[tuple[str, str]] = []
        consts: list[tuple[str, str, int]] = []
        stats = {"nodes_merged": 0, "constants_merged": 0}
        changed = _cse(graph, merged, consts, stats)
        stats["constants_merged"] = len(consts)
        remarks: list[Remark] = []
        if consts:
            saved = sum(n for _, _, n in consts)
            remarks.append(self.remark(
                "applied", f"merged {len(consts)} constant{'s' * (len(consts) != 1)} into equal "
                f"ones ({saved} bytes saved)",
                [], merged=[[dup, kept] for dup, kept, _ in consts], bytes=saved))
        remarks.extend(
            self.remark("applied", f"merged {dup} into {kept} (same op, attributes and inputs)",
                        [dup, kept])
            for dup, kept in merged)
        return PassResult(changed, remarks, stats)
