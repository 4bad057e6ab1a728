"""The decisions of ``inline-control-flow``: which If/Loop/Scan resolve at compile time, and how.

:func:`decide` is the one place that decides, per top-level ``If``/``Loop``/``Scan`` node (the
rewrites themselves are ``compiler.frontend.control_flow``'s):

* ``If``: its condition folds to a constant (an initializer, a ``Constant``, or computed from them
  and static shapes with ``onnx.reference``) -> the taken branch is inlined (action ``then`` /
  ``else``); otherwise it stays (action ``keep``, with the reason).
* ``Loop``: a constant trip count at most ``max_trip_count`` (``MAX_UNROLL_STEPS``) -> unrolled
  (``unroll``, ``steps``); a loop that may stop early is guarded with ``Where`` per step and may not
  have scan outputs.
* ``Scan``: static scan-input lengths, at most ``max_trip_count`` steps -> unrolled.

A ``keep`` decision leaves the node in place: the driver's ``control-flow`` stage runs it at run
time (``compiler.driver.control``: the model compiled in parts around it). :func:`resolve_control_flow` applies the
decisions round after round (bodies inlined at the top level may hold more control flow) and
records each :class:`Decision`. Semantics: the ONNX specs of If, Loop (opset 11+ body signature
``(iteration_num, cond, carried...)``) and Scan (opsets 8 and 9+).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
from onnx import ModelProto, NodeProto, helper, numpy_helper

from .control_flow import (
    CONTROL,
    MAX_UNROLL_STEPS,
    _attr,
    _constant_value,
    _Ctx,
    _shape_of,
    inline_body,
    loop_plan,
    unroll_loop,
)
from .origin import control_place
from .rounds import rewrite_rounds
from .unroll_scan import _scan, scan_plan


@dataclass
class Decision:
    """What happens to one control-flow node.

    Attributes:
        node: the node's name (its op type and first output when it has none).
        op: ``If``, ``Loop`` or ``Scan``.
        action: ``then`` / ``else`` (If: that branch inlined), ``unroll`` (Loop/Scan), ``keep``.
        reason: why, in words with the numbers ("condition folded to true", "trip count 5").
        steps: the unrolled step count (Loop/Scan).
        data: the numbers behind ``reason`` (``condition``, ``trip_count``, ``guarded``).
    """

    node: str
    op: str
    action: str
    reason: str
    steps: int | None = None
    data: dict[str, Any] = field(default_factory=dict)

    @property
    def applied(self) -> bool:
        return self.action != "keep"


def _label(n: NodeProto) -> str:
    return n.name or f"{n.op_type}->{n.output[0] if n.output else ''}"


def decide(ctx: _Ctx, node: NodeProto, consts: dict[str, np.ndarray], all_nodes: list[NodeProto],
           shapes: dict[str, list[int]], max_trip_count: int = MAX_UNROLL_STEPS) -> Decision:
    """The :class:`Decision` for one top-level If/Loop/Scan (see the module docstring)."""
    label = _label(node)
    if node.op_type == "If":
        cv = _constant_value(ctx, node.input[0], all_nodes, consts)
        if cv is None:
            return Decision(label, "If", "keep", f"its condition %{node.input[0]} is not a compile-time constant "
                            "(it depends on the data)")
        taken = bool(cv.reshape(-1)[0])
        return Decision(label, "If", "then" if taken else "else",
                        f"condition %{node.input[0]} folded to {str(taken).lower()}", data={"condition": taken})
    if node.op_type == "Loop":
        plan = loop_plan(ctx, node, consts, all_nodes, max_trip_count)
        if isinstance(plan, str):
            return Decision(label, "Loop", "keep", plan)
        steps, always = plan
        why = f"trip count {steps}" + ("" if always else ", each step guarded by Where (it may stop early)")
        return Decision(label, "Loop", "unroll", why, steps, {"trip_count": steps, "guarded": not always})
    plan_s = scan_plan(ctx, node, shapes, max_trip_count)
    if isinstance(plan_s, str):
        return Decision(label, "Scan", "keep", plan_s)
    return Decision(label, "Scan", "unroll", f"{plan_s} steps (static scan-input length)", plan_s,
                    {"steps": plan_s})


def _rewrite(ctx: _Ctx, node: NodeProto, d: Decision, shapes: dict[str, list[int]]) -> list[NodeProto] | None:
    """The nodes replacing ``node`` as ``d`` says (None: it stays)."""
    if d.action in ("then", "else"):
        body_nodes, outs = inline_body(ctx, _attr(node, f"{d.action}_branch"), {},
                                       control_place(node, f"{d.action}_branch inlined"))
        return body_nodes + [helper.make_node("Identity", [s], [o]) for s, o in zip(outs, node.output, strict=True)
                             if o]
    if d.action == "unroll" and node.op_type == "Loop":
        return unroll_loop(ctx, node, int(d.steps or 0), not d.data.get("guarded"))
    if d.action == "unroll":
        return _scan(ctx, node, shapes)
    return None


def _constants(model: ModelProto) -> dict[str, np.ndarray]:
    consts = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    for n in model.graph.node:
        if n.op_type == "Constant" and n.attribute and n.attribute[0].name == "value":
            consts[n.output[0]] = numpy_helper.to_array(n.attribute[0].t)
    return consts


def resolve_control_flow(model: ModelProto, max_rounds: int = 8, *, max_trip_count: int = MAX_UNROLL_STEPS,
                         decisions: list[Decision] | None = None) -> ModelProto:
    """A copy of ``model`` with every statically resolvable top-level If/Loop/Scan inlined or
    unrolled (see the module docstring); ``model`` itself when it has none. Nested ones are handled
    as they reach the top level, at most ``max_rounds`` rounds. Each node's :class:`Decision` is
    appended to ``decisions`` (a kept node once, in the last round that saw it)."""
    if not any(n.op_type in CONTROL for n in model.graph.node):
        return model
    ctx = _Ctx(model)  # reads the opset only, which the rounds do not change
    kept: dict[str, Decision] = {}

    def step(out: ModelProto, rnd: int) -> list[NodeProto] | None:
        ctx.model, ctx.inits, ctx.shapes = out, [], None
        consts = _constants(out)
        if any(n.op_type == "Scan" for n in out.graph.node):
            ctx.shapes = _shape_of(out)
        shapes = ctx.shapes or {}
        all_nodes = list(out.graph.node)
        new_nodes: list[NodeProto] = []
        changed = False
        kept.clear()
        for n in all_nodes:
            rep = None
            if n.op_type in CONTROL and n.domain in ("", "ai.onnx"):
                d = decide(ctx, n, consts, all_nodes, shapes, max_trip_count)
                rep = _rewrite(ctx, n, d, shapes)
                if rep is None:
                    kept[d.node] = d if not d.applied else Decision(d.node, d.op, "keep", "its shapes are not static")
                elif decisions is not None:
                    decisions.append(d)
            if rep is None:
                new_nodes.append(n)
            else:
                new_nodes.extend(rep)
                changed = True
        if not changed:
            return None
        out.graph.initializer.extend(ctx.inits)
        return new_nodes

    out = rewrite_rounds(model, max_rounds, step)
    if decisions is not None:
        decisions.extend(kept.values())
    return out
