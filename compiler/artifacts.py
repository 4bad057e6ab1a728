"""Downloadable artifacts of a compilation, rebuilt from what it emitted (its events) or, for the
graph after a pass, by running the same request again up to that pass.

- :func:`report_from_events`: the CLI's ``--json`` report (DESIGN.md "Command line") from the events;
- :func:`model_after_pass`: the graph IR after pass ``index`` exported to ONNX (fused groups as model-local
  functions, ``compiler.export``), checked by ``onnx.checker``; after an ONNX-level pass, the ONNX model
  that pass left (:func:`onnx_model_after`);
- :func:`module_object`: one ELF object for the target with every kernel, from the kernels' optimized
  LLVM IR (``kernel.compiled``) linked into one LLVM module and emitted by the target's machine;
- :func:`shared_object`: that object linked into a shared library by the host's C compiler driver
  (``cc -shared``), only for a target this host runs;
- :func:`kernel_sources_zip`: per kernel its loop IR, LLVM IR (as generated and optimized) and assembly.

Errors: :class:`ArtifactUnavailable` (with the reason in words) when the compilation has no such
artifact: a failed stage, a cross target, no kernels, no linker. No Django here (CONVENTIONS.md 1).
"""

from __future__ import annotations

import io
import os
import shutil
import subprocess
import tempfile
import zipfile
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import onnx

from .driver.prepare import upgrade_opset, with_input_shapes
from .driver.request import model_bytes, resolve_model
from .errors import CompileError
from .export import check_export
from .frontend import read_model
from .passes import PassContext
from .passes.instruments import PassInstrument, PassRun
from .passes.manager import PassManager
from .passes.pipeline import cut_after_run, parse_pipeline
from .result import CompileResult
from .targets import get_target

PAYLOAD_SKIP = ("seq", "type", "ts")


class ArtifactUnavailable(Exception):
    """The compilation has no such artifact; ``reason`` says why (shown to the user as is)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def _payload(e: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in e.items() if k not in PAYLOAD_SKIP}


def report_from_events(events: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The ``--json`` report of a compilation from its events (in seq order), as
    :meth:`compiler.result.CompileResult.to_dict` gathers them for the CLI."""
    started = next((e for e in events if e["type"] == "compile.started"), None)
    finished = next((e for e in events if e["type"] == "compile.finished"), None)
    failed = next((e for e in events if e["type"] == "compile.failed"), None)
    result = CompileResult(
        ok=finished is not None, error=_payload(failed) if failed else None, events=[dict(e) for e in events],
        target=str(started.get("target", "")) if started else "", pipeline=str(started.get("pipeline", "")) if started else "",
        model=started.get("model") if started else None,
        stage_ms=dict(finished.get("stage_ms") or {}) if finished else {},
        duration_ms=float(finished.get("duration_ms") or 0.0) if finished else 0.0)
    return result.to_dict()


def pipeline_passes(pipeline: str) -> list[str]:
    """The pass entries of expanded pipeline text, each as printed (``fuse-ops{max-group-size=32}``),
    a fixed-point group's passes once each."""

    return [spec.text() for spec in parse_pipeline(pipeline).specs()]


def run_levels(model: Any, *, target: str, pipeline: str, input_shapes: Mapping[str, Sequence[int]] | None = None,
               input_values: Mapping[str, Any] | None = None) -> list[str]:
    """The level of each ONNX-level pass run of ``pipeline`` on ``model`` (``["onnx", ...]``), found by
    running its model passes (a fixed-point group runs as many rounds as the model needs); for a
    caller without the compilation's events."""
    from . import api  # compiler.api loads the whole driver: only when a model is rebuilt

    onnx_part = parse_pipeline(pipeline).level("onnx").text()
    result = api.compile(model, target=target, pipeline=onnx_part, input_shapes=input_shapes, input_values=input_values,
                         verify=False, benchmark=False, backend=False)
    return ["onnx" for e in result.of_type("pass.finished") if e.get("level") == "onnx"]


def model_after_pass(model: Any, *, target: str, pipeline: str, index: int,
                     input_shapes: Mapping[str, Sequence[int]] | None = None,
                     calibration_data: Any = None, levels: Sequence[str] | None = None) -> onnx.ModelProto:
    """The graph after pass run ``index`` (0-based, as the events number them) of ``pipeline`` as an
    ONNX model that ``onnx.checker.check_model`` accepts (fused groups as ``prism`` functions).

    ``levels``: each pass run's level (``onnx``/``graph``) from the compilation's events (else found
    by :func:`run_levels`). Runs the same request (model, target, input shapes, the pipeline cut after
    that pass: ``compiler.passes.pipeline.cut_after_run``) without a back end. Raises
    ArtifactUnavailable for an index outside the pipeline, for an ONNX-level pass (it rewrites the
    ONNX model before the graph IR exists: its ONNX text is that pass's snapshot), or for a request
    that fails before that pass ends. For an ONNX-level pass run it is the model that pass left
    (:func:`onnx_model_after`)."""
    from . import api  # compiler.api loads the whole driver: only when a model is rebuilt

    levels = list(levels) if levels is not None else run_levels(model, target=target, pipeline=pipeline,
                                                               input_shapes=input_shapes)
    k = sum(1 for x in levels if x == "onnx")
    total = k + len(pipeline_passes(pipeline)) - sum(1 for _ in _onnx_specs(pipeline))
    if not 0 <= index < max(total, len(levels)):
        raise ArtifactUnavailable(f"the pipeline has {max(total, len(levels))} pass runs; there is no pass {index}")
    if index < k:
        return onnx_model_after(model, pipeline=pipeline, index=index, input_shapes=input_shapes)
    result = api.compile(model, target=target, pipeline=cut_after_run(pipeline, index, levels), input_shapes=input_shapes,
                         verify=False, benchmark=False, backend=False, calibration_data=calibration_data)
    if result.error is not None or result.graph is None:
        msg = (result.error or {}).get("message", "no graph")
        raise ArtifactUnavailable(f"the compilation did not get past pass {index}: {msg}")
    try:
        return check_export(result.graph)
    except onnx.checker.ValidationError as exc:
        raise ArtifactUnavailable(f"the graph after pass {index} does not export to valid ONNX: {exc}") from None


class _Stop(Exception):
    def __init__(self, model: onnx.ModelProto) -> None:
        self.model = model


def onnx_model_after(model: Any, *, pipeline: str, index: int,
                     input_shapes: Mapping[str, Sequence[int]] | None = None) -> onnx.ModelProto:
    """The ONNX model as model pass run ``index`` (0-based; one of the ONNX-level runs) of ``pipeline``
    left it: the model read, its input shapes bound, the model passes run by the pass manager with an
    instrument that stops after that run. Raises ArtifactUnavailable when the passes end (or fail)
    before it."""

    class StopAfter(PassInstrument):
        def run_after_pass(self, run: PassRun) -> None:
            if run.index == index:
                raise _Stop(run.ir)  # type: ignore[arg-type]

    proto, _ = read_model(model_bytes(resolve_model(model))[0])
    proto = with_input_shapes(upgrade_opset(proto), input_shapes)
    try:
        PassManager(PassContext(input_shapes=input_shapes), [StopAfter()]).run_model(proto, parse_pipeline(pipeline))
    except _Stop as stop:
        return stop.model
    except CompileError as exc:
        raise ArtifactUnavailable(f"the model passes did not get past pass {index}: {exc.message}") from None
    raise ArtifactUnavailable(f"the model passes of this pipeline end before pass {index}")


def _onnx_specs(pipeline: str) -> Iterable[Any]:

    return parse_pipeline(pipeline).level("onnx").specs()


def _compiled(events: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    out, seen = [], set()
    for e in events:
        if e["type"] == "kernel.compiled" and e.get("llvm_ir_optimized"):
            key = e.get("symbol") or e.get("kernel")
            if key not in seen:  # kernels with the same code share one symbol
                seen.add(key)
                out.append(e)
    return out


def module_object(events: Sequence[Mapping[str, Any]], target: str) -> bytes:
    """One relocatable ELF object for ``target`` holding every distinct kernel of the compilation
    (and, when a kernel has parallel loops, the thread pool they call: ``prism_parallel_for``,
    ``prism_pool_set_threads``; ``compiler.runtime.pool_ir``).

    The kernels' optimized LLVM IR (``kernel.compiled`` ``llvm_ir_optimized``) is parsed, linked into
    one module (``llvmlite.binding.ModuleRef.link_in``) and emitted by the target's machine
    (``compiler.codegen.compile.target_machine``: the same triple, CPU, features, -O3 and PIC as the
    kernels themselves). Raises ArtifactUnavailable when the compilation compiled no kernel."""
    kernels = _compiled(events)
    if not kernels:
        raise ArtifactUnavailable("this compilation has no compiled kernels (it ended before codegen)")
    from .codegen.checks import SYMBOL as FAULT_WORD  # llvmlite with it: only when asked
    from .codegen.checks import fault_word_ir  # (the same)
    from .codegen.compile import _llvm, target_machine  # llvmlite: only when asked

    llvm = _llvm()
    t = get_target(target)
    tm = target_machine(t)
    module = None
    for e in kernels:
        part = llvm.parse_assembly(str(e["llvm_ir_optimized"]))
        if module is None:
            module = part
        else:
            module.link_in(part)
    assert module is not None
    if any("prism_parallel_for" in str(e["llvm_ir_optimized"]) for e in kernels):
        # parallel loops call the thread pool the runtime JITs (compiler.runtime.pool): its IR is
        # linked in too, so that the object (and the shared object) needs nothing of the runtime
        from .runtime.pool_ir import pool_ir

        module.link_in(llvm.parse_assembly(pool_ir(t.triple)))
    if any(FAULT_WORD in str(e["llvm_ir_optimized"]) for e in kernels):  # run-time checks write it
        module.link_in(llvm.parse_assembly(fault_word_ir(t.triple)))
    module.triple = t.triple
    module.data_layout = str(tm.target_data)
    module.verify()
    return bytes(tm.emit_object(module))


def shared_object(obj: bytes, target: str) -> bytes:
    """``obj`` (:func:`module_object`) linked into a shared library with ``cc -shared ... -lm``.

    Only for a target this host runs (its code is loadable here, ``ctypes.CDLL``); raises
    ArtifactUnavailable for a cross target or when no C compiler driver is installed."""

    t = get_target(target)
    if not t.runnable:
        raise ArtifactUnavailable(f"target {target} is a cross target ({t.triple}): its object file is offered, "
                                  "but no shared object (this server has no linker for it)")
    cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        raise ArtifactUnavailable("this server has no C compiler driver (cc) to link a shared object")
    with tempfile.TemporaryDirectory(prefix="prism-so-") as tmp:
        src, out = os.path.join(tmp, "module.o"), os.path.join(tmp, "module.so")
        with open(src, "wb") as f:
            f.write(obj)
        proc = subprocess.run([cc, "-shared", "-o", out, src, "-lm"], capture_output=True, text=True, timeout=120)
        if proc.returncode != 0:
            err = (proc.stderr.strip().splitlines() or ["no output"])[-1]
            raise CompileError("codegen", f"linking the shared object failed: {err}")
        with open(out, "rb") as f:
            return f.read()


KERNEL_FILES = (("loop_ir", "kernel.lowered", "loop.txt"), ("llvm_ir", "kernel.compiled", "llvm.ll"),
                ("llvm_ir_optimized", "kernel.compiled", "llvm.opt.ll"), ("asm", "kernel.compiled", "asm.s"))


def kernel_sources_zip(events: Sequence[Mapping[str, Any]]) -> bytes:
    """A zip with ``<kernel>/loop.txt``, ``llvm.ll``, ``llvm.opt.ll`` and ``asm.s`` per kernel (what its
    ``kernel.lowered`` and ``kernel.compiled`` events hold). Raises ArtifactUnavailable when no
    kernel was lowered."""
    texts: dict[str, dict[str, str]] = {}
    for e in events:
        for field, etype, fname in KERNEL_FILES:
            if e["type"] == etype and isinstance(e.get(field), str):
                texts.setdefault(str(e["kernel"]), {})[fname] = e[field]
    if not texts:
        raise ArtifactUnavailable("this compilation has no kernels (it ended before lowering)")
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for kernel, files in texts.items():
            safe = "".join(c if c.isalnum() or c in "._-" else "_" for c in kernel)
            for fname, text in files.items():
                zf.writestr(f"{safe}/{fname}", text)
    return buf.getvalue()
