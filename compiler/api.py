"""Prism's public compiler API (what the explorer service and the CLI call).

``compile`` runs the one staged driver (``compiler.driver``: request -> read -> ONNX-level passes ->
graph IR import -> shape specialization -> graph passes -> lowering -> codegen -> link -> run ->
verify), emitting the events of DESIGN.md "Events" synchronously through ``on_event``. It never
raises for a compile error: the result says ``ok``/``error`` and always holds exactly one terminal
event (``compile.finished`` or ``compile.failed``). The other functions describe what the compiler
offers (targets, passes, pipelines) and check a request without compiling.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from . import frontend, targets
from .driver import STAGE_KEYS, Request, compile_model
from .driver.request import legalize_model, resolve_model
from .events import EventCallback
from .frontend import ModelSource, import_model, read_model, specialize
from .frontend.dim_range import check_dim_ranges, sizes_at
from .frontend.input_values import bind_input_values
from .frontend.narrow_types import uses_narrow_types
from .frontend.specialize import bind_input_shapes
from .passes import list_passes as _list_passes
from .passes.pipeline import list_pipelines as _list_pipelines
from .passes.pipeline import parse_pipeline
from .quant.calibrate import load_calibration
from .result import REPORT_VERSION, CompileResult, json_default
from .runtime.pool import check_threads
from .version import __version__

__all__ = ["REPORT_VERSION", "STAGE_KEYS", "CompileResult", "__version__", "check_target", "compile",
           "expand_pipeline", "inspect_model", "json_default", "legalize_model", "list_passes", "list_pipelines",
           "list_targets", "resolve_model", "validate_request"]


# targets --------------------------------------------------------------------------------------
def list_targets() -> list[dict[str, Any]]:
    """``[{"name", "triple", "cpu", "features", "runnable", "note"}]`` (see ``compiler.targets``)."""
    return list(targets.list_targets())


def check_target(name: str) -> None:
    """Raise CompileError(stage="request") for an unknown target or one this host cannot run."""
    targets.check_runnable(targets.get_target(name))


def list_pipelines() -> list[dict[str, str]]:
    """The presets: ``[{"name": "O0".."O3", "text": expanded pipeline text}]``."""
    return _list_pipelines()


def expand_pipeline(text: str) -> str:
    """The canonical expanded text of a pipeline or preset (``"O1"`` -> ``"fold-constants,..."``).

    Raises CompileError(stage="request") naming an unknown pass or option and listing the valid
    ones, or a syntax error in the text.
    """
    return parse_pipeline(text).text()


def list_passes() -> list[dict[str, Any]]:
    """``[{"name", "doc", "options": [{"name", "type", "default", "doc", "allowed"}]}]`` for every pass."""
    return _list_passes()


def inspect_model(model: ModelSource) -> dict[str, Any]:
    """See :func:`compiler.frontend.inspect_model`."""
    return frontend.inspect_model(resolve_model(model))


def validate_request(model: ModelSource, *, target: str, pipeline: str,
                     input_shapes: Mapping[str, Sequence[Any]] | None, calibration_data: Any = None,
                     input_values: Mapping[str, Any] | None = None, threads: int | None = None,
                     dim_ranges: Mapping[str, tuple[int, int]] | None = None) -> dict[str, Any]:
    """Check a compile request without compiling.

    Returns ``{"target", "pipeline": expanded text, "input_shapes": {input: [int, ...]} for every
    input not bound to a value}`` and, when ``input_values`` binds any, ``"input_values": {input:
    [value, ...]}`` (flat, C order, in the input's type). Raises CompileError(stage="request") naming an unknown target, pass or option (with
    the valid ones), each unbound dim, or the input of a bad input value (unknown name, wrong count,
    a value its type cannot hold), or ``threads`` outside 1..the CPUs this process may use (given, it
    is ``"threads"`` of the result); CompileError(stage="import") for a bad model. With a ranged dim
    (``dim_ranges``, a dim name in ``input_shapes``: ``compiler.frontend.dim_range``) the shapes are
    checked at the range's maximum and returned with the name, ``"dim_ranges": {name: [min, max]}``
    beside them; a bad range is a request error naming the dim.
    """
    check_target(target)
    n_threads = check_threads(threads)
    text = parse_pipeline(pipeline).text()
    proto, _ = read_model(resolve_model(model))
    proto, values = bind_input_values(proto, input_values, input_shapes)
    input_shapes = {k: v for k, v in (input_shapes or {}).items() if k not in values} or None
    if uses_narrow_types(proto):
        proto = legalize_model(proto)[0]
    graph = import_model(proto)
    ranged = check_dim_ranges(input_shapes, dim_ranges) if dim_ranges or _named_dims(input_shapes) else []
    at_max = sizes_at(input_shapes or {}, {d: int(dim_ranges[d][1]) for d in ranged}) if ranged and dim_ranges else None
    bound = bind_input_shapes(graph, at_max or input_shapes, stage="request")
    out: dict[str, Any] = {"target": target, "pipeline": text, "input_shapes": bound}
    if ranged and dim_ranges:  # the shapes as given (with the dim's name) and the range
        out["input_shapes"] = {**bound, **{k: list(v) for k, v in (input_shapes or {}).items()}}
        out["dim_ranges"] = {d: [int(x) for x in dim_ranges[d]] for d in ranged}
    if threads is not None:
        out["threads"] = n_threads
    if values:
        out["input_values"] = {k: v.reshape(-1).tolist() for k, v in values.items()}
    if calibration_data is not None:  # arrays named and shaped as the graph inputs (compiler.quant.calibrate)
        specialize(graph, bound)
        out["calibration"] = {k: list(v.shape) for k, v in load_calibration(calibration_data, graph).items()}
    return out


def _named_dims(input_shapes: Mapping[str, Sequence[Any]] | None) -> bool:
    return any(isinstance(d, str) for s in (input_shapes or {}).values() for d in s)


def compile(
    model: ModelSource,
    *,
    target: str = "host",
    pipeline: str = "O2",
    input_shapes: Mapping[str, Sequence[Any]] | None = None,
    input_values: Mapping[str, Any] | None = None,
    dim_ranges: Mapping[str, tuple[int, int]] | None = None,
    on_event: EventCallback | None = None,
    verify: bool = True,
    benchmark: bool = True,
    check_passes: bool = False,
    backend: bool = True,
    calibration_data: Any = None,
    threads: int | None = None,
    tuning_db: Any = None,
    compare_fp32: bool | None = None,
) -> CompileResult:
    """Compile an ONNX model (bytes, path, ``ModelProto`` or a sample name) for ``target`` with
    ``pipeline``.

    ``input_shapes`` binds symbolic input dims (``{"images": [1, 3, 320, 320]}``). ``input_values``
    binds inputs to values (``{"mode": [1]}``: a number or a flat list in C order, as many as the
    input has elements, of its element type): each becomes a constant of the compiled model, so an
    ``If`` on it folds at compile time (``compiler.frontend.input_values``); the compiled model no
    longer takes it, ``result.model["input_values"]`` lists the values and verification runs ONNX
    Runtime with them. A bad value is a ``request`` error naming the input. An ``If`` whose condition
    is left to run time is compiled with both branches and decided at run time (``compiler.driver.
    control``). ``dim_ranges`` (``{"N": (1, 8)}`` with ``input_shapes={"images": ["N", 3, 224, 224]}``)
    compiles one artifact serving every size of ``N`` (``compiler.driver.dim_range``: one compilation
    per size, every kernel specialized to it; events and verification at the maximum); a bad range is
    a ``request`` error naming the dim. Events go to
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

    ``calibration_data`` (a path to an ``.npz``, its bytes, or ``{input: array [samples, *shape]}``) feeds
    the ``quantize`` pass (``compiler.quant.calibrate``); a pipeline with ``quantize`` emits
    ``model.accuracy`` after the passes and verifies against ONNX Runtime running the equivalent QDQ model.

    ``threads``: the threads the compiled model's parallel loops run on (Prism's pool,
    ``compiler.runtime.pool``), and ONNX Runtime's intra-op threads beside it; 1..the CPUs this process
    may use (``os.sched_getaffinity``), None for all of them. Outside that range: ``compile.failed``
    at stage ``request``. ``model.timed`` and ``kernel.timed`` carry ``threads``, and with more than one
    the 1-thread times ``prism_ms_1t`` / ``median_us_1t``.

    ``tuning_db`` (a JSON-lines file's path or a ``compiler.tune.database.TuningDatabase``): each
    kernel whose workload has a record for this target is scheduled by the record's best trace
    (``compiler.tune``); ``kernel.lowered`` carries ``schedule_source`` and ``tune.applied`` the count.
    A database that cannot be opened is a ``request`` error; its invalid lines and records for
    another target are skipped with warnings (``tune.applied``'s ``warnings``).

    ``compare_fp32`` (quantized; None: when benchmarked): Prism FP32 of the same model is timed too, kernel by
    kernel (``model.timed.prism_fp32_ms``, ``kernel.timed.fp32_median_us`` and a ``missed`` remark where the
    quantized kernel is slower: ``compiler.driver.fp32``); False skips that second compilation.
    """
    schedules = None
    if tuning_db is not None:
        from .tune.apply import (
            DatabaseSchedules,  # deferred: compiler.tune is a layer above the driver
        )

        schedules = DatabaseSchedules(tuning_db)  # opened and checked by the driver's request stage
    return compile_model(Request(model, target=target, pipeline=pipeline, input_shapes=input_shapes,
                                 input_values=input_values, dim_ranges=dim_ranges, verify=verify, benchmark=benchmark,
                                 check_passes=check_passes, backend=backend, calibration_data=calibration_data,
                                 threads=threads, schedules=schedules, compare_fp32=compare_fp32), on_event)
