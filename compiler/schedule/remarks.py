"""``missed`` remarks for kernels that got the default schedule although a special one exists for an op
they hold: the node, the schedule that was not applied, and why.

A kernel lowered by ``compiler.driver.lower.lower_node`` whose special schedules all returned None
(``compiler.schedule.microkernel.try_microkernel``: the GEMM micro-kernel for Conv/Gemm/MatMul, the
grouped/depthwise Conv schedules, the direct pool schedule) compiles with the default rule-based
schedule (``compiler.schedule.default``): correct, and slower. Each such decision becomes a remark
``{"kind": "missed", "pass": "schedule", "message", "nodes": [node], "data": {"schedule", "reason"}}``
on the kernel's ``kernel.lowered`` event (DESIGN.md's remark shape, as passes write them), and its
message is also a ``# missed:`` line of the kernel's schedule text.
"""

from __future__ import annotations

from typing import Any

from .depthwise import grouped_conv_missed
from .pool import POOLS, pool_missed, reads_once

ANCHORS = ("Conv", "Gemm", "MatMul")


def _static_f32(v: Any) -> bool:
    return v is not None and v.type is not None and v.type.short == "f32" and v.type.is_static


def _gemm_missed(n: Any, nodes: list[Any]) -> str:
    """Why the micro-kernel did not take the Conv/Gemm/MatMul ``n`` of a kernel of ``nodes``."""
    if sum(m.op_type in ANCHORS for m in nodes) > 1:
        return "the kernel holds more than one Conv/Gemm/MatMul"
    if not _static_f32(n.outputs[0]):
        return f"the output {n.outputs[0].type} is not a static float32 tensor"
    x = n.inputs[0]
    w = n.inputs[1] if len(n.inputs) > 1 else None
    if n.op_type == "Conv":
        if w is None or w.const is None:
            return "the weight W is not a constant (it is computed at run time)"
        if x is None or x.type is None or len(x.type.shape) != 4:
            return f"only 2-D Conv has this schedule (X is {None if x is None else x.type})"
    elif n.op_type == "Gemm" and (w is None or w.const is None):
        return "B is not a constant (it is computed at run time)"
    elif n.op_type == "MatMul" and any(v is None or v.type is None or len(v.type.shape) < 2 for v in (x, w)):
        return "an operand has rank 1 (a matrix-vector product)"
    return "the kernel's output is not elementwise in the op's output (a reduction, a shifted read or another output)"


def missed_remarks(nodes: list[Any]) -> list[dict[str, Any]]:
    """The ``missed`` remarks (module docstring) of a default-scheduled kernel computing ``nodes``."""
    out: list[dict[str, Any]] = []

    def missed(n: Any, schedule: str, why: str) -> None:
        out.append({"kind": "missed", "pass": "schedule", "nodes": [n.label],
                    "message": f"{schedule} not applied to {n.label} ({n.op_type}): {why}; default schedule",
                    "data": {"schedule": schedule, "reason": why}})

    grouped = grouped_conv_missed(nodes)
    if grouped is not None:
        missed(grouped[0], "grouped-Conv schedules (direct, micro-kernel)", grouped[1])
    for n in nodes:
        if n.op_type in ANCHORS and not (n.op_type == "Conv" and int(n.attr("group", 1)) > 1):
            missed(n, "GEMM micro-kernel", _gemm_missed(n, nodes))
        elif n.op_type in POOLS:
            why = pool_missed(n)
            if why is None and reads_once(n):
                why = "its windows do not overlap and it has no padding: the default schedule reads each input once"
            missed(n, "direct pool schedule", why or "the pool's input or output is not a plain buffer in its kernel")
    return out


__all__ = ["missed_remarks"]
