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
from .ir import Buffer, Float, Int, PrimFunc, Seq, Stmt, walk_stmts
from .registry import LOWERINGS, LowerCtx, is_complex
from .sequential import SEQUENTIAL
from .tensor import Tensor, from_buffer


@dataclass
class KernelArg:
    """How the runtime binds one kernel parameter: ``kind`` is ``value`` (a graph value by
    ``name``), ``const`` (``data`` is the array) or ``scratch`` (kernel-private memory)."""

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


def _static(v: Value) -> tuple[str, tuple[int, ...]]:
    t = v.type
    if t is None or not t.is_static:
        raise CompileError("lowering", f"value %{v.name} has no static shape ({t})")
    return t.short, tuple(int(d) for d in t.shape)  # type: ignore[union-attr]


def lower_group(node: Node, kernel: str, opset: int, *, override: dict[int, Any] | None = None,
                build: bool = True) -> LoweredKernel:
    """Lower a FusedGroup (or any single node, as a one-node group) to a kernel named ``kernel``.

    ``override`` maps ``id(node)`` of an inner node to a replacement lowering (used by the
    micro-kernel schedules to read the anchor's value from its accumulators). With ``build=False``
    the output computes are not emitted: ``lk.pending`` holds ``(output buffer, tensor)`` pairs and
    ``lk.prelude`` the statements before them, for a schedule that builds its own loop nest.
    """
    if isinstance(node, FusedGroup):
        nodes = list(node.body.nodes)
        inner_in = list(node.body.inputs)
        inner_out = list(node.body.outputs)
        consts = dict(node.body.constants)
        outer_in: list[Value] = [v for v in node.inputs if v is not None]
        outer_out = list(node.outputs)
    else:
        nodes = [node]
        inner_in = [v for v in node.inputs if v is not None]
        outer_in = inner_in
        inner_out = outer_out = list(node.outputs)
        consts = {}
    lw = Lowering()
    ctx = LowerCtx(opset, lw)
    lk = LoweredKernel(kernel, node.name or kernel, PrimFunc(kernel, [], Seq([])))
    lk.nodes = nodes
    env: dict[int, Tensor] = {}
    upstream: dict[int, set[int]] = {}  # value id -> ids of unmaterialized reducing nodes it depends on

    def bind(inner: Value, outer: Value) -> None:
        dt, shape = _static(outer)
        if outer.const is not None:
            data = np.asarray(outer.const)
            if data.size == 1 and data.dtype.kind in "fiu":
                scalar = Float(float(data.reshape(-1)[0]), dt) if dt in ("f32", "f64") else Int(int(data.reshape(-1)[0]), dt)
                env[id(inner)] = Tensor(shape, dt, lambda i, s=scalar: s, data)
                return
            buf = Buffer(f"c{len(lk.args)}", dt, shape, "const")
            lk.args.append(KernelArg("const", outer.name, buf, data))
        else:
            buf = Buffer(f"in{len(lk.args)}", dt, shape, "arena")
            lk.args.append(KernelArg("value", outer.name, buf))
            lk.inputs.append(outer.name)
        env[id(inner)] = from_buffer(buf, outer.const)
        upstream[id(inner)] = set()

    for iv, ov in zip(inner_in, outer_in, strict=True):
        bind(iv, ov)
    for cv in consts.values():
        bind(cv, cv)
    body: list[Stmt] = []
    out_bufs: dict[int, Buffer] = {}
    for iv, ov in zip(inner_out, outer_out, strict=True):
        p = iv.producer
        if p is not None and p.op_type in SEQUENTIAL and not (ov.type is not None and ov.type.is_static):
            continue  # its lowering says why (a data-dependent length)
        dt, shape = _static(ov)
        out_bufs[id(iv)] = Buffer(f"out{len(out_bufs)}", dt, shape, "arena")
    n_tmp = 0

    def materialize(v: Value) -> None:
        nonlocal n_tmp
        t = env[id(v)]
        buf = Buffer(f"tmp{n_tmp}", t.dtype, t.shape, "scratch")
        n_tmp += 1
        lk.args.append(KernelArg("scratch", f"{kernel}.tmp{n_tmp - 1}", buf))
        body.append(lw.compute(buf, t.fn))
        env[id(v)] = from_buffer(buf)
        upstream[id(v)] = set()

    written: set[int] = set()  # outputs stored by a sequential lowering (compiler.loops.sequential)

    def scratch(dtype: str, shape: tuple[int, ...]) -> Buffer:
        nonlocal n_tmp
        buf = Buffer(f"tmp{n_tmp}", dtype, shape, "scratch")
        n_tmp += 1
        lk.args.append(KernelArg("scratch", f"{kernel}.tmp{n_tmp - 1}", buf))
        return buf

    for n in nodes:
        if n.op_type in SEQUENTIAL and n.domain in ("", "ai.onnx"):
            if any(v not in inner_out for v in n.outputs):
                raise CompileError("lowering", f"{n.label} ({n.op_type}) must be a kernel of its own",
                                   node=n.label, op=n.op_type)
            for v in n.inputs:
                if v is not None and id(v) not in env and v.const is not None:
                    bind(v, v)
            ins_t = [env[id(v)] if v is not None and id(v) in env else None for v in n.inputs]
            outs_b = [out_bufs.get(id(v)) for v in n.outputs]  # None: no static shape (the lowering raises)
            body.append(SEQUENTIAL[n.op_type](ctx, n, ins_t, outs_b, scratch))
            for v in n.outputs:
                env[id(v)] = from_buffer(out_bufs[id(v)])
                upstream[id(v)] = set()
                written.add(id(v))
            continue
        fn = (override or {}).get(id(n)) or LOWERINGS.get(registry_key(n))
        if fn is None:
            raise CompileError("lowering", f"no lowering for op {n.op_type} (node {n.label})", node=n.label,
                               op=n.op_type)
        ins = [v for v in n.inputs]
        for v in ins:
            if v is not None and id(v) not in env:
                if v.const is not None:
                    bind(v, v)
                else:
                    raise CompileError("lowering", f"{n.label}: input %{v.name} is not bound in the group",
                                       node=n.label, op=n.op_type)
        if is_complex(n):
            for v in ins:
                if v is not None and upstream.get(id(v)):
                    materialize(v)
        try:
            outs = fn(ctx, n, [env[id(v)] if v is not None else None for v in ins])
        except CompileError:
            raise
        except (ValueError, KeyError, IndexError, TypeError) as e:
            raise CompileError("lowering", f"{n.label} ({n.op_type}): {e}", node=n.label, op=n.op_type) from e
        up = set().union(*(upstream.get(id(v), set()) for v in ins if v is not None))
        if is_complex(n):
            up = up | {id(n)}
        for ov, t in zip(n.outputs, outs, strict=False):
            env[id(ov)] = t
            upstream[id(ov)] = up
    for buf, data in ctx.new_consts:
        lk.args.append(KernelArg("const", buf.name, buf, data))
    # a reducing node feeding more than one group output is computed once
    counts: dict[int, int] = {}
    for iv in inner_out:
        for c in upstream.get(id(iv), set()):
            counts[c] = counts.get(c, 0) + 1
    lk.pending = []
    for iv, ov in zip(inner_out, outer_out, strict=True):
        if any(counts[c] > 1 for c in upstream.get(id(iv), set())):
            for n in nodes:
                if counts.get(id(n), 0) > 1 and id(n.outputs[0]) in env and upstream.get(id(n.outputs[0])):
                    materialize(n.outputs[0])
        if id(iv) not in env:
            raise CompileError("lowering", f"group output %{iv.name} is not computed by the group")
        t = env[id(iv)]
        buf = out_bufs[id(iv)]
        lk.args.append(KernelArg("value", ov.name, buf))
        lk.outputs.append(ov.name)
        if id(iv) in written:
            continue
        if build:
            body.append(lw.compute(buf, t.fn))
        else:
            lk.pending.append((buf, t))
    lk.prelude = list(body)
    lk.lowering = lw
    if not build:
        return lk
    finalize(lk, body)
    return lk


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
    from .ir import Bin, Call, For, Select, children
    from .ir import Store as St

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
    from .ir import Allocate, If

    if isinstance(s, Seq):
        return s.stmts
    if isinstance(s, Allocate | If):
        return [s.body if isinstance(s, Allocate) else s.then]
    return []


__all__ = ["KernelArg", "LoweredKernel", "count_flops", "lower_group", "walk_stmts"]
