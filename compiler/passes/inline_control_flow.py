"""inline-control-flow: ``If`` with a compile-time condition inlined, ``Loop``/``Scan`` with a static
trip count unrolled, on the ONNX model (level ``onnx``, before the graph IR exists).

Prism compiles a static graph. An ``If`` whose condition folds to a constant (an initializer, a
``Constant``, or computed from them and from static shapes by ``onnx.reference``) is replaced by the
taken branch; a ``Loop`` whose trip count folds (at most ``max-trip-count``) is unrolled, its
loop-carried values guarded with ``Where`` when the body may stop early; a ``Scan`` with static
scan-input lengths (at most ``max-trip-count`` steps) is unrolled step by step. Inlined bodies get
their internal names prefixed. Left alone, each with a ``missed`` remark saying why: a condition or
trip count that depends on the data, a loop longer than ``max-trip-count``, a Scan whose lengths are
not static; the driver's ``control-flow`` stage then runs them at run time. The decisions are made in one function,
``compiler.frontend.inline_control.decide``; the rewrites are ``compiler.frontend.control_flow``'s.
Nested control flow is handled as inlining brings it to the top level (``max-rounds`` rounds).
"""

from __future__ import annotations

from onnx import ModelProto

from ..frontend.control_flow import MAX_UNROLL_STEPS
from ..frontend.inline_control import Decision, resolve_control_flow
from .base import ModelPass, ModelPassResult, Option, PassContext, Remark, register


@register
class InlineControlFlow(ModelPass):
    """Inline or unroll statically resolvable If/Loop/Scan (see module docstring)."""

    name = "inline-control-flow"
    options = (
        Option("max-rounds", int, 8, "inlining rounds at most (each may expose nested control flow)", minimum=1),
        Option("max-trip-count", int, MAX_UNROLL_STEPS, "a Loop or Scan with more steps is not unrolled: the "
               "runtime runs it (compiler.driver.control)", minimum=0),
    )

    def run(self, model: ModelProto, ctx: PassContext) -> ModelPassResult:
        decisions: list[Decision] = []
        out = resolve_control_flow(model, int(self.opts["max-rounds"]),
                                   max_trip_count=int(self.opts["max-trip-count"]), decisions=decisions)
        remarks = [self._remark(d) for d in decisions]
        applied = [d for d in decisions if d.applied]
        stats = {"inlined_if": sum(d.op == "If" for d in applied), "unrolled_loops": sum(d.op == "Loop" for d in applied),
                 "unrolled_scans": sum(d.op == "Scan" for d in applied), "kept": len(decisions) - len(applied)}
        return ModelPassResult(out is not model, remarks, stats, model=out)

    def _remark(self, d: Decision) -> Remark:
        data = {"op": d.op, "action": d.action, **d.data}
        if d.op == "If" and d.applied:
            return self.remark("applied", f"inlined If '{d.node}' ({d.action}-branch, {d.reason})", [d.node], **data)
        if d.applied:
            return self.remark("applied", f"unrolled {d.op} '{d.node}': {d.steps} steps ({d.reason})", [d.node],
                               **{**data, "steps": d.steps})
        return self.remark("missed", f"{d.op} '{d.node}' not inlined: {d.reason}", [d.node], **data)
