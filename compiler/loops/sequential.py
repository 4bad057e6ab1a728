"""Whole-kernel lowerings for sequential ops: statements, not index functions.

Most ops lower to index functions (``compiler.loops.tensor``) that ``compiler.loops.lower``
composes into one loop nest per group output. An op whose result is defined by a sequential
algorithm (NonMaxSuppression's greedy selection: whether a box is kept depends on the boxes kept
before it) is written instead as loop-IR statements (``For``, ``If``, ``Store``, ``Allocate``) that
fill its output buffers directly. Such an op is ``opaque`` (never fused), so it is its own kernel.

A lowering registered here is ``fn(ctx, node, ins, outs, scratch) -> Stmt``: ``ins`` are the
input tensors (index functions: ``t[[i, j]]`` is a load; ``None`` for an omitted optional input),
``outs`` the output buffers (static shapes, in output order; ``None`` for an output without a
static shape, which the lowering must refuse with a CompileError naming the node), and ``scratch(dtype, shape)`` gives a
kernel-private buffer (runtime memory, any size). The statements are not scheduled (the default
schedule vectorizes only compute loop nests), so their loops stay serial.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .ir import Buffer, Stmt

ScratchFn = Callable[[str, tuple[int, ...]], Buffer]
SequentialFn = Callable[[Any, Any, list[Any], list[Buffer | None], ScratchFn], Stmt]

SEQUENTIAL: dict[str, SequentialFn] = {}


def register_sequential(*names: str) -> Callable[[SequentialFn], SequentialFn]:
    """Decorator registering a whole-kernel lowering for the default-domain ops ``names``."""

    def deco(fn: SequentialFn) -> SequentialFn:
        for n in names:
            SEQUENTIAL[n] = fn
        return fn

    return deco
