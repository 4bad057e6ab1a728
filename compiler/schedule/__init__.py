"""Schedules: primitives on loop IR and the default rule-based schedule per kernel kind."""

from __future__ import annotations

from typing import Any

from ..targets import Target
from .default import apply_default
from .depthwise import missed_reason


def schedule_kernel(lk: Any, target: Target) -> None:
    """Apply the default rule-based schedule for a lowered kernel (``LoweredKernel``) in place."""
    apply_default(lk.func, target)
    why = missed_reason(lk.nodes)
    if why is not None:
        lk.func.attrs.setdefault("schedule", []).insert(0, why)


__all__ = ["apply_default", "schedule_kernel"]
