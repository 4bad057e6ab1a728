"""The per-op rules of ``compiler.frontend.sequences``: how each sequence/optional op rewrites.

A sequence known at compile time is a :class:`Seq` (its element tensor names), an optional an
:class:`Opt` (absent, a tensor name or a :class:`Seq`). :class:`SequenceOps` holds one method per
op (``_<OpType>``); each returns the nodes replacing the node (updating the environment) or None
to leave the node in place, saying why in ``kept``. Positions follow the specs: ``SequenceInsert``
accepts ``[-n, n]`` (default ``n``, the end), ``SequenceErase`` and ``SequenceAt`` ``[-n, n-1]``
(``SequenceErase``'s default is the last). Semantics: the ONNX specs of SequenceConstruct,
SequenceEmpty, SequenceInsert, SequenceErase, SequenceAt, SequenceLength, SplitToSequence,
ConcatFromSequence (opset 11), SequenceMap (17), Optional, OptionalHasElement, OptionalGetElement
(15/18).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import onnx
from onnx import NodeProto, helper

from .control_flow import _attr, _constant_value, _unsqueeze, inline_body

SEQ_OPS = ("SequenceConstruct", "SequenceEmpty", "SequenceInsert", "SequenceAt", "SequenceErase",
           "SequenceLength", "SplitToSequence", "ConcatFromSequence", "SequenceMap", "Optional",
           "OptionalHasElement", "OptionalGetElement")


@dataclass
class Seq:
    """A sequence known at compile time: its element tensor names and element type (0: unknown)."""
    items: list[str]
    elem: int = 0


@dataclass
class Opt:
    """An optional known at compile time: absent (``value`` None; ``tp`` its declared type), a tensor
    name, or a :class:`Seq`."""
    value: str | Seq | None
    tp: onnx.TypeProto | None = None


def _nonstandard(n: NodeProto) -> bool:
    return n.domain not in ("", "ai.onnx")


def _label(n: NodeProto) -> str:
    return n.name or f"{n.op_type}({', '.join(o for o in n.output if o)})"


def _constant(out: str, value: np.ndarray, name: str) -> NodeProto:
    return helper.make_node("Constant", [], [out], name=name, value=onnx.numpy_helper.from_array(value, out))


def _elem_type(tp: onnx.TypeProto) -> int:
    """The tensor element type inside a (sequence/optional of) tensor type; 0 when unknown."""
    kind = tp.WhichOneof("value")
    if kind == "tensor_type":
        return int(tp.tensor_type.elem_type)
    if kind == "sequence_type":
        return _elem_type(tp.sequence_type.elem_type)
    if kind == "optional_type":
        return _elem_type(tp.optional_type.elem_type)
    return 0


class SequenceOps:
    """The op rules, mixed into the resolver of ``compiler.frontend.sequences`` (which provides
    ``env``, ``ctx``, ``nodes``, ``consts``, ``kept`` and the helpers ``seq_of``, ``pos``, ``dim``,
    ``fail``, ``elem_of`` and ``process``)."""

    env: dict[str, Any]
    ctx: Any
    nodes: list[NodeProto]
    consts: dict[str, np.ndarray]
    kept: dict[str, str]
    elem_of: Callable[[str], int]
    seq_of: Callable[[NodeProto, str], Seq | None]
    pos: Callable[[NodeProto, int, int, int, int], int | None]
    dim: Callable[[NodeProto, str, int], int | None]
    fail: Callable[[NodeProto, str], Exception]
    process: Callable[[list[NodeProto]], list[NodeProto]]

    def _SequenceConstruct(self, n: NodeProto, ins: list[str], out: str) -> list[NodeProto]:
        self.env[out] = Seq(list(ins), self.elem_of(ins[0]) if ins else 0)
        return []

    def _SequenceEmpty(self, n: NodeProto, ins: list[str], out: str) -> list[NodeProto]:
        self.env[out] = Seq([], int(_attr(n, "dtype", onnx.TensorProto.FLOAT)))
        return []

    def _SequenceInsert(self, n: NodeProto, ins: list[str], out: str) -> list[NodeProto] | None:
        s = self.seq_of(n, ins[0])
        p = None if s is None else self.pos(n, 2, len(s.items), len(s.items), len(s.items))
        if s is None or p is None:
            return None
        self.env[out] = Seq(s.items[:p] + [ins[1]] + s.items[p:], s.elem or self.elem_of(ins[1]))
        return []

    def _SequenceErase(self, n: NodeProto, ins: list[str], out: str) -> list[NodeProto] | None:
        s = self.seq_of(n, ins[0])
        if s is not None and not s.items:
            raise self.fail(n, "erasing from an empty sequence")
        p = None if s is None else self.pos(n, 1, len(s.items), len(s.items) - 1, len(s.items) - 1)
        if s is None or p is None:
            return None
        self.env[out] = Seq(s.items[:p] + s.items[p + 1:], s.elem)
        return []

    def _SequenceAt(self, n: NodeProto, ins: list[str], out: str) -> list[NodeProto] | None:
        s = self.seq_of(n, ins[0])
        if s is not None and not s.items:
            raise self.fail(n, "reading from an empty sequence")
        p = None if s is None else self.pos(n, 1, len(s.items), -1, len(s.items) - 1)
        if s is None or p is None:
            return None
        return [helper.make_node("Identity", [s.items[p]], [out], name=_label(n))]

    def _SequenceLength(self, n: NodeProto, ins: list[str], out: str) -> list[NodeProto] | None:
        s = self.seq_of(n, ins[0])
        if s is None:
            return None
        return [_constant(out, np.array(len(s.items), np.int64), _label(n))]

    def _SplitToSequence(self, n: NodeProto, ins: list[str], out: str) -> list[NodeProto] | None:
        x, axis, keepdims = ins[0], int(_attr(n, "axis", 0)), int(_attr(n, "keepdims", 1))
        squeeze = False
        if len(ins) > 1 and ins[1]:
            v = _constant_value(self.ctx, ins[1], self.nodes, self.consts)
            if v is None:
                self.kept[_label(n)] = f"split '{ins[1]}' is not a compile-time constant"
                return None
            v = np.asarray(v).astype(np.int64)
            if v.ndim == 0:
                d = self.dim(n, x, axis)
                if d is None:
                    return None
                s = int(v)
                if s <= 0:
                    raise self.fail(n, f"split {s} must be positive")
                sizes = [s] * (d // s) + ([d % s] if d % s else [])
            else:
                sizes = [int(t) for t in v.reshape(-1)]
        else:
            d = self.dim(n, x, axis)
            if d is None:
                return None
            sizes, squeeze = [1] * d, not keepdims
        elem = self.elem_of(x)
        if not sizes:
            self.env[out] = Seq([], elem)
            return []
        parts = [self.ctx.fresh(f"{out}_part") for _ in sizes]
        nodes: list[NodeProto] = []
        if self.ctx.opset >= 13:
            nodes.append(helper.make_node("Split", [x, self.ctx.const(np.array(sizes, np.int64))], parts, axis=axis,
                                          name=_label(n)))
        else:
            nodes.append(helper.make_node("Split", [x], parts, axis=axis, split=sizes, name=_label(n)))
        if squeeze:
            sq = [self.ctx.fresh(f"{out}_item") for _ in parts]
            for p, q in zip(parts, sq, strict=True):
                if self.ctx.opset >= 13:
                    nodes.append(helper.make_node("Squeeze", [p, self.ctx.const(np.array([axis], np.int64))], [q]))
                else:
                    nodes.append(helper.make_node("Squeeze", [p], [q], axes=[axis]))
            parts = sq
        self.env[out] = Seq(parts, elem)
        return nodes

    def _ConcatFromSequence(self, n: NodeProto, ins: list[str], out: str) -> list[NodeProto] | None:
        s = self.seq_of(n, ins[0])
        if s is None:
            return None
        if not s.items:
            raise self.fail(n, "concatenating an empty sequence")
        axis = _attr(n, "axis")
        if axis is None:
            raise self.fail(n, "attribute 'axis' is required")
        nodes: list[NodeProto] = []
        parts = list(s.items)
        if int(_attr(n, "new_axis", 0)):
            parts = [_unsqueeze(self.ctx, p, int(axis), nodes) for p in parts]
        nodes.append(helper.make_node("Concat", parts, [out], axis=int(axis), name=_label(n)))
        return nodes

    def _SequenceMap(self, n: NodeProto, ins: list[str], out: str) -> list[NodeProto] | None:
        body = _attr(n, "body")
        seqs: list[Seq | None] = []
        for k, name in enumerate(ins):
            v = self.env.get(name)
            if k == 0 or v is not None:
                s = self.seq_of(n, name)
                if s is None:
                    return None
                seqs.append(s)
            else:
                seqs.append(None)
        lengths = {len(s.items) for s in seqs if s is not None}
        if len(lengths) > 1:
            raise self.fail(n, f"its input sequences have different lengths {sorted(lengths)}")
        length = lengths.pop()
        collected: list[list[str]] = [[] for _ in body.output]
        nodes: list[NodeProto] = []
        for i in range(length):
            bind = {body.input[k].name: (s.items[i] if s is not None else ins[k]) for k, s in enumerate(seqs)}
            body_nodes, outs = inline_body(self.ctx, body, bind)
            nodes.extend(self.process(body_nodes))
            for j, o in enumerate(outs):
                collected[j].append(o)
        for j, o in enumerate(n.output):
            if o:
                self.env[o] = Seq(collected[j], _elem_type(body.output[j].type))
        return nodes

    def _Optional(self, n: NodeProto, ins: list[str], out: str) -> list[NodeProto]:
        if ins and ins[0]:
            v = self.env.get(ins[0])
            if isinstance(v, Opt):
                raise self.fail(n, f"input '{ins[0]}' is already an optional")
            self.env[out] = Opt(v if isinstance(v, Seq) else ins[0])
        else:
            self.env[out] = Opt(None, _attr(n, "type"))
        return []

    def _OptionalHasElement(self, n: NodeProto, ins: list[str], out: str) -> list[NodeProto]:
        v = self.env.get(ins[0]) if ins and ins[0] else Opt(None)
        has = not (isinstance(v, Opt) and v.value is None)
        return [_constant(out, np.array(has), _label(n))]

    def _OptionalGetElement(self, n: NodeProto, ins: list[str], out: str) -> list[NodeProto]:
        v = self.env.get(ins[0])
        if isinstance(v, Opt):
            if v.value is None:
                raise self.fail(n, f"optional '{ins[0]}' is empty at compile time")
            v = v.value
        if isinstance(v, Seq):
            self.env[out] = v
            return []
        return [helper.make_node("Identity", [v if isinstance(v, str) else ins[0]], [out], name=_label(n))]
