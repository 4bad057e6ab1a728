"""The driver's ``link``, ``run`` and ``verify`` stages.

``link`` makes the :class:`~compiler.runtime.program.Program` (kernel objects, call list, memory
plan: :func:`link_program`), the one description every runtime path runs. ``run`` runs it in a child
process against ONNX Runtime on the same seeded inputs (``compiler.runtime.runner``):
``kernel.timed`` per kernel and ``model.timed`` (Prism through its entry function vs ONNX Runtime;
``prism_kernel_calls_ms``: the same kernels one ``ctypes`` call each, ``compiler.runtime.timing``), both
at ``threads`` threads (ONNX Runtime at as many intra-op threads), with ``median_us_1t`` per kernel and
``prism_ms_1t`` at one thread when ``threads`` > 1, and ``model.timed`` carries the roofline's
``ceilings`` (peak FP32 FLOP/s and memory bandwidth at those threads, measured once per process by
Prism-generated kernels: ``compiler.runtime.ceilings.worker_ceilings``). ``verify`` emits
``model.verified`` from that run's comparison.
"""

from __future__ import annotations

from typing import Any

from ..errors import CompileError
from ..ir import Graph
from ..passes.plan_memory import MemoryPlan, liveness, place
from ..quant.qdq import QDQ_NOTE, has_qdq, output_steps
from ..quant.reduced import REDUCED_NOTE
from ..runtime.ceilings import worker_ceilings
from ..runtime.pool import check_threads
from ..runtime.program import Program, link
from ..runtime.runner import measure_program
from .fp32 import compare as fp32_compare
from .state import Compilation


def memory_plan(graph: Graph, ctx: Any = None) -> MemoryPlan:
    """The ``plan-memory`` result of ``graph`` (from the pass context's artifacts or the graph's
    metadata), or, when the pipeline had no ``plan-memory``, one placed now from the graph's liveness
    (``compiler.passes.plan_memory``)."""
    plan = (ctx.artifacts.memory_plan if ctx is not None else None) or graph.metadata.get("memory_plan")
    if plan is None:
        plan = place(liveness(graph)[0])
    return plan


def link_program(graph: Graph, ctx: Any, kernels: list[Any], compiled: list[Any], pipeline: str = "",
                 target: Any = None, entry: bool = True) -> Program:
    """The :class:`compiler.runtime.program.Program` of ``graph``'s lowered and compiled kernels
    (``compiler.loops.lower.LoweredKernel``, ``compiler.codegen.compile.CompiledKernel``) and its
    memory plan (:func:`memory_plan`). Raises CompileError(stage="lowering") for a graph output that
    is not written by a kernel, not a graph input and not a constant (``compiler.runtime.program.link``).
    ``entry`` False: no entry function (``compiler.driver.batch`` compiles its own)."""
    return link(graph, [{"name": lk.name, "symbol": ck.symbol, "obj": ck.obj, "args": lk.args, "faults": lk.faults}
                        for lk, ck in zip(kernels, compiled, strict=True)], memory_plan(graph, ctx), pipeline, target,
                entry=entry)


def link_stage(comp: Compilation) -> None:
    """Stage ``link``: ``comp.program``."""
    assert comp.graph is not None and comp.pipeline is not None
    comp.program = link_program(comp.graph, comp.ctx, comp.kernels, comp.compiled, comp.pipeline.text(), comp.target)
    comp.program.threads = check_threads(comp.request.threads)


def run(comp: Compilation) -> None:
    """Stage ``run``: ``comp.measured`` (``compiler.runtime.runner.measure_program`` on
    ``comp.reference``, cutting bounded outputs to their counts and comparing narrow outputs in their
    storage types); ``kernel.timed`` per kernel and, with ``benchmark``, ``model.timed``. Raises
    CompileError(stage="run") naming the kernel when generated code crashes."""
    req = comp.request
    assert comp.program is not None and comp.reference is not None
    storage = comp.storage["io"] if comp.storage is not None else None

    arts = comp.ctx.artifacts if comp.ctx is not None else None
    qdq = arts.qdq_model if arts is not None else None  # a quantize pass ran (int8)
    reduced = arts.reduced_model if arts is not None else None  # quantize{dtype=bf16|fp16}: Cast pairs per layer
    reference = qdq if qdq is not None else reduced if reduced is not None else comp.reference
    timing = {"onnxruntime_ms": comp.reference.SerializeToString(), "onnxruntime_int8_ms": qdq.SerializeToString()} \
        if qdq is not None else None
    as_written = qdq is not None or reduced is not None or has_qdq(comp.reference)
    if as_written and timing is None:  # pre-quantized QDQ or reduced: verified as written, FP32 timed optimized
        timing = {"onnxruntime_ms": comp.reference.SerializeToString()}
    # the roofline's ceilings: this process's peak FLOP/s and bandwidth at these threads, measured once
    # (cached; a worker measures at start): asked before the timing run, so the two never overlap
    roof = worker_ceilings(check_threads(comp.program.threads), comp.target.name) \
        if req.benchmark and comp.target is not None else None
    res = measure_program(comp.program, reference.SerializeToString(), verify=req.verify,
                          benchmark=req.benchmark, trims=comp.trims, storage=storage, steps=output_steps(reference),
                          ort_no_opt=as_written, timing_models=timing)
    if as_written and req.verify:
        res.setdefault("notes", []).append(QDQ_NOTE if reduced is None else REDUCED_NOTE)
    comp.measured = res
    by_name = {lk.name: lk for lk in comp.kernels}
    fp32 = fp32_compare(comp, {kt["name"]: float(kt["median_us"]) for kt in res.get("kernels", [])}) \
        if "prism_ms" in res else None
    for kt in res.get("kernels", []):
        lk = by_name[kt["name"]]
        us = max(kt["median_us"], 1e-3)
        flops, nbytes = int(lk.func.attrs.get("flops", 0)), int(lk.func.attrs.get("bytes", 0))
        one = {"median_us_1t": round(kt["median_us_1t"], 3)} if "median_us_1t" in kt else {}
        cmp = (fp32 or {}).get("kernels", {}).get(lk.name)
        if cmp is not None:
            one |= {k: v for k, v in cmp.items() if v or k != "remarks"}
        comp.events.emit("kernel.timed", kernel=lk.name, median_us=round(us, 3), flops=flops, bytes=nbytes,
                         gflops=round(flops / us / 1e3, 3), gbps=round(nbytes / us / 1e3, 3),
                         threads=comp.program.threads, **one)
    if req.benchmark and "prism_ms" in res:
        ort_ms = res.get("onnxruntime_ms")
        int8: dict = {}
        if qdq is not None:  # Prism at the chosen precision, ORT on the FP32 model and on the QDQ model
            i8 = res.get("onnxruntime_int8_ms")
            int8 = {"precision": "int8", "onnxruntime_int8_ms": round(i8, 4) if i8 else None,
                    "ratio_int8": round(res["prism_ms"] / i8, 4) if i8 else None}
        elif reduced is not None:  # ORT has no bf16/fp16 Conv on CPU: timed against FP32 only
            int8 = {"precision": (arts.accuracy or {}).get("dtype") if arts is not None else None}
        if int8 and ort_ms and res["prism_ms"] > ort_ms:
            int8["notes"] = [f"Prism {str(int8['precision']).upper()} ({res['prism_ms']:.3g} ms) is slower than ONNX "
                             f"Runtime FP32 ({ort_ms:.3g} ms) on this model"]
        if int8 and fp32 is not None:
            f_ms = fp32.get("prism_fp32_ms")
            int8["prism_fp32_ms"] = round(f_ms, 4) if f_ms else None
            notes = list(fp32["notes"])
            if f_ms and res["prism_ms"] > f_ms:
                notes.append(f"Prism {str(int8['precision']).upper()} ({res['prism_ms']:.3g} ms) is slower than Prism "
                             f"FP32 ({f_ms:.3g} ms) on this model")
            if notes:
                int8["notes"] = int8.get("notes", []) + notes
        comp.events.emit("model.timed", prism_ms=round(res["prism_ms"], 4),
                         onnxruntime_ms=round(ort_ms, 4) if ort_ms else None,
                         ratio=round(res["prism_ms"] / ort_ms, 4) if ort_ms else None, repeats=res["repeats"],
                         prism_kernel_calls_ms=round(res.get("prism_kernel_calls_ms", res["prism_ms"]), 4),
                         threads=comp.program.threads,
                         **({"prism_ms_1t": round(res["prism_ms_1t"], 4)} if "prism_ms_1t" in res else {}), **int8,
                         **({"ceilings": roof.payload()} if roof is not None else {}))


def verify(comp: Compilation) -> None:
    """Stage ``verify``: ``model.verified`` from the run's comparison.

    It has ``passed``, ``max_abs_error``, ``max_rel_error``, ``rtol``/``atol`` (the loosest of the
    outputs'), ``atol_floor``, ``outputs`` (per output, with its own ``rtol``/``atol`` and, for a
    narrow one, its ``storage`` type) and ``verified`` (True). When ONNX Runtime cannot run the model
    (no CPU kernel for one of its ops in that type ...), it has ``verified: false``, ``passed: null``,
    null errors and ``message`` ("not verified: ONNX Runtime has no CPU kernel for ..."), and the
    compilation still finishes. A failed comparison is ``passed: false``, not an error; no output
    compared at all raises CompileError(stage="verify").
    """
    res = comp.measured
    outs = res.get("outputs", {})
    if res.get("ort_error"):
        comp.events.emit("model.verified", passed=None, verified=False, message=f"not verified: {res['ort_error']}",
                         max_abs_error=None, max_rel_error=None, rtol=None, atol=None, outputs={})
        return
    if not outs:
        raise CompileError("verify", "no outputs were compared with ONNX Runtime")
    comp.events.emit("model.verified", passed=all(o["passed"] for o in outs.values()), verified=True,
                     max_abs_error=max(o["max_abs_error"] for o in outs.values()),
                     max_rel_error=max(o["max_rel_error"] for o in outs.values()),
                     rtol=max(o.get("rtol", 1e-3) for o in outs.values()),
                     atol=max(o.get("atol", 1e-4) for o in outs.values()), atol_floor=1e-6, outputs=outs,
                     **({"notes": res["notes"]} if res.get("notes") else {}))
