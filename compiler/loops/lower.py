"""Lower one fused group (or a lone node) to one kernel (:class:`~compiler.loops.ir.PrimFunc`).

Each node of the group, in order, maps its input tensors to output tensors (index functions, see
``compiler.loops.tensor``): elementwise and injective ops are inlined into their consumers, so the
group's epilogue (bias, folded BatchNormalization, Relu, residual Add ...) is computed inside the
anchor's loop nest with no intermediate buffer. A reducing node's result is materialized in a
``scratch`` buffer only when another reducing node of the group, or more than one group output,
reads it. Each group output is then one compute (``compiler.loops.compute``).

Parameters are named by position and role (``in0``, ``c1``, ``out0``, ``tmp0``) so that identical
groups print identical loop IR and compile once; the printed kernel lists what each one is bound to.
An op without a lowering raises ``CompileError(stage="lowering")`` naming the node and op.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import CompileError
from ..ir import FusedGroup, Node, Value
from ..ops.registry import registry_key
from . import (  # noqa: F401  (issue 6: conformance lowerings)
    ops_grid,
    ops_linalg,
    ops_misc,
    ops_narrow,
    ops_nchwc,
    ops_nms,
    ops_nn,  # noqa: F401  (registers the reducing ops)
    ops_norm,
    ops_pad,
    ops_pool,
    ops_qlinear,
    ops_quant,
    ops_reduce,
    ops_resize,
    ops_shape,
    ops_text,
)
from .compute import Lowering
from .ir import (
    Allocate,
    Bin,
    Buffer,
    Call,
    Expr,
    Float,
    For,
    If,
    Int,
    PrimFunc,
    Select,
    Seq,
    Stmt,
    children,
    walk_stmts,
)
from .ir import Store as St
from .registry import LOWERINGS, LowerCtx, is_complex
from .sequential import SEQUENTIAL
from .tensor import Tensor, from_buffer


@dataclass
class KernelArg:
    """How the runtime binds one kernel parameter: ``kind`` is ``value`` (a graph value by
    ``name``), ``const`` (``data`` is the array), ``scratch`` (kernel-private memory) or ``dim`` (an
    ``i64`` holding the run-time batch size: ``compiler.schedule.batch.BATCH_N``)."""

    kind: str
    name: str
    buffer: Buffer
    data: np.ndarray | None = None


@dataclass
class LoweredKernel:
    """A kernel: its loop IR ``func``, parameter bindings ``args`` (call order), source group."""

    name: str
    group: str
    func: PrimFunc
    args: list[KernelArg] = field(default_factory=list)
    inputs: list[str] = field(default_factory=list)
    outputs: list[str] = field(default_factory=list)
    pending: list[Any] = field(default_factory=list)
    prelude: list[Any] = field(default_factory=list)
    lowering: Any = None
    nodes: list[Any] = field(default_factory=list)
    faults: dict[int, tuple[str, str, str]] = field(default_factory=dict)  # LowerCtx.faults
    writes: dict[str, set[int]] = field(default_factory=dict)  # buffer name -> indices into nodes it computes
    anchors: set[int] = field(default_factory=set)  # indices of the reducing / sequential nodes


def _constant(value: Expr) -> Callable[[list[Expr]], Expr]:
    """The index function of a tensor whose every element is ``value``."""
    return lambda idx: value


def _static(v: Value) -> tuple[str, tuple[int, ...]]:
    t = v.type
    if t is None or not t.is_static:
        raise CompileError("lowering", f"value %{v.name} has no static shape ({t})")
    return t.short, tuple(int(d) for d in t.shape)  # type: ignore[union-attr]


def origin_of(node: Node) -> list[str]:
    """The ONNX nodes a kernel computes: the names of a fused group's body nodes in order (a lone
    node: its own), an unnamed node by its op type and position (``Conv#3``); a kernel's loop IR
    carries them as ``attrs["origin"]`` (printed as its ``# origin:`` line)."""
    nodes = list(node.body.nodes) if isinstance(node, FusedGroup) else [node]
    return [n.name or f"{n.op_type}#{i}" for i, n in enumerate(nodes)]


def origin_ops(node: Node) -> list[str]:
    """The ONNX op types of :func:`origin_of`'s nodes, in the same order (``["Conv", "Relu"]``)."""
    nodes = list(node.body.nodes) if isinstance(node, FusedGroup) else [node]
    return [n.op_type for n in nodes]


def lower_group(node: Node, kernel: str, opset: int, *, override: dict[int, Any] | None = None,
                build: bool = True) -> LoweredKernel:
    """Lower a FusedGroup (or any single node, as a one-node group) to a kernel named ``kernel``.

    ``override`` maps ``id(node)`` of an inner node to a replacement lowering (used by the
    micro-kernel schedules to read the anchor's value from its accumulators). With ``build=False``
    the output computes are not emitted: ``lk.pending`` holds ``(output buffer, tensor)`` pairs and
    ``lk.prelude`` the statements before them, for a schedule that builds its own loop nest.
    """
    g = _GroupLowering(node, kernel, opset, override or {})
    for n in g.nodes:
        if n.op_type in SEQUENTIAL and n.domain in ("", "ai.onnx"):
            g.lower_sequential(n)
        else:
            g.lower_node(n)
    for buf, data in g.ctx.new_consts:
        g.lk.args.append(KernelArg("const", buf.name, buf, data))
    body = g.outputs(build)
    g.lk.prelude = list(body)
    g.lk.lowering = g.lw
    if build:
        finalize(g.lk, body)
    return g.lk


class _GroupLowering:
    """The state of lowering one group: the tensor of each value (``env``), the unmaterialized complex
    nodes each value depends on (``upstream``), the statements so far (``body``) and the kernel's
    parameters (``lk.args``, in binding order: the order names them ``inN``, ``cN``, ``outN``, ``tmpN``)."""

    def __init__(self, node: Node, kernel: str, opset: int, override: dict[int, Any]) -> None:
        if isinstance(node, FusedGroup):
            self.nodes = list(node.body.nodes)
            inner_in, self.inner_out = list(node.body.inputs), list(node.body.outputs)
            consts = dict(node.body.constants)
            outer_in: list[Value] = [v for v in node.inputs if v is not None]
            self.outer_out = list(node.outputs)
        else:
            self.nodes = [node]
            inner_in = outer_in = [v for v in node.inputs if v is not None]
            self.inner_out = self.outer_out = list(node.outputs)
            consts = {}
        self.kernel, self.override = kernel, override
        self.lw = Lowering()
        self.ctx = LowerCtx(opset, self.lw)
        self.lk = LoweredKernel(kernel, node.name or kernel, PrimFunc(kernel, [], Seq([])))
        self.lk.nodes = self.nodes
        self.lk.faults = self.ctx.faults  # the checks its lowerings add (compiler.runtime.faults)
        self.env: dict[int, Tensor] = {}
        self.index = {id(n): i for i, n in enumerate(self.nodes)}
        self.contrib: dict[int, set[int]] = {}  # value id -> indices of the nodes inlined into its tensor
        self.upstream: dict[int, set[int]] = {}  # value id -> ids of unmaterialized reducing nodes it depends on
        self.body: list[Stmt] = []
        self.n_tmp = 0
        self.written: set[int] = set()  # outputs stored by a sequential lowering (compiler.loops.sequential)
        for iv, ov in zip(inner_in, outer_in, strict=True):
            self.bind(iv, ov)
        for cv in consts.values():
            self.bind(cv, cv)
        self.out_bufs: dict[int, Buffer] = {}
        for iv, ov in zip(self.inner_out, self.outer_out, strict=True):
            p = iv.producer
            if p is not None and p.op_type in SEQUENTIAL and not (ov.type is not None and ov.type.is_static):
                continue  # its lowering says why (a data-dependent length)
            dt, shape = _static(ov)
            self.out_bufs[id(iv)] = Buffer(f"out{len(self.out_bufs)}", dt, shape, "arena")

    def bind(self, inner: Value, outer: Value) -> None:
        """Make ``inner`` read ``outer``: a scalar constant inline, an array constant or a graph value as a
        parameter."""
        dt, shape = _static(outer)
        if outer.const is not None:
            data = np.asarray(outer.const)
            if data.size == 1 and data.dtype.kind in "fiu":
                scalar = Float(float(data.reshape(-1)[0]), dt) if dt in ("f32", "f64") else Int(int(data.reshape(-1)[0]), dt)
                self.env[id(inner)] = Tensor(shape, dt, _constant(scalar), data)
                return
            buf = Buffer(f"c{len(self.lk.args)}", dt, shape, "const")
            self.lk.args.append(KernelArg("const", outer.name, buf, data))
        else:
            buf = Buffer(f"in{len(self.lk.args)}", dt, shape, "arena")
            self.lk.args.append(KernelArg("value", outer.name, buf))
            self.lk.inputs.append(outer.name)
        self.env[id(inner)] = from_buffer(buf, outer.const)
        self.upstream[id(inner)] = set()
        self.contrib[id(inner)] = set()

    def scratch(self, dtype: str, shape: tuple[int, ...]) -> Buffer:
        """A new kernel-private buffer (``tmpN``)."""
        buf = Buffer(f"tmp{self.n_tmp}", dtype, shape, "scratch")
        self.lk.args.append(KernelArg("scratch", f"{self.kernel}.tmp{self.n_tmp}", buf))
        self.n_tmp += 1
        return buf

    def materialize(self, v: Value) -> None:
        """Compute ``v`` into a scratch buffer now; later readers load it."""
        t = self.env[id(v)]
        buf = self.scratch(t.dtype, t.shape)
        self.body.append(self.lw.compute(buf, t.fn))
        self.env[id(v)] = from_buffer(buf)
        self.upstream[id(v)] = set()
        self.lk.writes[buf.name], self.contrib[id(v)] = self.contrib.get(id(v), set()), set()

    def lower_sequential(self, n: Node) -> None:
        """A sequential op (``compiler.loops.sequential``) stores its outputs itself: a kernel of its own."""
        if any(v not in self.inner_out for v in n.outputs):
            raise CompileError("lowering", f"{n.label} ({n.op_type}) must be a kernel of its own", node=n.label,
                               op=n.op_type)
        for v in n.inputs:
            if v is not None and id(v) not in self.env and v.const is not None:
                self.bind(v, v)
        ins_t = [self.env[id(v)] if v is not None and id(v) in self.env else None for v in n.inputs]
        outs_b = [self.out_bufs.get(id(v)) for v in n.outputs]  # None: no static shape (the lowering raises)
        self.body.append(SEQUENTIAL[n.op_type](self.ctx, n, ins_t, outs_b, self.scratch))
        self.lk.anchors.add(self.index[id(n)])
        for v in n.outputs:
            self.env[id(v)] = from_buffer(self.out_bufs[id(v)])
            self.upstream[id(v)] = set()
            self.written.add(id(v))
            self.lk.writes[self.out_bufs[id(v)].name] = self._inlined(n)
            self.contrib[id(v)] = set()

    def lower_node(self, n: Node) -> None:
        """Map ``n``'s input tensors to its output tensors; a complex op first materializes inputs that
        depend on another unmaterialized complex op."""
        fn = self.override.get(id(n)) or LOWERINGS.get(registry_key(n))
        if fn is None:
            raise CompileError("lowering", f"no lowering for op {n.op_type} (node {n.label})", node=n.label,
                               op=n.op_type)
        ins = list(n.inputs)
        for v in ins:
            if v is not None and id(v) not in self.env:
                if v.const is None:
                    raise CompileError("lowering", f"{n.label}: input %{v.name} is not bound in the group",
                                       node=n.label, op=n.op_type)
                self.bind(v, v)
        if is_complex(n):
            for v in ins:
                if v is not None and self.upstream.get(id(v)):
                    self.materialize(v)
        try:
            outs = fn(self.ctx, n, [self.env[id(v)] if v is not None else None for v in ins])
        except CompileError:
            raise
        except (ValueError, KeyError, IndexError, TypeError) as e:
            raise CompileError("lowering", f"{n.label} ({n.op_type}): {e}", node=n.label, op=n.op_type) from e
        up = set().union(*(self.upstream.get(id(v), set()) for v in ins if v is not None))
        if is_complex(n):
            up = up | {id(n)}
            self.lk.anchors.add(self.index[id(n)])
        inlined = self._inlined(n)
        for ov, t in zip(n.outputs, outs, strict=False):
            self.env[id(ov)] = t
            self.upstream[id(ov)] = up
            self.contrib[id(ov)] = inlined

    def _inlined(self, n: Node) -> set[int]:
        """``n`` and the nodes inlined into its inputs' tensors (indices into the group's nodes)."""
        return {self.index[id(n)]}.union(*(self.contrib.get(id(v), set()) for v in n.inputs if v is not None))

    def outputs(self, build: bool) -> list[Stmt]:
        """Bind the group outputs (``outN``) and compute each (``build``) or leave it in ``lk.pending``;
        a complex node feeding more than one group output is materialized once first. The body."""
        counts: dict[int, int] = {}
        for iv in self.inner_out:
            for c in self.upstream.get(id(iv), set()):
                counts[c] = counts.get(c, 0) + 1
        self.lk.pending = []
        for iv, ov in zip(self.inner_out, self.outer_out, strict=True):
            if any(counts[c] > 1 for c in self.upstream.get(id(iv), set())):
                for n in self.nodes:
                    if counts.get(id(n), 0) > 1 and id(n.outputs[0]) in self.env and self.upstream.get(id(n.outputs[0])):
                        self.materialize(n.outputs[0])
            if id(iv) not in self.env:
                raise CompileError("lowering", f"group output %{iv.name} is not computed by the group")
            t = self.env[id(iv)]
            buf = self.out_bufs[id(iv)]
            self.lk.args.append(KernelArg("value", ov.name, buf))
            self.lk.outputs.append(ov.name)
            if id(iv) in self.written:
                continue
            self.lk.writes[buf.name] = set(self.contrib.get(id(iv), set()))
            if build:
                self.body.append(self.lw.compute(buf, t.fn))
            else:
                self.lk.pending.append((buf, t))
        return self.body


def finalize(lk: LoweredKernel, body: list[Stmt]) -> None:
    """Build ``lk.func`` from ``body`` and record bindings, ops, computes, FLOPs and bytes."""
    kernel, nodes, lw = lk.name, lk.nodes, lk.lowering
    lk.func = PrimFunc(kernel, [a.buffer for a in lk.args], body[0] if len(body) == 1 else Seq(body))
    lk.func.attrs["bindings"] = [f"{a.buffer.name} = {a.kind} %{a.name}" if a.kind != "scratch"
                                 else f"{a.buffer.name} = scratch" for a in lk.args]
    lk.func.attrs["ops"] = [n.op_type for n in nodes]
    lk.func.attrs["computes"] = lw.out_loops
    lk.func.attrs["flops"] = count_flops(lk.func.body)
    lk.func.attrs["bytes"] = int(sum(a.buffer.numel * np.dtype(_np(a.buffer.dtype)).itemsize for a in lk.args
                                     if a.kind != "scratch"))


def _np(dt: str) -> str:
    return {"f32": "float32", "f64": "float64", "i64": "int64", "i32": "int32", "i8": "int8", "u8": "uint8",
            "bool": "bool", "i16": "int16", "u16": "uint16", "u32": "uint32", "u64": "uint64"}[dt]


def count_flops(s: Stmt) -> int:
    """Floating-point operations the loop nest executes (fma = 2; exp, tanh ... = 1 each)."""
    def ops(e) -> int:  # type: ignore[no-untyped-def]
        n = 0
        if isinstance(e, Bin) and e.dtype in ("f32", "f64") and e.op in ("+", "-", "*", "/", "min", "max"):
            n = 1
        elif isinstance(e, Call) and e.dtype in ("f32", "f64"):
            n = 2 if e.fn == "fma" else 1
        elif isinstance(e, Select) and e.dtype in ("f32", "f64") and isinstance(e.cond, Bin) and \
                e.cond.op in ("<", ">") and {e.cond.a, e.cond.b} == {e.t, e.f}:
            n = 1  # an ordered max/min (compiler.loops.compute's NaN-flagged reductions)
        return n + sum(ops(c) for c in children(e))

    def walk(x: Stmt, mult: int) -> int:
        if isinstance(x, For):
            return walk(x.body, mult * x.extent)
        if isinstance(x, St):
            return mult * ops(x.value)
        return sum(walk(c, mult) for c in _kids(x))

    return walk(s, 1)


def _kids(s: Stmt) -> list[Stmt]:
    if isinstance(s, Seq):
        return s.stmts
    if isinstance(s, Allocate | If):
        return [s.body if isinstance(s, Allocate) else s.then]
    return []


__all__ = ["KernelArg", "LoweredKernel", "count_flops", "lower_group", "walk_stmts"]
