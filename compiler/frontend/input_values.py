"""Input values: bind the value of a graph input, not only its shape (issue 13 item 1).

A bound input becomes a constant of the compiled model, as TVM's ``bind_params_by_name`` binds
parameters: :func:`bind_input_values` replaces the graph input by an initializer holding the given
values, so the compile-time resolution that follows (``compiler.frontend.control_flow``: an ``If``
whose condition folds, a ``Loop`` whose trip count folds; constant folding of shape slots) sees it
as a constant. The compiled program no longer takes that input.

:func:`value_inputs` finds the inputs worth binding (small integer or bool inputs whose value reaches
an ``If`` condition, a ``Loop`` trip count or condition, or a shape slot such as ``Reshape``'s
``shape``) for the explorer's form and ``compiler.inspect_model``. An ``If`` left with a condition known only at run time is compiled
with both branches and decided at run time (``compiler.driver.control``), never with a guessed one.

Semantics: the ONNX IR spec (an initializer of a graph is a constant value; IR version 4 and later
need not list it among the graph inputs) and the operator spec of each op for which input is a
shape slot.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import onnx
from onnx import GraphProto, ModelProto, helper, numpy_helper

from ..errors import CompileError, syntax

InputValues = Mapping[str, Any]

#: ``op_type -> input positions`` whose value decides a shape, a count or a branch (ONNX operator spec)
CONTROL_SLOTS: dict[str, tuple[int, ...]] = {
    "If": (0,), "Loop": (0, 1), "Reshape": (1,), "Expand": (1,), "Tile": (1,), "ConstantOfShape": (0,),
    "Range": (0, 1, 2), "Slice": (1, 2, 3, 4), "Pad": (1, 3), "Resize": (3,), "TopK": (1,), "OneHot": (1,),
    "Squeeze": (1,), "Unsqueeze": (1,), "Split": (1,), "ReduceSum": (1,), "ReduceMean": (1,),
    "ReduceMax": (1,), "ReduceMin": (1,), "ReduceProd": (1,), "CenterCropPad": (1,), "NonMaxSuppression": (2,),
}
_SLOT_NAMES = {("If", 0): "the condition", ("Loop", 0): "the trip count", ("Loop", 1): "the loop condition"}
_MAX_ELEMENTS = 16  # an input with more elements is data, not a mode flag or a size


def parse_input_value(text: str) -> tuple[str, list[int | float]]:
    """``"mode=1"`` -> ``("mode", [1])``; ``"sizes=2,3.5"`` -> ``("sizes", [2, 3.5])``; ``true``/``false``
    are 1/0. Raises CompileError(stage="request") naming the argument for anything else."""
    name, sep, text_values = text.partition("=")
    if not sep or not name or not text_values.strip():
        raise CompileError("request", f"--input-value {text!r}: expected NAME=V[,V...] (e.g. mode=1)")
    out: list[int | float] = []
    for part in text_values.split(","):
        p = part.strip().lower()
        try:
            out.append(1 if p == "true" else 0 if p == "false" else int(p) if p.lstrip("+-").isdigit() else float(p))
        except ValueError:
            raise CompileError("request", f"--input-value {text!r}: values must be numbers separated by "
                               "commas") from None
    return name, out


def _declared(vi: onnx.ValueInfoProto) -> list[int | str] | None:
    tt = vi.type.tensor_type
    if not tt.HasField("shape"):
        return None
    return [int(d.dim_value) if d.HasField("dim_value") else (d.dim_param or "?") for d in tt.shape.dim]


def _value_shape(name: str, declared: list[int | str] | None, given: Sequence[int] | None, count: int) -> list[int]:
    """The shape the values of input ``name`` fill: its bound or declared static shape, or ``[count]``
    for a rank-1 (or unknown-rank) input with a symbolic dim."""
    if given is not None:
        shape = [int(d) for d in given]
    elif declared is not None and all(isinstance(d, int) for d in declared):
        shape = [int(d) for d in declared]
    elif declared is None or len(declared) == 1:
        shape = [count]
    else:
        raise CompileError("request", f"input value for {name!r}: its shape [{', '.join(map(str, declared))}] has "
                           "unbound dims; give it " + syntax(f"with --input-shape {name}=D1,D2,...", "a shape in input_shapes") + " too")
    need = math.prod(shape)
    if need != count:
        raise CompileError("request", f"input value for {name!r}: the input has shape {shape} ({need} "
                           f"element{'s' if need != 1 else ''}), {count} value{'s' if count != 1 else ''} given",
                           node=name)
    return shape


def _array(name: str, elem: int, values: Any) -> np.ndarray:
    """``values`` as an array of input ``name``'s element type; raises CompileError(stage="request")
    for a value that type cannot hold exactly (a fraction for an integer, 2 for a bool, out of range)."""
    flat = np.asarray(values, dtype=object).reshape(-1).tolist()
    try:
        dtype = np.dtype(helper.tensor_dtype_to_np_dtype(elem))
    except Exception:
        dtype = np.dtype(object)
    if dtype.kind not in "biuf":
        raise CompileError("request", f"input value for {name!r}: the input's element type "
                           f"{onnx.TensorProto.DataType.Name(elem).lower()} cannot be bound to a value")
    for v in flat:
        ok = isinstance(v, int | float | np.integer | np.floating | bool) and not (isinstance(v, float) and math.isnan(v)
                                                                                  and dtype.kind != "f")
        if ok and dtype.kind in "biu":
            ok = float(v).is_integer() and (v in (0, 1) if dtype.kind == "b" else
                                            np.iinfo(dtype).min <= int(v) <= np.iinfo(dtype).max)
        if not ok:
            raise CompileError("request", f"input value for {name!r}: {v!r} is not a value of type {dtype.name}")
    return np.array([int(v) if dtype.kind in "biu" else float(v) for v in flat]).astype(dtype)


def bind_input_values(proto: ModelProto, values: InputValues | None,
                      input_shapes: Mapping[str, Sequence[int]] | None = None) -> tuple[ModelProto, dict[str, np.ndarray]]:
    """``proto`` with each input named in ``values`` replaced by an initializer of that value.

    ``values`` maps an input name to its values (a number, a flat list in C order, or an array);
    their count must equal the input's element count (from ``input_shapes``, else the declared shape;
    a rank-1 input with a symbolic length takes the count given). Returns ``(model, {name: array in
    the input's dtype and shape})``; ``proto`` itself is not modified (the model is returned as it is
    when ``values`` is empty). Raises CompileError(stage="request") naming the input for an unknown
    name (listing the inputs), a wrong count or a value its element type cannot hold.
    """
    if not values:
        return proto, {}
    inits = {t.name for t in proto.graph.initializer}
    inputs = {vi.name: vi for vi in proto.graph.input if vi.name not in inits}
    bound: dict[str, np.ndarray] = {}
    for name, given in values.items():
        vi = inputs.get(name)
        if vi is None:
            what = " (it is an initializer, a constant)" if name in inits else ""
            raise CompileError("request", f"input value for {name!r}: not a model input{what}; inputs: "
                               f"{', '.join(inputs) or 'none'}")
        if not vi.type.HasField("tensor_type"):
            raise CompileError("request", f"input value for {name!r}: only tensor inputs can be bound")
        arr = _array(name, vi.type.tensor_type.elem_type, given)
        shape = _value_shape(name, _declared(vi), (input_shapes or {}).get(name), arr.size)
        bound[name] = arr.reshape(shape)
    out = ModelProto()
    out.CopyFrom(proto)
    kept = [vi for vi in out.graph.input if vi.name not in bound]
    del out.graph.input[:]
    out.graph.input.extend(kept)
    out.graph.initializer.extend(numpy_helper.from_array(a, n) for n, a in bound.items())
    if out.ir_version < 4:
        out.ir_version = 4  # initializers not listed among the inputs (ONNX IR spec, version 4)
    return out, bound


# which inputs reach which slots -------------------------------------------------------------------
def _subgraphs(node: onnx.NodeProto) -> Iterable[GraphProto]:
    for a in node.attribute:
        if a.type == onnx.AttributeProto.GRAPH:
            yield a.g
        elif a.type == onnx.AttributeProto.GRAPHS:
            yield from a.graphs


def _walk(g: GraphProto, taint: dict[str, set[str]], found: list[tuple[str, onnx.NodeProto, int]]) -> None:
    """Propagate ``taint`` (value -> graph inputs its value depends on) forward through ``g``'s nodes
    (``Shape``/``Size`` depend on a shape, not a value) and record ``(input, node, slot)`` for every
    control slot a tainted value reaches; bodies see the taint of the outer values they name."""
    for n in g.node:
        src: set[str] = set()
        if n.op_type not in ("Shape", "Size"):
            for i in n.input:
                src |= taint.get(i, set())
        for i, name in enumerate(n.input):
            if i in CONTROL_SLOTS.get(n.op_type, ()) and n.domain in ("", "ai.onnx"):
                found.extend((s, n, i) for s in sorted(taint.get(name, ())))
        for sg in _subgraphs(n):
            inner = dict(taint)
            for vi in sg.input:
                inner.pop(vi.name, None)
            _walk(sg, inner, found)
            src |= {s for o in sg.node for i in o.input for s in taint.get(i, set())}
        for o in n.output:
            if o:
                taint[o] = set(src)


def input_uses(proto: ModelProto) -> list[tuple[str, onnx.NodeProto, int]]:
    """``[(graph input, node, input position)]``: the control slots (:data:`CONTROL_SLOTS`) each graph
    input's value reaches, through any chain of nodes, in bodies too."""
    inits = {t.name for t in proto.graph.initializer}
    taint = {vi.name: {vi.name} for vi in proto.graph.input if vi.name not in inits}
    found: list[tuple[str, onnx.NodeProto, int]] = []
    _walk(proto.graph, taint, found)
    return found


def _slot(node: onnx.NodeProto, pos: int) -> str:
    what = _SLOT_NAMES.get((node.op_type, pos), f"input {pos}")
    return f"{what} of {node.op_type} {node.name or node.output[0]!r}"


def value_inputs(proto: ModelProto) -> list[dict[str, Any]]:
    """The inputs a user may want to bind with a value: integer or bool inputs of at most 16 elements
    (or a symbolic rank-0/1 shape) whose value reaches an If condition, a Loop trip count or
    condition, or a shape slot. ``[{"name", "dtype", "shape", "uses": ["the condition of If 'sel'",
    ...]}]`` in input order."""
    uses: dict[str, list[str]] = {}
    for name, node, pos in input_uses(proto):
        text = _slot(node, pos)
        if text not in uses.setdefault(name, []):
            uses[name].append(text)
    out = []
    for vi in proto.graph.input:
        if vi.name not in uses or not vi.type.HasField("tensor_type"):
            continue
        elem = vi.type.tensor_type.elem_type
        shape = _declared(vi)
        kind = np.dtype(helper.tensor_dtype_to_np_dtype(elem)).kind if elem else "O"
        static = [d for d in shape or [] if isinstance(d, int)]
        small = shape is not None and (len(shape) <= 1 if len(static) < len(shape) else math.prod(static) <= _MAX_ELEMENTS)
        if kind in "biu" and small:
            out.append({"name": vi.name, "dtype": np.dtype(helper.tensor_dtype_to_np_dtype(elem)).name,
                        "shape": shape, "uses": uses[vi.name][:4]})
    return out
