"""Narrow element types as storage types computed in a wider compute type (type legalization).

The code generator computes in float32/float64 and 8..64-bit integers. Like XLA's float
normalization and TVM's BF16/FP8 legalization, :func:`legalize` rewrites a model whose tensors have
a narrow element type so that every tensor has its *compute* type, and every place where the model
*produces* a narrow value rounds explicitly to the narrow format:

========================================================  ===========
storage type                                              compute type
========================================================  ===========
float16, bfloat16, float8e4m3fn, float8e4m3fnuz,          float32
float8e5m2, float8e5m2fnuz, float8e8m0, float4e2m1
int4, int2                                                int8
uint4, uint2                                              uint8
========================================================  ===========

A compute-type buffer always holds values of the storage format (on the format's grid, in its
integer range): graph inputs are widened exactly by the caller, initializers and ``Constant`` /
``ConstantOfShape`` values are decoded exactly here, and each node output whose ONNX type is narrow
is followed by a ``prism.NarrowCast`` node (``compiler.ops.narrow``) converting it to the format:

- ``Cast``/``CastLike`` to a narrow float: a cast to float32, then ``NarrowCast`` with the node's
  ``saturate`` (float8 only, ONNX Cast opset 19) and ``round_mode`` (float8e8m0, opset 24);
- ``Cast``/``CastLike`` to int4/uint4/int2/uint2: replaced by ``NarrowCast`` (truncate toward zero,
  then wrap, as ``onnx.reference``'s ``astype``);
- ``QuantizeLinear`` to a narrow type: computed to int8/uint8 (then clipped to the narrow range by a
  saturating ``NarrowCast``) or, for float8/float4e2m1, as ``x / y_scale`` in float32 (``+ zero_point``
  for float4e2m1 only: ``onnx.reference`` ignores a float8 zero point), then ``NarrowCast``;
- ``DequantizeLinear`` of float8/float4e2m1 data: its zero point is dropped (the reference ignores it);
- any other op with a narrow float output (``Celu``, ``Einsum``, ``Attention`` in bfloat16 ...) is
  computed in float32 and its result rounded once, as ``ml_dtypes`` arithmetic in
  ``onnx.reference`` (and numpy's float16) rounds every op's result. Ops that only move or select
  values (``VALUE_PRESERVING``: Reshape, Transpose, Gather, Concat, Compress, Unique, OneHot ...)
  produce values already on the grid and get no rounding step.

float16 is the exception: its values are computed in float32 with no rounding step inside the
graph (a ``Cast`` to float16 is a cast to float32) and rounded once where they leave it, when the
caller encodes the outputs (CPU mixed precision; Prism's float16 rule before this module). Rounding
every float16 op as well was tried: it moved a float16 attention expansion of the ONNX suite
outside its tolerance, because ``onnx.reference`` rounds float16 at points of its own (inside
MatMul, Softmax ...) that per-op rounding does not reproduce.

The caller (``compiler.backend``) widens narrow inputs (``ml_dtypes`` arrays from
``onnx.numpy_helper.to_array``) with ``.astype`` and encodes the outputs back to their declared
narrow types with ``ml_dtypes`` (exact: they are on the grid). Types of intermediate values come
from ``onnx.shape_inference`` on the original model (and the declared value infos).

Known limitations: storage is widened, so a float8 or int4 tensor takes 4 or 1 bytes per element
in memory (packed storage is future work); a cast from float64 or from an integer above 2^24 to a
narrow float rounds twice (to float32, then to the format); complex and string stay unsupported.
"""

from __future__ import annotations

import itertools

import numpy as np
import onnx
from onnx import (
    AttributeProto,
    GraphProto,
    ModelProto,
    NodeProto,
    TensorProto,
    helper,
    numpy_helper,
)

from ..ops.narrow import BY_ELEM, DOMAIN, FORMATS, INT_BITS, OP

F16, F32 = TensorProto.FLOAT16, TensorProto.FLOAT
FLOAT8 = {"float8e4m3fn", "float8e4m3fnuz", "float8e5m2", "float8e5m2fnuz"}
VALUE_PRESERVING = frozenset({
    "Identity", "Reshape", "Flatten", "Squeeze", "Unsqueeze", "Transpose", "Concat", "Split", "Slice", "Gather",
    "GatherElements", "GatherND", "Expand", "Tile", "Compress", "ReverseSequence", "Unique", "OneHot", "Where",
    "Constant", "ConstantOfShape", "DepthToSpace", "SpaceToDepth", "TopK", "Max", "Min", "Relu", "MaxPool",
    "ReduceMax", "ReduceMin", "If", "Loop", "Scan", "Dropout", "Shape", "Size", "Pad", "ScatterND",
    "ScatterElements", "Trilu", "CenterCropPad",
})  # not Neg/Abs: -(-8) leaves int4, and -0 does not exist in the fnuz formats
_TYPE_ATTRS = ("to", "dtype", "output_dtype")


def compute_elem(elem: int) -> int:
    """The compute elem type of ``elem`` (itself when it is not narrow)."""
    name = BY_ELEM.get(elem)
    return elem if name is None else FORMATS[name][1]


def storage_dtype(elem: int) -> np.dtype:
    """The numpy (``ml_dtypes``) dtype of ONNX elem type ``elem``: ``ml_dtypes.bfloat16`` ..."""
    return np.dtype(helper.tensor_dtype_to_np_dtype(elem))


def widen(a: np.ndarray) -> np.ndarray:
    """``a`` in its compute dtype when its dtype is narrow (exact), else ``a`` itself."""
    try:
        elem = helper.np_dtype_to_tensor_dtype(a.dtype)
    except (KeyError, ValueError, TypeError):
        return a
    c = compute_elem(elem)
    return a if c == elem else a.astype(helper.tensor_dtype_to_np_dtype(c))


def _type_elems(t: onnx.TypeProto) -> list[int]:
    kind = t.WhichOneof("value")
    if kind == "tensor_type":
        return [t.tensor_type.elem_type]
    if kind == "sequence_type":
        return _type_elems(t.sequence_type.elem_type)
    if kind == "optional_type":
        return _type_elems(t.optional_type.elem_type)
    return []


def _graphs(n: NodeProto) -> list[GraphProto]:
    return [g for a in n.attribute for g in ([a.g] if a.type == AttributeProto.GRAPH else list(a.graphs))]


def uses_narrow_types(model: ModelProto) -> bool:
    """True when any tensor type, initializer, tensor attribute or ``to``/``dtype``/``output_dtype``
    attribute of ``model`` (subgraphs included) names a narrow elem type."""
    def graph(g: GraphProto) -> bool:
        for vi in itertools.chain(g.input, g.output, g.value_info):
            if any(e in BY_ELEM for e in _type_elems(vi.type)):
                return True
        if any(t.data_type in BY_ELEM for t in g.initializer):
            return True
        for n in g.node:
            for a in n.attribute:
                if a.type == AttributeProto.INT and a.name in _TYPE_ATTRS and a.i in BY_ELEM or \
                        a.type == AttributeProto.TENSOR and a.t.data_type in BY_ELEM or \
                        a.type == AttributeProto.TENSORS and any(t.data_type in BY_ELEM for t in a.tensors):
                    return True
            if any(graph(sg) for sg in _graphs(n)):
                return True
        return False
    return graph(model.graph)


def _collect(g: GraphProto, acc: dict[str, int]) -> None:
    for vi in itertools.chain(g.input, g.output, g.value_info):
        if vi.type.WhichOneof("value") == "tensor_type":
            acc.setdefault(vi.name, vi.type.tensor_type.elem_type)
    for t in g.initializer:
        acc.setdefault(t.name, t.data_type)
    for n in g.node:
        for sg in _graphs(n):
            _collect(sg, acc)


def _widen_type(t: onnx.TypeProto) -> None:
    kind = t.WhichOneof("value")
    if kind == "tensor_type":
        t.tensor_type.elem_type = compute_elem(t.tensor_type.elem_type)
    elif kind == "sequence_type":
        _widen_type(t.sequence_type.elem_type)
    elif kind == "optional_type":
        _widen_type(t.optional_type.elem_type)


def _decode(t: TensorProto) -> None:
    if t.data_type in BY_ELEM:
        t.CopyFrom(numpy_helper.from_array(widen(numpy_helper.to_array(t)), t.name))


class _Legalizer:
    def __init__(self, model: ModelProto) -> None:
        self.types: dict[str, int] = {}
        try:
            _collect(onnx.shape_inference.infer_shapes(model).graph, self.types)
        except Exception:  # inference is best effort: declared types are used as they are
            pass
        _collect(model.graph, self.types)
        names: set[str] = set()

        def all_names(g: GraphProto) -> None:
            names.update(vi.name for vi in itertools.chain(g.input, g.output, g.value_info))
            names.update(t.name for t in g.initializer)
            for n in g.node:
                names.update(n.output)
                for sg in _graphs(n):
                    all_names(sg)
        all_names(model.graph)
        self.names = names
        self.inserted = 0
        self.value_infos: list[onnx.ValueInfoProto] = []

    def fresh(self, base: str) -> str:
        k = 0
        while f"{base}_{k}" in self.names:
            k += 1
        self.names.add(f"{base}_{k}")
        return f"{base}_{k}"

    def out_elem(self, n: NodeProto) -> int | None:
        """The original ONNX elem type of ``n``'s first output."""
        attrs = {a.name: a for a in n.attribute}
        if n.op_type == "Cast" and "to" in attrs:
            return int(attrs["to"].i)
        if n.op_type == "CastLike" and len(n.input) > 1:
            return self.types.get(n.input[1])
        if n.op_type == "QuantizeLinear":
            if len(n.input) > 2 and n.input[2]:
                return self.types.get(n.input[2])
            return int(attrs["output_dtype"].i) if "output_dtype" in attrs and attrs["output_dtype"].i else \
                TensorProto.UINT8
        return self.types.get(n.output[0]) if n.output and n.output[0] else None

    def narrow(self, src: str, dst: str, fmt: str, saturate: int = 0, round_mode: str | None = None) -> NodeProto:
        self.inserted += 1
        for name in (src, dst):  # typed for onnx.shape_inference (function bodies that depend on types)
            self.value_infos.append(helper.make_tensor_value_info(name, FORMATS[fmt][1], None))
        kw = {"round_mode": round_mode} if round_mode is not None else {}
        return helper.make_node(OP, [src], [dst], domain=DOMAIN, to=fmt, saturate=int(saturate),
                                name=self.fresh(f"{dst}_narrow"), **kw)

    def graph(self, g: GraphProto) -> None:
        for vi in itertools.chain(g.input, g.output, g.value_info):
            _widen_type(vi.type)
        for t in g.initializer:
            _decode(t)
        nodes: list[NodeProto] = []
        outer, self.value_infos = self.value_infos, []
        for n in g.node:
            nodes.extend(self.node(n))
        del g.node[:]
        g.node.extend(nodes)
        declared = {vi.name for vi in itertools.chain(g.input, g.output, g.value_info)}
        g.value_info.extend(vi for vi in self.value_infos if vi.name not in declared)
        self.value_infos = outer

    def node(self, n: NodeProto) -> list[NodeProto]:
        default = n.domain in ("", "ai.onnx")
        first = self.out_elem(n) if default else None
        in_elems = [self.types.get(i) for i in n.input]
        attrs = {a.name: a for a in n.attribute}
        saturate = int(attrs["saturate"].i) if "saturate" in attrs else 1
        round_mode = attrs["round_mode"].s.decode() if "round_mode" in attrs else "up"
        for a in n.attribute:  # decode tensors, widen type attributes, recurse into bodies
            if a.type == AttributeProto.TENSOR:
                _decode(a.t)
            elif a.type == AttributeProto.TENSORS:
                for t in a.tensors:
                    _decode(t)
            elif a.type == AttributeProto.INT and a.name in _TYPE_ATTRS:
                a.i = compute_elem(int(a.i))
        for sg in _graphs(n):
            self.graph(sg)
        fmt = BY_ELEM.get(first) if first is not None else None
        fmt = None if fmt == "float16" else fmt  # float16: no rounding steps (module docstring)
        if not default:
            return [n]
        if n.op_type in ("Cast", "CastLike") and fmt is not None:
            if fmt in INT_BITS:  # the conversion itself: truncate and wrap
                return [self.narrow(n.input[0], n.output[0], fmt)]
            n = helper.make_node("Cast", [n.input[0]], [n.output[0]], name=n.name, to=F32)  # CastLike: known target
            return self.follow(n, fmt, saturate if fmt in FLOAT8 or fmt == "float8e8m0" else 0,
                               round_mode if fmt == "float8e8m0" else None)
        if n.op_type == "QuantizeLinear" and fmt is not None:
            _drop_attrs(n, ("saturate",))
            if fmt in INT_BITS:
                return self.follow(n, fmt, 1)
            if fmt in FLOAT8 and len(n.input) > 2:
                del n.input[2:]
            _drop_attrs(n, ("output_dtype",))
            if len(n.input) < 3 or not n.input[2]:
                n.attribute.append(helper.make_attribute("output_dtype", F32))
            return self.follow(n, fmt, saturate if fmt in FLOAT8 else 0)
        if n.op_type == "DequantizeLinear" and in_elems and BY_ELEM.get(in_elems[0] or 0, "") in \
                FLOAT8 | {"float4e2m1"} and len(n.input) > 2:
            del n.input[2:]
        if fmt is not None and n.op_type not in VALUE_PRESERVING:
            return self.follow(n, fmt, 0)
        return [n]

    def follow(self, n: NodeProto, fmt: str, saturate: int, round_mode: str | None = None) -> list[NodeProto]:
        """``n`` writing a fresh value, then a NarrowCast from it to ``n``'s first output."""
        out = n.output[0]
        wide = self.fresh(f"{out}_wide")
        n.output[0] = wide
        return [n, self.narrow(wide, out, fmt, saturate, round_mode)]


def _drop_attrs(n: NodeProto, names: tuple[str, ...]) -> None:
    keep = [a for a in n.attribute if a.name not in names]
    del n.attribute[:]
    n.attribute.extend(keep)


def legalize(model: ModelProto) -> ModelProto:
    """A copy of ``model`` with narrow types computed in their compute types and explicit
    ``prism.NarrowCast`` rounding steps (module docstring); ``model`` is not modified. The copy
    imports the ``prism`` domain (version 1) when it has such a step."""
    out = ModelProto()
    out.CopyFrom(model)
    lg = _Legalizer(out)
    lg.graph(out.graph)
    if lg.inserted and not any(o.domain == DOMAIN for o in out.opset_import):
        out.opset_import.append(helper.make_opsetid(DOMAIN, 1))
    return out


def narrow_outputs(model: ModelProto) -> dict[int, np.dtype]:
    """``{output index: storage dtype}`` for the graph outputs of ``model`` with a narrow type."""
    out = {}
    for k, o in enumerate(model.graph.output):
        elems = _type_elems(o.type)
        if elems and elems[0] in BY_ELEM:
            out[k] = storage_dtype(elems[0])
    return out


__all__ = ["VALUE_PRESERVING", "compute_elem", "legalize", "narrow_outputs", "storage_dtype", "uses_narrow_types",
           "widen"]
