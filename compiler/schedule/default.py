"""Default rule-based schedules per kernel kind.

Rule for every compute of a kernel (elementwise, injective, pooling, reductions, and Conv/MatMul
when the micro-kernel path does not apply): vectorize the innermost output loop at the target's
f32 width (16 lanes on AVX-512, 8 on AVX2, 4 on SSE/NEON/RVV here): if the extent is a multiple of the
width, split by it and vectorize the inner loop; otherwise the largest of 8 and 4 that divides it;
otherwise (55, 14, 7 ...) split by the width (or the power of two covering a shorter extent) with the
output stores of the tail masked (``split_guarded``); extents below 4 stay serial. Tunable knobs
(``compiler.schedule.knobs``): ``vector`` (the lanes, 1 = serial) and ``unroll`` (the loop of
vectors split by 2, 4 or 8 and the inner part unrolled; default 1) per compute (``vector_1`` ... for
the second and later computes). Reductions inside stay serial per lane, so
their summation order is the sequential one (no reassociation). Inlining of elementwise and injective
producers (compute_inline) is done by the lowering and listed here as well.
"""

from __future__ import annotations

from ..loops.ir import PrimFunc
from ..targets import Target
from . import primitives as P
from .knobs import choose


def apply_default(func: PrimFunc, target: Target) -> PrimFunc:
    """Schedule ``func`` in place (and return it); records every primitive in ``attrs["schedule"]``."""
    sched = func.attrs.setdefault("schedule", [])
    ops = func.attrs.get("ops", [])
    if len(ops) > 1:
        sched.append(f"compute_inline({', '.join(ops[1:])}) into {ops[0]}'s loop nest")
    width = target.vector_width_f32
    for i, loops in enumerate(func.attrs.get("computes", [])):
        if not loops:
            continue
        var, extent = loops[-1]
        tag = f"_{i}" if i else ""
        lanes = next((w for w in (width, 8, 4) if w <= width and extent % w == 0), None)
        if lanes is None and extent >= 4:
            lanes = min(width, 1 << (extent - 1).bit_length())
        opts = [1, *(w for w in (width, 8, 4) if w <= width and (extent % w == 0 or extent >= 4))]
        lanes = int(choose(f"vector{tag}", lanes or 1, opts))
        if lanes == 1:
            sched.append(f"# {var} (extent {extent}) left serial: too short to vectorize")
            continue
        if extent == lanes:
            P.vectorize(func, var)
            continue
        outer, inner = P.split(func, var, lanes) if extent % lanes == 0 else P.split_guarded(func, var, lanes)
        P.vectorize(func, inner)
        n_outer = -(-extent // lanes)
        unroll = int(choose(f"unroll{tag}", 1, [u for u in (1, 2, 4, 8) if n_outer % u == 0 and u < n_outer]))
        if unroll > 1:
            if n_outer % unroll:
                raise P.ScheduleError(f"{func.name}: unroll {unroll} does not divide {outer}'s extent {n_outer}")
            _, ui = P.split(func, outer, unroll)
            P.unroll(func, ui)
    return func
