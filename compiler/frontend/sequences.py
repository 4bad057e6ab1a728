"""Sequence and optional values resolved at compile time into tensors (static lists).

Prism's graph IR holds tensors only. As TVM's ONNX frontend does for static lists, a sequence
whose length and positions are known at compile time is a Python list of tensor names here, and
an optional value is present or absent at compile time; :func:`resolve_sequences` rewrites the
ONNX graph (before import, with ``compiler.frontend.control_flow``) so that no sequence or
optional value is left:

* ``SequenceConstruct``/``SequenceEmpty`` make a list; ``SequenceInsert``/``SequenceErase`` edit it
  at a constant position (default: the end); ``SequenceAt`` becomes an ``Identity`` of the element;
  ``SequenceLength`` a ``Constant``.
* ``SplitToSequence`` becomes a ``Split`` (its ``split`` input constant; without it, pieces of 1 along
  ``axis``, squeezed when ``keepdims=0``); ``ConcatFromSequence`` a ``Concat`` (each element
  ``Unsqueeze``d first when ``new_axis=1``).
* ``SequenceMap`` inlines its body once per element (all sequence inputs the same length).
* ``Optional`` makes a present (an input) or absent (none) value; ``OptionalHasElement`` becomes a
  ``Constant`` (an empty input name is absent, a tensor or sequence is present);
  ``OptionalGetElement`` an ``Identity`` (an error on an absent value). ``Identity`` of a sequence
  or an optional is the same list or value.

A graph output that is a sequence or an optional becomes its element outputs ``<name>__seq<i>``
(an optional tensor: ``<name>``, absent: nothing); the layout is recorded in the model's
``metadata_props`` under :data:`LAYOUT_KEY` for the backend (``compiler.frontend.sequence_io``).

A value read by a node this module leaves in place (an ``If``/``Loop``/``Scan`` not resolved yet,
or a sequence op whose position is not yet constant) is rebuilt where it was made
(``SequenceConstruct``, ``SequenceEmpty``, ``Optional``), so that a later round, after control flow
is unrolled, finishes the job. With ``final=True`` a sequence or optional that is still left raises
CompileError naming the node and why (e.g. a position or a length that depends on data).

Semantics: the ONNX specs of the sequence ops (opset 11+), SequenceMap (17), Optional,
OptionalHasElement and OptionalGetElement (15/18).
"""

from __future__ import annotations

import json
import re
from typing import Any

import numpy as np
import onnx
from onnx import ModelProto, NodeProto, helper

from ..errors import CompileError
from .control_flow import CONTROL, _constant_value, _Ctx, _shape_of
from .sequence_ops import (
    SEQ_OPS,
    Opt,
    Seq,
    SequenceOps,
    _elem_type,
    _label,
    _nonstandard,
)

LAYOUT_KEY = "prism.sequence_outputs"


def needs_resolution(model: ModelProto) -> bool:
    """True when ``model``'s top-level graph uses a sequence/optional op or has a sequence or
    optional graph input or output."""
    vis = list(model.graph.input) + list(model.graph.output)
    return any(n.op_type in SEQ_OPS and not _nonstandard(n) for n in model.graph.node) or \
        any(vi.type.WhichOneof("value") in ("sequence_type", "optional_type") for vi in vis)


class _SeqCtx(_Ctx):
    """Fresh names ``<base>__sq<n>``, ``n`` past every such name already in the model (an earlier
    round's), so that names made in different rounds never collide."""

    def __init__(self, model: ModelProto) -> None:
        super().__init__(model)
        text = " ".join(_all_names(model.graph))
        self.n = max((int(k) for k in re.findall(r"__sq(\d+)", text)), default=0)

    def fresh(self, base: str) -> str:
        self.n += 1
        return f"{base}__sq{self.n}"


def _all_names(g: onnx.GraphProto) -> list[str]:
    out = [t.name for t in g.initializer] + [i.name for i in g.input]
    for n in g.node:
        out.extend(n.output)
        for a in n.attribute:
            for sg in [a.g] if a.type == onnx.AttributeProto.GRAPH else list(a.graphs):
                out.extend(_all_names(sg))
    return out


class _Resolver(SequenceOps):
    def __init__(self, model: ModelProto) -> None:
        self.model = model
        self.ctx = _SeqCtx(model)
        self.nodes = list(model.graph.node)
        self.consts = {t.name: onnx.numpy_helper.to_array(t) for t in model.graph.initializer}
        for n in self.nodes:
            if n.op_type == "Constant" and n.attribute and n.attribute[0].name == "value":
                self.consts[n.output[0]] = onnx.numpy_helper.to_array(n.attribute[0].t)
        self.shapes: dict[str, list[int]] | None = None
        self.types = {vi.name: vi.type for vi in list(model.graph.input) + list(model.graph.value_info)}
        self.unknown = {vi.name for vi in model.graph.input
                        if vi.type.WhichOneof("value") in ("sequence_type", "optional_type")}
        self.env: dict[str, Seq | Opt] = {}
        self.kept: dict[str, str] = {}  # label of a node left in place -> why
        self.needed: set[str] = set()  # values read by a node left in place: rebuilt where made
        self.again = False  # a new value joined ``needed``: the caller reruns

    # --- helpers ---------------------------------------------------------------------------------
    def const_int(self, n: NodeProto, name: str, what: str) -> list[int] | None:
        v = _constant_value(self.ctx, name, self.nodes, self.consts)
        if v is None:
            self.kept[_label(n)] = f"{what} '{name}' is not a compile-time constant"
            return None
        return [int(x) for x in np.asarray(v).reshape(-1)]

    def dim(self, n: NodeProto, x: str, axis: int) -> int | None:
        if self.shapes is None:
            self.shapes = _shape_of(self.model)
        shp = self.shapes.get(x)
        if shp is None:
            self.kept[_label(n)] = f"the shape of '{x}' is not known at compile time"
            return None
        return shp[axis % len(shp)] if shp else None

    def fail(self, n: NodeProto, why: str) -> CompileError:
        return CompileError("import", f"{_label(n)} ({n.op_type}): {why}", node=_label(n), op=n.op_type)

    def seq_of(self, n: NodeProto, name: str) -> Seq | None:
        v = self.env.get(name)
        if isinstance(v, Opt) and isinstance(v.value, Seq):
            return v.value
        if isinstance(v, Seq):
            return v
        if isinstance(v, Opt):
            raise self.fail(n, f"input '{name}' is an optional without a sequence")
        self.kept[_label(n)] = f"sequence '{name}' is not known at compile time"
        return None

    def pos(self, n: NodeProto, k: int, length: int, default: int, hi: int) -> int | None:
        if len(n.input) <= k or not n.input[k]:
            return default
        p = self.const_int(n, n.input[k], "position")
        if p is None:
            return None
        q = p[0] + length if p[0] < 0 else p[0]
        if not 0 <= q <= hi:
            raise self.fail(n, f"position {p[0]} is out of range for a sequence of {length} tensors")
        return q

    # --- one node ---------------------------------------------------------------------------------
    def rewrite(self, n: NodeProto) -> list[NodeProto] | None:
        """The nodes replacing ``n`` (the env updated), or None to keep ``n`` (``kept`` says why for
        a sequence op)."""
        op, ins = n.op_type, list(n.input)
        out = n.output[0] if n.output else ""
        if _nonstandard(n):
            return None
        if op == "Identity" and ins[0] in self.env:
            self.env[out] = self.env[ins[0]]
            return []
        if op == "Identity" or op not in SEQ_OPS:
            return None
        if any(i in self.unknown for i in ins):
            self.kept[_label(n)] = "its input is a sequence or optional not known at compile time"
            return None
        return getattr(self, f"_{op}")(n, ins, out)

    def elem_of(self, name: str) -> int:
        tp = self.types.get(name)
        if tp is not None and tp.WhichOneof("value") == "tensor_type":
            return int(tp.tensor_type.elem_type)
        if name in self.consts:
            return int(helper.np_dtype_to_tensor_dtype(self.consts[name].dtype))
        return 0

    # --- a node list --------------------------------------------------------------------------------
    def process(self, nodes: list[NodeProto]) -> list[NodeProto]:
        """Rewrite ``nodes`` in order; a node left in place gets the sequence/optional values it reads
        rebuilt where they were made (``needed``; a new one sets ``again`` and the caller reruns)."""
        out: list[NodeProto] = []
        for n in nodes:
            nested = any(a.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS) for a in n.attribute)
            rep = None if nested and n.op_type != "SequenceMap" else self.rewrite(n)
            if rep is None:
                for r in [i for i in n.input if i] + _subgraph_reads(n):
                    if r in self.env and r not in self.needed:
                        self.needed.add(r)
                        self.again = True
                if n.op_type in SEQ_OPS + CONTROL + ("Identity",) and \
                        (n.op_type != "Identity" or n.input[0] in self.unknown):
                    self.unknown.update(o for o in n.output if o)
                out.append(n)
                continue
            out.extend(rep)
            for o in n.output:
                if o in self.env and o in self.needed:
                    out.extend(self.materialize(o, self.env[o]))
        return out

    def materialize(self, name: str, v: Seq | Opt) -> list[NodeProto]:
        if isinstance(v, Seq):
            if v.items:
                return [helper.make_node("SequenceConstruct", v.items, [name])]
            return [helper.make_node("SequenceEmpty", [], [name], dtype=v.elem or onnx.TensorProto.FLOAT)]
        if v.value is None:
            tp = v.tp or helper.make_tensor_type_proto(onnx.TensorProto.FLOAT, None)
            return [helper.make_node("Optional", [], [name], type=tp)]
        if isinstance(v.value, Seq):
            tmp = self.ctx.fresh(f"{name}_seq")
            return self.materialize(tmp, v.value) + [helper.make_node("Optional", [tmp], [name])]
        return [helper.make_node("Optional", [v.value], [name])]


def _subgraph_reads(n: NodeProto) -> list[str]:
    out: list[str] = []
    for a in n.attribute:
        for g in [a.g] if a.type == onnx.AttributeProto.GRAPH else list(a.graphs):
            for m in g.node:
                out.extend(i for i in m.input if i)
                out.extend(_subgraph_reads(m))
    return out


def _is_value_type(tp: onnx.TypeProto) -> bool:
    return tp.WhichOneof("value") in ("sequence_type", "optional_type")


def _sig(nodes: Any) -> list[tuple[str, tuple[str, ...], tuple[str, ...]]]:
    return [(n.op_type, tuple(n.input), tuple(n.output)) for n in nodes]


def _flatten_outputs(r: _Resolver, outputs: list[onnx.ValueInfoProto]
                     ) -> tuple[list[onnx.ValueInfoProto], list[NodeProto], dict[str, Any]]:
    """Graph outputs with each known sequence/optional replaced by its element outputs, the
    ``Identity`` nodes that name them, and their layout (``{name: {"kind", "names"}}``)."""
    new: list[onnx.ValueInfoProto] = []
    nodes: list[NodeProto] = []
    layout: dict[str, Any] = {}
    for vo in outputs:
        v = r.env.get(vo.name)
        if v is None:
            new.append(vo)
            continue
        inner = v.value if isinstance(v, Opt) else v
        if inner is None:
            layout[vo.name] = {"kind": "absent", "names": []}
            continue
        items = [inner] if isinstance(inner, str) else inner.items
        names = [f"{vo.name}__opt"] if isinstance(inner, str) else [f"{vo.name}__seq{i}" for i in range(len(items))]
        for item, nm in zip(items, names, strict=True):
            nodes.append(helper.make_node("Identity", [item], [nm]))
            elem = _elem_type(vo.type) or (inner.elem if isinstance(inner, Seq) else 0) or r.elem_of(item)
            new.append(helper.make_tensor_value_info(nm, elem, None))
        layout[vo.name] = {"kind": "tensor" if isinstance(inner, str) else "sequence", "names": names}
    return new, nodes, layout


def resolve_sequences(model: ModelProto, *, final: bool = False, kept: dict[str, str] | None = None) -> ModelProto:
    """A copy of ``model`` with its sequence and optional values resolved into tensors (see the
    module docstring); ``model`` itself when there is nothing to do.

    Raises CompileError(stage="import") naming the node for an invalid use (a position out of
    range, an empty sequence read, an absent optional's element) and, with ``final=True``, for a
    sequence or optional still left (its reason, e.g. a position not known at compile time).
    ``kept`` receives ``{node label: why it stays}`` for the sequence nodes left in place."""
    if not needs_resolution(model):
        return model
    needed: set[str] = set()
    for _ in range(32):
        r = _Resolver(model)
        r.needed, r.again = set(needed), False
        nodes = r.process(list(model.graph.node))
        if not r.again:
            break
        needed = r.needed
    outputs, out_nodes, layout = _flatten_outputs(r, list(model.graph.output))
    nodes += out_nodes
    if kept is not None:
        kept.update(r.kept)
    if final:
        _check_resolved(r, nodes, outputs, model)
    if not layout and _sig(nodes) == _sig(model.graph.node):
        return model
    out = ModelProto()
    out.CopyFrom(model)
    del out.graph.node[:]
    out.graph.node.extend(nodes)
    del out.graph.output[:]
    out.graph.output.extend(outputs)
    out.graph.initializer.extend(r.ctx.inits)
    keep = [vi for vi in out.graph.value_info if not _is_value_type(vi.type) or vi.name in r.unknown]
    del out.graph.value_info[:]
    out.graph.value_info.extend(keep)
    if layout:
        props = {p.key: p for p in out.metadata_props}
        old = json.loads(props[LAYOUT_KEY].value) if LAYOUT_KEY in props else {}
        old.update(layout)
        if LAYOUT_KEY in props:
            props[LAYOUT_KEY].value = json.dumps(old)
        else:
            out.metadata_props.add(key=LAYOUT_KEY, value=json.dumps(old))
    return out


def _check_resolved(r: _Resolver, nodes: list[NodeProto], outputs: list[onnx.ValueInfoProto],
                    model: ModelProto) -> None:
    for vi in list(model.graph.input):
        if _is_value_type(vi.type):
            raise CompileError("import", f"graph input {vi.name!r} is a sequence or optional: give its elements as "
                               "tensor inputs (compiler.frontend.sequence_io, as the ONNX backend does)")
    left = [n for n in nodes if n.op_type in SEQ_OPS and not _nonstandard(n)]
    for n in sorted(left, key=lambda n: _label(n) not in r.kept):  # a node with its reason first
        why = r.kept.get(_label(n), "its sequence or optional input is not known at compile time")
        raise r.fail(n, f"cannot resolve the sequence/optional value at compile time: {why}")
    for vo in outputs:
        if _is_value_type(vo.type):
            raise CompileError("import", f"graph output {vo.name!r} is a sequence or optional whose elements are "
                               "not known at compile time (its length or presence depends on data)")
