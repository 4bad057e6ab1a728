"""Type inference of control-flow ops: ``If``, ``Loop``, ``Scan`` (ONNX operator spec).

Their bodies are inferred too, so every value in every subgraph has a type. ``If`` merges the
types of its two branches (equal dims stay, differing dims become symbolic) unless its condition
is known, then the taken branch's types are used and the other branch, which never runs, is typed
only where it can be: a shape error there (a branch valid only at other shapes) is not the model's.
With a run-time condition, a branch that fails to infer gives way to the other one (the driver's
``control-flow`` stage makes taking it a run-time error naming the If).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from ..errors import CompileError
from ..ir import Graph, TensorType
from ..ir.types import Dim, type_from_proto
from .registry import InferContext

if TYPE_CHECKING:
    from .infer import ShapeEnv

#: ``compiler.ops.infer.infer_graph``, passed in by the caller (infer dispatches to this module)
InferGraph = Callable[[Graph, "ShapeEnv"], object]


def _merge(a: TensorType | None, b: TensorType | None, name: str) -> TensorType | None:
    if a is None or b is None:
        return a or b
    if a.shape is None or b.shape is None or len(a.shape) != len(b.shape):
        return a.with_shape(None)
    dims: list[Dim] = [x if x == y else f"{name}_d{i}" for i, (x, y) in enumerate(zip(a.shape, b.shape, strict=True))]
    return a.with_shape(dims)


def _body(g: Graph, env: ShapeEnv, in_types: list[TensorType | None], infer_graph: InferGraph) -> list[TensorType]:
    for v, t in zip(g.inputs, in_types, strict=False):
        if t is not None and (v.type is None or v.type.shape is None):
            v.type = t
        elif t is not None and v.type is not None and v.type.shape is not None and t.shape is not None \
                and len(t.shape) == len(v.type.shape):
            v.type = t  # the outer, specialized type wins over the body's declared one
    infer_graph(g, env)
    out: list[TensorType] = []
    for v in g.outputs:
        if v.type is None:
            raise CompileError("shape", f"subgraph @{g.name}: body output %{v.name} has no type")
        out.append(v.type)
    return out


def infer_if(ctx: InferContext, env: ShapeEnv, infer_graph: InferGraph) -> list[TensorType]:
    then_g, else_g = ctx.attr("then_branch"), ctx.attr("else_branch")
    if not isinstance(then_g, Graph) or not isinstance(else_g, Graph):
        raise ctx.fail("needs then_branch and else_branch graphs")
    cond = ctx.value(0)
    if cond is not None and cond.size == 1:
        taken, other = (then_g, else_g) if bool(cond.reshape(-1)[0]) else (else_g, then_g)
        types = _body(taken, env, [], infer_graph)
        try:  # typed too where it can be, but it never runs: at these shapes it may be invalid (silero_vad's
            _body(other, env, [], infer_graph)  # unbatched-input branch Squeezes axis 0 of the batch)
        except CompileError:
            pass
        if len(types) != len(ctx.node.outputs):
            raise ctx.fail(f"the taken branch gives {len(types)} outputs for {len(ctx.node.outputs)}")
        return types
    try:
        t_types = _body(then_g, env, [], infer_graph)
    except CompileError as e:  # a run-time condition: the branch may not run (compiler.driver.control defers it)
        try:
            return _body(else_g, env, [], infer_graph)
        except CompileError:
            raise e from None
    try:
        e_types = _body(else_g, env, [], infer_graph)
    except CompileError:
        return t_types
    if len(t_types) != len(e_types) or len(t_types) != len(ctx.node.outputs):
        raise ctx.fail(f"branches give {len(t_types)} and {len(e_types)} outputs for {len(ctx.node.outputs)}")
    return [_merge(a, b, f"{ctx.node.outputs[i].name}") or a for i, (a, b) in enumerate(zip(t_types, e_types, strict=True))]


def infer_loop(ctx: InferContext, env: ShapeEnv, infer_graph: InferGraph) -> list[TensorType]:
    body = ctx.attr("body")
    if not isinstance(body, Graph):
        raise ctx.fail("needs a body graph", attribute="body")
    carried = [ctx.type(i) if ctx.has(i) else None for i in range(2, ctx.n_inputs)]
    i64 = TensorType.of("i64", ())
    cond = TensorType.of("bool", ())
    n_carried = len(carried)
    trip = ctx.value(0)
    hints = body.metadata.get("value_info", {})  # the body's declared output types (compiler.frontend.importer)
    declared = [type_from_proto(hints[v.name], f"body output {v.name!r}") if v.name in hints else None
                for v in body.outputs[1 + n_carried:]]
    try:
        outs = _body(body, env, [i64, cond, *carried], infer_graph)
    except CompileError:  # a run-time trip count: the body may never run (compiler.driver.control defers it)
        if trip is not None and not ctx.has(1) and int(trip.reshape(-1)[0]) > 0 or None in carried or None in declared:
            raise
        outs = [cond, *carried, *declared]  # type: ignore[list-item]
    res = list(outs[1:1 + n_carried])
    lead: Dim = int(trip.reshape(-1)[0]) if trip is not None and not ctx.has(1) else f"{ctx.node.label}_trips"
    for t in outs[1 + n_carried:]:
        res.append(t.with_shape(None if t.shape is None else (lead, *t.shape)))
    return res


def infer_scan(ctx: InferContext, env: ShapeEnv, infer_graph: InferGraph) -> list[TensorType]:
    """Scan-9+: scan inputs sliced along ``scan_input_axes``; Scan-8: a leading batch axis on every
    state and scan input, the sequence axis second, and ``sequence_lens`` as input 0."""
    body = ctx.attr("body")
    if not isinstance(body, Graph):
        raise ctx.fail("needs a body graph", attribute="body")
    n_scan = int(ctx.attr("num_scan_inputs"))
    batched = ctx.opset < 9
    offset = 1 if batched else 0
    n_state = ctx.n_inputs - offset - n_scan
    states = [ctx.type(offset + i) for i in range(n_state)]
    scans = [ctx.type(offset + n_state + i) for i in range(n_scan)]
    in_axes = [1] * n_scan if batched else (ctx.attr("scan_input_axes") or [0] * n_scan)
    batch: Dim = "?"
    elems: list[TensorType | None] = []
    lengths: list[Dim] = []
    for t, ax in zip(scans, in_axes, strict=False):
        shp = list(t.shape or ())
        a = ax + len(shp) if ax < 0 else ax
        lengths.append(shp[a] if shp else "?")
        inner = shp[:a] + shp[a + 1:]
        if batched and inner:
            batch = inner[0]
            inner = inner[1:]
        elems.append(t.with_shape(inner) if t.shape is not None else t)
    body_states = [t.with_shape(t.shape[1:]) if batched and t.shape else t for t in states]
    try:
        outs = _body(body, env, [*body_states, *elems], infer_graph)
    except CompileError as e:  # the body runs (a Scan of zero steps is resolved before: compiler.frontend.unroll_scan)
        steps = ", ".join(str(t) for t in [*body_states, *elems])
        raise ctx.fail(f"its body does not compile at the per-step types it is given ({steps}): {e.message}") from None
    n = lengths[0] if lengths else "?"
    res = [t.with_shape((batch, *t.shape)) if batched and t.shape is not None else t for t in outs[:n_state]]
    out_axes = [0] * (len(outs) - n_state) if batched else (ctx.attr("scan_output_axes") or [0] * (len(outs) - n_state))
    for t, ax in zip(outs[n_state:], out_axes, strict=False):
        if t.shape is None:
            res.append(t)
            continue
        shp = list(t.shape)
        a = ax + len(shp) + 1 if ax < 0 else ax
        full = shp[:a] + [n] + shp[a:]
        res.append(t.with_shape([batch, *full] if batched else full))
    return res


CONTROL: dict[str, Callable[[InferContext, ShapeEnv, InferGraph], list[TensorType]]] = {
    "If": infer_if,
    "Loop": infer_loop,
    "Scan": infer_scan,
}
