"""The lowering registry and what every op lowering uses.

:data:`LOWERINGS` maps an op's registry key (``compiler.ops.registry.registry_key``: ``op_type``, or
``domain.op_type`` outside the ONNX domain) to its lowering, a function ``(ctx, node, input tensors)
-> output tensors`` (index functions, ``compiler.loops.tensor``); :data:`COMPLEX_OPS` holds the keys
of the ops that read an input at computed positions or more than once per output. Both are filled
only by :func:`register`, the decorator on each op's lowering in the ``ops_*`` modules (imported by
``compiler.loops.lower``). :class:`LowerCtx` is what a lowering may use; :func:`bad` and
:func:`const_input` give the errors it raises.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable

import numpy as np

from ..errors import CompileError
from ..ir import Node, TensorType
from ..ops.registry import registry_key
from .ir import Bin, Buffer, Cast, Expr, Int, add, call, select
from .tensor import Tensor, clamp, from_buffer

Lower = Callable[["LowerCtx", Node, list[Tensor | None]], list[Tensor]]

#: registry key (``compiler.ops.registry.registry_key``) -> lowering
LOWERINGS: dict[str, Lower] = {}
#: registry keys of the complex ops: their lowering reads an input at computed positions or more than
#: once per output (reductions, windows, gathers by data, scans), so ``compiler.loops.lower`` keeps
#: such an op's input in a scratch buffer when another complex op of the same group computes it
COMPLEX_OPS: set[str] = set()


class LowerCtx:
    """What an op lowering may use: the opset, output shapes/dtypes, fresh variables."""

    def __init__(self, opset: int, lowering) -> None:  # type: ignore[no-untyped-def]
        self.opset = opset
        self.lowering = lowering
        self.new_consts: list[tuple[Buffer, np.ndarray]] = []
        self.faults: dict[int, tuple[str, str, str]] = {}  # code -> (node, op, message): compiler.runtime.faults

    def checked(self, node: Node, kind: str, value: Expr, bad: Expr, message: str) -> Expr:
        """``value`` under a run-time check (``compiler.runtime.faults``): where ``bad`` holds, the run
        fails with CompileError(stage="run") naming ``node`` and saying ``message``."""
        code = (zlib.crc32(f"{kind}:{node.label}".encode()) & 0x7FFFFFFF) + 1  # stable across processes, never 0
        self.faults[code] = (node.label, node.op_type, message)
        return call("check", value, bad, Int(code))

    def const_tensor(self, data: np.ndarray, name: str) -> Tensor:
        """A compile-time array (e.g. folded BatchNormalization scale) as a ``const`` kernel parameter."""
        data = np.ascontiguousarray(data)
        clean = "".join(c if c.isalnum() else "_" for c in name)
        buf = Buffer(f"c{len(self.new_consts)}_{clean}", _short(data.dtype), tuple(data.shape), "const")
        self.new_consts.append((buf, data))
        return from_buffer(buf, data)

    @staticmethod
    def out_shape(node: Node, i: int = 0) -> tuple[int, ...]:
        t = node.outputs[i].type
        if t is None or not t.is_static:
            raise CompileError("lowering", f"{node.label}: output {i} has no static shape", node=node.label,
                               op=node.op_type)
        return tuple(int(d) for d in t.shape)  # type: ignore[union-attr]

    @staticmethod
    def out_dtype(node: Node, i: int = 0) -> str:
        t = node.outputs[i].type
        return t.short if t is not None else "f32"


def checked_index(ctx: LowerCtx, node: Node, e: Expr, n: int, axis: int) -> Expr:
    """An index read from a tensor (``e``, any integer dtype) as an i64 in ``[0, n)``: negative values
    count from the end, and one outside ``[-n, n-1]`` (an error in the ONNX spec of Gather, GatherND,
    GatherElements, ScatterND, ScatterElements) fails the run naming ``node`` (``LowerCtx.checked``);
    the kernel reads at the clamped index meanwhile, so memory stays in bounds."""
    j = Cast("i64", e) if e.dtype != "i64" else e
    bad = Bin("or", Bin("<", j, Int(-n)), Bin(">=", j, Int(n)))
    j = clamp(select(Bin("<", j, Int(0)), add(j, n), j), 0, max(n - 1, 0))
    return ctx.checked(node, f"index{axis}", j, bad, f"{node.label} ({node.op_type}): an index computed in the model "
                       f"is out of range for axis {axis} of size {n} (valid: -{n} to {n - 1})")


def divide_message(node: Node, dtype: str) -> str:
    """The run-time error of an integer Div or Mod by zero (``LowerCtx.checked``)."""
    what = "modulo" if node.op_type == "Mod" else "division"
    return (f"{node.label} ({node.op_type}): integer {what} by zero ({dtype}; undefined in the ONNX spec, "
            f"ONNX Runtime stops with 'Integer {what} by zero')")


def _short(dt: np.dtype) -> str:
    return TensorType.of(dt, ()).short


def bad(node: Node, attribute: str, why: str) -> CompileError:
    """The lowering error for ``node``: its label, op and ``attribute``, and why it cannot be lowered."""
    return CompileError("lowering", f"{node.label} ({node.op_type}): {why}", node=node.label, op=node.op_type,
                        attribute=attribute)


def const_input(node: Node, t: Tensor | None, what: str) -> np.ndarray:
    """The constant value of input ``what``; raises :func:`bad` when it is not a compile-time constant."""
    if t is None or t.const is None:
        raise bad(node, what, f"input '{what}' must be a constant to lower this op")
    return np.asarray(t.const)


def register(*names: str, complex_op: bool = False) -> Callable[[Lower], Lower]:
    """Decorator: ``fn`` lowers the ops ``names`` (registry keys: ``op_type``, or ``domain.op_type`` outside
    the default domain); ``complex_op`` puts them in :data:`COMPLEX_OPS` (a later registration of a name
    replaces both its lowering and its kind)."""
    def deco(fn: Lower) -> Lower:
        for n in names:
            LOWERINGS[n] = fn
            if complex_op:
                COMPLEX_OPS.add(n)
            else:
                COMPLEX_OPS.discard(n)
        return fn
    return deco


def is_complex(node: Node) -> bool:
    """Whether ``node``'s op is in :data:`COMPLEX_OPS`."""
    return registry_key(node) in COMPLEX_OPS
