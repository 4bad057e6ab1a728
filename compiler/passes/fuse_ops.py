"""``fuse-ops``: partition the graph into fused groups, one kernel each (TVM's ``FuseOps``).

Each node has a pattern from the op registry (``compiler.ops.op_kind``): elementwise, broadcast,
injective, reduction, out-elementwise-fusable (Conv, ConvTranspose, MatMul, Gemm: the *anchors*)
or opaque. Over the post-dominator tree of the dataflow graph (``fusion_graph.py``), visiting
nodes in topological order, a node's group is merged into the group of its immediate
post-dominator ``D`` when every path from the node to ``D`` stays fusable:
- phase 0, anchor group: when every edge on the way to ``D`` is elementwise (same shape), and
  every node on those paths and ``D`` is elementwise or broadcast: the Conv/MatMul/Gemm takes
  ``D`` as its epilogue (bias Add, BN remnants Mul/Add, Relu/Clip/LeakyRelu, ``x*sigmoid(x)``
  where both uses of ``x`` are in the group, a residual Add whose other operand is read from
  memory). Applied step by step, a whole chain becomes the anchor's epilogue;
- elementwise/broadcast groups: into ``D`` when the paths are at most injective and ``D`` is
  elementwise, broadcast, injective or a reduction (elementwise chains; reductions with their
  elementwise producers);
- phase 1, injective groups: into an injective ``D`` through injective paths (injective chains);
  a chain of view ops (:data:`OPERAND_VIEWS`: Transpose, Reshape, Squeeze, Unsqueeze, Flatten,
  Split, Slice, Identity) whose only consumer is a MatMul anchor joins that MatMul's group as its
  operand access: the micro-kernel reads the buffer in place through the index remap (``Q K^T``
  reads K as the projection wrote it), so the transposed copy is never materialized.
A node whose output has several consumers is fused only when all its paths re-converge at its
post-dominator inside the group; otherwise a missed remark names the consumers. An epilogue must
have the anchor's output shape: a broadcast that grows the result (MatMul ``[3,1]`` + Add ``[1,4]``
-> ``[3,4]``) is a broadcast edge, not fused, with a missed remark giving both shapes.

Deviations from TVM, on purpose: an elementwise producer is never fused *into* an anchor (as a
prologue; view ops into a MatMul are an index remap, not a computation, and are the exception) nor into an anchor's group from the side: the back end's Conv/MatMul micro-kernels read
their operands from packed memory and apply the epilogue to the accumulators, so a prologue
would be recomputed once per use (K·kh·kw times). The one exception (phase 1): a lone ``Mul`` by a
per-channel scale ``[N|1, C, 1, 1]`` (a squeeze-excitation block's excitation) read only by a 1x1,
stride-1, unpadded, group-1 Conv joins that Conv's group: the micro-kernel multiplies each input row by
its channel's scale as it reads it (one multiply per B vector, for MR x NV FMAs), so the scaled
activation is never written and read back. Each group has at most one anchor. Groups are
limited to ``max-group-size`` nodes (default 32, well above ResNet-50's Conv+Add+Relu or
YOLOv8n's Conv+Sigmoid+Mul, and small enough for a readable kernel).

Every node left over becomes a singleton group, so the back end gets one kernel per group. Nodes
with subgraphs (``If``/``Loop``) and existing fused groups are left alone, and subgraphs are not
fused. Kernel names are ``fused_<ops>_<n>`` (``fused_conv2d_add_relu_0``), numbered per name in
schedule order. A group's body keeps the original nodes and names in topological order; constants
are group inputs (the outer values, so the back end can see their data and repack them).
"""

from __future__ import annotations

import re
from collections import Counter

import numpy as np

from ..ir import FusedGroup, Graph, Node, Value
from ..ir.rewrite import group_nodes
from .base import FusionResult, Option, Pass, PassContext, Remark, register
from .fusion_graph import (
    BROADCAST,
    ELEMWISE,
    INJECTIVE,
    KIND_NAMES,
    OPAQUE,
    OUT_EWISE,
    REDUCTION,
    FNode,
    Groups,
    build_forward_graph,
    path_nodes,
    post_dominators,
)

OPERAND_VIEWS = {"Transpose", "Reshape", "Squeeze", "Unsqueeze", "Flatten", "Split", "Slice", "Identity"}
ACTIVATIONS = {"Relu", "Clip", "LeakyRelu", "Sigmoid", "HardSigmoid", "HardSwish", "Tanh", "Elu",
               "Selu", "PRelu", "Softplus", "Gelu", "Mish"}


def _channel_scale_prologue(f: FNode, fnodes: list[FNode], groups: Groups, root: int, sink: int,
                            sink_root: int) -> bool:
    """True when ``f`` is a lone ``Mul(X, s)`` by a per-channel scale ``s: [N|1, C, 1, 1]`` (the
    excitation of a squeeze-excitation block) read only by the 1x1, stride-1, unpadded, group-1 Conv
    ``sink``, which anchors its own group."""
    m, conv = f.node, fnodes[sink].node
    if m.op_type != "Mul" or groups.size[root] != 1 or conv.op_type != "Conv" or groups.anchor[sink_root] != sink:
        return False
    y = m.outputs[0]
    if conv.input(0) is not y or len(y.uses()) != 1 or (m.graph is not None and y in m.graph.outputs):
        return False
    if int(conv.attr("group", 1)) != 1 or list(conv.attr("strides", [1, 1])) != [1, 1] or \
            any(int(p) for p in conv.attr("pads", [0, 0, 0, 0])) or conv.attr("auto_pad", "NOTSET") not in ("NOTSET", "VALID"):
        return False
    w, ins = conv.input(1), [v for v in m.inputs if v is not None]
    if w is None or w.const is None or np.asarray(w.const).shape[2:] != (1, 1) or len(ins) != 2:
        return False
    shapes = [tuple(v.type.shape or ()) for v in ins if v.type is not None and v.type.is_static]
    if len(shapes) != 2 or any(len(sh) != 4 for sh in shapes):
        return False
    x_s, s_s = sorted(shapes, key=lambda sh: sh[2:] == (1, 1))  # the scale last
    return s_s[2:] == (1, 1) and x_s[2:] != (1, 1) and s_s[1] == x_s[1] and s_s[0] in (1, x_s[0])


def op_name(node: Node) -> str:
    """The kernel-name fragment of one op: ``conv2d``, ``matmul``, ``global_average_pool`` ..."""
    op = node.op_type
    if op in ("Conv", "ConvTranspose"):
        w = node.input(1)
        dims = (w.type.rank - 2) if w is not None and w.type is not None and w.type.rank else 2
        return f"conv{dims}d" + ("_transpose" if op == "ConvTranspose" else "")
    short = {"BatchNormalization": "batch_norm", "MatMul": "matmul", "Gemm": "gemm"}
    if op in short:
        return short[op]
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", op).lower()


def role(node: Node) -> str:
    """What an epilogue op does, for remarks: bias add, residual add, scale, SiLU, activation."""
    ins = [v for v in node.inputs if v is not None]
    if node.op_type in ("Add", "Sub", "Sum") and len(ins) >= 2:
        if any(v.is_constant for v in ins):
            return "bias add"
        return "residual add"
    if node.op_type in ("Mul", "Div") and any(v.is_constant for v in ins):
        return "scale"
    if node.op_type == "Mul" and len(ins) == 2:
        for a, b in (ins, ins[::-1]):
            if a.producer is not None and a.producer.op_type == "Sigmoid" and a.producer.inputs[0] is b:
                return "SiLU: x*sigmoid(x)"
    if node.op_type in ACTIVATIONS:
        return "activation"
    return ""


def _with_role(node: Node) -> str:
    r = role(node)
    return f"{node.label} ({r})" if r else node.label


def _consumers_text(v: Value) -> str:
    return ", ".join(c.label for c in v.consumers())


@register
class FuseOps(Pass):
    """TVM-style operator fusion into FusedGroup kernels (see module docstring)."""

    name = "fuse-ops"
    options = (
        Option("max-group-size", int, 32, "largest number of nodes in one fused group", minimum=1),
    )

    def run(self, graph: Graph, ctx: PassContext) -> FusionResult:
        fnodes = build_forward_graph(graph)
        tree = post_dominators(fnodes)
        groups = Groups(fnodes)
        remarks: list[Remark] = []
        for phase in (0, 1):
            for f in fnodes:
                self._visit(phase, f, fnodes, tree, groups, remarks)
        remarks.extend(self._missed(fnodes, tree, groups))
        members: dict[int, list[int]] = {}
        for f in fnodes:
            if not isinstance(f.node, FusedGroup):
                members.setdefault(groups.find(f.index), []).append(f.index)
        made = self._materialize(graph, fnodes, groups, members)
        sizes = [len(m.body.nodes) for m in made]
        stats = {
            "groups": len(made),
            "fused_nodes": sum(s for s in sizes if s > 1),
            "largest_group": max(sizes, default=0),
            "nodes_per_group": {str(k): v for k, v in sorted(Counter(sizes).items())},
        }
        remarks.append(self.remark(
            "analysis", f"{len(made)} groups from {len(fnodes)} nodes; largest group: "
            f"{stats['largest_group']} nodes; multi-node groups: {sum(1 for s in sizes if s > 1)}"
            f", holding {stats['fused_nodes']} nodes", [], **stats))
        return FusionResult(bool(made), remarks, stats)

    # the partitioner -----------------------------------------------------------------------
    def _visit(self, phase: int, f: FNode, fnodes: list[FNode], tree, groups: Groups,
               remarks: list[Remark]) -> None:
        root = groups.find(f.index)
        gp = groups.pattern[root]
        dom = tree[f.index]
        if gp == OPAQUE or dom.parent is None:
            return
        sink = dom.parent
        sink_root = groups.find(sink)
        if sink_root == root:
            return
        if gp == OUT_EWISE:
            if phase != 0 or dom.pattern != ELEMWISE:
                return

            def fcond(kind: int, is_sink: bool) -> bool:
                return kind <= BROADCAST
        elif gp <= BROADCAST:
            if phase == 1 and _channel_scale_prologue(f, fnodes, groups, root, sink, sink_root):
                groups.merge(f.index, sink)
                remarks.append(self.remark(
                    "applied", f"fused {f.node.label} (Mul by a per-channel scale) into {fnodes[sink].node.label} "
                    "as its operand scale: the 1x1 Conv scales each input row as it reads it, so the scaled "
                    "activation is never written", [f.node.label, fnodes[sink].node.label]))
                return
            if not (dom.pattern <= INJECTIVE or dom.pattern == REDUCTION):
                return
            if groups.anchor[sink_root] is not None:
                return  # no prologue into an anchor, no side input into its epilogue

            def fcond(kind: int, is_sink: bool) -> bool:
                return kind <= INJECTIVE or (is_sink and kind == REDUCTION)
        elif gp == INJECTIVE and phase == 1 and self._operand_view(root, fnodes, groups, sink, sink_root):
            def fcond(kind: int, is_sink: bool) -> bool:
                return is_sink
        elif gp == INJECTIVE:
            if phase != 1 or dom.pattern > INJECTIVE:
                return

            def fcond(kind: int, is_sink: bool) -> bool:
                return kind <= INJECTIVE
        else:
            return
        path = path_nodes(fnodes, f.index, sink)
        if path is None:
            return
        for j in path:
            kind = groups.pattern[groups.find(j)]
            if not fcond(kind, j == sink):
                if j == sink and gp == OUT_EWISE and groups.anchor[sink_root] is not None:
                    other = fnodes[groups.anchor[sink_root]].node  # type: ignore[index]
                    anchor = fnodes[groups.anchor[root]].node  # type: ignore[index]
                    remarks.append(self.remark(
                        "missed", f"not fused: {fnodes[sink].node.label} is already the epilogue "
                        f"of {other.label}; a group has one anchor, so {anchor.label} stays apart",
                        [anchor.label, fnodes[sink].node.label, other.label]))
                return
        roots = {root} | {groups.find(j) for j in path}
        size = sum(groups.size[r] for r in roots)
        limit = int(self.opts["max-group-size"])
        if size > limit:
            remarks.append(self.remark(
                "missed", f"not fused: {f.node.label} + {fnodes[sink].node.label} would make a "
                f"group of {size} nodes > max-group-size {limit}",
                [f.node.label, fnodes[sink].node.label], size=size, limit=limit))
            return
        src_members = [i for i in range(len(fnodes)) if groups.find(i) == root]
        new = [fnodes[j].node for j in path if groups.find(j) != root]
        for j in [f.index] + path:
            groups.merge(j, sink)
        remarks.append(self._applied(gp, fnodes, groups, root, src_members, new, sink))

    @staticmethod
    def _operand_view(root: int, fnodes: list[FNode], groups: Groups, sink: int, sink_root: int) -> bool:
        """True when the injective group ``root`` is a chain of view ops read only by the MatMul
        ``sink``, which anchors its own group (see the module docstring)."""
        if fnodes[sink].node.op_type != "MatMul" or groups.anchor[sink_root] != sink:
            return False
        members = [f for f in fnodes if groups.find(f.index) == root]
        return all(f.node.op_type in OPERAND_VIEWS for f in members) and all(
            groups.find(j) == root or j == sink for f in members for j, _ in f.outputs)

    def _applied(self, gp: int, fnodes: list[FNode], groups: Groups, root: int,
                 src_members: list[int], new: list[Node], sink: int) -> Remark:
        sink_node = fnodes[sink].node
        if gp == INJECTIVE and fnodes[sink].node.op_type == "MatMul" and groups.anchor[groups.find(sink)] == sink:
            chain = [fnodes[i].node for i in src_members]
            msg = (" + ".join(n.label for n in chain) + f" fused into {sink_node.label} as its operand access: "
                   "read in place through the index remap, no copy")
            return self.remark("applied", msg, [n.label for n in chain] + [sink_node.label])
        if gp == OUT_EWISE:
            anchor = fnodes[groups.anchor[groups.find(sink)]].node  # type: ignore[index]
            msg = (f"fused {anchor.label} + " + " + ".join(_with_role(n) for n in new)
                   + " as elementwise epilogue")
            nodes = [anchor.label] + [n.label for n in new]
        else:
            chain = [fnodes[i].node for i in src_members] + new
            sink_kind = KIND_NAMES[fnodes[sink].pattern]
            how = {INJECTIVE: "as injective chain"}.get(gp, "as elementwise chain")
            if fnodes[sink].pattern == REDUCTION:
                how = "into the reduction as its elementwise producers"
            elif gp <= BROADCAST and fnodes[sink].pattern == INJECTIVE:
                how = "into an injective consumer"
            msg = ("fused " + " + ".join(n.label for n in chain)
                   + f" {how} ({sink_node.label}: {sink_kind})")
            nodes = [n.label for n in chain]
        return self.remark("applied", msg, nodes)

    def _missed(self, fnodes: list[FNode], tree, groups: Groups) -> list[Remark]:
        out: list[Remark] = []
        for f in fnodes:
            if f.pattern == OPAQUE:
                continue
            root = groups.find(f.index)
            for v in f.node.outputs:
                users = sorted({j for j, _ in f.outputs
                                if any(u is fnodes[j].node for u in v.consumers())})
                apart = [j for j in users if groups.find(j) != root]
                if not apart:
                    continue
                if len(v.consumers()) > 1:
                    dom = tree[f.index]
                    if dom.parent is None:
                        why = "its paths do not re-converge before a graph output"
                    else:
                        why = (f"its paths re-converge at {fnodes[dom.parent].node.label} only "
                               f"through {KIND_NAMES[dom.pattern]} ops")
                    out.append(self.remark(
                        "missed", f"not fused: %{v.name} has {len(v.consumers())} consumers "
                        f"({_consumers_text(v)}); {why}",
                        [f.node.label] + [c.label for c in v.consumers()],
                        consumers=len(v.consumers())))
                    continue
                (j,) = apart
                edge = next(p for k, p in f.outputs if k == j)
                c = fnodes[j].node
                if groups.anchor[root] is not None and fnodes[j].pattern <= BROADCAST and edge == BROADCAST:
                    anchor = fnodes[groups.anchor[root]].node  # type: ignore[index]
                    out.append(self.remark(
                        "missed", f"not fused: {c.label} ({c.op_type}) output {c.outputs[0].type} "
                        f"is not the shape of {f.node.label} output {v.type}: a broadcasting "
                        f"epilogue would change {anchor.label}'s output shape",
                        [anchor.label, c.label], shapes=[str(v.type), str(c.outputs[0].type)]))
        return out

    def _materialize(self, graph: Graph, fnodes: list[FNode], groups: Groups,
                     members: dict[int, list[int]]) -> list:
        made = []
        counters: Counter[str] = Counter()
        taken = {n.kernel for n in graph.nodes if isinstance(n, FusedGroup)}
        for root in sorted(members, key=lambda r: max(members[r])):
            nodes = [fnodes[i].node for i in sorted(members[root])]
            if any(n.op_type == "FusedGroup" or n.subgraphs() for n in nodes):
                continue
            base = "fused_" + "_".join(op_name(n) for n in nodes)
            if len(base) > 64:
                base = base[:64].rstrip("_")
            while f"{base}_{counters[base]}" in taken:
                counters[base] += 1
            kernel = f"{base}_{counters[base]}"
            counters[base] += 1
            taken.add(kernel)
            kind = KIND_NAMES[groups.pattern[root]]
            made.append(group_nodes(graph, nodes, kind=kind, kernel=kernel))
        graph.topological_sort()
        return made
