"""Schedules: primitives on loop IR and the default rule-based schedule per kernel kind."""

from __future__ import annotations

from typing import Any

from ..targets import Target
from .default import apply_default
from .remarks import missed_remarks


def schedule_kernel(lk: Any, target: Target) -> None:
    """Apply the default rule-based schedule for a lowered kernel (``LoweredKernel``) in place; each
    special schedule it did not get is a ``missed`` remark in ``attrs["remarks"]``
    (``compiler.schedule.remarks``) and a ``# missed:`` line of its schedule text."""
    apply_default(lk.func, target)
    remarks = missed_remarks(lk.nodes)
    if remarks:
        lk.func.attrs["remarks"] = remarks
        lk.func.attrs.setdefault("schedule", [])[:0] = [f"# missed: {r['message']}" for r in remarks]


__all__ = ["apply_default", "schedule_kernel"]
