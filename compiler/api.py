"""Prism's public compiler API (what the explorer service and the CLI call).

``compile`` runs: request check -> import -> shape specialization -> graph passes -> back end
(lowering, codegen, run, verify; ``compiler/build.py`` where present), emitting the events of
DESIGN.md "Events" synchronously through ``on_event``. It never raises for a compile error: the
result says ``ok``/``error`` and always holds exactly one terminal event (``compile.finished`` or
``compile.failed``).
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from onnx import ModelProto

from .errors import CompileError
from .events import EventCallback, EventStream
from .frontend import ModelSource, describe_io, import_model, read_model, specialize
from .frontend.importer import check_opset, default_opset
from .frontend.narrow_types import uses_narrow_types
from .frontend.specialize import bind_input_shapes
from .ir import Graph
from .passes import PassContext
from .passes.pipeline import parse_pipeline

STAGE_KEYS = ("import", "passes", "lowering", "codegen", "run", "verify")
REPORT_VERSION = 1


def _compute_version() -> str:
    h = hashlib.sha256()
    root = Path(__file__).resolve().parent
    for p in sorted(root.rglob("*.py")):
        h.update(str(p.relative_to(root)).encode())
        h.update(p.read_bytes())
    return "0.1.0+" + h.hexdigest()[:12]


__version__ = _compute_version()


# targets --------------------------------------------------------------------------------------
def list_targets() -> list[dict[str, Any]]:
    """``[{"name", "triple", "cpu", "features", "runnable", "note"}]`` (see ``compiler.targets``)."""
    from . import targets

    return list(targets.list_targets())


def check_target(name: str) -> None:
    """Raise CompileError(stage="request") for an unknown target or one this host cannot run."""
    from . import targets

    targets.check_runnable(targets.get_target(name))


def list_pipelines() -> list[dict[str, str]]:
    """The presets: ``[{"name": "O0".."O3", "text": expanded pipeline text}]``."""
    from .passes.pipeline import list_pipelines as _lp

    return _lp()


def expand_pipeline(text: str) -> str:
    """The canonical expanded text of a pipeline or preset (``"O1"`` -> ``"fold-constants,..."``).

    Raises CompileError(stage="request") naming an unknown pass or option and listing the valid
    ones, or a syntax error in the text.
    """
    return parse_pipeline(text).text()


def list_passes() -> list[dict[str, Any]]:
    """``[{"name", "doc", "options": [{"name", "type", "default", "doc"}]}]`` for every pass."""
    from .passes import list_passes as _lp

    return _lp()


def inspect_model(model: ModelSource) -> dict[str, Any]:
    """See :func:`compiler.frontend.inspect_model`."""
    from .frontend import inspect_model as _im

    return _im(resolve_model(model))


def validate_request(model: ModelSource, *, target: str, pipeline: str,
                     input_shapes: Mapping[str, Sequence[int]] | None) -> dict[str, Any]:
    """Check a compile request without compiling.

    Returns ``{"target", "pipeline": expanded text, "input_shapes": {input: [int, ...]} for every
    input}``. Raises CompileError(stage="request") naming an unknown target, pass or option (with
    the valid ones) or each unbound dim; CompileError(stage="import") for a bad model.
    """
    check_target(target)
    text = parse_pipeline(pipeline).text()
    proto, _ = read_model(resolve_model(model))
    if uses_narrow_types(proto):
        proto = legalize_model(proto)[0]
    graph = import_model(proto)
    bound = bind_input_shapes(graph, input_shapes, stage="request")
    return {"target": target, "pipeline": text, "input_shapes": bound}


# result ---------------------------------------------------------------------------------------
@dataclass
class CompileResult:
    """The outcome of :func:`compile`.

    Attributes:
        ok: True when the compilation finished.
        error: the ``compile.failed`` payload (stage, message, pass, node ...) or None.
        events: every event emitted, in ``seq`` order.
        graph: the graph IR after the passes (None if import failed).
        stage_ms: wall time per stage in ms (import, passes, lowering, codegen, run, verify).
        checks: with ``check_passes``, one record per stage checked against ONNX Runtime:
            ``{"after": "import" | pass name, "passed": bool, "problem": str | None}``.
    """

    ok: bool = False
    error: dict[str, Any] | None = None
    events: list[dict[str, Any]] = field(default_factory=list)
    graph: Graph | None = None
    target: str = ""
    pipeline: str = ""
    model: dict[str, Any] | None = None
    stage_ms: dict[str, float] = field(default_factory=dict)
    duration_ms: float = 0.0
    checks: list[dict[str, Any]] = field(default_factory=list)

    def of_type(self, type_: str) -> list[dict[str, Any]]:
        return [e for e in self.events if e["type"] == type_]

    @staticmethod
    def _payload(event: dict[str, Any] | None) -> dict[str, Any] | None:
        if event is None:
            return None
        return {k: v for k, v in event.items() if k not in ("seq", "type", "ts")}

    def to_dict(self) -> dict[str, Any]:
        """The CLI's ``--json`` report (DESIGN.md "Command line"): ``{"version": 1, "model", "target",
        "pipeline", "passes", "fusion", "memory", "kernels", "timing", "verification", "stage_ms",
        "error"}``; kernels merge the kernel.lowered/compiled/timed payloads per kernel name."""
        kernels: dict[str, dict[str, Any]] = {}
        for e in self.events:
            if e["type"] in ("kernel.lowered", "kernel.compiled", "kernel.timed"):
                kernels.setdefault(str(e.get("kernel")), {}).update(self._payload(e) or {})
        last = lambda t: self._payload(self.of_type(t)[-1]) if self.of_type(t) else None  # noqa: E731
        return {
            "version": REPORT_VERSION,
            "compiler_version": __version__,
            "model": self.model,
            "target": self.target,
            "pipeline": self.pipeline,
            "passes": [self._payload(e) for e in self.of_type("pass.finished")],
            "fusion": last("graph.fused"),
            "memory": last("memory.planned"),
            "kernels": list(kernels.values()),
            "timing": last("model.timed"),
            "verification": last("model.verified"),
            "stage_ms": dict(self.stage_ms),
            "duration_ms": self.duration_ms,
            "error": self.error,
            "checks": list(self.checks),
        }

    def to_json(self, indent: int | None = None) -> str:
        """:meth:`to_dict` as JSON text."""
        return json.dumps(self.to_dict(), indent=indent, default=_json_default)


def _json_default(o: Any) -> Any:
    import numpy as np

    if isinstance(o, np.integer):
        return int(o)
    if isinstance(o, np.floating):
        return float(o)
    if isinstance(o, np.ndarray):
        return o.tolist()
    return str(o)


def resolve_model(model: ModelSource) -> ModelSource:
    """A sample name (``compiler.samples``) that is not an existing path -> the sample's file
    (fetched and cached on first use); anything else unchanged."""
    if isinstance(model, str) and not os.path.exists(model):
        from . import samples

        if model in samples.SAMPLES:
            return str(samples.fetch(model))
    return model


def _model_bytes(model: ModelSource) -> tuple[bytes | ModelProto, str]:
    if isinstance(model, ModelProto):
        data = model.SerializeToString()
        return model, hashlib.sha256(data).hexdigest()
    if isinstance(model, str | os.PathLike):
        p = Path(model)
        if not p.is_file():
            from .samples import SAMPLES

            hint = "" if p.suffix or os.sep in str(p) else f" and is not a sample (samples: {', '.join(SAMPLES)})"
            raise CompileError("import", f"model file {str(p)!r} does not exist{hint}")
        return model, hashlib.sha256(p.read_bytes()).hexdigest()  # type: ignore[return-value]
    data = bytes(model)
    return data, hashlib.sha256(data).hexdigest()


def bound_model(proto: ModelProto, graph: Graph) -> tuple[ModelProto, list[tuple[int, str, int]]]:
    """``proto`` with its data-dependent graph outputs in bounded form (``compiler.frontend.bounded``).

    A NonZero, Compress, Unique or NonMaxSuppression whose results are graph outputs read by no other
    node becomes its result padded to an upper bound plus an int64 count output (appended after the
    graph outputs); ``graph`` is ``proto`` imported and specialized, read for the shapes and dtypes of
    its values. Returns ``(model, trims)`` as :func:`compiler.frontend.bounded.bound_outputs` (the
    model unchanged and ``[]`` when no node applies); the runtime cuts each output to its count with
    :func:`compiler.frontend.bounded.trim_outputs`. Any other use of these ops is left as it is (and
    fails in lowering with a CompileError naming the node, unless its input folds to a constant).
    """
    from .frontend.bounded import BOUNDED_OPS, bound_outputs

    outs = {o.name for o in proto.graph.output}
    if not any(n.op_type in BOUNDED_OPS and any(o in outs for o in n.output) for n in proto.graph.node):
        return proto, []
    typed = [v for v in graph.values() if v.type is not None and v.type.is_static]
    shapes = {v.name: [int(d) for d in v.type.shape] for v in typed}  # type: ignore[union-attr]
    return bound_outputs(proto, shapes, {v.name: v.type.dtype for v in typed})  # type: ignore[union-attr]


def legalize_model(model: ModelProto) -> tuple[ModelProto, dict[str, Any]]:
    """``model`` (with narrow element types) legalized, and its storage types.

    The model is rewritten by :func:`compiler.frontend.narrow_types.legalize`: computed in float32,
    int8 or uint8, with explicit ``prism.NarrowCast`` rounding steps. The graph IR built from it has
    compute-type graph inputs and outputs. Returns ``(legalized model, {"io": {"inputs": {name: elem},
    "outputs": {name: elem}}, "summary": {"values": [{"name", "role", "storage", "compute"}], "notes":
    [str]}})``: the declared storage types of the narrow graph inputs and outputs
    (``compiler.runtime.narrow_io``), in which the runner feeds ONNX Runtime and to which it encodes
    Prism's outputs before comparing; ``summary`` is ``model["storage"]`` of the result.
    """
    from .frontend.narrow_types import legalize
    from .ops.narrow import DOMAIN, OP
    from .runtime.narrow_io import describe_storage, storage_io

    io = storage_io(model)
    legal = legalize(model)
    steps = sum(1 for n in legal.graph.node if n.op_type == OP and n.domain == DOMAIN)
    return legal, {"io": io, "summary": describe_storage(io, steps)}


def pass_checker(reference: ModelProto, compiled: ModelProto, graph: Graph, input_shapes: Any,
                 records: list[dict[str, Any]], trims: list[tuple[int, str, int]],
                 storage: dict[str, Any] | None) -> Any:
    """The ``check_passes`` checker (``compiler.passes.check.PassChecker``), or None when it cannot run.

    A legalized model (``storage``) is checked against its legalized form (``compiled``: the same
    float32 compute, which is what the passes must preserve) when ONNX Runtime can run that: when it
    has no ``prism.NarrowCast`` step (float16). With rounding steps the checks are skipped, and one
    record says why (``{"after": "import", "passed": None, "problem": None, "skipped": reason}``).
    """
    from .passes.check import PassChecker

    if storage is None:
        return PassChecker(reference, graph, input_shapes, records=records, trims=trims)
    from .ops.narrow import DOMAIN

    if any(n.domain == DOMAIN for n in compiled.graph.node):
        records.append({"after": "import", "passed": None, "problem": None,
                        "skipped": "the legalized model has prism.NarrowCast rounding steps, which ONNX Runtime "
                                   "cannot run; the passes were not checked"})
        return None
    return PassChecker(compiled, graph, input_shapes, records=records, trims=trims)


def compile(
    model: ModelSource,
    *,
    target: str = "host",
    pipeline: str = "O2",
    input_shapes: Mapping[str, Sequence[int]] | None = None,
    on_event: EventCallback | None = None,
    verify: bool = True,
    benchmark: bool = True,
    check_passes: bool = False,
    backend: bool = True,
) -> CompileResult:
    """Compile an ONNX model (bytes, path, ``ModelProto`` or a sample name) for ``target`` with
    ``pipeline``.

    ``input_shapes`` binds symbolic input dims (``{"images": [1, 3, 320, 320]}``). Events go to
    ``on_event`` synchronously as they happen. ``check_passes`` runs the exported model after every
    pass in ONNX Runtime and compares with the original (rtol 1e-4, atol 1e-5). ``backend=False``
    stops after the graph passes (no lowering, codegen, run or verify). Never raises a
    CompileError: failures end in a ``compile.failed`` event and ``result.error``.

    Narrow element types (float16, bfloat16, float8, float4e2m1, float8e8m0, int4/int2 ...): the model
    is legalized (:func:`legalize_model`), so the IR, the passes and the kernels compute in float32
    (int8/uint8 for int4/int2) with explicit ``prism.NarrowCast`` rounding steps; ``result.model``
    keeps the declared types and adds ``"storage"`` ({"values": [{"name", "role", "storage",
    "compute"}], "notes": ["float16 storage computed in float32 ..."]}); ``graph.metadata
    ["storage_types"]`` holds ``{"inputs": {name: elem}, "outputs": {name: elem}}`` for the graph
    inputs and outputs whose declared type is narrow (their IR type is the compute type). Verification
    feeds ONNX Runtime the original model in the storage types and compares with Prism's outputs
    encoded to them, at the storage type's tolerance (``compiler.runtime.narrow_io``); when ONNX
    Runtime cannot run the model (no CPU kernel for a bfloat16 op ...), ``model.verified`` says
    ``verified: false`` with the reason instead of failing the compilation.
    """
    events = EventStream(on_event)
    result = CompileResult(events=events.events, target=target)
    stage_ms = {k: 0.0 for k in STAGE_KEYS}
    result.stage_ms = stage_ms
    t_start = time.perf_counter()
    stage = "request"
    try:
        check_target(target)
        pipe = parse_pipeline(pipeline)
        result.pipeline = pipe.text()
        stage = "import"
        t0 = time.perf_counter()
        src, sha = _model_bytes(resolve_model(model))
        proto, _ = read_model(src)
        opset = default_opset(proto)
        check_opset(opset)
        ins, outs = describe_io(proto)
        result.model = {"name": proto.graph.name or "model", "sha256": sha, "opset": opset,
                        "inputs": ins, "outputs": outs}
        storage = None
        if uses_narrow_types(proto):  # narrow storage, wider compute (compiler.frontend.narrow_types)
            legal, storage = legalize_model(proto)
            result.model["storage"] = storage["summary"]
        events.emit("compile.started", model=result.model, target=target, pipeline=result.pipeline,
                    compiler_version=__version__)
        from .runtime.execute import (
            prepare_model,  # If/Loop/Scan, LSTM/GRU/RNN, function ops (issue 6)
        )

        proto = reference = prepare_model(proto, input_shapes)  # ONNX Runtime runs it (narrow types and all)
        if storage is not None:
            proto = prepare_model(legal, input_shapes)
        graph = import_model(proto)
        if storage is not None:
            graph.metadata["storage_types"] = storage["io"]
        stage = "shape"
        specialize(graph, input_shapes)
        legal = proto  # the prepared, legalized model (the model itself when it has no narrow type)
        proto, trims = bound_model(proto, graph)
        if trims:  # the padded form is what the passes, the IR printer and the back end see
            graph = import_model(proto)
            specialize(graph, input_shapes)
        result.graph = graph
        stage_ms["import"] = (time.perf_counter() - t0) * 1000.0

        stage = "passes"
        t0 = time.perf_counter()
        ctx = PassContext(target=target)
        after = None
        if check_passes:
            checker = pass_checker(reference, legal, graph, input_shapes, result.checks, trims, storage)
            after = checker.after_pass if checker is not None else None
        from .passes.manager import run_pipeline

        run_pipeline(graph, pipe, ctx, events, after_pass=after)
        stage_ms["passes"] = (time.perf_counter() - t0) * 1000.0

        # ---- back end hook (owned by the back-end engineer; keep this call site small) ----
        if backend and importlib.util.find_spec(f"{__package__}.build") is not None:
            stage = "lowering"
            from . import build

            build.run_backend(graph, ctx, events, target=target, verify=verify, benchmark=benchmark,
                              model_proto=reference, input_shapes=input_shapes, stage_ms=stage_ms, trims=trims,
                              storage=storage["io"] if storage is not None else None)
        # ---- end of back end hook ----
        result.duration_ms = round((time.perf_counter() - t_start) * 1000.0, 3)
        events.emit("compile.finished", duration_ms=result.duration_ms,
                    stage_ms={k: round(v, 3) for k, v in stage_ms.items()})
        result.ok = True
    except CompileError as exc:
        _fail(events, result, exc.to_dict(), t_start)
    except RecursionError:
        _fail(events, result, {"stage": stage, "message": "internal error: recursion too deep (model too deep?)"},
              t_start)
    except Exception as exc:  # an internal bug must still end the stream with compile.failed
        msg = " ".join(f"internal error: {type(exc).__name__}: {exc}".split())
        _fail(events, result, {"stage": stage, "message": msg[:500]}, t_start)
    return result


def _fail(events: EventStream, result: CompileResult, payload: dict[str, Any], t_start: float) -> None:
    result.ok = False
    result.duration_ms = round((time.perf_counter() - t_start) * 1000.0, 3)
    result.error = payload
    events.emit("compile.failed", **payload)
