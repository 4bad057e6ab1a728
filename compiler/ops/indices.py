"""Index operands known at compile time checked against the axes they index (ONNX operator spec:
Gather, GatherElements, GatherND, ScatterElements, ScatterND take indices in ``[-s, s-1]`` for an
axis of size ``s``; an index outside is an error there, not a value to clamp). The kernels clamp
out-of-range indices to stay in memory, so an index known here (an initializer, a folded constant,
an input bound with ``input_values``) that is out of range is refused with the node, the position
and the value. Indices that arrive at run time are not checked.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from onnx import TensorProto

from ..ir.types import Dim
from .registry import InferContext


def check_indices(ctx: InferContext, i: int, sizes: Sequence[Dim], first_axis: int) -> None:
    """Raise CompileError(stage="shape") when input ``i`` is known and one of its indices is outside
    ``[-size, size-1]``. One size: every index addresses axis ``first_axis``; several (GatherND,
    ScatterND): the index in column ``k`` of the last axis addresses axis ``first_axis + k``. Indices that are
    not int32/int64 are refused too (ONNX spec type constraint Tind; ONNX Runtime refuses the model)."""
    elem = ctx.type(i).elem_type
    if elem not in (TensorProto.INT32, TensorProto.INT64):
        raise ctx.fail(f"indices are {ctx.type(i).short}; ONNX {ctx.node.op_type} needs int32 or int64 indices")
    idx = ctx.value(i)
    if idx is None or not sizes or any(not isinstance(s, int) for s in sizes):
        return
    a = np.asarray(idx).astype(np.int64)
    if a.size == 0:
        return
    per_column = len(sizes) > 1
    bound = np.asarray(sizes, np.int64) if per_column else np.int64(sizes[0])
    bad = (a < -bound) | (a >= bound)
    if not bad.any():
        return
    pos = tuple(int(p) for p in np.argwhere(bad)[0])
    k = pos[-1] if per_column else 0
    size, axis = int(sizes[k]), first_axis + k
    raise ctx.fail(f"indices{list(pos)} = {int(a[pos])} is out of range for axis {axis} of size {size} "
                   f"(ONNX {ctx.node.op_type}: indices must be in [-{size}, {size - 1}])")
