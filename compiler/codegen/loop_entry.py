"""A ``Loop`` or ``Scan`` run from generated code: ``i64 prism_loop_<hex>(ptr table, i64 limit)``.

The runtime's ``Loop`` (``compiler.runtime.control``) calls its body, compiled once as a Program with
an entry function (``compiler.codegen.entry``), once per iteration. Dispatching each iteration from
Python costs microseconds (binding the inputs, the call, copying the outputs out); this function
runs the iterations natively instead, as TVM's and XLA's generated ``while`` loops do: per iteration
it stores the iteration number into the body's ``i`` input (int64) and ``true`` into its ``cond``
input (bool, one byte), calls the body's entry function, copies each loop-carried output into the
matching input buffer (``llvm.memcpy``; the body reads it in the next iteration), appends each scan
output to its stacked buffer at ``iteration * bytes``, and stops after ``limit`` iterations or when
the body's condition output (one byte) is 0. It returns the iterations run.

``table`` holds pointers: [0] the body's slot table, [1] its ``i`` input buffer, [2] its ``cond``
input buffer, [3] its condition output, then per carried value its input and output buffers, then
per scan output its per-iteration buffer and its stacked destination. A null pointer where the
body has no buffer (an input no kernel reads) skips that store or copy. A ``Scan`` (axis 0 of its scan
inputs and outputs, either direction) runs the same loop for ``limit`` = the scan length, each
iteration first copying its slices of the scan inputs into the body's buffers. Semantics: the ONNX
Loop spec (opset 11+: the trip count and condition checked before each iteration) and Scan spec (9+).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

from llvmlite import ir

from ..targets import Target
from .compile import emit_function_object

PTR = ir.PointerType()
I1 = ir.IntType(1)
I8 = ir.IntType(8)
I64 = ir.IntType(64)


def loop_ir(symbol: str, body_entry: str, carried: Sequence[int], scans: Sequence[int], cond_out: bool,
            triple: str, scan_ins: Sequence[tuple[int, bool]] = (), reverse_out: Sequence[bool] = ()) -> str:
    """The LLVM IR text of the loop function (module docstring). ``carried`` and ``scans``: the bytes
    of each loop-carried value and each scan output per iteration; ``cond_out``: whether the body
    writes its condition output (False: it passes its ``cond`` input through, the loop runs to ``limit``).
    For a ``Scan``: ``scan_ins`` (bytes of one slice, reversed) per scan input, whose table pairs (the
    stacked source, the body's slice buffer) follow the scan outputs' and whose slice ``i`` (or
    ``limit - 1 - i``) is copied in before each call; ``reverse_out`` per scan output: stacked at
    ``limit - 1 - i``."""
    mod = ir.Module(name="prism_loop")
    mod.triple = triple
    fn = ir.Function(mod, ir.FunctionType(I64, [PTR, I64]), symbol)
    table, limit = fn.args
    table.name, limit.name = "table", "limit"
    body_fn = ir.Function(mod, ir.FunctionType(ir.VoidType(), [PTR]), body_entry)
    memcpy = mod.declare_intrinsic("llvm.memcpy", [PTR, PTR, I64])
    entry = fn.append_basic_block("entry")
    head, body, done = (fn.append_basic_block(n) for n in ("head", "body", "done"))
    b = ir.IRBuilder(entry)

    def slot(k: int) -> ir.Value:
        return b.load(b.gep(table, [I64(k)], inbounds=True, source_etype=PTR), typ=PTR)

    slots, it_in, cond_in, cond_ptr = (slot(k) for k in range(4))
    pairs = [(slot(4 + 2 * k), slot(5 + 2 * k)) for k in range(len(carried))]
    base = 4 + 2 * len(carried)
    outs = [(slot(base + 2 * j), slot(base + 2 * j + 1)) for j in range(len(scans))]
    base += 2 * len(scans)
    ins = [(slot(base + 2 * j), slot(base + 2 * j + 1)) for j in range(len(scan_ins))]
    reverse_out = list(reverse_out) or [False] * len(scans)
    null = ir.Constant(PTR, None)
    b.branch(head)
    b.position_at_end(head)
    i = b.phi(I64, name="i")
    i.add_incoming(I64(0), entry)
    b.cbranch(b.icmp_signed("<", i, limit), body, done)
    b.position_at_end(body)

    def if_set(p: ir.Value, emit: object) -> None:
        with b.if_then(b.icmp_unsigned("!=", p, null)):
            emit()  # type: ignore[operator]

    if_set(it_in, lambda: b.store(i, it_in, align=1))
    if_set(cond_in, lambda: b.store(I8(1), cond_in, align=1))
    back = b.sub(b.sub(limit, I64(1)), i, name="back")  # limit - 1 - i: a reversed scan's index
    for (src, dst), (nbytes, rev) in zip(ins, scan_ins, strict=True):
        at = b.gep(src, [b.mul(back if rev else i, I64(nbytes))], inbounds=True, source_etype=I8)
        if_set(dst, lambda dst=dst, at=at, nbytes=nbytes: b.call(memcpy, [dst, at, I64(nbytes), I1(0)]))
    b.call(body_fn, [slots])
    for (dst, src), nbytes in zip(pairs, carried, strict=True):
        if_set(dst, lambda dst=dst, src=src, nbytes=nbytes: b.call(memcpy, [dst, src, I64(nbytes), I1(0)]))
    for (src, dst), nbytes, rev in zip(outs, scans, reverse_out, strict=True):
        at = b.gep(dst, [b.mul(back if rev else i, I64(nbytes))], inbounds=True, source_etype=I8)
        b.call(memcpy, [at, src, I64(nbytes), I1(0)])
    nxt = b.add(i, I64(1), name="next")
    latch = b.block
    if cond_out:
        go = b.icmp_unsigned("!=", b.load(cond_ptr, typ=I8, align=1), I8(0))
        stop = fn.append_basic_block("stop")
        b.cbranch(go, head, stop)
        b.position_at_end(stop)
        b.ret(nxt)
    else:
        b.branch(head)
    i.add_incoming(nxt, latch)
    b.position_at_end(done)
    b.ret(i)
    return str(mod)


def compile_loop(body_entry: str, carried: Sequence[int], scans: Sequence[int], cond_out: bool,
                 target: Target, scan_ins: Sequence[tuple[int, bool]] = (),
                 reverse_out: Sequence[bool] = ()) -> tuple[str, bytes]:
    """``(symbol, ELF object)`` of the loop function calling ``body_entry`` for ``target``; the object
    is loaded beside the body's (its entry symbol resolved there). Raises CompileError(stage="codegen")
    when LLVM rejects it."""
    text = repr((body_entry, list(carried), list(scans), cond_out, list(scan_ins), list(reverse_out)))
    symbol = "prism_loop_" + hashlib.sha256(text.encode()).hexdigest()[:16]
    obj = emit_function_object(lambda: loop_ir(symbol, body_entry, carried, scans, cond_out, target.triple,
                                               scan_ins, reverse_out), target, f"loop function {symbol}")
    return symbol, obj
