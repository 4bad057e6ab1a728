"""Schedules: primitives on loop IR and the default rule-based schedule per kernel kind."""

from __future__ import annotations

from typing import Any

from ..targets import Target
from .default import apply_default


def schedule_kernel(lk: Any, target: Target) -> None:
    """Apply the default rule-based schedule for a lowered kernel (``LoweredKernel``) in place."""
    apply_default(lk.func, target)


__all__ = ["apply_default", "schedule_kernel"]
