"""Lowering a group around its one anchor op (a pool) whose results a schedule computes itself: the
shared front of :mod:`compiler.schedule.pool` and :mod:`compiler.schedule.conv_se`."""

from __future__ import annotations

from collections.abc import Callable, Collection
from typing import Any

from ..ir import FusedGroup
from ..loops.ir import Buffer
from ..loops.lower import LoweredKernel
from ..loops.registry import is_complex
from ..loops.tensor import Tensor
from .gemm import lower_around, probe_buffer, virtual_result


def lower_around_single(node: Any, kernel: str, opset: int, ops: Collection[str],
                        accept: Callable[[Any], bool]
                        ) -> tuple[Any, LoweredKernel, Buffer, Tensor, Tensor, Buffer] | None:
    """A group (or single node) whose one complex op is the only node of ``ops`` (e.g. a pool), that
    op ``accept``-ed (its output type static), lowered around it with :func:`virtual_result`:
    ``(op, kernel, output buffer, output tensor, the op's rank-4 input, the buffer it reads)``, or None
    when the group is not of that form or the input is not a plain rank-4 buffer read."""
    nodes = list(node.body.nodes) if isinstance(node, FusedGroup) else [node]
    anchors = [n for n in nodes if n.op_type in ops]
    if len(anchors) != 1 or len(node.outputs) != 1 or sum(is_complex(n) for n in nodes) != 1:
        return None
    op = anchors[0]
    t = op.outputs[0].type
    if t is None or t.shape is None or not accept(op):
        return None
    got = lower_around(node, kernel, opset, op, virtual_result(tuple(int(d) for d in t.shape)))
    if got is None:
        return None
    lk, out_buf, out_t, ins = got
    x = ins[0]
    xbuf = probe_buffer(x) if x is not None and x.rank == 4 else None
    if x is None or xbuf is None:
        return None
    return op, lk, out_buf, out_t, x, xbuf
