"""The one description of a compiled model that every runtime path executes, and its execution.

Both ways Prism runs generated code go through this module: ``compiler.compile``'s measuring and
verifying child (``compiler.runtime.runner`` -> ``compiler.runtime.child``) and the ONNX backend's
executor (``compiler.runtime.execute``, behind ``compiler.backend`` and the conformance runner).

:func:`link` turns the lowered kernels of a graph, their objects and the memory plan into a
:class:`Program`: the call list with every parameter's binding (graph input, arena value at its
``plan-memory`` offset, heap value, constant, scratch) and where each graph output comes from: a
kernel-written value, a graph input, or a constant (a graph whose output folds to a constant or is
an input needs no kernel for it; an output may be listed more than once).

:class:`Bound` binds a Program to memory in this process: the kernel objects loaded into one MCJIT
engine (``compiler.runtime.jit``), one 64-byte aligned arena of the planned size, every other
buffer aligned and followed by slack (``compiler.runtime.buffers``), and the resolved call list
``(kernel name, function, pointers)`` that :meth:`Bound.run` calls in order (writing the progress
markers of ``compiler.runtime.buffers`` when asked) and timing loops call again.

Dtypes the code generator handles: f32, f64, i64, i32, i8, u8, bool (``bool`` is one byte per
element, as numpy's).
"""

from __future__ import annotations

import ctypes
import functools
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import CompileError
from ..targets import get_target
from . import faults
from .buffers import aligned as _aligned
from .index_checks import index_checks
from .jit import JitModule
from .pool import available_threads, set_threads

NP_DTYPES = {"f32": "float32", "f64": "float64", "i64": "int64", "i32": "int32", "i8": "int8", "u8": "uint8",
             "bool": "bool", "f16": "float16", "i16": "int16", "u16": "uint16", "u32": "uint32", "u64": "uint64"}


@dataclass
class Program:
    """A compiled model for one set of input shapes (picklable).

    Attributes:
        objects: ``{symbol: ELF object bytes}``, one per distinct kernel.
        calls: ``[{"name", "symbol", "args": [{"kind": "value", "name"} | {"kind": "const", "index"} |
            {"kind": "scratch", "dtype", "shape"} | {"kind": "dim"}]}]`` in execution order (``dim``:
            the run-time batch size, only in a ``compiler.runtime.batch.BatchProgram``'s unit).
        values: ``{name: {"kind": "input" | "arena" | "heap", "dtype", "shape", "offset"}}``.
        arena_bytes: size of the arena (bytes) from the memory plan.
        consts: constant arrays bound to ``const`` parameters.
        inputs: ``[(name, numpy dtype, shape)]`` of the graph inputs, in order.
        outputs: ``[(name, kind, payload)]``: kind ``value`` (written by a kernel), ``input`` (payload
            the input name) or ``const`` (payload the array).
        kernels: number of kernels; ``pipeline``: the expanded pipeline text.
        entry: the symbol of the entry function (``compiler.codegen.entry``: one call runs every kernel
            in order), its object among ``objects``; ``entry_layout`` its slot table. Empty for a
            program without kernels.
        const_names: the graph value each of ``consts`` holds (its layout may differ: packed weights).
        index_checks: the index operands that are graph inputs (``compiler.runtime.index_checks``).
        faults: ``{code: (node, op, message)}`` of the kernels' run-time checks (``compiler.runtime.faults``).
        threads: the threads its parallel loops run on (``compiler.runtime.pool``; None: all this
            process may use, ``os.sched_getaffinity``).
    """

    objects: dict[str, bytes] = field(default_factory=dict)
    calls: list[dict[str, Any]] = field(default_factory=list)
    values: dict[str, dict[str, Any]] = field(default_factory=dict)
    arena_bytes: int = 0
    consts: list[np.ndarray] = field(default_factory=list)
    inputs: list[tuple[str, str, tuple[int, ...]]] = field(default_factory=list)
    outputs: list[tuple[str, str, Any]] = field(default_factory=list)
    pipeline: str = ""
    entry: str = ""
    entry_layout: Any = None
    const_names: list[str] = field(default_factory=list)
    index_checks: list[dict[str, Any]] = field(default_factory=list)
    threads: int | None = None
    faults: dict[int, tuple[str, str, str]] = field(default_factory=dict)

    def __getstate__(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if not k.startswith("_")}


def np_dtype(short: str) -> str:
    """The numpy dtype name of an IR dtype's short name (``f32`` -> ``float32``). Raises
    CompileError(stage="lowering") for one the runtime has no buffer type for."""
    try:
        return NP_DTYPES[short]
    except KeyError:
        raise CompileError("lowering", f"the runtime has no buffer type for dtype {short!r}") from None


def link(graph: Any, kernels: Iterable[Mapping[str, Any]], plan: Any, pipeline: str = "",
         target: Any = None, entry: bool = True) -> Program:
    """The Program of ``graph`` (graph IR after the passes) whose schedule steps were lowered and
    compiled to ``kernels``: dicts with ``name``, ``symbol``, ``obj`` (ELF bytes) and ``args`` (list of
    ``compiler.loops.lower.KernelArg``), in execution order. ``plan`` is the ``plan-memory`` result
    (``buffers`` with ``value``/``offset``, ``arena_bytes``) or None (every value on the heap).

    Graph outputs map, in this order of preference, to the graph input of that name, the value's
    constant data (``Value.const``) or the kernel-written value. The entry function calling every
    kernel in order (``compiler.codegen.entry``) is compiled for ``target`` (default: the host; not with
    ``entry`` False, which leaves ``entry`` and ``entry_layout`` unset for a caller that builds its own). Raises
    CompileError(stage="lowering") for an output that is none of these.
    """
    offsets = {b.value: b.offset for b in plan.buffers} if plan is not None else {}
    prog = Program(arena_bytes=int(plan.arena_bytes) if plan is not None else 0, pipeline=pipeline)
    graph_inputs = {v.name for v in graph.inputs}
    for v in graph.inputs:
        t = v.type
        prog.inputs.append((v.name, NP_DTYPES.get(t.short, str(t.dtype)), tuple(int(d) for d in t.shape)))
    const_ids: dict[int, int] = {}
    for k in kernels:
        prog.objects.setdefault(k["symbol"], k["obj"])
        args = []
        for a in k["args"]:
            if a.kind == "value":
                if a.name not in prog.values:
                    kind = "input" if a.name in graph_inputs else "arena" if a.name in offsets else "heap"
                    prog.values[a.name] = {"kind": kind, "dtype": np_dtype(a.buffer.dtype),
                                           "shape": tuple(a.buffer.shape), "offset": offsets.get(a.name, 0)}
                args.append({"kind": "value", "name": a.name})
            elif a.kind == "const":
                if id(a.data) not in const_ids:
                    const_ids[id(a.data)] = len(prog.consts)
                    prog.consts.append(np.ascontiguousarray(a.data))
                    prog.const_names.append(a.name)
                args.append({"kind": "const", "index": const_ids[id(a.data)]})
            else:
                args.append({"kind": "scratch", "dtype": np_dtype(a.buffer.dtype), "shape": tuple(a.buffer.shape)})
        prog.calls.append({"name": k["name"], "symbol": k["symbol"], "args": args})
        prog.faults.update(k.get("faults") or {})
    prog.index_checks = index_checks(graph)
    for v in graph.outputs:
        if v.name in graph_inputs:
            prog.outputs.append((v.name, "input", v.name))
        elif v.const is not None:
            prog.outputs.append((v.name, "const", np.array(v.const)))
        elif v.name in prog.values:
            prog.outputs.append((v.name, "value", v.name))
        else:
            raise CompileError("lowering", f"graph output %{v.name} is not written by any kernel, not a graph "
                               "input and not a constant")
    if prog.calls and entry:
        # loads llvmlite: only a program with kernels needs it
        from ..codegen.entry import compile_entry

        prog.entry, prog.entry_layout, obj = compile_entry(prog.calls, prog.values, target or get_target("host"))
        prog.objects[prog.entry] = obj
    return prog


def check_inputs(prog: Program, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    """The inputs as C-contiguous arrays of the graph's dtypes. Raises CompileError(stage="request")
    when the count or a shape differs from what ``prog`` was compiled for."""
    if len(inputs) != len(prog.inputs):
        raise CompileError("request", f"the model takes {len(prog.inputs)} inputs, {len(inputs)} were given")
    out = []
    for (name, dt, shape), x in zip(prog.inputs, inputs, strict=True):
        arr = np.asarray(x)
        if tuple(arr.shape) != tuple(shape):
            raise CompileError("request", f"input {name!r} has shape {arr.shape}; compiled for {shape}")
        out.append(np.ascontiguousarray(arr.astype(dt, copy=False)))
    return out


def empty(dtype: str, shape: Sequence[int]) -> np.ndarray:
    """A zeroed, 64-byte aligned array of ``dtype`` and ``shape`` followed by slack bytes."""
    dt = np.dtype(dtype)
    n = int(np.prod(shape, dtype=np.int64))
    return _aligned(max(n, 1) * dt.itemsize).view(dt)[:n].reshape(tuple(shape))


def _copy(c: np.ndarray) -> np.ndarray:
    out = empty(c.dtype.str, c.shape)
    out[...] = c
    return out


def jit_for(prog: Program) -> Any:
    """The MCJIT module holding ``prog``'s objects (loaded once, kept on the Program; not pickled);
    None for a program without kernels."""
    jit = getattr(prog, "_jit", None)
    if jit is None and prog.objects:
        jit = JitModule(list(prog.objects.values()))
        prog._jit = jit  # type: ignore[attr-defined]
    return jit


def bind(prog: Any, inputs: Sequence[np.ndarray]) -> Any:
    """``prog`` bound to memory for ``inputs``: a :class:`Bound` for a Program; a program with runtime
    control flow (``compiler.runtime.control.ControlProgram``) binds itself (its ``bind``), offering
    the same ``run``/``outputs``/``set_inputs``/``inputs``/``calls``."""
    own = getattr(prog, "bind", None)
    return own(inputs) if own is not None else Bound(prog, inputs)


class Bound:
    """``prog`` bound to fresh memory in this process for ``inputs`` (one array per graph input, in
    order; checked and cast by :func:`check_inputs`).

    Attributes:
        calls: ``[(kernel name, ctypes function, pointer tuple)]`` in execution order; a timing loop
            may call them again (the buffers stay alive as long as this object).
        inputs: ``{name: array}`` of the checked inputs.
        threads: the threads its parallel loops run on (``Program.threads``; the pool is set to it).
        entry: the entry function bound to this memory (a no-argument callable: one native call runs
            every kernel), or None for a program without kernels.
    """

    def __init__(self, prog: Program, inputs: Sequence[np.ndarray]) -> None:
        self.prog = prog
        self.inputs = dict(zip([n for n, _, _ in prog.inputs], check_inputs(prog, inputs), strict=True))
        jit = jit_for(prog)
        self.threads = prog.threads or available_threads()
        if jit is not None:
            set_threads(self.threads)
        arena = _aligned(max(prog.arena_bytes, 64))
        self._arrays: dict[str, np.ndarray] = {}
        for name, b in prog.values.items():
            if b["kind"] == "input":
                self._arrays[name] = _copy(self.inputs[name])
            elif b["kind"] == "arena":
                dt = np.dtype(b["dtype"])
                n = int(np.prod(b["shape"], dtype=np.int64))
                self._arrays[name] = arena[b["offset"]:b["offset"] + n * dt.itemsize].view(dt).reshape(b["shape"])
            else:
                self._arrays[name] = empty(b["dtype"], b["shape"])
        consts = [_copy(c) for c in prog.consts]  # copied next to slack, like every other buffer
        self._keep: list[np.ndarray] = [arena]
        self.calls: list[tuple[str, Any, tuple[int, ...]]] = []
        for call in prog.calls:
            ptrs = []
            for a in call["args"]:
                if a["kind"] == "value":
                    arr = self._arrays[a["name"]]
                elif a["kind"] == "const":
                    arr = consts[a["index"]]
                else:
                    arr = empty(a["dtype"], a["shape"])
                self._keep.append(arr)
                ptrs.append(arr.ctypes.data)
            self.calls.append((call["name"], jit.function(call["symbol"], len(ptrs)), tuple(ptrs)))
        self.entry = self._bind_entry(jit, arena)

    def _bind_entry(self, jit: Any, arena: np.ndarray) -> Any:
        """The entry function (``compiler.codegen.entry``) as a no-argument callable over this binding's
        slot table (the same buffers the per-kernel calls use), or None for a program without one."""
        layout = self.prog.entry_layout
        if not self.prog.entry or layout is None:
            return None
        table = (ctypes.c_void_p * (len(layout.slots) + 1))()
        table[0] = arena.ctypes.data
        for (_, _, ptrs), args in zip(self.calls, layout.args, strict=True):
            for p, (kind, n) in zip(ptrs, args, strict=True):
                if kind == "slot":
                    table[n] = p
                elif p != arena.ctypes.data + n:
                    raise CompileError("run", "the entry function's arena offsets differ from the memory plan")
        self._keep_table = table
        return functools.partial(jit.function(self.prog.entry, 1), ctypes.addressof(table))

    def set_inputs(self, inputs: Sequence[np.ndarray]) -> None:
        """Replace the inputs (checked as at construction; the shapes compiled for) in place: copied
        into this binding's input buffers, which the kernels and the entry function read."""
        for (name, _, shape), x in zip(self.prog.inputs, check_inputs(self.prog, inputs), strict=True):
            self.inputs[name] = x
            if name in self._arrays:
                self._arrays[name][...] = x.reshape(shape)

    def feed(self, inputs: Sequence[np.ndarray]) -> None:
        """:meth:`set_inputs` without the checks, for a caller whose arrays have the dtypes and shapes
        compiled for (the runtime's control flow, ``compiler.runtime.control``, once per iteration)."""
        for (name, _, _), x in zip(self.prog.inputs, inputs, strict=True):
            self.inputs[name] = x
            buf = self._arrays.get(name)
            if buf is not None:
                buf[...] = x  # (numpy's setitem: a fraction of np.copyto's call cost for small arrays)

    def run(self, progress: Path | None = None, per_kernel: bool = False) -> None:
        """Run the model: one call of the entry function, or, with ``per_kernel`` or ``progress`` (or
        for a program without an entry function), one ``ctypes`` call per kernel in order. With
        ``progress``, append ``start <kernel>`` before each kernel and ``done`` at the end (unbuffered
        ``os.write``), for crash attribution by a parent process (``compiler.runtime.buffers.running_kernel``)."""
        faults.clear()
        if progress is None and not per_kernel and self.entry is not None:
            self.entry()
        elif progress is None:
            for _, fn, ptrs in self.calls:
                fn(*ptrs)
        else:
            fd = os.open(progress, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
            try:
                for name, fn, ptrs in self.calls:
                    os.write(fd, f"start {name}\n".encode())
                    fn(*ptrs)
                os.write(fd, b"done\n")
            finally:
                os.close(fd)
        faults.raise_if_set(getattr(self.prog, "faults", None) or {})

    def outputs(self) -> list[np.ndarray]:
        """The graph outputs in order (fresh arrays): copies of kernel-written values, of graph
        inputs, or of constants (``Program.outputs``)."""
        outs = []
        for _name, kind, payload in self.prog.outputs:
            if kind == "input":
                outs.append(self.inputs[payload].copy())
            elif kind == "const":
                outs.append(np.array(payload))
            else:
                outs.append(self._arrays[payload].copy())
        return outs
