"""One entry function per model: ``void prism_run(ptr slots)`` calls every kernel in order.

As TVM's AOT executor (``tvmgen_default___tvm_main__``) or XLA's entry computation, the model's
kernels are called from generated code instead of one ``ctypes`` call per kernel from Python: an
application that embeds the compiled model makes one call, and the runtime's timing loop measures
the model as that application would run it. The per-kernel path (one ``ctypes`` call per kernel,
with progress markers for crash attribution and per-kernel timing) stays beside it
(``compiler.runtime.program.Bound``).

The argument is a table of pointers (:func:`entry_layout`): slot 0 is the arena (one block of
``Program.arena_bytes``, 64-byte aligned); every other buffer a kernel takes (a graph input, a heap
value, a constant, a scratch buffer) has a slot of its own. An arena value is addressed as
``arena + offset`` with the ``plan-memory`` offset folded into the code (a ``getelementptr`` on
``i8``), as TVM's AOT executor addresses its workspace pool. Kernels are external symbols, resolved
when the objects are loaded into one engine (``compiler.runtime.jit``).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from llvmlite import ir

from ..targets import Target
from .compile import emit_function_object

PTR = ir.PointerType()
I64 = ir.IntType(64)


@dataclass(frozen=True)
class EntryLayout:
    """Where the entry function finds each kernel parameter.

    Attributes:
        slots: the keys of table slots 1.. (slot 0 is the arena): ``("value", name)``, ``("const",
            index)``, ``("scratch", call index, arg index)`` or ``("dim",)`` (an ``i64`` holding the
            run-time batch size: ``compiler.codegen.batch_entry``), in first-use order.
        args: per call, per parameter, ``("arena", byte offset)`` or ``("slot", slot index)``.
    """

    slots: tuple[tuple[Any, ...], ...]
    args: tuple[tuple[tuple[str, int], ...], ...]


def entry_layout(calls: Sequence[dict[str, Any]], values: dict[str, dict[str, Any]]) -> EntryLayout:
    """The slot table of a Program's ``calls`` and ``values`` (``compiler.runtime.program.Program``):
    arena values by offset, every other distinct buffer in its own slot."""
    slot_of: dict[tuple[Any, ...], int] = {}
    per_call = []
    for ci, call in enumerate(calls):
        args = []
        for ai, a in enumerate(call["args"]):
            if a["kind"] == "value" and values[a["name"]]["kind"] == "arena":
                args.append(("arena", int(values[a["name"]]["offset"])))
                continue
            key = ("value", a["name"]) if a["kind"] == "value" else ("const", a["index"]) \
                if a["kind"] == "const" else ("dim",) if a["kind"] == "dim" else ("scratch", ci, ai)
            args.append(("slot", slot_of.setdefault(key, len(slot_of) + 1)))
        per_call.append(tuple(args))
    return EntryLayout(tuple(slot_of), tuple(per_call))


def entry_symbol(calls: Sequence[dict[str, Any]], layout: EntryLayout) -> str:
    """``prism_run_<16 hex>``: a name derived from the call list and layout (two Programs loaded in one
    process never share one)."""
    text = repr(([c["symbol"] for c in calls], layout))
    return "prism_run_" + hashlib.sha256(text.encode()).hexdigest()[:16]


def entry_ir(calls: Sequence[dict[str, Any]], layout: EntryLayout, symbol: str, triple: str) -> str:
    """The LLVM IR text of ``void @symbol(ptr %slots)`` calling every kernel of ``calls`` in order."""
    mod = ir.Module(name="prism_entry")
    mod.triple = triple
    fn = ir.Function(mod, ir.FunctionType(ir.VoidType(), [PTR]), symbol)
    fn.args[0].name = "slots"
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    arena = b.load(fn.args[0], typ=PTR, name="arena")
    loaded: dict[int, ir.Value] = {}
    decls: dict[str, ir.Function] = {}
    for call, args in zip(calls, layout.args, strict=True):
        sym = call["symbol"]
        if sym not in decls:
            decls[sym] = ir.Function(mod, ir.FunctionType(ir.VoidType(), [PTR] * len(args)), sym)
        ptrs = []
        for kind, n in args:
            if kind == "arena":
                ptrs.append(b.gep(arena, [I64(n)], inbounds=True, source_etype=ir.IntType(8)))
            else:
                if n not in loaded:
                    at = b.gep(fn.args[0], [I64(n)], inbounds=True, source_etype=PTR)
                    loaded[n] = b.load(at, typ=PTR)
                ptrs.append(loaded[n])
        b.call(decls[sym], ptrs)
    b.ret_void()
    return str(mod)


def compile_entry(calls: Sequence[dict[str, Any]], values: dict[str, dict[str, Any]],
                  target: Target) -> tuple[str, EntryLayout, bytes]:
    """``(symbol, layout, ELF object)`` of the entry function of a Program's call list for ``target``
    (``compiler.codegen.compile.target_machine``; no optimization: the function is a list of calls).
    Raises CompileError(stage="codegen") when LLVM rejects it."""
    layout = entry_layout(calls, values)
    symbol = entry_symbol(calls, layout)
    obj = emit_function_object(lambda: entry_ir(calls, layout, symbol, target.triple), target,
                               f"entry function {symbol}")
    return symbol, layout, obj
