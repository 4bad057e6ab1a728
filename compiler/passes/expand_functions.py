"""expand-functions: ONNX function ops that Prism has no lowering for replaced by the body their
operator schema defines, on the ONNX model (level ``onnx``).

Many ONNX ops are defined by a function of other ops (``CastLike``, ``LayerNormalization``,
``Selu``, ``Attention``, ``NegativeLogLikelihoodLoss`` ...; context-dependent ones get a body built
for the node's input types). A top-level node whose op has no lowering in ``compiler.loops`` (and is
not control flow or a folded op) is replaced by the schema's body for the model's opset (the newest
function version not newer than it), its attributes and the schema defaults bound, internal names
prefixed by the node's; bodies that use function ops are expanded again (``max-rounds``). Left
alone: ops with a lowering (they compile as one kernel, which is faster than their body), ops of
other domains, and ops with no function body (a ``missed`` remark; they fail later with "no
lowering"). Semantics: ``onnx.defs`` and ``onnx.backend.test.case.node.function_expand_helper``.
"""

from __future__ import annotations

from typing import Any

from onnx import ModelProto, NodeProto

from ..frontend.expand import expand_functions
from ..loops.lower import LOWERINGS
from .base import ModelPass, ModelPassResult, Option, PassContext, register

NO_EXPAND = {"Constant", "If", "Loop", "Scan", "Range"}  # folded, or run as control flow


def has_lowering(node: NodeProto) -> bool:
    """True when ``node`` is compiled as it is: it has a lowering, is a control-flow or folded op,
    or is of another domain; else its function body (if any) replaces it."""
    return node.domain not in ("", "ai.onnx") or node.op_type in LOWERINGS or node.op_type in NO_EXPAND


@register
class ExpandFunctions(ModelPass):
    """Expand function ops without a lowering into their schema bodies (see module docstring)."""

    name = "expand-functions"
    options = (Option("max-rounds", int, 6, "expansion rounds at most (a body may hold function ops)", minimum=1),)

    def run(self, model: ModelProto, ctx: PassContext) -> ModelPassResult:
        decisions: list[dict[str, Any]] = []
        out = expand_functions(model, keep=has_lowering, max_rounds=int(self.opts["max-rounds"]), decisions=decisions)
        missed: dict[str, dict[str, Any]] = {}
        remarks = []
        for d in decisions:
            node = d.pop("node")
            if d["expanded"]:
                remarks.append(self.remark(
                    "applied", f"expanded {d['op']} '{node}' into its function body (opset {d['function_opset']}): "
                    f"{d['new_nodes']} nodes", [node], **d))
            else:
                missed[node] = d
        remarks += [self.remark("missed", f"{d['op']} '{n}' not expanded: {d['reason']}", [n], **d)
                    for n, d in missed.items()]
        return ModelPassResult(out is not model, remarks,
                               {"expanded": sum(bool(d["expanded"]) for d in decisions)}, model=out)
