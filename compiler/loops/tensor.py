"""Tensors as index functions: the value of every element as a loop-IR expression.

A :class:`Tensor` has a static shape, a dtype and ``fn(indices) -> Expr``. Lowering an op composes
these functions: elementwise ops combine their inputs' expressions at the same (broadcast) index,
injective ops (Reshape, Transpose, Concat, Slice, Pad, Gather ...) rewrite the index, and
reductions (Conv, MatMul, pooling, Softmax ...) build :class:`~compiler.loops.ir.Reduce` nodes.
Nothing is materialized until a kernel stores a group output (see ``compiler.loops.lower``).
Broadcasting follows ONNX multidirectional (numpy) broadcasting.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ..errors import CompileError
from ..ir import Node
from .ir import Expr, Float, Int, Load, add, emax, emin, floordiv, floormod, mul


@dataclass
class Tensor:
    """``shape`` (ints), ``dtype`` (short name), ``fn`` (indices -> element expression)."""

    shape: tuple[int, ...]
    dtype: str
    fn: Callable[[list[Expr]], Expr]
    const: object = None  # numpy data when the value is a compile-time constant

    def __getitem__(self, idx: Sequence[Expr]) -> Expr:
        return self.fn(list(idx))

    @property
    def rank(self) -> int:
        return len(self.shape)


def from_buffer(buf, const=None) -> Tensor:  # type: ignore[no-untyped-def]
    return Tensor(tuple(buf.shape), buf.dtype, lambda idx: Load(buf, tuple(idx)), const)


def broadcast_to(t: Tensor, out_shape: Sequence[int]) -> Tensor:
    """``t`` read at indices of the (broadcast) ``out_shape``: numpy right-aligned broadcasting."""
    off = len(out_shape) - t.rank
    if off < 0:
        raise ValueError(f"cannot broadcast {t.shape} to {tuple(out_shape)}")

    def fn(idx: list[Expr]) -> Expr:
        return t[[Int(0) if t.shape[k] == 1 else idx[off + k] for k in range(t.rank)]]

    return Tensor(tuple(out_shape), t.dtype, fn)


def unravel(flat: Expr, shape: Sequence[int]) -> list[Expr]:
    """Row-major multi-index of a flat offset ``0 <= flat < prod(shape)``. The outermost dim that is
    not 1 takes the quotient without a modulo (it is in range), so an offset into a shape with one
    non-unit dim stays the offset itself: affine, and a contiguous vector access where it was one."""
    out: list[Expr] = []
    outer = next((k for k, d in enumerate(shape) if d != 1), len(shape))
    for k in range(len(shape) - 1, -1, -1):
        d = shape[k]
        out.append(Int(0) if d == 1 else flat if k == outer else floormod(flat, d))
        flat = floordiv(flat, d)
    return list(reversed(out))


def ravel(idx: Sequence[Expr], shape: Sequence[int]) -> Expr:
    off: Expr = Int(0)
    for d, i in zip(shape, idx, strict=True):
        off = add(mul(off, d), i)
    return off


def reshape(t: Tensor, shape: Sequence[int]) -> Tensor:
    """Same elements in row-major order, new shape (index arithmetic; no copy)."""
    shape = tuple(int(d) for d in shape)
    if shape == t.shape:
        return t
    # fast path: only unit dims inserted or removed
    if [d for d in shape if d != 1] == [d for d in t.shape if d != 1]:
        def squeeze_fn(idx: list[Expr]) -> Expr:
            real = [i for i, d in zip(idx, shape, strict=True) if d != 1]
            it = iter(real)
            return t[[Int(0) if d == 1 else next(it) for d in t.shape]]

        return Tensor(shape, t.dtype, squeeze_fn, t.const)
    # dims shared at the front and the back map index to index; only the middle is re-raveled
    src = t.shape
    pre = 0
    while pre < min(len(src), len(shape)) and src[pre] == shape[pre]:
        pre += 1
    suf = 0
    while suf < min(len(src), len(shape)) - pre and src[-1 - suf] == shape[-1 - suf]:
        suf += 1
    mid_out, mid_in = shape[pre:len(shape) - suf], src[pre:len(src) - suf]

    def fn(idx: list[Expr]) -> Expr:
        mid = unravel(ravel(idx[pre:len(shape) - suf], mid_out), mid_in)
        return t[idx[:pre] + mid + idx[len(shape) - suf:]]

    return Tensor(shape, t.dtype, fn)


def fconst(v: float, dt: str = "f32") -> Expr:
    """The float constant ``v`` (a Python or numpy number, converted with ``float``) of dtype ``dt``."""
    return Float(float(v), dt)


def clamp(i: Expr, lo: int, hi: int) -> Expr:
    return emin(emax(i, lo), hi)


def norm_axis(node: Node, axis: int, rank: int, attr: str = "axis") -> int:
    a = axis + rank if axis < 0 else axis
    if not 0 <= a < max(rank, 1):
        raise CompileError("lowering", f"{node.label}: {attr}={axis} out of range for rank {rank}",
                           node=node.label, op=node.op_type, attribute=attr)
    return a
