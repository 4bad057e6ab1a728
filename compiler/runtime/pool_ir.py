"""The native thread pool that generated code calls, written as LLVM IR (``llvmlite.ir``).

The module defines, with C linkage:

- ``void prism_parallel_for(ptr fn, ptr closure, i64 max_tasks)``: runs ``fn(closure, task, n)`` for
  every ``task`` in ``0..n-1``, ``n = min(max_tasks, CHUNKS_PER_THREAD * threads)``, on the calling
  thread and the pool's workers, and returns when all have finished (a barrier), as TVM's
  ``TVMBackendParallelLaunch``. With one thread or ``max_tasks <= 1``, or when the pool is already
  running a job (a nested or concurrent launch), it calls ``fn(closure, 0, 1)`` on the calling thread.
- ``i64 prism_pool_set_threads(i64 n)``: sets the number of threads (the caller plus ``n - 1``
  workers, clamped to ``1..MAX_THREADS``), starting workers that do not exist yet
  (``pthread_create``, once: workers persist for the life of the process); returns the count set.
  Call it only between launches.
- ``i64 prism_pool_threads()``: the count set.

Protocol. Tasks are claimed, not assigned: one 64-bit word holds the job's sequence number (high 32
bits) and the next unclaimed task (low 32 bits); whoever is running (the launching thread, and each
worker once it is awake) claims the next task with a compare-and-swap and runs it, until none is
left; the launch returns when ``completed == n``. A worker that a loaded machine has preempted thus
delays nothing: the tasks it did not claim are run by the others (with every worker descheduled, a
launch costs what the serial loop costs). The job's fields (``fn``, ``closure``, ``n``) are published
as a seqlock: the launch first closes the word (next task = all ones, the new sequence number), then
writes the fields, then opens it (next task 0, release); a thread reads the word, the fields, and
the word again, and claims only when both reads show the same job. A task is claimed only while its
job is open and unfinished, so the closure (on the launching thread's stack) is alive when it runs.

Waking: each worker owns one cache line, a futex word ``gen`` and a ``sleeping`` flag. A launch
increments ``gen`` (seq_cst) of workers ``1..min(threads, n) - 1`` and wakes those that sleep
(``FUTEX_WAKE_PRIVATE``). A worker spins (``pause``) on its ``gen`` for ``spin`` rounds (tens of µs,
so that back-to-back kernels find it awake, as ONNX Runtime's intra-op threads spin between ops),
then sets ``sleeping`` (seq_cst), re-reads ``gen`` and waits on the futex (``FUTEX_WAIT_PRIVATE``: it
sleeps only if ``gen`` still holds the value it saw, so a wake-up cannot be lost). The launching
thread spins at the barrier for ``YIELD_AFTER`` rounds, then calls ``sched_yield`` between checks.

Linux only (``futex`` through libc's ``syscall``; number 202 on x86-64, 98 on AArch64 and RISC-V).
"""

from __future__ import annotations

from llvmlite import ir

MAX_THREADS = 256
SPIN_ROUNDS = 20000  # pause rounds before a worker sleeps (about 40-100 µs)
YIELD_AFTER = 2000  # pause rounds the launching thread spins at the barrier before it yields its core
CHUNKS_PER_THREAD = 4  # tasks per thread a launch splits a loop into (balance when a thread is late)
OPEN_MASK = 0xFFFFFFFF  # low half of the job word: the next unclaimed task (all ones: closed)
LINE = 16  # i32 slots per worker: one 64-byte cache line (gen, sleeping)
FUTEX_WAIT_PRIVATE, FUTEX_WAKE_PRIVATE = 128, 129
SYS_FUTEX = {"x86_64": 202, "aarch64": 98, "riscv64": 98}

I32, I64, PTR, VOID = ir.IntType(32), ir.IntType(64), ir.PointerType(), ir.VoidType()
TASK_FN = ir.FunctionType(VOID, [PTR, I64, I64])


class _Callee:
    """An opaque ``ptr`` to a task function as a callee for ``IRBuilder.call``: llvmlite takes an
    indirect callee's signature from ``function_type``, which an opaque pointer value lacks."""

    function_type = TASK_FN
    type = PTR

    def __init__(self, p: ir.Value) -> None:
        self._p = p

    def get_reference(self) -> str:
        return self._p.get_reference()

    def __str__(self) -> str:
        return str(self._p)


class _Pool:
    """Builds the pool module (see the module docstring) for one architecture."""

    def __init__(self, triple: str) -> None:
        self.arch = triple.split("-")[0]
        self.m = ir.Module(name="prism_pool")
        self.m.triple = triple
        self.state = self._global("prism_pool_state", ir.ArrayType(I32, LINE * MAX_THREADS), align=64)
        self.tids = self._global("prism_pool_tids", ir.ArrayType(I64, MAX_THREADS))
        self.job_fn = self._global("prism_pool_job_fn", PTR)
        self.job_closure = self._global("prism_pool_job_closure", PTR)
        self.job_n = self._global("prism_pool_job_n", I64)
        self.word = self._global("prism_pool_word", I64, align=64)
        self.completed = self._global("prism_pool_completed", I64, align=64)
        self.busy = self._global("prism_pool_busy", I32, align=64)
        self.threads = self._global("prism_pool_nthreads", I64, init=1)
        self.workers = self._global("prism_pool_nworkers", I64)
        self.spin = self._global("prism_pool_spin", I64, init=SPIN_ROUNDS)
        self.syscall = ir.Function(self.m, ir.FunctionType(I64, [I64], var_arg=True), "syscall")
        self.sched_yield = ir.Function(self.m, ir.FunctionType(I32, []), "sched_yield")
        self.pthread_create = ir.Function(self.m, ir.FunctionType(I32, [PTR, PTR, PTR, PTR]), "pthread_create")

    def _global(self, name: str, ty: ir.Type, init: int | None = 0, align: int | None = None) -> ir.GlobalVariable:
        g = ir.GlobalVariable(self.m, ty, name)
        g.linkage = "internal"
        g.initializer = ir.Constant(ty, None) if not isinstance(ty, ir.IntType) else ir.Constant(ty, init)
        if align:
            g.align = align
        return g

    @staticmethod
    def _store_atomic(b: ir.IRBuilder, value: ir.Value, ptr: ir.Value, ordering: str) -> None:
        """An atomic store through an opaque pointer (``IRBuilder.store_atomic`` checks a pointee type,
        which opaque pointers do not have): an atomic exchange whose old value is ignored."""
        b.atomic_rmw("xchg", ptr, value, ordering)

    def _pause(self, b: ir.IRBuilder) -> None:
        """A spin-wait hint: x86 ``pause`` (``llvm.x86.sse2.pause``), AArch64 ``yield``
        (``llvm.aarch64.hint(1)``); nothing elsewhere."""
        if self.arch == "x86_64":
            name, args = "llvm.x86.sse2.pause", []
        elif self.arch == "aarch64":
            name, args = "llvm.aarch64.hint", [I32(1)]
        else:
            return
        f = self.m.globals.get(name) or ir.Function(self.m, ir.FunctionType(VOID, [a.type for a in args]), name)
        b.call(f, args)

    def _slot(self, b: ir.IRBuilder, w: ir.Value, k: int) -> ir.Value:
        """Pointer to i32 slot ``k`` of worker ``w``'s cache line."""
        idx = b.add(b.mul(w, I64(LINE)), I64(k))
        return b.gep(self.state, [idx], inbounds=True, source_etype=I32)

    def _futex(self, b: ir.IRBuilder, addr: ir.Value, op: int, val: ir.Value) -> None:
        b.call(self.syscall, [I64(SYS_FUTEX.get(self.arch, 98)), addr, I64(op), val, ir.Constant(PTR, None)])

    def _counted(self, b: ir.IRBuilder, fn: ir.Function, name: str, lo: ir.Value, hi: ir.Value, body) -> None:  # type: ignore[no-untyped-def]
        """``for i in lo..hi-1: body(b, i)`` (i64)."""
        pre = b.block
        head, loop, end = (fn.append_basic_block(f"{name}.{s}") for s in ("head", "body", "end"))
        b.branch(head)
        b.position_at_end(head)
        i = b.phi(I64, name=name)
        i.add_incoming(lo, pre)
        b.cbranch(b.icmp_signed("<", i, hi), loop, end)
        b.position_at_end(loop)
        body(b, i)
        i.add_incoming(b.add(i, I64(1)), b.block)
        b.branch(head)
        b.position_at_end(end)

    def work(self) -> ir.Function:
        """``void prism_pool_work()``: claim and run tasks of the open job until none is left (module
        docstring: the seqlock read, then a compare-and-swap on the job word)."""
        fn = ir.Function(self.m, ir.FunctionType(VOID, []), "prism_pool_work")
        fn.linkage = "internal"
        b = ir.IRBuilder(fn.append_basic_block("entry"))
        top, check, claim, run, out = (fn.append_basic_block(s) for s in ("top", "check", "claim", "run", "out"))
        b.branch(top)
        b.position_at_end(top)
        w1 = b.load_atomic(self.word, "acquire", 8, typ=I64)
        task_fn = b.load_atomic(self.job_fn, "monotonic", 8, typ=PTR)
        closure = b.load_atomic(self.job_closure, "monotonic", 8, typ=PTR)
        n = b.load_atomic(self.job_n, "monotonic", 8, typ=I64)
        b.fence("acquire")
        w2 = b.load_atomic(self.word, "monotonic", 8, typ=I64)
        same = b.icmp_unsigned("==", b.lshr(w1, I64(32)), b.lshr(w2, I64(32)))
        b.cbranch(same, check, top)
        b.position_at_end(check)
        task = b.and_(w1, I64(OPEN_MASK))
        b.cbranch(b.icmp_signed("<", task, n), claim, out)
        b.position_at_end(claim)
        won = b.extract_value(b.cmpxchg(self.word, w1, b.add(w1, I64(1)), "acq_rel", "monotonic"), 1)
        b.cbranch(won, run, top)
        b.position_at_end(run)
        b.call(_Callee(task_fn), [closure, task, n])
        b.atomic_rmw("add", self.completed, I64(1), "release")
        b.branch(top)
        b.position_at_end(out)
        b.ret_void()
        return fn

    def worker(self, work: ir.Function) -> ir.Function:
        """``ptr prism_pool_worker(ptr w)``: the start routine of worker ``w`` (its index as a pointer):
        wait for its ``gen`` to change (spin, then sleep on the futex), run tasks, repeat."""
        fn = ir.Function(self.m, ir.FunctionType(PTR, [PTR]), "prism_pool_worker")
        fn.linkage = "internal"
        b = ir.IRBuilder(fn.append_basic_block("entry"))
        w = b.ptrtoint(fn.args[0], I64)
        gen_p, sleep_p = self._slot(b, w, 0), self._slot(b, w, 1)
        entry = b.block
        top, spin, pause, sleep, got = (fn.append_basic_block(s) for s in ("top", "spin", "pause", "sleep", "got"))
        b.branch(top)
        b.position_at_end(top)
        seen = b.phi(I32, "seen")
        seen.add_incoming(I32(0), entry)
        b.branch(spin)
        b.position_at_end(spin)
        rounds = b.phi(I64, "rounds")
        rounds.add_incoming(I64(0), top)
        g = b.load_atomic(gen_p, "acquire", 4, typ=I32)
        b.cbranch(b.icmp_unsigned("!=", g, seen), got, pause)
        b.position_at_end(pause)
        self._pause(b)
        more = b.icmp_signed("<", rounds, b.load(self.spin, typ=I64))
        rounds.add_incoming(b.add(rounds, I64(1)), pause)
        b.cbranch(more, spin, sleep)
        b.position_at_end(sleep)
        self._store_atomic(b, I32(1), sleep_p, "seq_cst")
        with b.if_then(b.icmp_unsigned("==", b.load_atomic(gen_p, "seq_cst", 4, typ=I32), seen)):
            self._futex(b, gen_p, FUTEX_WAIT_PRIVATE, b.zext(seen, I64))
        self._store_atomic(b, I32(0), sleep_p, "seq_cst")
        rounds.add_incoming(I64(0), b.block)
        b.branch(spin)
        b.position_at_end(got)
        seen.add_incoming(g, got)
        b.call(work, [])
        b.branch(top)
        return fn

    def set_threads(self, worker: ir.Function) -> None:
        fn = ir.Function(self.m, ir.FunctionType(I64, [I64]), "prism_pool_set_threads")
        b = ir.IRBuilder(fn.append_basic_block("entry"))
        n = b.select(b.icmp_signed("<", fn.args[0], I64(1)), I64(1), fn.args[0])
        n = b.select(b.icmp_signed(">", n, I64(MAX_THREADS)), I64(MAX_THREADS), n)
        have = b.load(self.workers, typ=I64)

        def start(b: ir.IRBuilder, w: ir.Value) -> None:
            tid = b.gep(self.tids, [w], inbounds=True, source_etype=I64)
            b.call(self.pthread_create, [tid, ir.Constant(PTR, None), worker, b.inttoptr(w, PTR)])

        self._counted(b, fn, "w", b.add(have, I64(1)), n, start)
        last = b.sub(n, I64(1))
        b.store(b.select(b.icmp_signed(">", last, have), last, have), self.workers)
        b.store(n, self.threads)
        b.ret(n)
        get = ir.Function(self.m, ir.FunctionType(I64, []), "prism_pool_threads")
        gb = ir.IRBuilder(get.append_basic_block("entry"))
        gb.ret(gb.load(self.threads, typ=I64))

    def parallel_for(self, work: ir.Function) -> None:
        fn = ir.Function(self.m, ir.FunctionType(VOID, [PTR, PTR, I64]), "prism_parallel_for")
        task, closure, max_tasks = fn.args
        b = ir.IRBuilder(fn.append_basic_block("entry"))
        threads = b.load(self.threads, typ=I64)
        serial, try_lock, launch = (fn.append_basic_block(s) for s in ("serial", "lock", "launch"))
        one = b.or_(b.icmp_signed("<=", max_tasks, I64(1)), b.icmp_signed("<=", threads, I64(1)))
        b.cbranch(one, serial, try_lock)
        b.position_at_end(serial)
        b.call(_Callee(task), [closure, I64(0), I64(1)])
        b.ret_void()
        b.position_at_end(try_lock)
        got = b.cmpxchg(self.busy, I32(0), I32(1), "acquire", "monotonic")
        b.cbranch(b.extract_value(got, 1), launch, serial)
        b.position_at_end(launch)
        most = b.mul(threads, I64(CHUNKS_PER_THREAD))
        n = b.select(b.icmp_signed("<", max_tasks, most), max_tasks, most)
        seq = b.shl(b.add(b.lshr(b.load_atomic(self.word, "monotonic", 8, typ=I64), I64(32)), I64(1)), I64(32))
        self._store_atomic(b, b.or_(seq, I64(OPEN_MASK)), self.word, "seq_cst")  # closed while rewritten
        b.fence("release")
        for field, value in ((self.job_fn, task), (self.job_closure, closure), (self.job_n, n)):
            self._store_atomic(b, value, field, "monotonic")
        self._store_atomic(b, I64(0), self.completed, "monotonic")
        self._store_atomic(b, seq, self.word, "release")  # open: next task 0

        def hand(b: ir.IRBuilder, w: ir.Value) -> None:
            gen_p = self._slot(b, w, 0)
            b.atomic_rmw("add", gen_p, I32(1), "seq_cst")
            with b.if_then(b.icmp_unsigned("!=", b.load_atomic(self._slot(b, w, 1), "seq_cst", 4, typ=I32), I32(0))):
                self._futex(b, gen_p, FUTEX_WAKE_PRIVATE, I64(1))

        self._counted(b, fn, "w", I64(1), b.select(b.icmp_signed("<", n, threads), n, threads), hand)
        b.call(work, [])
        self._barrier(b, fn, n)
        self._store_atomic(b, I32(0), self.busy, "release")
        b.ret_void()

    def _barrier(self, b: ir.IRBuilder, fn: ir.Function, n: ir.Value) -> None:
        """Wait until ``completed == n``: spin, then yield the core (a worker preempted on a loaded
        machine needs it to finish the task it claimed)."""
        pre = b.block
        wait, pause, out = (fn.append_basic_block(s) for s in ("wait", "pause", "out"))
        b.branch(wait)
        b.position_at_end(wait)
        rounds = b.phi(I64, "rounds")
        rounds.add_incoming(I64(0), pre)
        finished = b.icmp_signed("==", b.load_atomic(self.completed, "acquire", 8, typ=I64), n)
        b.cbranch(finished, out, pause)
        b.position_at_end(pause)
        with b.if_else(b.icmp_signed("<", rounds, I64(YIELD_AFTER))) as (spin, yield_):
            with spin:
                self._pause(b)
            with yield_:
                b.call(self.sched_yield, [])
        rounds.add_incoming(b.add(rounds, I64(1)), b.block)
        b.branch(wait)
        b.position_at_end(out)


def pool_ir(triple: str) -> str:
    """The LLVM IR text of the pool module (module docstring) for ``triple``."""
    p = _Pool(triple)
    work = p.work()
    p.set_threads(p.worker(work))
    p.parallel_for(work)
    return str(p.m)
