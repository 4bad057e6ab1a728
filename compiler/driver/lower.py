"""The driver's ``lowering`` and ``codegen`` stages: loop IR, schedules and object code per kernel.

Per schedule step (a FusedGroup, or a lone node, which becomes a one-node kernel) ``lowering``
lowers to loop IR and applies the schedule (:func:`lower_graph`; event ``kernel.lowered``), and
``codegen`` compiles each kernel to LLVM IR, optimized LLVM IR, assembly and object code
(:func:`compile_all`; ``kernel.compiled``; identical kernels compile once). Cross targets stop here
(their code is emitted, never run); ``compiler.driver.run`` links and runs the rest.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Protocol

from onnx import TensorProto

from ..codegen.compile import CompiledKernel, compile_kernel
from ..errors import CompileError
from ..frontend.bounded import BOUNDED_OPS
from ..ir import FusedGroup, Graph
from ..loops.lower import LoweredKernel, lower_group, origin_of, origin_ops
from ..loops.printer import print_func, print_schedule
from ..loops.provenance import line_nodes
from ..schedule import schedule_kernel
from ..schedule.int8 import try_int8
from ..schedule.knobs import Context, KnobError, apply_trace, trace_text
from ..schedule.microkernel import try_microkernel
from ..schedule.parallel import plan_parallel
from ..schedule.primitives import ScheduleError
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


def lower_node(node: Any, name: str, opset: int, target: Target,
               trace: Mapping[str, Any] | None = None) -> tuple[LoweredKernel, Context]:
    """Lower and schedule one schedule step (a FusedGroup or a lone node) as kernel ``name``, replaying
    the tuning ``trace`` (``compiler.schedule.knobs``; None: the default schedule). Returns the kernel
    and the knobs context: ``.seen`` the decisions the schedule asked (its search space), ``.taken``
    the values taken. Raises KnobError or ScheduleError for a trace that does not apply."""
    with apply_trace(trace) as ctx:
        lk = try_int8(node, name, opset, target) or try_bf16(node, name, opset, target) or \
            try_microkernel(node, name, opset, target)
        if lk is None:
            lk = lower_group(node, name, opset)
            schedule_kernel(lk, target)
        plan_parallel(lk.func)
    lk.func.attrs["origin"] = origin_of(node)
    lk.func.attrs["origin_ops"] = origin_ops(node)
    return lk, ctx


ScheduleFor = Callable[[Any, str], "Mapping[str, Any] | None"]


class ScheduleSource(Protocol):
    """Where tuned schedules come from (``Request.schedules``; ``compiler.tune.apply.DatabaseSchedules``):
    ``lookup(node, kernel, target)`` returns a record ``{"trace", "median_us", "default_us", "source"}``
    or None; ``name`` names it in events (``tune.applied.database``, a record's ``source``); ``label``
    names it in a sentence (``tune.applied.message``: "the database tuning.jsonl", "this server's tuning
    database"); ``warnings()`` lists what it skipped; ``check()`` (the ``request`` stage) raises
    CompileError(stage="request") when it cannot be read."""

    name: str
    label: str

    def check(self) -> None: ...

    def lookup(self, node: Any, kernel: str, target: Target) -> Mapping[str, Any] | None: ...

    def warnings(self) -> list[str]: ...


def lower_graph(graph: Graph, target: Target, schedule_for: ScheduleFor | None = None) -> list[LoweredKernel]:
    """Lower and schedule every schedule step of ``graph``. Raises CompileError(stage="lowering"),
    among others for a data-dependent output length (:func:`check_data_dependent`) or a value of a
    narrow storage type (:func:`check_compute_types`).

    ``schedule_for(node, kernel name)`` (a tuning database's lookup, ``compiler.tune.apply``) may
    return a record ``{"trace", "median_us", "default_us", "source"}``: the kernel is scheduled by its
    trace (``attrs["schedule_source"] = "tuned"``, the trace and its measured times as the first lines
    of the schedule); a trace that no longer applies falls back to the default with a line saying why."""
    check_compute_types(graph)
    check_data_dependent(graph)
    opset = graph_opset(graph)
    used: set[str] = set()
    out = []
    for node in graph.nodes:
        if node.op_type in SKIP_OPS:
            continue
        name = _kernel_name(node, used)
        rec = schedule_for(node, name) if schedule_for is not None else None
        note = None
        if rec is not None:
            try:
                lk, ctx = lower_node(node, name, opset, target, rec["trace"])
            except (KnobError, ScheduleError) as exc:
                rec, note = None, f"# tuning record not applied ({exc}): default schedule"
        if rec is None:
            lk, ctx = lower_node(node, name, opset, target)
        lk.func.attrs["schedule_source"] = "tuned" if rec is not None else "default"
        if rec is not None:
            lk.func.attrs["tuned"] = rec
            defaults = {k.name: k.default for k in ctx.seen.values()}
            fb = rec.get("found_by") or {}
            by = f"; found tuning {fb.get('model', '?')} on {fb.get('host', '?')}" if fb else ""
            lk.func.attrs["schedule"].insert(0, f"# schedule: tuned ({rec.get('source', 'database')}: "
                                                f"{rec['median_us']:.4g} us, default {rec['default_us']:.4g} us{by})")
            lk.func.attrs["schedule"].insert(1, f"# trace: {trace_text(ctx.taken, defaults)}")
        elif note is not None:
            lk.func.attrs["schedule"].insert(0, note)
        out.append(lk)
    return out


def graph_opset(graph: Graph) -> int:
    """The default-domain opset of ``graph`` (13 when it names none)."""
    return int(graph.opset_imports.get("", graph.opset_imports.get("ai.onnx", 13)))


def compile_all(kernels: list[LoweredKernel], target: Target, threads: int = 2) -> list[CompiledKernel]:
    """Compile every kernel (two at a time: llvmlite releases the GIL inside LLVM)."""
    with ThreadPoolExecutor(max_workers=threads) as pool:
        return list(pool.map(lambda k: compile_kernel(k.func, target), kernels))


def tune_applied_message(tuned: int, this_run: int, kernels: int, database: str) -> str:
    """``tune.applied``'s line: how many kernels run on tuned schedules, and whether this compilation's
    own tuning run found them (what the kernels pane's schedule column says: "this run" / "database").
    ``database`` is the source's ``label``, a phrase ("the database tuning.jsonl")."""
    if tuned == 0:
        these = "the one kernel" if kernels == 1 else f"these {kernels} kernels"
        return f"no tuned schedules in {database} for {these}"
    head = f"{tuned} of {kernels} kernels on tuned schedules"
    if this_run == 0:
        return f"{head} from {database}"
    if this_run == tuned:
        return f"{head} ({this_run} found by this run)"
    return f"{head} ({this_run} found by this run, {tuned - this_run} from {database})"


def lower(comp: Compilation) -> None:
    """Stage ``lowering``: ``comp.kernels`` (:func:`lower_graph`), one ``kernel.lowered`` each. With
    ``request.schedules`` (a tuning database), each kernel's schedule comes from its best record where
    there is one: ``kernel.lowered`` says ``schedule_source`` (``tuned`` / ``default``) and
    ``tune.applied`` the count (:func:`tune_applied_message`: "23 of 58 kernels on tuned schedules
    from the database tuning.jsonl")."""
    assert comp.graph is not None and comp.target is not None
    src, target = comp.request.schedules, comp.target
    comp.kernels = lower_graph(comp.graph, target, (lambda n, k: src.lookup(n, k, target)) if src is not None else None)
    if src is not None:
        recs = [lk.func.attrs["tuned"] for lk in comp.kernels if lk.func.attrs.get("schedule_source") == "tuned"]
        here = sum(1 for r in recs if r.get("this_run"))
        comp.events.emit("tune.applied", database=src.name, kernels=len(comp.kernels), tuned=len(recs), this_run=here,
                         message=tune_applied_message(len(recs), here, len(comp.kernels), src.label),
                         warnings=src.warnings()[:100])
    if comp.request.kernel_events:
        for lk in comp.kernels:
            extra: dict[str, Any] = {}
            if lk.func.attrs.get("remarks"):
                extra["remarks"] = lk.func.attrs["remarks"]
            if src is not None:
                extra["schedule_source"] = lk.func.attrs.get("schedule_source", "default")
                rec = lk.func.attrs.get("tuned")
                if rec is not None:
                    extra["tuned"] = {"median_us": rec["median_us"], "default_us": rec["default_us"],
                                      "trace": rec["trace"], "database": rec.get("source", src.name),
                                      "workload": rec.get("workload", ""),
                                      **({"found_by": rec["found_by"]} if rec.get("found_by") else {})}
            comp.events.emit("kernel.lowered", kernel=lk.name, group=lk.group, loop_ir=print_func(lk.func),
                             schedule=print_schedule(lk.func), nodes=lk.func.attrs.get("origin", []),
                             ops=lk.func.attrs.get("origin_ops", []),
                             line_nodes=line_nodes(lk.func, lk.writes, lk.anchors, len(lk.nodes)), **extra)


def codegen(comp: Compilation, given: Mapping[int, CompiledKernel] | None = None) -> None:
    """Stage ``codegen``: ``comp.compiled`` (:func:`compile_all`), one ``kernel.compiled`` each.
    ``given`` ({kernel index: compiled}, ``compiler.driver.batch``) are taken as they are, not compiled."""
    assert comp.target is not None
    given = given or {}
    rest = [lk for i, lk in enumerate(comp.kernels) if i not in given]
    done = iter(compile_all(rest, comp.target, threads=comp.request.codegen_threads))
    comp.compiled = [given[i] if i in given else next(done) for i in range(len(comp.kernels))]
    if comp.request.kernel_events:
        for lk, ck in zip(comp.kernels, comp.compiled, strict=True):
            comp.events.emit("kernel.compiled", kernel=lk.name, llvm_ir=ck.llvm_ir,
                             llvm_ir_optimized=ck.llvm_ir_optimized, asm=ck.asm, compile_ms=round(ck.compile_ms, 3),
                             cached=ck.cached, symbol=ck.symbol, asm_loop_lines=list(ck.asm_lines),
                             llvm_ir_loop_lines=list(ck.llvm_ir_lines),
                             llvm_ir_optimized_loop_lines=list(ck.llvm_ir_optimized_lines))
