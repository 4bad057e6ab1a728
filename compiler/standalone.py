"""The compiled model as a standalone shared library: ``module.so`` with one C entry point.

As TVM's AOT "C runtime" module or XLA's ``tfcompile`` output, the library holds everything a
program needs to run the model: every kernel, the thread pool its parallel loops call
(``compiler.runtime.pool_ir``), the weights (constants, in ``.rodata``) and the entry function
(``compiler.codegen.entry``). Loaded with ``ctypes.CDLL`` it exports, with C linkage::

    int prism_run(const void *const *inputs, void *const *outputs);
    int64_t prism_pool_set_threads(int64_t n);   /* when a kernel has parallel loops; default 1 */
    const char prism_signature[];                /* JSON: {"inputs": [...], "outputs": [...]}, NUL-ended */

``inputs[i]`` points to graph input i, ``outputs[j]`` to a caller-owned buffer for graph output j,
both in the graph's order, C-contiguous, of the dtypes and shapes the model was compiled for
(``prism_signature``: ``name``, ``dtype`` as numpy names it, ``shape``; from Python
``ctypes.string_at(ctypes.addressof(ctypes.c_char.in_dll(lib, "prism_signature")))``). Every kernel's
own symbol is exported too (``void <symbol>(void *, ...)``, its loop IR's parameters). ``prism_run`` allocates the
arena and scratch buffers (64-byte aligned, ``aligned_alloc``), calls every kernel in order, copies
the outputs that live in the arena to ``outputs`` and frees what it allocated; it returns 0, or 1
when an allocation failed (nothing was run). Calls on different threads are independent.

What it does not do (the Python runtime does): check the inputs' shapes and index operands
(``compiler.runtime.index_checks``); programs with run-time control flow, a run-time dim range,
bounded outputs or sequence outputs are not offered (:class:`ArtifactUnavailable` says which).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from llvmlite import ir

from .artifacts import ArtifactUnavailable
from .codegen.checks import SYMBOL as FAULT_WORD
from .codegen.checks import fault_word_ir
from .codegen.compile import _llvm, target_machine
from .driver.stages import run_stages
from .driver.state import Compilation, Request
from .errors import CompileError
from .events import EventStream
from .runtime.program import Program
from .targets import Target, get_target

I8, I32, I64 = ir.IntType(8), ir.IntType(32), ir.IntType(64)
PTR = ir.PointerType()
ALIGN = 64


def _nbytes(dtype: str, shape: Sequence[int]) -> int:
    return max(1, int(np.prod(shape, dtype=np.int64))) * np.dtype(dtype).itemsize


def _padded(n: int) -> int:
    return (n + ALIGN - 1) // ALIGN * ALIGN  # aligned_alloc wants a multiple of the alignment


def program_for(model: Any, *, target: str, pipeline: str, input_shapes: Mapping[str, Sequence[int]] | None = None,
                input_values: Mapping[str, Any] | None = None, calibration_data: Any = None,
                schedules: Any = None) -> Program:
    """The linked Program of the same request (no run, no events). ``schedules``: the schedule source the
    request compiled with (``compiler.tune.recorded.RecordedSchedules`` of its log: the same tuned
    kernels; None: default schedules). Raises ArtifactUnavailable for a program the library cannot hold
    (see the module docstring) and CompileError where compiling fails."""
    req = Request(model, target=target, pipeline=pipeline, input_shapes=input_shapes, input_values=input_values,
                  verify=False, benchmark=False, link=True, kernel_events=False, codegen_threads=1,
                  calibration_data=calibration_data, schedules=schedules or None)
    comp = Compilation(req, EventStream(None))
    run_stages(comp)
    prog = comp.program
    if type(prog) is not Program:
        raise ArtifactUnavailable("this model has run-time control flow or a run-time dim range: its program is "
                                  "driven from Python, so there is no standalone library")
    if comp.trims or getattr(comp, "sequence_layout", None):
        raise ArtifactUnavailable("this model has bounded or sequence outputs, which the Python runtime cuts and "
                                  "rebuilds: there is no standalone library")
    if not prog.calls:
        raise ArtifactUnavailable("this compilation has no kernels")
    return prog


def signature(prog: Program) -> dict[str, Any]:
    """``prism_signature``'s content: each input and output's ``name``, numpy ``dtype`` and ``shape``."""
    outs = []
    for name, kind, src in prog.outputs:
        if kind == "value":
            v = prog.values[src]
            outs.append({"name": name, "dtype": v["dtype"], "shape": list(v["shape"])})
        elif kind == "input":
            i = next(x for x in prog.inputs if x[0] == src)
            outs.append({"name": name, "dtype": i[1], "shape": list(i[2])})
        else:
            outs.append({"name": name, "dtype": str(src.dtype), "shape": list(src.shape)})
    return {"inputs": [{"name": n, "dtype": d, "shape": list(s)} for n, d, s in prog.inputs], "outputs": outs}


def wrapper_ir(prog: Program, triple: str) -> str:
    """The LLVM IR of ``prism_run`` for ``prog``: slot table, allocations, the entry call, output copies.
    Constant ``i`` is the external symbol ``prism_const_<i>`` (defined by :func:`constants_asm`)."""
    mod = ir.Module(name="prism_standalone")
    mod.triple = triple
    alloc = ir.Function(mod, ir.FunctionType(PTR, [I64, I64]), "aligned_alloc")
    free = ir.Function(mod, ir.FunctionType(ir.VoidType(), [PTR]), "free")
    memcpy = ir.Function(mod, ir.FunctionType(PTR, [PTR, PTR, I64]), "memcpy")
    entry = ir.Function(mod, ir.FunctionType(ir.VoidType(), [PTR]), prog.entry)
    consts = [ir.GlobalVariable(mod, ir.ArrayType(I8, 0), f"prism_const_{i}") for i in range(len(prog.consts))]
    fn = ir.Function(mod, ir.FunctionType(I32, [PTR, PTR]), "prism_run")
    ins, outs = fn.args
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    layout = prog.entry_layout
    slots = b.alloca(ir.ArrayType(PTR, len(layout.slots) + 1), name="slots")
    owned: list[ir.Value] = []

    def slot(i: int) -> ir.Value:
        return b.gep(slots, [I32(0), I32(i)], inbounds=True)

    def arg(table: ir.Value, i: int) -> ir.Value:
        return b.load(b.gep(table, [I64(i)], inbounds=True, source_etype=PTR), typ=PTR)

    def allocate(nbytes: int) -> ir.Value:
        nonlocal b
        p = b.call(alloc, [I64(ALIGN), I64(_padded(nbytes))])
        fail = fn.append_basic_block(f"out_of_memory_{len(owned)}")
        fb = ir.IRBuilder(fail)
        for q in owned:  # what was allocated before this one
            fb.call(free, [q])
        fb.ret(I32(1))
        owned.append(p)
        ok = fn.append_basic_block(f"allocated_{len(owned)}")
        b.cbranch(b.icmp_unsigned("==", p, ir.Constant(PTR, None)), fail, ok)
        b = ir.IRBuilder(ok)
        return p

    input_index = {name: i for i, (name, _, _) in enumerate(prog.inputs)}
    output_of = {src: j for j, (_, kind, src) in enumerate(prog.outputs) if kind == "value"}
    arena = allocate(prog.arena_bytes) if prog.arena_bytes else ir.Constant(PTR, None)
    b.store(arena, slot(0))
    for s, key in enumerate(layout.slots, start=1):
        if key[0] == "value" and prog.values[key[1]]["kind"] == "input":
            p = arg(ins, input_index[key[1]])
        elif key[0] == "value" and key[1] in output_of:  # a heap value the model outputs: written in place
            p = arg(outs, output_of[key[1]])
        elif key[0] == "value":
            v = prog.values[key[1]]
            p = allocate(_nbytes(v["dtype"], v["shape"]))
        elif key[0] == "const":
            p = consts[key[1]]
        else:
            a = prog.calls[key[1]]["args"][key[2]]
            p = allocate(_nbytes(a["dtype"], a["shape"]))
        b.store(p, slot(s))
    b.call(entry, [b.bitcast(slots, PTR)])
    for j, (_, kind, src) in enumerate(prog.outputs):
        if kind == "value" and output_of[src] != j:  # the same value output twice: copy the one written
            v = prog.values[src]
            b.call(memcpy, [arg(outs, j), arg(outs, output_of[src]) if v["kind"] != "arena" else
                            b.gep(arena, [I64(int(v["offset"]))], inbounds=True, source_etype=I8),
                            I64(_nbytes(v["dtype"], v["shape"]))])
        elif kind == "value" and prog.values[src]["kind"] == "arena":
            v = prog.values[src]
            at = b.gep(arena, [I64(int(v["offset"]))], inbounds=True, source_etype=I8)
            b.call(memcpy, [arg(outs, j), at, I64(_nbytes(v["dtype"], v["shape"]))])
        elif kind == "input":
            d, shape = next((x[1], x[2]) for x in prog.inputs if x[0] == src)
            b.call(memcpy, [arg(outs, j), arg(ins, input_index[src]), I64(_nbytes(d, shape))])
        elif kind == "const":
            k = len(prog.consts) + j  # output constants follow the kernels' constants (constants_asm)
            g = ir.GlobalVariable(mod, ir.ArrayType(I8, 0), f"prism_const_{k}")
            b.call(memcpy, [arg(outs, j), g, I64(int(src.nbytes))])
    for p in owned:
        b.call(free, [p])
    b.ret(I32(0))
    return str(mod)


def constants_asm(prog: Program, folder: str) -> str:
    """Assembly (GNU as) defining ``prism_const_<i>`` (each constant's bytes, written to ``folder`` and
    included with ``.incbin``; then the constant outputs') and ``prism_signature`` in ``.rodata``."""
    lines = ["\t.section\t.rodata"]
    blobs = list(prog.consts) + [np.ascontiguousarray(src) for _, kind, src in prog.outputs if kind == "const"]
    for i, data in enumerate(blobs):
        path = os.path.join(folder, f"const_{i}.bin")
        with open(path, "wb") as f:
            f.write(np.ascontiguousarray(data).tobytes())
        lines += [f"\t.balign\t{ALIGN}", f"\t.globl\tprism_const_{i}", f"prism_const_{i}:", f'\t.incbin\t"{path}"']
    sig = os.path.join(folder, "signature.json")
    with open(sig, "wb") as f:
        f.write(json.dumps(signature(prog)).encode() + b"\0")
    lines += ["\t.globl\tprism_signature", "prism_signature:", f'\t.incbin\t"{sig}"',
              '\t.section\t.note.GNU-stack,"",@progbits']
    return "\n".join(lines) + "\n"


def shared_library(prog: Program, target: str) -> bytes:
    """``prog`` linked into a shared library (``cc -shared``): its kernels' and entry function's objects,
    the thread pool when a kernel calls it, ``prism_run`` (:func:`wrapper_ir`) and the constants
    (:func:`constants_asm`). Raises ArtifactUnavailable for a cross target or without a C compiler
    driver, CompileError when linking fails."""
    t = get_target(target)
    if not t.runnable:
        raise ArtifactUnavailable(f"target {target} is a cross target ({t.triple}): no shared library is linked here")
    cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        raise ArtifactUnavailable("this server has no C compiler driver (cc) to link a shared object")
    objects = list(prog.objects.values()) + [_emit(wrapper_ir(prog, t.triple), t)]
    if any(b"prism_parallel_for" in o for o in prog.objects.values()):
        # deferred: pool_ir loads llvmlite.binding (as compiler.artifacts does)
        from .runtime.pool_ir import pool_ir

        objects.append(_emit(pool_ir(t.triple), t))
    if any(FAULT_WORD.encode() in o for o in prog.objects.values()):  # run-time checks write it
        objects.append(_emit(fault_word_ir(t.triple), t))
    with tempfile.TemporaryDirectory(prefix="prism-so-") as tmp:
        paths = []
        for i, obj in enumerate(objects):
            paths.append(os.path.join(tmp, f"part{i}.o"))
            with open(paths[-1], "wb") as f:
                f.write(obj)
        asm = os.path.join(tmp, "constants.s")
        with open(asm, "w") as f:
            f.write(constants_asm(prog, tmp))
        out = os.path.join(tmp, "module.so")
        proc = subprocess.run([cc, "-shared", "-o", out, *paths, asm, "-lm"], capture_output=True, text=True,
                              timeout=300)
        if proc.returncode != 0:
            err = (proc.stderr.strip().splitlines() or ["no output"])[-1]
            raise CompileError("codegen", f"linking the shared object failed: {err}")
        with open(out, "rb") as f:
            return f.read()


def _emit(text: str, t: Target) -> bytes:
    llvm = _llvm()
    mod = llvm.parse_assembly(text)
    mod.verify()
    tm = target_machine(t)
    mod.data_layout = str(tm.target_data)
    return bytes(tm.emit_object(mod))
