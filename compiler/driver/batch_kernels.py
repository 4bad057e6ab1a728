"""Kernels that take the run-time batch size inside their loops (issue 13 item 3).

:func:`compiler.driver.batch.compile_batch` serves ``N = lo..hi`` with the kernels compiled for
``N = 1``, each kernel over per-sample buffers called once per sample (``N`` calls, each
launching its own parallel loops) unless :func:`batched_kernels` gives it a form that takes ``N``:
the kernel lowered again from the ``N = hi`` graph (the same fused group: same kernel name, nodes
and graph values) with the batch dim a run-time argument, either

* by its schedule: Gemm and MatMul bound their row-tile loops by ``N`` (``compiler.schedule.batch``:
  one GEMM over every sample's rows, register tiles and the parallel loop spanning samples), or
* after its schedule: every other kernel (Conv on each of its schedules, pooling, normalization, the
  row kernels, elementwise) has its loops over samples bounded by ``N`` where the loop IR proves each
  such loop's iteration touches one sample (``compiler.schedule.batch_loops``): one call computes the
  ``N`` samples with the schedule of one.

That form replaces the per-sample call in the call list (:func:`batched_calls`). Anything else keeps
the per-sample call: a kernel whose ``N = hi`` group or buffers differ, that fails to lower at
``N = hi``, or whose batch loops are not proven (the reason is returned for the remark).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..codegen.compile import CompiledKernel
from ..codegen.entry import entry_layout
from ..errors import CompileError
from ..ir import Graph
from ..loops.lower import LoweredKernel, origin_of
from ..loops.printer import print_func, print_schedule
from ..runtime.program import Program, np_dtype
from ..schedule.batch import BatchDim, batch_dim, takes_batch
from ..schedule.batch_loops import bound_batch_loops
from ..schedule.knobs import KnobError
from ..schedule.primitives import ScheduleError
from ..targets import Target
from .lower import SKIP_OPS, _kernel_name, compile_all, graph_opset, lower_node


def _kernel_nodes(graph: Graph) -> dict[str, Any]:
    """``{kernel name: schedule step}`` as ``compiler.driver.lower.lower_graph`` names them."""
    used: set[str] = set()
    return {_kernel_name(n, used): n for n in graph.nodes if n.op_type not in SKIP_OPS}


def batched_kernels(unit_kernels: Sequence[LoweredKernel], top: Graph, per_sample: frozenset[str], lo: int, hi: int,
                    target: Target, refused: dict[str, str] | None = None,
                    threads: int = 2) -> dict[int, tuple[LoweredKernel, CompiledKernel]]:
    """``{call index: (kernel, compiled)}`` for the ``N = 1`` kernels (``unit_kernels``, in call order)
    whose group, lowered from ``top`` (the graph IR at ``N = hi``), takes ``N`` at run time (module
    docstring); ``refused`` gets {kernel: why} for those whose batch loops could not be bounded.
    The forms are compiled ``threads`` at a time (``compiler.driver.lower.compile_all``).
    Raises CompileError(stage="codegen") when LLVM rejects such a kernel."""
    nodes, opset = _kernel_nodes(top), graph_opset(top)
    dim = BatchDim(lo, hi)
    out: dict[int, LoweredKernel] = {}
    for ci, lk1 in enumerate(unit_kernels):
        node = nodes.get(lk1.name)
        values = {a.name: a.buffer.numel for a in lk1.args if a.kind == "value"}
        if node is None or lk1.func.attrs.get("origin") != origin_of(node) \
                or not all(o.name in per_sample for o in node.outputs):
            continue
        try:
            with batch_dim(dim):
                lk, _ = lower_node(node, lk1.name, opset, target)
        except (CompileError, ScheduleError, KnobError):
            continue  # the per-sample kernel serves
        args = {a.name: a.buffer for a in lk.args if a.kind == "value"}
        if set(args) != set(values) or any(args[v].numel != values[v] * (hi if v in per_sample else 1) for v in args):
            continue
        if not takes_batch(lk):
            samples = {args[v].name: values[v] for v in args if v in per_sample}
            scratch = {a.buffer.name for a in lk.args if a.kind == "scratch"}
            why = bound_batch_loops(lk, samples, scratch, dim)
            if why is not None:
                if refused is not None:
                    refused[lk1.name] = why
                continue
        lk.func.attrs["schedule_source"] = "default"
        out[ci] = lk
    return dict(zip(out, zip(out.values(), compile_all(list(out.values()), target, threads), strict=True), strict=True))


def batched_calls(prog: Program, batched: dict[int, tuple[LoweredKernel, CompiledKernel]]) -> Program:
    """``prog`` (the ``N = 1`` Program) with the calls of ``batched`` replaced: the kernel's ``value``
    arguments bound to the same graph values, its constants and scratch its own, its ``dim``
    parameter (``compiler.schedule.batch.BATCH_N``) the ``{"kind": "dim"}`` argument the batch entry
    function fills with ``N``; constants and objects no call reads any more dropped (the ``N = 1`` entry
    function's among them); the entry layout redone."""
    calls, objects = [dict(c) for c in prog.calls], dict(prog.objects)
    consts: list[np.ndarray] = []
    names: list[str] = []
    kept: dict[int, int] = {}
    for ci, call in enumerate(calls):
        if ci in batched:
            lk, ck = batched[ci]
            objects[ck.symbol] = ck.obj
            args: list[dict[str, Any]] = []
            for a in lk.args:
                if a.kind == "value":
                    args.append({"kind": "value", "name": a.name})
                elif a.kind == "const":
                    consts.append(np.ascontiguousarray(a.data))
                    names.append(a.name)
                    args.append({"kind": "const", "index": len(consts) - 1})
                elif a.kind == "dim":
                    args.append({"kind": "dim"})
                else:
                    args.append({"kind": "scratch", "dtype": np_dtype(a.buffer.dtype), "shape": tuple(a.buffer.shape)})
            calls[ci] = {"name": call["name"], "symbol": ck.symbol, "args": args}
            continue
        for a in call["args"]:
            if a["kind"] == "const":
                if a["index"] not in kept:
                    kept[a["index"]] = len(consts)
                    consts.append(prog.consts[a["index"]])
                    names.append(prog.const_names[a["index"]] if a["index"] < len(prog.const_names) else "")
        call["args"] = [dict(a, index=kept[a["index"]]) if a["kind"] == "const" else a for a in call["args"]]
    objects = {c["symbol"]: objects[c["symbol"]] for c in calls}  # those the calls run, nothing else
    return dataclasses.replace(prog, calls=calls, objects=objects, consts=consts, const_names=names,
                               entry_layout=entry_layout(calls, prog.values))


def batched_event(ev: dict[str, Any], batched: dict[str, tuple[LoweredKernel, CompiledKernel]]) -> dict[str, Any]:
    """A held ``kernel.lowered`` / ``kernel.compiled`` payload of the ``N = 1`` compilation, for a kernel
    replaced by its batched form: that form's loop IR, schedule and code (the kernel that runs)."""
    got = batched.get(ev.get("kernel", ""))
    if got is None:
        return ev
    lk, ck = got
    if ev["type"] == "kernel.lowered":
        return dict(ev, loop_ir=print_func(lk.func), schedule=print_schedule(lk.func))
    if ev["type"] == "kernel.compiled":
        return dict(ev, llvm_ir=ck.llvm_ir, llvm_ir_optimized=ck.llvm_ir_optimized, asm=ck.asm,
                    compile_ms=round(ck.compile_ms, 3), cached=ck.cached, symbol=ck.symbol,
                    asm_loop_lines=list(ck.asm_lines), llvm_ir_loop_lines=list(ck.llvm_ir_lines),
                    llvm_ir_optimized_loop_lines=list(ck.llvm_ir_optimized_lines))
    return ev
