"""``parallel`` loops: the body outlined into a task function launched on the runtime's thread pool.

A loop ``for v in 0..E (parallel)`` becomes, as TVM lowers ``ForKind.PARALLEL`` to a closure passed
to ``TVMBackendParallelLaunch``:

- a task function ``void @<kernel>.task<k>(ptr closure, i64 task, i64 n)`` (internal) that loads the
  kernel's buffer pointers and the enclosing loops' variables from the closure and runs the
  iterations ``[task * E / n, (task + 1) * E / n)`` of the loop (E its extent, or its run-time
  ``bound`` evaluated before the launch and passed in the closure): a static, contiguous partition, so
  each thread's rows are adjacent in memory and every iteration is computed by the same code at any
  thread count;
- at the loop's place, the closure (a struct on the stack: one ``ptr`` per kernel parameter, one
  ``i64`` per enclosing loop variable the body uses) and a call
  ``prism_parallel_for(@task, closure, E)`` (``compiler.runtime.pool_ir``), which returns when every
  task has finished.

Nothing is reordered: each iteration of the loop does what it did serially, so a kernel's results do
not depend on the thread count (bitwise). The loop stays serial (a counted loop, as before) when
outlining cannot be correct: inside a vectorized loop or another task, when the body uses a ``local``
buffer allocated outside the loop (threads would share one stack temporary), or when a store's
index does not involve the loop variable (every iteration would write the same element).
"""

from __future__ import annotations

from typing import Any

from llvmlite import ir

from ..loops.ir import Allocate, For, If, Load, Stmt, Store, children, free_vars, walk_stmts

I32, I64, PTR, VOID = ir.IntType(32), ir.IntType(64), ir.PointerType(), ir.VoidType()
TASK_FN = ir.FunctionType(VOID, [PTR, I64, I64])
LAUNCH = "prism_parallel_for"


def _exprs(s: Stmt) -> list[Any]:
    if isinstance(s, Store):
        return [*s.indices, s.value]
    if isinstance(s, If):
        return [s.cond]
    return []


def _buffers(e: Any, acc: set[Any]) -> None:
    if isinstance(e, Load):
        acc.add(e.buf)
    for c in children(e):
        _buffers(c, acc)


def captures(loop: For) -> tuple[set[str], bool]:
    """``(variables of enclosing loops the body reads, ok)``: ``ok`` when every ``local`` buffer the
    body uses is allocated inside it and every store to another buffer has the loop variable in its
    index (a store that does not would be a write every iteration shares: a race)."""
    names: set[str] = set()
    bound: set[str] = {loop.var.name}
    bufs: set[Any] = set()
    inner_locals: set[str] = set()
    for st in walk_stmts(loop.body):
        if isinstance(st, For):
            bound.add(st.var.name)
        elif isinstance(st, Allocate):
            inner_locals.add(st.buf.name)
        elif isinstance(st, Store):
            bufs.add(st.buf)
            if st.buf.scope != "local" and not any(loop.var.name in free_vars(i) for i in st.indices):
                return set(), False
        for e in _exprs(st):
            free_vars(e, names)
            _buffers(e, bufs)
    ok = all(b.scope != "local" or b.name in inner_locals for b in bufs)
    return names - bound, ok


def emit_parallel(cg: Any, loop: For) -> bool:
    """Emit ``loop`` (kind ``parallel``) through the thread pool (module docstring) with the
    ``compiler.codegen.llvm_codegen.KernelCodegen`` ``cg``; False (nothing emitted) where it stays
    serial."""
    if cg.vec is not None or cg.in_task or loop.extent < 2:
        return False
    names, ok = captures(loop)
    if not ok or any(n not in cg.env or cg.env[n].lanes != 1 for n in names):
        return False
    params = [p.name for p in cg.f.params]
    var_names = sorted(names)
    # a run-time bound (For.bound) is evaluated here and handed to the tasks as a closure field
    count = I64(loop.extent) if loop.bound is None else cg._ev(loop.bound).val
    sty = ir.LiteralStructType([PTR] * len(params) + [I64] * (len(var_names) + 1))
    cg.n_tasks += 1
    task = ir.Function(cg.m, TASK_FN, f"{cg.fn.name}.task{cg.n_tasks}")
    task.linkage = "internal"
    closure = ir.IRBuilder(cg.entry).alloca(sty, name=f"closure{cg.n_tasks}")
    for i, v in enumerate([cg.ptr[p] for p in params] + [cg.env[n].val for n in var_names] + [count]):
        cg.b.store(v, _field(cg.b, closure, sty, i))
    launch = cg.m.globals.get(LAUNCH) or ir.Function(cg.m, ir.FunctionType(VOID, [PTR, PTR, I64]), LAUNCH)
    _body(cg, task, sty, params, var_names, loop)
    cg.b.call(launch, [task, closure, count])
    return True


def _field(b: ir.IRBuilder, base: ir.Value, sty: ir.LiteralStructType, i: int) -> ir.Value:
    p = b.gep(base, [I32(0), I32(i)], inbounds=True, source_etype=sty)
    p.type = PTR  # opaque pointer (LLVM 22 has no typed pointers)
    return p


def _body(cg: Any, task: ir.Function, sty: ir.LiteralStructType, params: list[str], var_names: list[str],
          loop: For) -> None:
    """Fill ``task`` with the iterations of ``loop`` assigned to its task index (module docstring),
    emitting the body with ``cg``'s statement emitter on the task's own builder and bindings."""
    saved = (cg.fn, cg.entry, cg.b, cg.ptr, cg.env, cg.vlocal)
    clo, t, n = task.args
    cg.fn, cg.entry = task, task.append_basic_block("entry")
    b = cg.b = ir.IRBuilder(task.append_basic_block("body"))
    scope = cg.dbg.enter(task)  # the task's own subprogram; its code at the parallel loop's line
    b.debug_metadata = cg.dbg.location(loop)
    cg.ptr = {p: b.load(_field(b, clo, sty, i), typ=PTR, name=p) for i, p in enumerate(params)}
    cg.env = {v: cg.V(b.load(_field(b, clo, sty, len(params) + i), typ=I64, name=v), 1) for i, v in enumerate(var_names)}
    cg.vlocal = {}
    cg.in_task = True
    try:
        ext = b.load(_field(b, clo, sty, len(params) + len(var_names)), typ=I64, name="count")
        lo = b.sdiv(b.mul(t, ext), n)
        hi = b.sdiv(b.mul(b.add(t, I64(1)), ext), n)
        pre = b.block
        head, body, end = (task.append_basic_block(f"{loop.var.name}.{s}") for s in ("head", "body", "end"))
        b.branch(head)
        b.position_at_end(head)
        i = b.phi(I64, name=loop.var.name)
        i.add_incoming(lo, pre)
        b.cbranch(b.icmp_signed("<", i, hi), body, end)
        b.position_at_end(body)
        cg.env[loop.var.name] = cg.V(i, 1)
        cg._stmt(loop.body)
        cg.b.position_at_end(cg.b.block)
        i.add_incoming(cg.b.add(i, I64(1), flags=["nsw", "nuw"]), cg.b.block)
        cg.b.branch(head)
        cg.b.position_at_end(end)
        cg.b.ret_void()
        ir.IRBuilder(cg.entry).branch(task.blocks[1])
    finally:
        cg.fn, cg.entry, cg.b, cg.ptr, cg.env, cg.vlocal = saved
        cg.dbg.scope = scope
        cg.in_task = False
