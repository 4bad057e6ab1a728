"""``convert-layout{block=N}``: run Conv chains in the NCHWc layout (ORT's NCHWc transformer; NeoCPU).

A tensor ``[N, C, H, W]`` becomes ``[N, ceil(C/N), H, W, N]`` (``compiler.ops.nchwc``): the channels of
a block are adjacent, so a kernel keeps them in the vector lanes of the target's f32 width (``block=0``,
the default: 16 with AVX-512, 8 with AVX2). Rewrites, in order:

1. each 2-D float32 ``Conv`` with a constant weight and group 1 or depthwise (group = C = Co) becomes
   ``ReorderInput -> prism.NchwcConv -> ReorderOutput``; its weight and bias are repacked at compile
   time (zero-padded when a channel count is not a multiple of the block);
2. a unary activation (Relu, Clip with constant bounds, HardSwish, HardSigmoid, Sigmoid, LeakyRelu,
   Tanh ...) of a ``ReorderOutput`` moves before it (it runs on the blocked tensor); so does an
   ``Add`` or ``Mul`` of two ``ReorderOutput`` s whose blocked shapes broadcast (a residual, the
   excitation's scale of a squeeze-excitation block), and a ``GlobalAveragePool`` (as ``ReduceMean``
   over the blocked tensor's axes 2 and 3: the mean of each lane);
3. ``ReorderInput(ReorderOutput(v))`` with the same block and channel count is ``v``: the two
   reorders cancel, so consecutive layout-aware ops keep the activation blocked and reorders stay
   only at the boundaries of a chain; reorders left without a use are removed.

Each reorder inserted or removed is a remark with its shapes. Left alone (a missed remark says why):
a Conv whose weight is computed at run time, that is not 2-D or not float32 with static shapes, or
whose group is neither 1 nor depthwise, or whose input channels padded to whole blocks would at least
double its work (a 3-channel stem). Semantics are unchanged (each output is the same sum, the
padded lanes are zeros or multiplied by zero weights); the summation order over the input channels is
that of the blocked loop (block by block, lane by lane), which is the spec's order.

Not in O2/O3, measured: ``prism.NchwcConv`` has a register-tiled kernel (``compiler.schedule.conv_nchwc``,
block = the target's f32 width) about as fast as the NCHW micro-kernels on 1x1 Convs and slower on
depthwise ones, and the reorders at the chain's ends (the NCHW stem, the head) cost about what the rest
saves: ``compiler.bench_models``' MobileNets at 1 thread on a shared machine, kernel sums in two
alternating rounds, without / with this pass: mobilenet_v2ish 1116, 950 / 958, 976 us (110 us of it
reorders), mobilenet_v3ish 921, 897 / 874, 946 us (56 us reorders): no clear win.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..ir import Graph, Node, TensorType, Value
from ..ir.rewrite import forward_value
from ..ops.nchwc import DOMAIN
from .base import Option, Pass, PassContext, PassResult, Remark, register

ACTIVATIONS = {"Relu", "Clip", "HardSwish", "HardSigmoid", "Sigmoid", "LeakyRelu", "Tanh", "Elu", "Selu",
               "Softplus"}


def _static(v: Value | None) -> tuple[int, ...] | None:
    t = None if v is None else v.type
    if t is None or not t.is_static or t.short != "f32":
        return None
    return tuple(int(d) for d in t.shape)  # type: ignore[union-attr]


def _dims(v: Value | None) -> list[int]:
    """The static dims of ``v`` (the pass only builds values with static shapes)."""
    assert v is not None and v.type is not None and v.type.shape is not None
    return [int(d) for d in v.type.shape]


def _broadcasts(ro: list[Node]) -> bool:
    """Whether the blocked inputs of two ReorderOutputs broadcast against each other (numpy rules)."""
    try:
        np.broadcast_shapes(tuple(_dims(ro[0].input(0))), tuple(_dims(ro[1].input(0))))
    except ValueError:
        return False
    return True


def _opset(graph: Graph) -> int:
    return int(graph.opset_imports.get("", graph.opset_imports.get("ai.onnx", 13)))


def _pads(conv: Node, x: tuple[int, ...], y: tuple[int, ...], ks: list[int]) -> list[int]:
    """Explicit ``[top, left, bottom, right]`` pads of a 2-D Conv (auto_pad resolved as the spec says)."""
    auto = conv.attr("auto_pad", "NOTSET")
    if auto in ("NOTSET", "") or auto == b"NOTSET":
        return [int(p) for p in conv.attr("pads", [0, 0, 0, 0])]
    if auto in ("VALID", b"VALID"):
        return [0, 0, 0, 0]
    st = list(conv.attr("strides", [1, 1]))
    dil = list(conv.attr("dilations", [1, 1]))
    total = [max(0, (y[2 + d] - 1) * st[d] + (ks[d] - 1) * dil[d] + 1 - x[2 + d]) for d in range(2)]
    lower = auto in ("SAME_LOWER", b"SAME_LOWER")
    begin = [t - t // 2 if lower else t // 2 for t in total]
    return begin + [t - b for t, b in zip(total, begin, strict=True)]


def _why_not(conv: Node, b: int) -> str | None:
    x, w, y = _static(conv.input(0)), conv.input(1), _static(conv.outputs[0])
    if w is None or w.const is None:
        return "its weight is computed at run time"
    if conv.input(2) is not None and conv.input(2).const is None:  # type: ignore[union-attr]
        return "its bias is computed at run time"
    if x is None or y is None or len(x) != 4:
        return "it is not a 2-D float32 Conv with static shapes"
    g, wsh = int(conv.attr("group", 1)), np.asarray(w.const).shape
    if g != 1 and not (g == x[1] == wsh[0] and wsh[1] == 1):
        return f"group {g} is neither 1 nor depthwise (C = {x[1]}, Co = {wsh[0]})"
    grow = -(-x[1] // b) * b / x[1]
    if grow >= 2:
        return f"C = {x[1]}, block {b}: padded to whole blocks, its input and work would grow {grow:.1f}x"
    return None


def _pack(w: np.ndarray, b: int, depthwise: bool) -> np.ndarray:
    co, ci, kh, kw = w.shape
    cob = -(-co // b)
    if depthwise:
        p = np.zeros((cob * b, kh, kw), np.float32)
        p[:co] = w[:, 0]
        return np.ascontiguousarray(p.reshape(cob, b, kh, kw).transpose(0, 2, 3, 1))
    cib = -(-ci // b)
    p = np.zeros((cob * b, cib * b, kh, kw), np.float32)
    p[:co, :ci] = w
    return np.ascontiguousarray(p.reshape(cob, b, cib, b, kh, kw).transpose(0, 2, 4, 5, 3, 1))


def _blocked(shape: tuple[int, ...], b: int) -> tuple[int, ...]:
    return (shape[0], -(-shape[1] // b), shape[2], shape[3], b)


@register
class ConvertLayout(Pass):
    name = "convert-layout"
    options = (Option("block", int, 0, "channels per block; 0: the target's f32 vector width", minimum=0),)
    before = ("fuse-ops",)

    def run(self, graph: Graph, ctx: PassContext) -> PassResult:
        b = int(self.opts["block"])
        if b <= 0:
            from ..targets import get_target  # the target tables are read lazily (cold start)

            b = get_target(ctx.target).vector_width_f32
        remarks: list[Remark] = []
        changed = False
        for node in list(graph.nodes):
            if node.op_type != "Conv" or node.domain not in ("", "ai.onnx"):
                continue
            why = _why_not(node, b)
            if why is not None:
                remarks.append(self.remark("missed", f"{node.label} stays NCHW: {why}", [node.label]))
                continue
            self._convert(graph, node, b, remarks)
            changed = True
        if changed:
            self._propagate(graph, b, remarks)
            self._cancel(graph, remarks)
        return PassResult(changed, remarks)

    def _reorder(self, graph: Graph, kind: str, v: Value, b: int, at: Node, remarks: list[Remark]) -> Value:
        shape = _static(v)
        assert shape is not None
        if kind == "ReorderInput":
            attrs: dict[str, Any] = {"block": b}
            out = _blocked(shape, b)
        else:
            attrs = {"block": b, "channels": int(self._channels(v))}
            out = (shape[0], attrs["channels"], shape[2], shape[3])
        n = graph.add_node(kind, [v], 1, attrs, name=f"{v.name}.{kind[7:].lower()}", domain=DOMAIN, before=at)
        n.outputs[0].type = TensorType.of("float32", out)
        remarks.append(self.remark("applied", f"inserted {kind} %{v.name}: {list(shape)} -> {list(out)}",
                                   [n.label], shape=list(shape), to=list(out)))
        return n.outputs[0]

    @staticmethod
    def _channels(v: Value) -> int:
        p = v.producer
        return int(p.attrs["channels"]) if p is not None and "channels" in p.attrs else _dims(v)[1]

    def _convert(self, graph: Graph, conv: Node, b: int, remarks: list[Remark]) -> None:
        x, y = conv.input(0), conv.outputs[0]
        assert x is not None
        xs, ys = _static(x), _static(y)
        assert xs is not None and ys is not None
        w = np.asarray(conv.input(1).const, np.float32)  # type: ignore[union-attr]
        ks = [int(k) for k in w.shape[2:]]
        dw = int(conv.attr("group", 1)) > 1
        xb = self._reorder(graph, "ReorderInput", x, b, conv, remarks)
        ins: list[Value | None] = [xb, graph.add_constant(f"{conv.label}.wb", _pack(w, b, dw))]
        bias = conv.input(2)
        if bias is not None and bias.const is not None:
            bp = np.zeros(-(-ys[1] // b) * b, np.float32)
            bp[:ys[1]] = np.asarray(bias.const, np.float32)
            ins.append(graph.add_constant(f"{conv.label}.bb", bp))
        attrs = {"block": b, "channels": ys[1], "kernel_shape": ks, "strides": [int(s) for s in conv.attr("strides", [1, 1])],
                 "dilations": [int(d) for d in conv.attr("dilations", [1, 1])], "pads": _pads(conv, xs, ys, ks),
                 "depthwise": int(dw)}
        nc = graph.add_node("NchwcConv", [v for v in ins if v is not None], 1, attrs, name=f"{conv.label}.nchwc",
                            domain=DOMAIN, before=conv)
        nc.outputs[0].type = TensorType.of("float32", _blocked(ys, b))
        out = self._reorder(graph, "ReorderOutput", nc.outputs[0], b, conv, remarks)
        remarks.append(self.remark("applied", f"{conv.label}: Conv {list(xs)} -> {list(ys)} in NCHW{b}c"
                                   + (" (depthwise)" if dw else ""), [conv.label]))
        if not forward_value(graph, y, out):
            y.replace_all_uses_with(out)
        graph.remove_node(conv, force=True)

    def _propagate(self, graph: Graph, b: int, remarks: list[Remark]) -> None:
        for node in list(graph.nodes):
            ins = [v for v in node.inputs if v is not None]
            srcs = [v.producer for v in ins]
            ro = [p for p in srcs if p is not None and p.op_type == "ReorderOutput" and p.domain == DOMAIN]
            op, attrs = node.op_type, dict(node.attrs)
            if op in ACTIVATIONS and ro and srcs[0] is ro[0] and all(v.const is not None for v in ins[1:]):
                blocked = [ro[0].input(0), *node.inputs[1:]]
            elif op in ("Add", "Mul") and len(ins) == 2 and len(ro) == 2 and _broadcasts(ro) and \
                    ro[0].attrs["channels"] == ro[1].attrs["channels"]:  # a residual, the excitation's scale
                blocked = [ro[0].input(0), ro[1].input(0)]
            elif op == "GlobalAveragePool" and ro and srcs[0] is ro[0]:  # the mean over H, W of each lane
                op, attrs, blocked = "ReduceMean", {"keepdims": 1}, [ro[0].input(0)]
                if _opset(graph) >= 18:
                    blocked.append(graph.add_constant(f"{node.label}.axes", np.array([2, 3], np.int64)))
                else:
                    attrs["axes"] = [2, 3]
            else:
                continue
            src = blocked[0]
            assert src is not None
            nb = graph.add_node(op, blocked, 1, attrs, name=f"{node.label}.nchwc", before=node)
            dims = np.broadcast_shapes(*(tuple(_dims(v)) for v in blocked[:2] if v is not None and v.const is None))
            if op == "ReduceMean":
                dims = (dims[0], dims[1], 1, 1, dims[4])
            nb.outputs[0].type = TensorType.of("float32", list(dims))
            out = graph.add_node("ReorderOutput", [nb.outputs[0]], 1, dict(ro[0].attrs),
                                 name=f"{node.outputs[0].name}.reorderoutput", domain=DOMAIN, before=node)
            out.outputs[0].type = node.outputs[0].type
            remarks.append(self.remark("applied", f"{node.label} ({node.op_type}) runs on the blocked tensor "
                                       f"{_dims(src)}" + (" as ReduceMean over axes [2, 3]" if op != node.op_type
                                                          else ""), [node.label]))
            if not forward_value(graph, node.outputs[0], out.outputs[0]):
                node.outputs[0].replace_all_uses_with(out.outputs[0])
            graph.remove_node(node, force=True)
            for p in ro:
                if not p.outputs[0].uses() and p.outputs[0] not in graph.outputs:
                    graph.remove_node(p)

    def _cancel(self, graph: Graph, remarks: list[Remark]) -> None:
        for node in list(graph.nodes):
            if node.op_type != "ReorderInput" or node.domain != DOMAIN or node.graph is None:
                continue
            p = node.input(0).producer  # type: ignore[union-attr]
            if p is None or p.op_type != "ReorderOutput" or p.domain != DOMAIN or p.attrs["block"] != node.attrs["block"]:
                continue
            v = p.input(0)
            assert v is not None
            node.outputs[0].replace_all_uses_with(v)
            remarks.append(self.remark(
                "applied", f"removed ReorderOutput -> ReorderInput on %{v.name}: {_dims(v)} -> "
                f"{_dims(p.outputs[0])} -> {_dims(v)}: the two cancel", [p.label, node.label]))
            graph.remove_node(node)
            if not p.outputs[0].uses() and p.outputs[0] not in graph.outputs:
                graph.remove_node(p)


__all__ = ["ConvertLayout"]
