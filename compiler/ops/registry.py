"""The op registry: per ONNX op, shape and dtype inference and a fusion kind.

An :class:`OpDef` gives, for one op of the default domain, its fusion kind (TVM's op patterns:
``elementwise``, ``broadcast``, ``injective``, ``reduction``, ``out-elementwise-fusable``,
``opaque``) and an inference function ``infer(ctx) -> list[TensorType]`` that computes the type of
every output from the input types, the attributes and, for data-dependent shape ops (Reshape,
Slice, Expand ...), the input *values* where they are known. Semantics: the ONNX operator spec
(onnx/docs/Operators.md) at the model's opset. Inference errors a user can cause raise
:class:`CompileError` with stage ``shape`` naming the node, op and attribute.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import CompileError
from ..ir import Node, TensorType
from ..ir.types import Dim

KINDS = ("elementwise", "broadcast", "injective", "reduction", "out-elementwise-fusable", "opaque")


class InferContext:
    """What an inference function sees of one node.

    ``opset`` is the default-domain opset version; ``value(i)`` the known contents of input ``i``
    (a numpy array, or ``None`` when not known at compile time).
    """

    def __init__(self, node: Node, opset: int, known: Callable[[Any], np.ndarray | None]) -> None:
        self.node = node
        self.opset = opset
        self._known = known

    # inputs ------------------------------------------------------------------------------
    @property
    def n_inputs(self) -> int:
        return len(self.node.inputs)

    def has(self, i: int) -> bool:
        return self.node.input(i) is not None

    def sym(self, i: int, out: int = 0) -> str:
        """A symbolic dim name for dim ``i`` of output ``out`` (its size known only at run time)."""
        return f"{self.node.outputs[out].name}_d{i}"

    def type(self, i: int) -> TensorType:
        v = self.node.input(i)
        if v is None:
            raise self.fail(f"input {i} is required")
        if v.type is None:
            raise self.fail(f"input {i} (%{v.name}) has no type")
        return v.type

    def shape(self, i: int) -> tuple[Dim, ...]:
        t = self.type(i)
        if t.shape is None:
            raise self.fail(f"input {i} (%{self.node.inputs[i].name}) has unknown rank")  # type: ignore[union-attr]
        return t.shape

    def rank(self, i: int) -> int:
        return len(self.shape(i))

    def value(self, i: int) -> np.ndarray | None:
        v = self.node.input(i)
        return None if v is None else self._known(v)

    def ints(self, i: int) -> list[int] | None:
        """Input ``i``'s known contents as a list of ints, or None."""
        val = self.value(i)
        return None if val is None else [int(x) for x in np.asarray(val).reshape(-1)]

    def attr(self, name: str, default: Any = None) -> Any:
        return self.node.attrs.get(name, default)

    # errors ---------------------------------------------------------------------------------
    def fail(self, message: str, attribute: str | None = None) -> CompileError:
        n = self.node
        return CompileError("shape", f"{n.label} ({n.op_type}): {message}", node=n.name or n.label,
                            op=n.op_type, attribute=attribute)

    def axis(self, axis: int, rank: int, name: str = "axis") -> int:
        """Normalize a possibly negative axis; raises CompileError when out of [-rank, rank)."""
        if not -rank <= axis < rank:
            raise self.fail(f"{name} {axis} is out of range for rank {rank}", attribute=name)
        return axis + rank if axis < 0 else axis


InferFn = Callable[[InferContext], list[TensorType]]


@dataclass(frozen=True)
class OpDef:
    """One op's registry entry: ``kind`` (one of :data:`KINDS`) and its ``infer`` function."""

    op_type: str
    kind: str
    infer: InferFn


REGISTRY: dict[str, OpDef] = {}


def op(*names: str, kind: str, domain: str = "") -> Callable[[InferFn], InferFn]:
    """Decorator registering ``infer`` for the ops ``names`` of ``domain`` (default: the ONNX domain) with
    fusion ``kind``: the one way :data:`REGISTRY` is filled (keys as :func:`registry_key` makes them).
    Raises ValueError for an unknown kind or an op registered before."""
    if kind not in KINDS:
        raise ValueError(f"unknown fusion kind {kind!r}")

    def deco(fn: InferFn) -> InferFn:
        for n in names:
            key = n if domain in ("", "ai.onnx") else f"{domain}.{n}"
            if key in REGISTRY:  # one registration per op: a second one would make the result import-order dependent
                raise ValueError(f"op {key} is registered twice ({REGISTRY[key].infer.__module__} and {fn.__module__})")
            REGISTRY[key] = OpDef(n, kind, fn)
        return fn

    return deco


def registry_key(node: Node) -> str:
    """``op_type`` for the default domain, ``domain.op_type`` otherwise (e.g. ``prism.NarrowCast``)."""
    return node.op_type if node.domain in ("", "ai.onnx") else f"{node.domain}.{node.op_type}"


def op_kind(node: Node) -> str:
    """The fusion kind of ``node``; ``opaque`` for ops without a registry entry."""
    d = REGISTRY.get(registry_key(node))
    return d.kind if d is not None else "opaque"


# shape helpers ------------------------------------------------------------------------------
def broadcast(ctx: InferContext, *shapes: tuple[Dim, ...]) -> tuple[Dim, ...]:
    """Multidirectional (numpy) broadcasting, ONNX "Broadcasting in ONNX"; raises on mismatch."""
    rank = max((len(s) for s in shapes), default=0)
    out: list[Dim] = []
    for k in range(rank):
        dims = [s[len(s) - rank + k] for s in shapes if len(s) - rank + k >= 0]
        ints = {d for d in dims if isinstance(d, int) and d != 1}
        syms = [d for d in dims if isinstance(d, str)]
        if len(ints) > 1:
            raise ctx.fail(f"shapes {' and '.join(str(list(s)) for s in shapes)} do not broadcast")
        if ints:
            out.append(ints.pop())
        elif syms:
            out.append(syms[0])
        else:
            out.append(1)
    return tuple(out)


def same(ctx: InferContext, i: int = 0) -> list[TensorType]:
    return [ctx.type(i)]


def dtype_of(ctx: InferContext, i: int) -> int:
    return ctx.type(i).elem_type


def mul_dims(dims: list[Dim] | tuple[Dim, ...]) -> Dim:
    out = 1
    for d in dims:
        if not isinstance(d, int):
            return "?"
        out *= d
    return out
