"""The batch dim as a run-time argument inside a kernel's loops (issue 13 item 3).

A model separable along its batch dim (``compiler.frontend.batch_split``) compiled for a range
``N = lo..hi`` runs most kernels once per sample (``compiler.codegen.batch_entry``). A GEMM-class
kernel instead takes ``N`` inside its loops, so that a projection of ``N`` samples is one GEMM of
``N * rows`` rows (register tiles spanning samples, one parallel launch) and not ``N`` GEMMs of
``rows``: the kernel is lowered at the range's maximum ``N = hi`` (every index function then
correct for every sample below ``hi``), and while :func:`active` holds, the schedules of
``compiler.schedule.gemm`` / ``matmul`` / ``microkernel`` bound the loops that span samples by the
run-time value, read from the kernel parameter :data:`BATCH_N` (an ``i64 [1]`` holding ``N``; the
batch entry function stores its ``n`` there). Computing only the outputs of samples ``< N`` is
correct because samples are independent: output sample ``s`` reads only input sample ``s``, and
axis 0 outermost puts sample ``s`` at the same offset at every ``N``.

A schedule that honours the bound says how in a schedule line and takes :data:`BATCH_N` as a
parameter (:func:`mark`, :func:`takes_batch`); a kernel without it keeps the per-sample call.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from ..loops.ir import Buffer, Expr, Int, Load, mul
from ..loops.lower import KernelArg
from ..loops.printer import expr_str

BATCH_N = Buffer("batch_n", "i64", (1,), "dim")


@dataclass(frozen=True)
class BatchDim:
    """``N`` is a run-time value in ``lo..hi``; kernels are lowered at ``hi``."""

    lo: int
    hi: int

    def n(self) -> Expr:
        """``N`` at run time: the load of :data:`BATCH_N`."""
        return Load(BATCH_N, (Int(0),))

    def rows(self, extent: int) -> tuple[int, Expr, list[int]] | None:
        """For a loop over ``extent`` rows at ``N = hi`` that is ``hi`` samples of equal row counts:
        ``(rows per sample, the run-time row count, every row count N takes)``; None when
        ``extent`` is not a multiple of ``hi``."""
        if extent % self.hi:
            return None
        per = extent // self.hi
        return per, mul(self.n(), per), [n * per for n in range(self.lo, self.hi + 1)]


_ACTIVE: ContextVar[BatchDim | None] = ContextVar("prism_batch_dim", default=None)


def active() -> BatchDim | None:
    """The batch dim kernels being lowered take at run time, or None (a kernel of one shape)."""
    return _ACTIVE.get()


@contextmanager
def batch_dim(dim: BatchDim) -> Iterator[BatchDim]:
    """Lower kernels with ``dim`` a run-time argument inside the block."""
    token = _ACTIVE.set(dim)
    try:
        yield dim
    finally:
        _ACTIVE.reset(token)






def batch_rows(lk: Any, rows: int, what: str) -> tuple[Expr, list[int]] | None:
    """``compiler.schedule.gemm.gemm_nest``'s ``m_run`` for a GEMM of ``rows`` rows at ``N = hi`` while
    :func:`active` (the rows being every sample's rows), marking ``lk`` (a LoweredKernel); else None."""
    dim = active()
    got = dim.rows(rows) if dim is not None else None
    if got is None:
        return None
    per, run, sizes = got
    mark(lk, f"{what} is {expr_str(run)} rows at run time (N samples of {per} rows, at most {rows}): "
                        "one GEMM over every sample's rows")
    return run, sizes


def mark(lk: Any, how: str) -> None:
    """Record that ``lk``'s (a LoweredKernel, before ``finish``) loops take ``N`` at run time (``how``:
    which loop, in words): a schedule line and :data:`BATCH_N` among its parameters (``KernelArg``
    kind ``dim``: what :func:`takes_batch` looks for)."""
    lk.func.attrs.setdefault("schedule", []).append(f"# batch: {how}")
    if not any(a.buffer.name == BATCH_N.name for a in lk.args):
        lk.args.append(KernelArg("dim", "N", BATCH_N))


def takes_batch(lk: Any) -> bool:
    """Whether the lowered kernel ``lk`` reads ``N`` at run time (its parameters include :data:`BATCH_N`)."""
    return any(a.kind == "dim" for a in lk.args)


__all__ = ["BATCH_N", "BatchDim", "active", "batch_dim", "batch_rows", "mark", "takes_batch"]
