"""``plan-memory``: liveness over the schedule and buffer reuse in one arena.

Analysis only; the graph is not rewritten. The schedule is the graph's node order: after
``fuse-ops`` one entry per fused group (kernel), otherwise one per node. Step ``i`` reads its
inputs and writes its outputs, so both are live at ``i``.

What gets an arena buffer: every value produced by a schedule step and read by a later one or by
none (a dead output still has to be written somewhere) -- the intermediates. Values inside a
fused group's body are not materialized (the kernel keeps them in registers) and get nothing.
Left out, and why: graph inputs (the caller owns them), constants (the constant pool, repacked by
the back end), and graph outputs: they get their own buffers, allocated by the runtime and handed
to the caller, so no copy out of the arena is needed and the arena can be reused by the next
call while the caller holds the outputs. A value with a non-static shape cannot be planned; it is
left out with a missed remark (the runtime allocates it on the fly).

Placement: greedy by size with best-fit offsets (Pisarchyk & Lee, "Efficient Memory Management
for Deep Neural Net Inference", 2020, "Greedy by Size for Offset Calculation"; the same idea as
TFLite's arena planner): buffers in decreasing size order (ties: earlier first use, then name);
each goes into the smallest gap between already-placed buffers whose lifetimes overlap its own
that fits it, else on top of the highest of them. The same best fit is also run in decreasing
size x lifetime order and in first-use order, and the smallest arena is kept (on DenseNet-121,
size order alone gives 1.11x the lower bound); the remark names the order used. Sizes are rounded up to ``alignment`` bytes (64
by default: a cache line and an AVX-512 vector), so every offset is aligned.

Reported figures (bytes): ``arena_bytes`` (the arena's size), ``no_sharing_bytes`` (sum of the
aligned sizes: every buffer its own memory), ``lower_bound_bytes`` (max over schedule steps of the
aligned sizes live at that step: no placement can do better). ``buffers`` lists ``{value, offset,
size, first, last}`` with ``size`` the value's exact bytes and ``first``/``last`` schedule indices.
The plan goes to ``ctx.artifacts.memory_plan`` and ``graph.metadata["memory_plan"]``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..ir import Graph, implicit_inputs
from .base import MemoryPlanResult, Option, Pass, PassContext, Remark, register


@dataclass
class Buffer:
    """One intermediate value's place in the arena. Bytes and schedule indices (inclusive)."""

    value: str
    offset: int
    size: int
    first: int
    last: int
    aligned: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {"value": self.value, "offset": self.offset, "size": self.size,
                "first": self.first, "last": self.last}


@dataclass
class MemoryPlan:
    """The arena plan: sizes in bytes, buffers in schedule order (then by name)."""

    arena_bytes: int
    no_sharing_bytes: int
    lower_bound_bytes: int
    buffers: list[Buffer] = field(default_factory=list)
    alignment: int = 64
    schedule: list[str] = field(default_factory=list)
    strategy: str = "size"

    def to_dict(self) -> dict[str, Any]:
        """The ``memory.planned`` event payload (DESIGN.md "Events")."""
        return {"arena_bytes": self.arena_bytes, "no_sharing_bytes": self.no_sharing_bytes,
                "lower_bound_bytes": self.lower_bound_bytes,
                "buffers": [b.to_dict() for b in self.buffers]}

    def offset_of(self, value: str) -> int | None:
        for b in self.buffers:
            if b.value == value:
                return b.offset
        return None


def _align(n: int, a: int) -> int:
    return (n + a - 1) // a * a


def liveness(graph: Graph) -> tuple[list[tuple[str, int, int, int]], list[str]]:
    """``([(value, bytes, first, last)], [names of values with non-static shapes])``.

    ``first`` is the producing step, ``last`` the last step reading the value (a node whose
    subgraph reads it counts as reading it); ``last == first`` for an unread value.
    """
    step = {id(n): i for i, n in enumerate(graph.nodes)}
    last: dict[int, int] = {}
    for i, n in enumerate(graph.nodes):
        for v in list(n.inputs) + implicit_inputs(n):
            if v is not None:
                last[id(v)] = max(last.get(id(v), i), i)
    outputs = {id(v) for v in graph.outputs}
    out: list[tuple[str, int, int, int]] = []
    dynamic: list[str] = []
    for n in graph.nodes:
        first = step[id(n)]
        for v in n.outputs:
            if id(v) in outputs or v.is_constant:
                continue
            if v.type is None or not v.type.is_static:
                dynamic.append(v.name)
                continue
            out.append((v.name, v.type.nbytes, first, last.get(id(v), first)))
    return out, dynamic


#: placement orders tried; the smallest arena wins (ties: the first listed)
ORDERS = {
    "size": lambda b: (-b.aligned, b.first, b.value),
    "size-x-lifetime": lambda b: (-b.aligned * (b.last - b.first + 1), b.first, b.value),
    "first-use": lambda b: (b.first, -b.aligned, b.value),
}


def place(intervals: list[tuple[str, int, int, int]], alignment: int = 64,
          order: str | None = None) -> MemoryPlan:
    """Best-fit placement of ``(name, bytes, first, last)`` intervals in the given ``order`` (a
    key of :data:`ORDERS`), or in each order keeping the smallest arena when ``order`` is None."""
    if order is None:
        plans = [place(intervals, alignment, o) for o in ORDERS]
        return min(plans, key=lambda p: p.arena_bytes)
    bufs = [Buffer(name, 0, size, first, lst, _align(max(size, 1), alignment))
            for name, size, first, lst in intervals]
    placed: list[Buffer] = []
    for b in sorted(bufs, key=ORDERS[order]):
        conflicts = sorted((p for p in placed if p.first <= b.last and b.first <= p.last),
                           key=lambda p: p.offset)
        best, best_gap, top = None, None, 0
        for p in conflicts:
            gap = p.offset - top
            if gap >= b.aligned and (best_gap is None or gap < best_gap):
                best, best_gap = top, gap
            top = max(top, p.offset + p.aligned)
        b.offset = best if best is not None else top
        placed.append(b)
    steps = max((b.last for b in bufs), default=-1) + 1
    live = [0] * steps
    for b in bufs:
        for t in range(b.first, b.last + 1):
            live[t] += b.aligned
    bufs.sort(key=lambda b: (b.first, b.value))
    return MemoryPlan(
        arena_bytes=max((b.offset + b.aligned for b in bufs), default=0),
        no_sharing_bytes=sum(b.aligned for b in bufs),
        lower_bound_bytes=max(live, default=0),
        buffers=bufs,
        alignment=alignment,
        strategy=order,
    )


@register
class PlanMemory(Pass):
    """Plan one arena for the intermediates of the schedule (see module docstring)."""

    name = "plan-memory"
    options = (
        Option("alignment", int, 64, "byte alignment of every buffer offset (a power of two)", power_of_two=True),
    )

    def run(self, graph: Graph, ctx: PassContext) -> MemoryPlanResult:
        alignment = int(self.opts["alignment"])  # a power of two (checked by Option)
        intervals, dynamic = liveness(graph)
        plan = place(intervals, alignment)
        plan.schedule = [n.label for n in graph.nodes]
        ctx.artifacts.memory_plan = plan
        graph.metadata["memory_plan"] = plan
        remarks: list[Remark] = []
        ratio = plan.no_sharing_bytes / plan.arena_bytes if plan.arena_bytes else 1.0
        gap = plan.arena_bytes / plan.lower_bound_bytes if plan.lower_bound_bytes else 1.0
        stats = {"arena_bytes": plan.arena_bytes, "no_sharing_bytes": plan.no_sharing_bytes,
                 "lower_bound_bytes": plan.lower_bound_bytes, "buffers": len(plan.buffers),
                 "schedule_steps": len(graph.nodes)}
        remarks.append(self.remark(
            "analysis",
            f"arena {plan.arena_bytes} bytes for {len(plan.buffers)} buffers over "
            f"{len(graph.nodes)} steps: {ratio:.2f}x smaller than no sharing "
            f"({plan.no_sharing_bytes} bytes), {gap:.3f}x the max-live lower bound "
            f"({plan.lower_bound_bytes} bytes); best-fit in {plan.strategy} order", [],
            strategy=plan.strategy, **stats))
        for name in dynamic:
            remarks.append(self.remark(
                "missed", f"not planned: %{name} has a non-static shape; the runtime allocates it",
                [name]))
        return MemoryPlanResult(False, remarks, stats, plan=plan)
