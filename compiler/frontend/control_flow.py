"""Resolve ``If``, ``Loop`` and ``Scan`` at compile time where their control is static.

Prism compiles a static graph, so control flow is resolved before the graph IR is built, at the
ONNX level, with the shapes bound by specialization:

* ``If`` whose condition is a compile-time constant (an initializer, a ``Constant``, or computed
  from them and from static shapes: the condition's producers are evaluated with
  ``onnx.reference``, ``Shape``/``Size`` of a statically shaped value being constants)
  is replaced by the taken branch, inlined.
* ``Scan`` (opset 9+; opset 8's batched form without ``sequence_lens`` too) has a static trip count
  (the scan axis length): its body is inlined once per iteration (``compiler.frontend.unroll_scan``).
* ``Loop`` whose trip count ``M`` is a compile-time constant is unrolled ``M`` times. If the body's
  condition output is not simply its condition input (the loop may stop early), the loop-carried
  values are guarded with ``Where(cond, new, old)``; such a loop may not have scan outputs (their
  length would depend on data).

Inlined bodies get their internal names prefixed (unique per inlined copy); references to outer
values keep their names. Each inlined node carries where it came from as the user wrote it (the
control node, the step or branch, the body node: ``compiler.frontend.origin``), so that an error
about it names those, not the prefixed name. Anything else (a data-dependent condition or trip count) is left in
place, as is a Loop or Scan of more than :data:`MAX_UNROLL_STEPS` steps: the runtime runs them
(``compiler.driver.control``). Semantics: the ONNX specs of If,
Loop (opset 11+ body signature ``(iteration_num, cond, carried...)``) and Scan (opset 9+).
"""

from __future__ import annotations

from typing import Any, cast

import numpy as np
import onnx
from onnx import GraphProto, ModelProto, NodeProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

from .importer import import_model
from .origin import ORIGIN, ORIGIN_NODE, body_label, control_place, set_meta
from .specialize import specialize

CONTROL = ("If", "Loop", "Scan")
#: a static Loop or Scan of more steps is not unrolled: its body runs once per step at run time
#: (compiler.driver.control, compiler.runtime.control), compiled once
MAX_UNROLL_STEPS = 32


class _Ctx:
    def __init__(self, model: ModelProto) -> None:
        self.model = model
        self.opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 13)
        self.n = 0
        self.inits: list[onnx.TensorProto] = []
        self.shapes: dict[str, list[int]] | None = None

    def fresh(self, base: str) -> str:
        self.n += 1
        return f"{base}__cf{self.n}"

    def const(self, arr: Any, base: str = "cf_const") -> str:
        nm = self.fresh(base)
        self.inits.append(numpy_helper.from_array(np.asarray(arr), nm))
        return nm


def _attr(node: NodeProto, name: str, default: Any = None) -> Any:
    for a in node.attribute:
        if a.name == name:
            return helper.get_attribute_value(a)
    return default


def _rename_graph(g: GraphProto, mapping: dict[str, str]) -> None:
    """Rename references in a nested graph (in place); its own names shadow ``mapping``."""
    own = {i.name for i in g.input} | {t.name for t in g.initializer} | {o for n in g.node for o in n.output}
    local = {k: v for k, v in mapping.items() if k not in own}
    for n in g.node:
        for k, name in enumerate(n.input):
            if name in local:
                n.input[k] = local[name]
        _rename_subgraphs(n, local)
    for o in g.output:
        if o.name in local:
            o.name = local[o.name]


def _rename_subgraphs(n: NodeProto, mapping: dict[str, str]) -> None:
    """Apply ``mapping`` to the outer references inside ``n``'s graph attributes (in place)."""
    for a in n.attribute:
        if a.type == onnx.AttributeProto.GRAPH:
            _rename_graph(a.g, mapping)
        elif a.type == onnx.AttributeProto.GRAPHS:
            for sg in a.graphs:
                _rename_graph(sg, mapping)


def inline_body(ctx: _Ctx, body: GraphProto, bind: dict[str, str],
                place: tuple[str, str, str] | None = None) -> tuple[list[NodeProto], list[str]]:
    """Copy ``body``'s nodes with its inputs bound to outer names (``bind``: body input -> outer
    name) and its internal names made unique; with ``place`` (``origin.control_place``) each copy
    records where it came from (``origin.inlined_from``). Returns the nodes and the outer names of its
    outputs."""
    mapping = dict(bind)
    prefix = ctx.fresh("body")
    for t in body.initializer:
        nt = onnx.TensorProto()
        nt.CopyFrom(t)
        nt.name = f"{prefix}_{t.name}"
        mapping[t.name] = nt.name
        ctx.inits.append(nt)
    for n in body.node:
        for o in n.output:
            if o:
                mapping[o] = f"{prefix}_{o}"
    nodes = []
    for n in body.node:
        m = NodeProto()
        m.CopyFrom(n)
        m.name = f"{prefix}_{n.name or n.op_type}"
        for k, name in enumerate(m.input):
            if name in mapping:
                m.input[k] = mapping[name]
        for k, name in enumerate(m.output):
            if name:
                m.output[k] = mapping[name]
        _rename_subgraphs(m, mapping)
        if place is not None:
            set_meta(m, ORIGIN, f"{place[0]}: body node {body_label(n)} ({n.op_type})")
            set_meta(m, ORIGIN_NODE, f"{place[1]}\t{place[2]}")
        nodes.append(m)
    outs = []
    for o in body.output:
        outs.append(mapping.get(o.name, o.name))
    return nodes, outs


def _constant_value(ctx: _Ctx, name: str, nodes: list[NodeProto], consts: dict[str, np.ndarray]) -> np.ndarray | None:
    """The value of ``name`` if it is computed from constants and static shapes only (``Shape`` and
    ``Size`` of a value with a static shape are constants), evaluated with onnx.reference."""
    if name in consts:
        return consts[name]
    if ctx.shapes is None:
        ctx.shapes = _shape_of(ctx.model)
    consts = dict(consts)
    for n in nodes:
        if n.op_type in ("Shape", "Size") and n.input[0] in ctx.shapes and n.output[0] not in consts:
            shp = ctx.shapes[n.input[0]]
            if n.op_type == "Size":
                consts[n.output[0]] = np.array(int(np.prod(shp)), np.int64)
            else:
                r = len(shp)
                start, end = int(_attr(n, "start", 0)), _attr(n, "end", None)
                start = max(0, min(r, start + r if start < 0 else start))
                end = r if end is None else max(0, min(r, int(end) + r if int(end) < 0 else int(end)))
                consts[n.output[0]] = np.array(shp[start:end], np.int64)
    if name in consts:
        return consts[name]
    producer = {o: n for n in nodes for o in n.output}
    need: list[NodeProto] = []
    seen: set[str] = set()
    stack = [name]
    while stack:
        v = stack.pop()
        if v in seen or v in consts or not v:
            continue
        seen.add(v)
        p = producer.get(v)
        if p is None or p.op_type in CONTROL or p.domain not in ("", "ai.onnx"):
            return None
        if p not in need:
            need.append(p)
        stack.extend(p.input)
    order = [n for n in nodes if n in need]
    leaves = {i for n in order for i in n.input if i and i in consts}
    g = helper.make_graph(order, "cond", [], [helper.make_tensor_value_info(name, onnx.TensorProto.UNDEFINED, None)],
                          [numpy_helper.from_array(consts[k], k) for k in leaves])
    m = helper.make_model(g, opset_imports=ctx.model.opset_import)
    try:
        outs = ReferenceEvaluator(m).run(None, {})  # a list: the stub's dict is for intermediate=True
        return np.asarray(cast("list[Any]", outs)[0])
    except Exception:
        return None


def _shape_of(model: ModelProto) -> dict[str, list[int]]:
    """Static shapes of the top-level values: Prism's own inference (``compiler.ops.infer``, which
    also uses known values), completed by ``onnx.shape_inference``."""
    out: dict[str, list[int]] = {}
    try:
        inferred = onnx.shape_inference.infer_shapes(model)
        for vi in list(inferred.graph.input) + list(inferred.graph.value_info) + list(inferred.graph.output):
            tt = vi.type.tensor_type
            if tt.HasField("shape") and all(d.HasField("dim_value") for d in tt.shape.dim):
                out[vi.name] = [d.dim_value for d in tt.shape.dim]
    except Exception:
        pass
    try:
        graph = import_model(model)
        specialize(graph, None)
        vals = list(graph.inputs) + [o for n in graph.nodes for o in n.outputs]
        for v in vals:
            if v.type is not None and v.type.is_static:
                out[v.name] = [int(d) for d in v.type.shape]  # type: ignore[union-attr]
    except Exception:
        pass
    for t in model.graph.initializer:
        out[t.name] = list(t.dims)
    return out


def _unsqueeze(ctx: _Ctx, x: str, axis: int, nodes: list[NodeProto]) -> str:
    out = ctx.fresh("unsq")
    if ctx.opset < 13:
        nodes.append(helper.make_node("Unsqueeze", [x], [out], axes=[axis]))
    else:
        nodes.append(helper.make_node("Unsqueeze", [x, ctx.const(np.array([axis], np.int64))], [out]))
    return out


def _stack(ctx: _Ctx, parts: list[str], axis: int, out: str, nodes: list[NodeProto]) -> None:
    nodes.append(helper.make_node("Concat", [_unsqueeze(ctx, p, axis, nodes) for p in parts], [out], axis=axis))


def loop_plan(ctx: _Ctx, node: NodeProto, consts: dict[str, np.ndarray], all_nodes: list[NodeProto],
              max_trip_count: int = MAX_UNROLL_STEPS) -> tuple[int, bool] | str:
    """Whether a Loop unrolls: ``(steps, always)`` (``always``: the body's condition is its input and
    starts true, so no step needs a ``Where`` guard), or the reason it stays a Loop (words)."""
    body: GraphProto = _attr(node, "body")
    trip = node.input[0] if len(node.input) > 0 else ""
    cond = node.input[1] if len(node.input) > 1 else ""
    if not trip:
        return "it has no trip count M (it runs until its condition is false, which depends on the data)"
    mv = _constant_value(ctx, trip, all_nodes, consts)
    if mv is None:
        return f"its trip count %{trip} is not a compile-time constant"
    steps = int(mv.reshape(-1)[0])
    if steps > max_trip_count:
        return f"its trip count {steps} is over the unroll limit {max_trip_count} (the runtime runs it)"
    n_c = len(node.input) - 2
    k = len(body.output) - 1 - n_c
    cond_in, cond_out = body.input[1].name, body.output[0].name
    passthrough = cond_out == cond_in or any(n.op_type == "Identity" and list(n.input) == [cond_in] and
                                             list(n.output) == [cond_out] for n in body.node)
    cv = _constant_value(ctx, cond, all_nodes, consts) if cond else np.array(True)
    always = passthrough and cv is not None and bool(cv.reshape(-1)[0])
    if not always and k:
        return (f"it may stop early (its condition is not constant true) and has {k} scan output(s), whose "
                "length would depend on the data")
    return max(steps, 0), always


def unroll_loop(ctx: _Ctx, node: NodeProto, steps: int, always: bool) -> list[NodeProto] | None:
    """The nodes of a Loop unrolled ``steps`` times (:func:`loop_plan`); with ``always`` False the
    loop-carried values are guarded with ``Where(cond, new, old)``. None: a scan output of a loop
    that runs zero times (its shape is unknown)."""
    body: GraphProto = _attr(node, "body")
    cond = node.input[1] if len(node.input) > 1 else ""
    carried = list(node.input[2:])
    n_c = len(carried)
    k = len(body.output) - 1 - n_c
    cond_in = body.input[1].name
    nodes: list[NodeProto] = []
    cur_cond = cond or ctx.const(np.array(True))
    state = carried
    collected: list[list[str]] = [[] for _ in range(k)]
    for t in range(steps):
        bind = {body.input[0].name: ctx.const(np.array(t, np.int64)), cond_in: cur_cond}
        bind.update({body.input[2 + i].name: state[i] for i in range(n_c)})
        body_nodes, outs = inline_body(ctx, body, bind, control_place(node, f"iteration {t} of {steps}, unrolled"))
        nodes.extend(body_nodes)
        new_state = outs[1:1 + n_c]
        if not always:
            guarded = []
            for old, new in zip(state, new_state, strict=True):
                g = ctx.fresh("loop_keep")
                nodes.append(helper.make_node("Where", [cur_cond, new, old], [g]))
                guarded.append(g)
            new_state = guarded
            nc = ctx.fresh("loop_cond")
            nodes.append(helper.make_node("And", [cur_cond, outs[0]], [nc]))
            cur_cond = nc
        state = new_state
        for j in range(k):
            collected[j].append(outs[1 + n_c + j])
    for i in range(n_c):
        if node.output[i]:
            nodes.append(helper.make_node("Identity", [state[i]], [node.output[i]]))
    for j in range(k):
        o = node.output[n_c + j] if n_c + j < len(node.output) else ""
        if o and steps:
            _stack(ctx, collected[j], 0, o, nodes)
        elif o:  # no iteration: an empty scan output [0, *per-iteration shape], when that shape is static
            vi = body.output[1 + n_c + j].type.tensor_type
            dims = [d.dim_value if d.HasField("dim_value") else -1 for d in vi.shape.dim]
            if not vi.HasField("shape") or -1 in dims or not vi.elem_type:
                return None
            empty = np.zeros([0, *dims], helper.tensor_dtype_to_np_dtype(vi.elem_type))
            nodes.append(helper.make_node("Identity", [ctx.const(empty, "loop_empty")], [o]))
    return nodes
