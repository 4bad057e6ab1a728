"""The driver's ``lowering`` and ``codegen`` stages: loop IR, schedules and object code per kernel.

Per schedule step (a FusedGroup, or a lone node, which becomes a one-node kernel) ``lowering``
lowers to loop IR and applies the schedule (:func:`lower_graph`; event ``kernel.lowered``), and
``codegen`` compiles each kernel to LLVM IR, optimized LLVM IR, assembly and object code
(:func:`compile_all`; ``kernel.compiled``; identical kernels compile once). Cross targets stop here
(their code is emitted, never run); ``compiler.driver.run`` links and runs the rest.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

from onnx import TensorProto

from ..codegen.compile import CompiledKernel, compile_kernel
from ..errors import CompileError
from ..frontend.bounded import BOUNDED_OPS
from ..ir import FusedGroup, Graph
from ..loops.lower import LoweredKernel, lower_group, origin_of
from ..loops.printer import print_func, print_schedule
from ..schedule import schedule_kernel
from ..schedule.int8 import try_int8
from ..schedule.microkernel import try_microkernel
from ..schedule.parallel import plan_parallel
from ..schedule.reduced import try_bf16
from ..targets import Target
from .state import Compilation

SKIP_OPS = {"Constant"}
NARROW_IR_ELEMS = frozenset({TensorProto.FLOAT16})  # storage types the IR models but codegen does not compute in


def _kernel_name(node: Any, used: set[str]) -> str:
    base = node.kernel if isinstance(node, FusedGroup) else "k_" + node.label
    base = "".join(c if c.isalnum() or c == "_" else "_" for c in base)
    name, i = base, 1
    while name in used:
        i += 1
        name = f"{base}_{i}"
    used.add(name)
    return name


def check_data_dependent(graph: Graph) -> None:
    """Raise CompileError(stage="lowering") naming the first NonZero, Compress, Unique or
    NonMaxSuppression node (``compiler.frontend.bounded.BOUNDED_OPS``) whose output still has a
    data-dependent length: one that was not rewritten to its bounded form (padded plus a count)
    because it is not a graph output or is read by another node, and was not folded to a constant."""
    for node in graph.walk():
        if node.op_type not in BOUNDED_OPS or node.domain not in ("", "ai.onnx"):
            continue
        for v in node.outputs:
            if v is None or v.type is None or v.type.is_static:
                continue
            readers = ", ".join(dict.fromkeys(  # by name: a fused group's body has its own values
                f"{c.label} ({c.op_type})" for c in graph.walk()
                if not isinstance(c, FusedGroup) and any(i is not None and i.name == v.name for i in c.inputs)))
            where = f"; here %{v.name} is read by {readers}" if readers else ""
            raise CompileError(
                "lowering", f"{node.label} ({node.op_type}): the length of its output %{v.name} ({v.type}) depends on "
                f"the data, so it has no static shape; Prism compiles {node.op_type} in its bounded form (padded to a "
                f"bound plus a count, carried through the nodes that read it: compiler.frontend.bounded, "
                f"bounded_flow) only when its inputs have static shapes and the opset is 11 or later{where}", node=node.label, op=node.op_type)


def check_compute_types(graph: Graph) -> None:
    """Raise CompileError(stage="lowering") naming the first value (and the node that reads or writes
    it) whose element type is a narrow storage type the code generator does not compute in (float16:
    the only one the graph IR models). ``compiler.compile`` and the ONNX backend legalize such models
    first (``compiler.frontend.narrow_types.legalize``: float16 computed in float32), so this catches
    a graph that reached the back end without that step."""
    def bad(v: Any) -> bool:
        return v is not None and v.type is not None and v.type.elem_type in NARROW_IR_ELEMS

    def fail(v: Any, where: str, node: Any = None) -> CompileError:
        kw = {"node": node.label, "op": node.op_type} if node is not None else {}
        return CompileError("lowering", f"{where}: value %{v.name} has element type {v.type.dtype.name} ({v.type}), a "
                            "storage type the code generator does not compute in; the model must be legalized "
                            "first (compiler.frontend.narrow_types.legalize computes float16 in float32, as "
                            "compiler.compile does)", **kw)

    for v in graph.inputs:
        if bad(v):
            raise fail(v, "graph input")
    for node in graph.walk():
        if node.op_type in SKIP_OPS:
            continue
        for w in [*node.inputs, *node.outputs]:
            if bad(w):
                raise fail(w, f"{node.label} ({node.op_type})", node)


def lower_graph(graph: Graph, target: Target) -> list[LoweredKernel]:
    """Lower and schedule every schedule step of ``graph``. Raises CompileError(stage="lowering"),
    among others for a data-dependent output length (:func:`check_data_dependent`) or a value of a
    narrow storage type (:func:`check_compute_types`)."""
    check_compute_types(graph)
    check_data_dependent(graph)
    opset = int(graph.opset_imports.get("", graph.opset_imports.get("ai.onnx", 13)))
    used: set[str] = set()
    out = []
    for node in graph.nodes:
        if node.op_type in SKIP_OPS:
            continue
        name = _kernel_name(node, used)
        lk = try_int8(node, name, opset, target) or try_bf16(node, name, opset, target) or \
            try_microkernel(node, name, opset, target)
        if lk is None:
            lk = lower_group(node, name, opset)
            schedule_kernel(lk, target)
        plan_parallel(lk.func)
        lk.func.attrs["origin"] = origin_of(node)
        out.append(lk)
    return out


def compile_all(kernels: list[LoweredKernel], target: Target, threads: int = 2) -> list[CompiledKernel]:
    """Compile every kernel (two at a time: llvmlite releases the GIL inside LLVM)."""
    with ThreadPoolExecutor(max_workers=threads) as pool:
        return list(pool.map(lambda k: compile_kernel(k.func, target), kernels))


def lower(comp: Compilation) -> None:
    """Stage ``lowering``: ``comp.kernels`` (:func:`lower_graph`), one ``kernel.lowered`` each."""
    assert comp.graph is not None and comp.target is not None
    comp.kernels = lower_graph(comp.graph, comp.target)
    if comp.request.kernel_events:
        for lk in comp.kernels:
            comp.events.emit("kernel.lowered", kernel=lk.name, group=lk.group, loop_ir=print_func(lk.func),
                             schedule=print_schedule(lk.func), nodes=lk.func.attrs.get("origin", []))


def codegen(comp: Compilation) -> None:
    """Stage ``codegen``: ``comp.compiled`` (:func:`compile_all`), one ``kernel.compiled`` each."""
    assert comp.target is not None
    comp.compiled = compile_all(comp.kernels, comp.target, threads=comp.request.codegen_threads)
    if comp.request.kernel_events:
        for lk, ck in zip(comp.kernels, comp.compiled, strict=True):
            comp.events.emit("kernel.compiled", kernel=lk.name, llvm_ir=ck.llvm_ir,
                             llvm_ir_optimized=ck.llvm_ir_optimized, asm=ck.asm, compile_ms=round(ck.compile_ms, 3),
                             cached=ck.cached, symbol=ck.symbol, asm_loop_lines=list(ck.asm_lines),
                             llvm_ir_loop_lines=list(ck.llvm_ir_lines),
                             llvm_ir_optimized_loop_lines=list(ck.llvm_ir_optimized_lines))
