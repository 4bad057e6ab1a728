"""``eliminate-dead-code``: remove nodes and constants that nothing reads.

Rewrites:
- a node none of whose outputs is used (by a node of this graph, by a node inside any nested
  subgraph, or as a graph output) is removed. Nodes are visited in reverse topological order, so
  a whole dead chain goes in one run;
- a constant that nothing uses and that is not a graph output is removed;
- ``If``/``Loop``/``Scan`` bodies of live nodes are cleaned the same way, with the body's outputs
  as its roots. A value of an outer graph that a subgraph reads is live: the IR records the inner
  node as a use of the outer value, so it is kept as long as that inner node lives; when a dead
  node holding subgraphs is removed, the uses made inside its subgraphs are released first, so
  their outer producers become dead in the same run.

Left alone, and why:
- graph inputs (they are the model's interface, even when unused);
- a node with several outputs of which only some are used (the node has to run anyway);
- fused-group bodies: a group's body is closed and its outputs are by construction used;
- ops are assumed free of side effects (true of the ONNX default domain in inference), so a
  node is live only through its outputs.
"""

from __future__ import annotations

from ..ir import Graph
from ..ir.rewrite import remove_node_deep
from .base import Pass, PassContext, PassResult, Remark, register


def _sweep(graph: Graph, removed: list[str], stats: dict[str, int]) -> bool:
    changed = False
    outputs = {id(v) for v in graph.outputs}
    for node in reversed(list(graph.nodes)):
        live = any(v.uses() or id(v) in outputs for v in node.outputs)
        if not live:
            remove_node_deep(graph, node)
            removed.append(node.label)
            stats["nodes_removed"] += 1
            changed = True
            continue
        for sub in node.subgraphs():
            changed |= _sweep(sub, removed, stats)
    for v in list(graph.constants.values()):
        if not v.uses() and id(v) not in outputs:
            graph.remove_constant(v)
            stats["constants_removed"] += 1
            stats["constant_bytes_removed"] += int(v.const.nbytes) if v.const is not None else 0
            changed = True
    return changed


@register
class EliminateDeadCode(Pass):
    """Remove unused nodes and constants (see module docstring)."""

    name = "eliminate-dead-code"
    options = ()

    def run(self, graph: Graph, ctx: PassContext) -> PassResult:
        removed: list[str] = []
        stats = {"nodes_removed": 0, "constants_removed": 0, "constant_bytes_removed": 0}
        changed = _sweep(graph, removed, stats)
        remarks: list[Remark] = []
        if changed:
            remarks.append(self.remark(
                "applied",
                f"removed {stats['nodes_removed']} dead nodes and {stats['constants_removed']} "
                f"unused constants ({stats['constant_bytes_removed']} bytes)",
                sorted(removed), **stats))
        return PassResult(changed, remarks, stats)
