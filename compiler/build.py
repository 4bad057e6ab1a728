"""The back end's single entry: lower, schedule, compile, run, time and verify a fused graph.

:func:`run_backend` is called by ``compiler.compile`` after the graph passes. Per schedule step
(a FusedGroup, or a lone node, which becomes a one-node kernel) it lowers to loop IR and applies the
schedule (event ``kernel.lowered``), compiles to LLVM IR, optimized LLVM IR, assembly and object
code (``kernel.compiled``; identical kernels compile once), and, where the target is runnable
here, runs the model in a child process (``compiler.runtime.runner``): ``kernel.timed`` per kernel,
``model.timed`` (Prism vs ONNX Runtime, 1 thread) and ``model.verified``. Cross targets emit code
only. ``stage_ms`` gets ``lowering``, ``codegen``, ``run`` and ``verify`` in ms.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from onnx import TensorProto

from .codegen.compile import CompiledKernel, compile_kernel
from .errors import CompileError
from .events import EventStream
from .ir import FusedGroup, Graph
from .loops.lower import LoweredKernel, lower_group
from .loops.printer import print_func, print_schedule
from .schedule import schedule_kernel
from .schedule.microkernel import try_microkernel
from .targets import Target, check_runnable, get_target

if TYPE_CHECKING:
    from .runtime.program import Program

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
    from .frontend.bounded import BOUNDED_OPS

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
                f"the data, so it has no static shape; Prism compiles {node.op_type} only when its results are graph "
                f"outputs read by no other node (padded to their bound plus a count, then trimmed: "
                f"compiler.frontend.bounded){where}", node=node.label, op=node.op_type)


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
        lk = try_microkernel(node, name, opset, target)
        if lk is None:
            lk = lower_group(node, name, opset)
            schedule_kernel(lk, target)
        out.append(lk)
    return out


def compile_all(kernels: list[LoweredKernel], target: Target, threads: int = 2) -> list[CompiledKernel]:
    """Compile every kernel (two at a time: llvmlite releases the GIL inside LLVM)."""
    with ThreadPoolExecutor(max_workers=threads) as pool:
        return list(pool.map(lambda k: compile_kernel(k.func, target), kernels))


def memory_plan(graph: Graph, ctx: Any = None) -> Any:
    """The ``plan-memory`` result of ``graph`` (from the pass context's artifacts or the graph's
    metadata), or, when the pipeline had no ``plan-memory``, one placed now from the graph's liveness
    (``compiler.passes.plan_memory``)."""
    plan = getattr(ctx, "artifacts", {}).get("memory_plan") or graph.metadata.get("memory_plan")
    if plan is None:
        from .passes.plan_memory import liveness, place

        plan = place(liveness(graph)[0])
    return plan


def link_program(graph: Graph, ctx: Any, kernels: list[LoweredKernel], compiled: list[CompiledKernel],
                 pipeline: str = "") -> Program:
    """The :class:`compiler.runtime.program.Program` of ``graph``'s lowered and compiled kernels and
    its memory plan (:func:`memory_plan`): the one description both runtime paths run
    (``compiler.compile``'s verification and timing, and the ONNX backend). Raises
    CompileError(stage="lowering") for a graph output that is not written by a kernel, not a graph
    input and not a constant (``compiler.runtime.program.link``)."""
    from .runtime.program import link

    return link(graph, [{"name": lk.name, "symbol": ck.symbol, "obj": ck.obj, "args": lk.args}
                        for lk, ck in zip(kernels, compiled, strict=True)], memory_plan(graph, ctx), pipeline)


def run_backend(graph: Graph, ctx: Any, events: EventStream, *, target: str, verify: bool, benchmark: bool,
                model_proto: Any, input_shapes: Any, stage_ms: dict[str, float],
                trims: list[tuple[int, str, int]] | None = None,
                storage: dict[str, dict[str, int]] | None = None) -> dict[str, Any]:
    """Lower, compile, run and verify ``graph`` for ``target``; returns a summary dict.

    ``model_proto`` is the model ONNX Runtime runs for timing and verification; when ``graph`` has
    bounded outputs (``compiler.api.bound_model``), ``trims`` lists them and Prism's outputs are cut
    to their counts before the comparison. ``storage`` (``compiler.api.legalize_model``): the declared
    narrow types of the graph inputs and outputs of a legalized model, ``{"inputs": {name: elem},
    "outputs": {name: elem}}``; the runner feeds ONNX Runtime in them and compares in them
    (``compiler.runtime.narrow_io``).

    ``model.verified`` has ``passed``, ``max_abs_error``, ``max_rel_error``, ``rtol``/``atol`` (the
    loosest of the outputs'), ``atol_floor``, ``outputs`` (per output, with its own ``rtol``/``atol``
    and, for a narrow one, its ``storage`` type) and ``verified`` (True). When ONNX Runtime cannot run
    the model (no CPU kernel for one of its ops in that type ...), it has ``verified: false``,
    ``passed: null``, null errors and ``message`` ("not verified: ONNX Runtime has no CPU kernel for
    ..."), and the compilation still finishes.

    Raises CompileError (stages ``request``, ``lowering``, ``codegen``, ``run``); a failed
    verification is reported in ``model.verified`` (``passed: false``), not raised.
    """
    tgt = get_target(target)
    check_runnable(tgt)
    t0 = time.perf_counter()
    kernels = lower_graph(graph, tgt)
    for lk in kernels:
        events.emit("kernel.lowered", kernel=lk.name, group=lk.group, loop_ir=print_func(lk.func),
                    schedule=print_schedule(lk.func))
    stage_ms["lowering"] = stage_ms.get("lowering", 0.0) + (time.perf_counter() - t0) * 1e3
    t0 = time.perf_counter()
    compiled = compile_all(kernels, tgt)
    for lk, ck in zip(kernels, compiled, strict=True):
        events.emit("kernel.compiled", kernel=lk.name, llvm_ir=ck.llvm_ir, llvm_ir_optimized=ck.llvm_ir_optimized,
                    asm=ck.asm, compile_ms=round(ck.compile_ms, 3), cached=ck.cached, symbol=ck.symbol)
    stage_ms["codegen"] = stage_ms.get("codegen", 0.0) + (time.perf_counter() - t0) * 1e3
    summary: dict[str, Any] = {"kernels": len(kernels), "distinct": len({c.symbol for c in compiled})}
    if not tgt.runnable or not (verify or benchmark):
        return summary
    from .runtime.runner import measure_program

    t0 = time.perf_counter()
    prog = link_program(graph, ctx, kernels, compiled)
    res = measure_program(prog, model_proto.SerializeToString(), verify=verify, benchmark=benchmark, trims=trims,
                          storage=storage)
    elapsed = (time.perf_counter() - t0) * 1e3
    by_name = {lk.name: lk for lk in kernels}
    for kt in res.get("kernels", []):
        lk = by_name[kt["name"]]
        us = max(kt["median_us"], 1e-3)
        flops, nbytes = int(lk.func.attrs.get("flops", 0)), int(lk.func.attrs.get("bytes", 0))
        events.emit("kernel.timed", kernel=lk.name, median_us=round(us, 3), flops=flops, bytes=nbytes,
                    gflops=round(flops / us / 1e3, 3), gbps=round(nbytes / us / 1e3, 3))
    if benchmark and "prism_ms" in res:
        ort_ms = res.get("onnxruntime_ms")
        events.emit("model.timed", prism_ms=round(res["prism_ms"], 4),
                    onnxruntime_ms=round(ort_ms, 4) if ort_ms else None,
                    ratio=round(res["prism_ms"] / ort_ms, 4) if ort_ms else None, repeats=res["repeats"])
        summary.update(prism_ms=res["prism_ms"], onnxruntime_ms=ort_ms)
    stage_ms["run"] = stage_ms.get("run", 0.0) + elapsed
    if verify:
        t0 = time.perf_counter()
        outs = res.get("outputs", {})
        if res.get("ort_error"):
            message = f"not verified: {res['ort_error']}"
            events.emit("model.verified", passed=None, verified=False, message=message, max_abs_error=None,
                        max_rel_error=None, rtol=None, atol=None, outputs={})
            summary.update(passed=None, verified=False, message=message)
            stage_ms["verify"] = stage_ms.get("verify", 0.0) + (time.perf_counter() - t0) * 1e3
            return summary
        if not outs:
            raise CompileError("verify", "no outputs were compared with ONNX Runtime")
        passed = all(o["passed"] for o in outs.values())
        events.emit("model.verified", passed=passed, verified=True,
                    max_abs_error=max(o["max_abs_error"] for o in outs.values()),
                    max_rel_error=max(o["max_rel_error"] for o in outs.values()),
                    rtol=max(o.get("rtol", 1e-3) for o in outs.values()),
                    atol=max(o.get("atol", 1e-4) for o in outs.values()), atol_floor=1e-6, outputs=outs,
                    **({"notes": res["notes"]} if res.get("notes") else {}))
        summary.update(passed=passed, max_abs_error=max(o["max_abs_error"] for o in outs.values()))
        stage_ms["verify"] = stage_ms.get("verify", 0.0) + (time.perf_counter() - t0) * 1e3
    return summary
