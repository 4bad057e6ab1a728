"""Loop IR -> LLVM IR (``llvmlite.ir``), with explicit vectorization and unrolling.

One :class:`~compiler.loops.ir.PrimFunc` becomes ``void @sym(ptr %p0, ptr %p1, ...)``; buffers are
addressed with ``getelementptr`` on the element type only (no ``ptrtoint``/``inttoptr``: LLVM 22's
unroller can miscompile that). Loop kinds: ``serial`` becomes a counted loop with a phi; ``parallel``
a task function launched on the runtime's thread pool (``compiler.codegen.parallel``; a counted loop
where it cannot be outlined); ``unrolled`` repeats the body with the variable bound to each
constant; ``vectorized`` evaluates its whole body lane-wise: the loop variable is ``base + <0..L-1>``
with L the loop extent, or chunks of the target's f32 width when the extent is a multiple of it.
In a vectorized body a load whose flat offset is ``1 * var + invariant`` is one vector load,
``s * var + invariant`` (s = 2..4) one wider load and a shuffle (reading at most s - 1 elements
past the last used one: the runtime leaves slack after every buffer), an invariant load is a scalar
load and a broadcast, anything else a per-lane gather; stores alike (strided stores per lane). A 256-entry byte table read at
an 8-bit index is a ``vpermi2b`` lookup where the target has it (``compiler.codegen.lookup``); a select
whose condition is the same on every lane is a branch (``compiler.codegen.branch``).
A local buffer allocated inside a vectorized loop holds vectors (an accumulator per lane).

Floating point: IEEE semantics, no fast-math flags, except that ``a * b + c`` in float is emitted
as ``llvm.fma`` (one rounding instead of two; ONNX does not fix the rounding of a product sum, and
ONNX Runtime's MLAS kernels use FMA too) on targets with hardware FMA; on others (x86-64-v2) it
stays ``fmul`` + ``fadd``, since ``llvm.fma`` would become a libm ``fmaf`` call per element. Reductions keep their sequential order per lane (no
``reassoc``), so no reduction is reordered. ``exp``, ``tanh`` and ``erf`` are vector
polynomials (``compiler.codegen.intrinsics``, with their error bounds). Integer
``//`` and ``%`` are emitted as ``sdiv``/``srem``: the lowering only divides non-negative indices.

This module walks statements, loops and memory accesses; the instructions of one arithmetic step on
evaluated operands (``Bin``, ``Cast``, float min/max, non-trapping division) and the dtype -> LLVM
type tables are in :mod:`compiler.codegen.arith`.
"""

from __future__ import annotations

from llvmlite import ir

from ..errors import CompileError
from ..loops.ir import (
    Allocate,
    Bin,
    Buffer,
    Call,
    Cast,
    Expr,
    Float,
    For,
    If,
    Int,
    Load,
    PrimFunc,
    Select,
    Seq,
    Stmt,
    Store,
    Var,
    flat_index,
    free_vars,
    substitute,
)
from ..loops.ir import linear_coeff as _linear
from .arith import I64, LTYPE, MTYPE, PTR, binary, cast, isf, splat
from .arith import V as _V
from .branch import counted_loop, uniform_select, wants_branch
from .debuginfo import DebugInfo
from .guards import conjuncts as _conjuncts
from .guards import guarded as _guarded
from .guards import unclamp as _unclamp
from .intrinsics import Intrinsics, _suffix
from .lookup import byte_index, emit_lookup
from .parallel import emit_parallel


class KernelCodegen:
    """Emits one PrimFunc into ``module`` as function ``symbol``; ``width`` = f32 lanes per vector."""

    V = _V  # an SSA value with its lane count (for compiler.codegen.parallel)

    def __init__(self, module: ir.Module, func: PrimFunc, symbol: str, width: int, fma: bool = True,
                 features: frozenset[str] = frozenset()) -> None:
        self.m, self.f, self.width, self.fma = module, func, width, fma
        self.fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [PTR] * len(func.params)), symbol)
        self.entry = self.fn.append_basic_block("entry")
        self.b = ir.IRBuilder(self.fn.append_basic_block("body"))
        self.ptr: dict[str, ir.Value] = {p.name: a for p, a in zip(func.params, self.fn.args, strict=True)}
        self.vlocal: dict[str, int] = {}
        self.env: dict[str, _V] = {}
        self.vec: tuple[str, int] | None = None  # (var name, lanes) of the enclosing vectorized loop
        self.intr = Intrinsics(module, fma, features)
        self._lane_mask: ir.Value | None = None
        self._access: dict[tuple, tuple[str, Expr]] = {}  # type: ignore[type-arg]
        self.in_task, self.n_tasks = False, 0  # inside an outlined parallel body; bodies outlined so far
        self.dbg = DebugInfo(module, func, self.fn)  # !dbg locations: loop-IR lines

    def emit(self) -> ir.Function:
        self._stmt(self.f.body)
        self.b.ret_void()
        ir.IRBuilder(self.entry).branch(self.fn.blocks[1])
        return self.fn

    # statements -------------------------------------------------------------------------------
    def _stmt(self, s: Stmt) -> None:
        loc, prev = self.dbg.location(s), self.b.debug_metadata
        self.b.debug_metadata = loc or prev
        try:
            self._stmt_at(s)
        finally:
            self.b.debug_metadata = prev

    def _stmt_at(self, s: Stmt) -> None:
        if isinstance(s, Seq):
            for x in s.stmts:
                self._stmt(x)
        elif isinstance(s, For):
            self._for(s)
        elif isinstance(s, Store):
            self._store(s)
        elif isinstance(s, Allocate):
            self._alloc(s.buf)
            self._stmt(s.body)
        elif isinstance(s, If):
            c = self._ev(s.cond)
            if c.lanes != 1:
                self._masked(s, c)
                return
            with self.b.if_then(c.val):
                self._stmt(s.then)
        else:
            raise TypeError(type(s))

    def _masked(self, s: If, mask: _V) -> None:
        """A lane-varying ``if`` around contiguous stores: ``llvm.masked.store`` with the condition as mask."""
        stores = s.then.stmts if isinstance(s.then, Seq) else [s.then]
        for st in stores:
            if not isinstance(st, Store):
                raise CompileError("codegen", f"{self.f.name}: a lane-varying 'if' may only guard stores",
                                   kernel=self.f.name)
            kind, where = self._addr(st.buf, st.indices)
            if kind != "vector":
                raise CompileError("codegen", f"{self.f.name}: masked store to {st.buf.name} is not contiguous",
                                   kernel=self.f.name)
            self._lane_mask = mask.val  # a run-time check counts only the stored lanes
            val = self._to_mem(self._widen(self._ev(st.value), mask.lanes).val, st.buf.dtype)
            self._lane_mask = None
            vt = val.type
            name = f"llvm.masked.store.{_suffix(vt)}.p0"
            fn = self.m.globals.get(name) or ir.Function(
                self.m, ir.FunctionType(ir.VoidType(), [vt, PTR, ir.IntType(32), mask.val.type]), name)
            self.b.call(fn, [val, where, ir.IntType(32)(4), mask.val])

    def _alloc(self, buf: Buffer) -> None:
        lanes = self.vec[1] if self.vec else 1
        ety = MTYPE[buf.dtype] if lanes == 1 else ir.VectorType(MTYPE[buf.dtype], lanes)
        eb = ir.IRBuilder(self.entry)
        slot = eb.alloca(ety, size=buf.numel, name=buf.name)
        slot.type = PTR  # opaque pointer (LLVM 22 has no typed pointers): loads/stores of any type
        self.ptr[buf.name] = slot
        if lanes > 1:
            self.vlocal[buf.name] = lanes

    def _for(self, s: For) -> None:
        name = s.var.name
        if s.bound is not None and s.kind in ("unrolled", "vectorized"):
            raise CompileError("codegen", f"{self.f.name}: {s.kind} loop {name} has a run-time bound",
                               kernel=self.f.name)
        if s.kind == "unrolled":
            for k in range(s.extent):
                self.env[name] = _V(I64(k), 1)
                self._stmt(s.body)
            return
        if s.kind == "vectorized" and s.extent == 1 and self.vec is None:
            self.env[name] = _V(I64(0), 1)  # one lane: the scalar body (a <1 x T> vector would meet scalars)
            self._stmt(s.body)
            return
        if s.kind == "vectorized":
            if self.vec is not None:
                raise CompileError("codegen", f"{self.f.name}: nested vectorized loops", kernel=self.f.name)
            if s.extent <= self.width:
                chunks, lanes = 1, s.extent
            elif s.extent % self.width == 0:
                chunks, lanes = s.extent // self.width, self.width
            else:
                raise CompileError("codegen", f"{self.f.name}: vectorized extent {s.extent} is not a multiple "
                                   f"of {self.width}", kernel=self.f.name)
            self.vec = (name, lanes)
            ramp = ir.Constant(ir.VectorType(I64, lanes), [I64(k) for k in range(lanes)])

            def body(base: ir.Value) -> None:
                self.env["__base_" + name] = _V(base, 1)
                self.env[name] = _V(self.b.add(splat(self.b, base, lanes), ramp), lanes)
                self._stmt(s.body)

            if chunks <= 4:
                for c in range(chunks):
                    body(I64(c * lanes))
            else:
                counted_loop(self.b, self.fn, chunks, lambda i: body(self.b.mul(i, I64(lanes))), name)
            self.vec = None
            return
        if s.kind == "parallel" and emit_parallel(self, s):
            return

        def step(i: ir.Value) -> None:  # one iteration of a counted loop
            self.env[name] = _V(i, 1)
            self._stmt(s.body)

        counted_loop(self.b, self.fn, s.extent if s.bound is None else self._ev(s.bound).val, step, name)

    def _classify(self, buf: Buffer, indices: tuple[Expr, ...]) -> tuple[str, Expr]:
        """Symbolic part of an access (cached: unrolled copies share it): its kind and offset expression."""
        key = (buf, indices, self.vec)
        hit = self._access.get(key)
        if hit is None:
            flat = flat_index(buf, indices)
            if buf.name in self.vlocal:
                hit = ("vlocal", flat)
            elif self.vec is None or self.vec[0] not in free_vars(flat):
                hit = ("scalar", flat)
            elif (c := _linear(flat, self.vec[0])) == 1:
                hit = ("vector", substitute(flat, {self.vec[0]: Var("__base_" + self.vec[0])}))
            elif c in (2, 3, 4):
                hit = (f"strided{c}", substitute(flat, {self.vec[0]: Var("__base_" + self.vec[0])}))
            else:
                hit = ("gather", flat)
            self._access[key] = hit
        return hit

    def _addr(self, buf: Buffer, indices: tuple[Expr, ...]) -> tuple[str, ir.Value]:
        """('scalar'|'vector'|'gather', pointer or per-lane offsets) for an element access."""
        kind, off_e = self._classify(buf, indices)
        ety = MTYPE[buf.dtype]
        if kind == "scalar" or kind == "vector" or kind.startswith("strided"):
            off = self._ev(off_e)
            if off.lanes != 1:  # the offset reads a per-lane value (a vectorized loop's local: TopK's rank)
                return "gather", self._ev(flat_index(buf, indices)).val if kind != "scalar" else off.val
            return kind, self.b.gep(self.ptr[buf.name], [off.val], inbounds=True, source_etype=ety)
        if kind == "gather":
            return "gather", self._ev(off_e).val
        off = self._ev(off_e)
        if off.lanes != 1:
            raise CompileError("codegen", f"{self.f.name}: lane-varying index into {buf.name}", kernel=self.f.name)
        return "vlocal", self.b.gep(self.ptr[buf.name], [off.val], inbounds=True,
                                    source_etype=ir.VectorType(ety, self.vlocal[buf.name]))

    def _store(self, s: Store) -> None:
        kind, where = self._addr(s.buf, s.indices)
        if kind.startswith("strided"):
            kind, where = "gather", self._ev(flat_index(s.buf, s.indices)).val
        val = self._ev(s.value)
        lanes = self.vec[1] if self.vec else 1
        mt = MTYPE[s.buf.dtype]
        if kind == "scalar":
            if val.lanes != 1:
                raise CompileError("codegen", f"{self.f.name}: vector value stored to an invariant element of "
                                   f"{s.buf.name}", kernel=self.f.name)
            self.b.store(self._to_mem(val.val, s.buf.dtype), where)
        elif kind == "vlocal":
            self.b.store(self._to_mem(self._widen(val, lanes).val, s.buf.dtype), where)
        elif kind == "vector":
            self.b.store(self._to_mem(self._widen(val, lanes).val, s.buf.dtype), where, align=4)
        else:
            vv = self._to_mem(self._widen(val, lanes).val, s.buf.dtype)
            for k in range(lanes):
                p = self.b.gep(self.ptr[s.buf.name], [self.b.extract_element(where, I64(k))], inbounds=True,
                               source_etype=mt)
                self.b.store(self.b.extract_element(vv, I64(k)), p)

    # expressions -----------------------------------------------------------------------------
    def _widen(self, x: _V, lanes: int) -> _V:
        return x if x.lanes == lanes or lanes == 1 else _V(splat(self.b, x.val, lanes), lanes)

    def _to_mem(self, v: ir.Value, dt: str) -> ir.Value:
        if dt != "bool":
            return v
        t = MTYPE["bool"] if not isinstance(v.type, ir.VectorType) else ir.VectorType(MTYPE["bool"], v.type.count)
        return self.b.zext(v, t)

    def _ev(self, e: Expr) -> _V:
        if isinstance(e, Int):
            return _V(ir.Constant(LTYPE[e.dtype], e.value), 1)
        if isinstance(e, Float):
            return _V(ir.Constant(LTYPE[e.dtype], e.value), 1)
        if isinstance(e, Var):
            if e.name not in self.env:
                raise CompileError("codegen", f"{self.f.name}: unbound variable {e.name}", kernel=self.f.name)
            return self.env[e.name]
        if isinstance(e, Load):
            return self._load(e)
        if isinstance(e, Bin):
            return self._bin(e)
        if isinstance(e, Select):
            masked = self._masked_load(e)
            if masked is not None:
                return masked
            c = self._ev(e.cond)
            if wants_branch(e, c, self.vec[1] if self.vec else None):  # evaluate only the side taken
                return uniform_select(self, e, c, self.vec[1])  # type: ignore[index]
            t, f = self._ev(e.t), self._ev(e.f)
            n = max(c.lanes, t.lanes, f.lanes)
            c, t, f = self._widen(c, n), self._widen(t, n), self._widen(f, n)
            return _V(self.b.select(c.val, t.val, f.val), n)
        if isinstance(e, Cast):
            return cast(self.b, self._ev(e.value), e.value.dtype, e.to)
        if isinstance(e, Call):
            args = [self._ev(a) for a in e.args]
            n = max(a.lanes for a in args)
            args = [self._widen(a, n) for a in args]
            return _V(self.intr.call(self.b, e.fn, [a.val for a in args], self._lane_mask), n)
        raise CompileError("codegen", f"{self.f.name}: cannot emit {type(e).__name__}", kernel=self.f.name)

    def _masked_load(self, e: Select) -> _V | None:
        """``select(cond, buf[clamp(i)], pad)`` with ``i`` contiguous in the vector lane: one
        ``llvm.masked.load`` at the unclamped address with ``cond`` as mask and ``pad`` as pass-through
        (the clamp only exists to keep scalar reads in bounds; masked lanes are not read). Applied only
        when the condition implies every clamp is a no-op (padding windows), so that no lane whose
        value is used, or is read at all, lies outside the buffer (a Concat's select does not qualify)."""
        if self.vec is None or not isinstance(e.t, Load) or e.t.buf.name in self.vlocal:
            return None
        buf = e.t.buf
        if buf.scope == "local" or buf.dtype != "f32":
            return None
        v, lanes = self.vec
        conds = _conjuncts(e.cond)
        if not all(_guarded(i, conds) for i in e.t.indices):
            return None
        flat = flat_index(buf, tuple(_unclamp(i) for i in e.t.indices))
        st = _linear(flat, v)
        if st not in (1, 2, 3, 4):
            return None
        c = self._ev(e.cond)
        if c.lanes != lanes:  # decided before the pass-through is emitted: the caller then emits it once
            return None  # (a chain of N nested selects, a Concat of N values, would otherwise cost 2^N)
        f = self._ev(e.f)
        base = self._ev(substitute(flat, {v: Var("__base_" + v)}))
        ptr = self.b.gep(self.ptr[buf.name], [base.val], source_etype=MTYPE[buf.dtype])
        width = st * (lanes - 1) + 1  # stride st: lane j of the result is element st*j of a wider masked load
        vt = ir.VectorType(MTYPE[buf.dtype], width)
        mask = c.val
        if st > 1:
            false = ir.Constant(mask.type, [ir.IntType(1)(0)] * lanes)
            mask = self.b.shuffle_vector(mask, false, ir.Constant(ir.VectorType(ir.IntType(32), width), [
                k // st if k % st == 0 else lanes for k in range(width)]))
        name = f"llvm.masked.load.v{width}f32.p0"
        fn = self.m.globals.get(name) or ir.Function(self.m, ir.FunctionType(vt, [PTR, ir.IntType(32), mask.type,
                                                                                 vt]), name)
        got = self.b.call(fn, [ptr, ir.IntType(32)(4), mask, ir.Constant(vt, [ir.Constant(MTYPE[buf.dtype], 0.0)]
                                                                            * width)])
        if st == 1:
            return _V(self.b.select(c.val, got, self._widen(f, lanes).val), lanes)
        picked = self.b.shuffle_vector(got, ir.Constant(vt, ir.Undefined), ir.Constant(
            ir.VectorType(ir.IntType(32), lanes), [st * k for k in range(lanes)]))
        return _V(self.b.select(c.val, picked, self._widen(f, lanes).val), lanes)

    def _load(self, e: Load) -> _V:
        if self.vec is not None and (lut := byte_index(e)) is not None:  # a byte table (compiler.codegen.lookup)
            x = self._ev(lut[0])
            return _V(emit_lookup(self.m, self.b, self.ptr[e.buf.name], x.val, lut[1], self.intr.features), x.lanes)
        kind, where = self._addr(e.buf, e.indices)
        mt = MTYPE[e.buf.dtype]
        if kind == "scalar":
            v = _V(self.b.load(where, typ=mt), 1)
        elif kind == "vlocal":
            n = self.vlocal[e.buf.name]
            v = _V(self.b.load(where, typ=ir.VectorType(mt, n)), n)
        elif kind == "vector":
            assert self.vec is not None
            v = _V(self.b.load(where, typ=ir.VectorType(mt, self.vec[1]), align=4), self.vec[1])
        elif kind.startswith("strided"):
            assert self.vec is not None
            st, lanes = int(kind[7:]), self.vec[1]
            wide = self.b.load(where, typ=ir.VectorType(mt, st * (lanes - 1) + 1), align=4)
            v = _V(self.b.shuffle_vector(wide, ir.Constant(wide.type, ir.Undefined), ir.Constant(
                ir.VectorType(ir.IntType(32), lanes), [st * k for k in range(lanes)])), lanes)
        else:
            assert self.vec is not None
            lanes = self.vec[1]
            acc = ir.Constant(ir.VectorType(mt, lanes), ir.Undefined)
            for k in range(lanes):
                p = self.b.gep(self.ptr[e.buf.name], [self.b.extract_element(where, I64(k))], inbounds=True,
                               source_etype=mt)
                acc = self.b.insert_element(acc, self.b.load(p, typ=mt), I64(k))
            v = _V(acc, lanes)
        if e.buf.dtype == "bool":
            t = LTYPE["bool"] if v.lanes == 1 else ir.VectorType(LTYPE["bool"], v.lanes)
            v = _V(self.b.trunc(v.val, t), v.lanes)
        return v

    def _bin(self, e: Bin) -> _V:
        op = e.op
        if op == "+" and isf(e.dtype) and self.fma:
            for x, y in ((e.a, e.b), (e.b, e.a)):
                if isinstance(y, Bin) and y.op == "*":
                    return self._ev(Call("fma", (y.a, y.b, x)))
        a, b = self._ev(e.a), self._ev(e.b)
        n = max(a.lanes, b.lanes)
        a, b = self._widen(a, n), self._widen(b, n)
        return _V(binary(self.b, e, a.val, b.val), n)
