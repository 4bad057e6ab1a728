"""Tunable schedule decisions ("knobs") and the trace of the ones a kernel's schedule took.

A schedule function that has a choice to make (a register tile, a column block, a vector width, the
parallel grain) asks :func:`choose` with its rule-based ``default`` and the legal ``choices``. Outside a
tuning context it returns ``default``: the default schedules are unchanged. Inside
:func:`apply_trace` it returns the trace's value for that name (when the trace names it and the
value is one of the choices; otherwise :class:`KnobError`), and every call is recorded, so the same
context also *discovers* the search space of a kernel: ``(name, default, choices)`` per decision,
in the order the schedule asked (the model is TVM MetaSchedule's trace of sampling instructions,
``tir.Schedule.trace``, replayed against the same kernel).

A trace is ``{name: value}`` (values int or str: JSON-able). The decisions taken are printed with the
kernel's schedule text (``# trace: tile=8x2 block_tiles=4``) by :func:`apply_trace`'s caller.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field

Value = int | str


class KnobError(ValueError):
    """A trace names a value that is not among a knob's choices."""


@dataclass(frozen=True)
class Knob:
    """One decision point: its ``name``, rule-based ``default`` and legal ``choices`` (default included)."""

    name: str
    default: Value
    choices: tuple[Value, ...]


@dataclass
class Context:
    """The active tuning context: the ``trace`` to replay and the knobs met so far (``seen``)."""

    trace: Mapping[str, Value]
    seen: dict[str, Knob] = field(default_factory=dict)
    taken: dict[str, Value] = field(default_factory=dict)


_ACTIVE: ContextVar[Context | None] = ContextVar("prism_schedule_knobs", default=None)


def choose(name: str, default: Value, choices: Sequence[Value]) -> Value:
    """The value of knob ``name``: ``default`` outside a tuning context; inside one, the trace's value
    (``default`` when the trace does not name it). Raises KnobError when the trace's value is not one
    of ``choices``. A knob asked twice in one kernel takes the same value both times."""
    ctx = _ACTIVE.get()
    if ctx is None:
        return default
    opts = tuple(dict.fromkeys([default, *choices]))
    if name not in ctx.seen:
        ctx.seen[name] = Knob(name, default, opts)
    value = ctx.trace.get(name, default)
    if value not in opts:
        raise KnobError(f"knob {name}: value {value!r} is not one of its choices {list(opts)}")
    ctx.taken[name] = value
    return value


@contextmanager
def apply_trace(trace: Mapping[str, Value] | None = None) -> Iterator[Context]:
    """Within the block, :func:`choose` replays ``trace`` (empty: every default) and records the knobs
    met (``context.seen``) and the values taken (``context.taken``)."""
    ctx = Context(dict(trace or {}))
    token = _ACTIVE.set(ctx)
    try:
        yield ctx
    finally:
        _ACTIVE.reset(token)


def trace_text(taken: Mapping[str, Value], defaults: Mapping[str, Value] | None = None) -> str:
    """``tile=8x2 block_tiles=4`` (a value other than its default marked ``*``)."""
    return " ".join(f"{k}={v}{'*' if defaults is not None and defaults.get(k) != v else ''}"
                    for k, v in taken.items())


__all__ = ["Context", "Knob", "KnobError", "apply_trace", "choose", "trace_text"]
