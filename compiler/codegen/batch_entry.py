"""The entry function of a run-time batch size: ``i32 prism_batch_<hex>(ptr slots, i64 n)``.

A model separable along its batch dim (``compiler.frontend.batch_split``) is compiled once for
``N = 1``; this function serves every ``N`` from ``lo`` to ``hi`` with those kernels. It returns 1
without touching memory when ``n`` is outside ``lo..hi``, else runs every kernel in order and
returns 0. A kernel that takes a per-sample buffer runs once per sample, its per-sample pointers
advanced by one sample's bytes (a scratch buffer too: each sample has its own copy), the ``n``
samples split over the thread pool (``prism_parallel_for``, as ``compiler.codegen.parallel`` splits
a parallel loop: contiguous runs of samples per task; a kernel's own parallel loop inside a task
runs serially, the pool being busy, and at ``n = 1`` the one task runs on the caller with its
kernel's loops parallel). A kernel over shared (batch-independent) buffers runs once, and so does a
kernel that takes ``n`` inside its loops (``compiler.driver.batch_kernels``: a GEMM over every sample's
rows), which reads it from the table's ``("dim",)`` slot, an ``i64`` this function stores ``n`` in.

Buffers come as in ``compiler.codegen.entry`` (slot 0 the arena, every other buffer a slot of its
own: :func:`~compiler.codegen.entry.entry_layout` of the ``N = 1`` program), with one change: an
arena value's ``plan-memory`` offset at ``N = 1`` is multiplied by ``n``. Scaling every interval of a
valid plan by ``n`` keeps the intervals of values live together disjoint, and each value (``n``
samples of its ``N = 1`` size, or its shared size) fits its scaled interval, so the arena at ``n``
is ``n`` times the ``N = 1`` arena (``compiler.runtime.batch``).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

from llvmlite import ir

from ..targets import Target
from .compile import emit_function_object
from .entry import EntryLayout, entry_layout

PTR = ir.PointerType()
I8 = ir.IntType(8)
I32 = ir.IntType(32)
I64 = ir.IntType(64)
LAUNCH = "prism_parallel_for"  # compiler.runtime.pool_ir: returns when every task has run


def _range_loop(b: ir.IRBuilder, fn: ir.Function, lo: ir.Value, hi: ir.Value, body: Any) -> None:
    """``for (i = lo; i < hi; i++) body(i)``."""
    pre = b.block
    head, loop, done = (fn.append_basic_block(s) for s in ("head", "loop", "done"))
    b.branch(head)
    b.position_at_end(head)
    i = b.phi(I64, name="i")
    i.add_incoming(lo, pre)
    b.cbranch(b.icmp_signed("<", i, hi), loop, done)
    b.position_at_end(loop)
    body(i)
    i.add_incoming(b.add(i, I64(1)), b.block)
    b.branch(head)
    b.position_at_end(done)


def _field(b: ir.IRBuilder, base: ir.Value, sty: ir.LiteralStructType, k: int) -> ir.Value:
    p = b.gep(base, [I32(0), I32(k)], inbounds=True, source_etype=sty)
    p.type = PTR  # opaque pointer (LLVM 22 has no typed pointers)
    return p


def _sample_task(mod: ir.Module, name: str, kernel: ir.Function, per: Sequence[int]) -> tuple[ir.Function, Any]:
    """The task ``void @name(ptr closure, i64 task, i64 tasks)`` running ``kernel`` on samples
    ``[task * n / tasks, (task + 1) * n / tasks)`` (closure: the kernel's base pointers, then ``n``),
    as ``compiler.codegen.parallel`` splits a parallel loop; and the closure's struct type."""
    sty = ir.LiteralStructType([PTR] * len(per) + [I64])
    task = ir.Function(mod, ir.FunctionType(ir.VoidType(), [PTR, I64, I64]), name)
    task.linkage = "internal"
    clo, t, tasks = task.args
    b = ir.IRBuilder(task.append_basic_block("entry"))
    fields = [_field(b, clo, sty, k) for k in range(len(per) + 1)]
    bases = [b.load(f, typ=PTR) for f in fields[:-1]]
    n = b.load(fields[-1], typ=I64, name="n")
    lo, hi = b.sdiv(b.mul(t, n), tasks), b.sdiv(b.mul(b.add(t, I64(1)), n), tasks)

    def body(i: ir.Value) -> None:
        b.call(kernel, [b.gep(p, [b.mul(i, I64(step))], inbounds=True, source_etype=I8) if step else p
                        for p, step in zip(bases, per, strict=True)])

    _range_loop(b, task, lo, hi, body)
    b.ret_void()
    return task, sty


def batch_entry_ir(calls: Sequence[dict[str, Any]], layout: EntryLayout, steps: Sequence[Sequence[int]],
                   lo: int, hi: int, symbol: str, triple: str) -> str:
    """The LLVM IR text of ``i32 @symbol(ptr %slots, i64 %n)``; ``steps[c][a]`` is the bytes of one
    sample of call ``c``'s argument ``a`` (0: a shared buffer, the same for every sample)."""
    mod = ir.Module(name="prism_batch_entry")
    mod.triple = triple
    fn = ir.Function(mod, ir.FunctionType(I32, [PTR, I64]), symbol)
    slots, n = fn.args
    slots.name, n.name = "slots", "n"
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    run, bad = fn.append_basic_block("run"), fn.append_basic_block("out_of_range")
    b.cbranch(b.and_(b.icmp_signed(">=", n, I64(lo)), b.icmp_signed("<=", n, I64(hi))), run, bad)
    b.position_at_end(bad)
    b.ret(I32(1))
    b.position_at_end(run)
    arena = b.load(slots, typ=PTR, name="arena")
    loaded: dict[int, ir.Value] = {}
    for k, key in enumerate(layout.slots, start=1):  # kernels that take n inside their loops read it here
        if key == ("dim",):
            loaded[k] = b.load(b.gep(slots, [I64(k)], inbounds=True, source_etype=PTR), typ=PTR, name="n_slot")
            b.store(n, loaded[k])
    decls: dict[str, ir.Function] = {}
    for ci, (call, args, per) in enumerate(zip(calls, layout.args, steps, strict=True)):
        sym = call["symbol"]
        if sym not in decls:
            decls[sym] = ir.Function(mod, ir.FunctionType(ir.VoidType(), [PTR] * len(args)), sym)
        bases = []
        for kind, k in args:
            if kind == "arena":  # the N = 1 offset times n
                bases.append(b.gep(arena, [b.mul(n, I64(k))], inbounds=True, source_etype=I8))
            else:
                if k not in loaded:
                    loaded[k] = b.load(b.gep(slots, [I64(k)], inbounds=True, source_etype=PTR), typ=PTR)
                bases.append(loaded[k])
        if not any(per):
            b.call(decls[sym], bases)
            continue
        # the samples over the pool's threads (a scratch buffer is per sample too: its step)
        task, sty = _sample_task(mod, f"{symbol}.c{ci}", decls[sym], per)
        clo = b.alloca(sty, name=f"c{ci}.closure")
        for k, v in enumerate([*bases, n]):
            b.store(v, _field(b, clo, sty, k))
        launch = mod.globals.get(LAUNCH) or ir.Function(mod, ir.FunctionType(ir.VoidType(), [PTR, PTR, I64]), LAUNCH)
        b.call(launch, [task, clo, n])
    b.ret(I32(0))
    return str(mod)


def compile_batch_entry(calls: Sequence[dict[str, Any]], values: dict[str, dict[str, Any]],
                        steps: Sequence[Sequence[int]], lo: int, hi: int,
                        target: Target) -> tuple[str, EntryLayout, bytes]:
    """``(symbol, layout, ELF object)`` of the batch entry function of an ``N = 1`` Program's call list
    (``calls``, ``values``) for ``target``. Raises CompileError(stage="codegen") when LLVM rejects it."""
    layout = entry_layout(calls, values)
    text = repr(([c["symbol"] for c in calls], layout, [list(s) for s in steps], lo, hi))
    symbol = "prism_batch_" + hashlib.sha256(text.encode()).hexdigest()[:16]
    obj = emit_function_object(lambda: batch_entry_ir(calls, layout, steps, lo, hi, symbol, target.triple),
                               target, f"batch entry function {symbol}")
    return symbol, layout, obj
