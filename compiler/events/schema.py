"""The event schema, defined once: every event type, its payload fields, the stages and the terminal types.

This is DESIGN.md "Events" as code. :class:`~compiler.events.stream.EventStream` validates every
payload against it when the compiler emits (:func:`compiler.events.validate.check_payload`), the
service takes its stage and terminal-type lists from it, and ``python -m compiler.events.typescript``
prints the browser's types from it (``frontend/src/events.generated.ts``; a test fails when the
checked-in file differs). Fields may be added, never renamed or removed: add a field here (with a
``Doc``), regenerate the TypeScript, and emit it. The structs nested in payloads are in
:mod:`compiler.events.structs`.
"""

# No `from __future__ import annotations`: Python 3.11's TypedDict reads NotRequired only from real annotations.
from typing import Annotated, Any, Literal, NotRequired, TypedDict

from .spec import Doc, EventSpec, KeysOf, Named, OneOf
from .structs import (
    AccuracyCriterion,
    AccuracyFallback,
    AccuracyLayer,
    AccuracyOutput,
    BufferPlan,
    Calibration,
    ControlDecision,
    FusedEdge,
    FusedGroup,
    FusedNode,
    ModelInfo,
    Number,
    OutputVerification,
    PassOptions,
    PassStats,
    Remark,
)

#: ``compile.finished``'s ``stage_ms`` keys, in pipeline order (the browser's stage strip)
STAGE_KEYS: tuple[str, ...] = ("import", "passes", "lowering", "codegen", "run", "verify")

#: the ``stage`` of a ``compile.failed`` event raised by the compiler (``compiler.errors.CompileError``)
FAILURE_STAGES: tuple[str, ...] = ("request", "import", "shape", "passes", "lowering", "codegen", "run", "verify")

#: the ``stage`` of a ``compile.failed`` the service writes when the compiler could not (a lost queue message)
SERVICE_FAILURE_STAGES: tuple[str, ...] = ("queue",)

# --- event payloads (the TypeScript interfaces are named after these classes) ---


class CompileStarted(TypedDict):
    model: ModelInfo
    target: Annotated[str, Doc('The target name, e.g. "host", "x86-64-v3".')]
    pipeline: Annotated[str, Doc("The pipeline with presets expanded, e.g. `fold-constants,fuse-ops{max-group-size=16}`.")]
    compiler_version: NotRequired[str]


PassLevel = Annotated[Literal["onnx", "graph"], Named(
    "PassLevel", "The IR a pass rewrites: the ONNX model before import (`onnx`) or the graph IR (`graph`).")]
PASS_LEVEL_DOC = "Absent in logs from before ONNX-level passes existed: those are all graph passes."
ITERATION_DOC = "The round of its `fixed-point` group (1-based); absent outside a group."


class PassStarted(TypedDict):
    index: Annotated[int, Doc("The run's position in the whole pipeline (a fixed-point group's passes once per round).")]
    name: str
    options: PassOptions
    level: NotRequired[Annotated[PassLevel, Doc(PASS_LEVEL_DOC)]]
    iteration: NotRequired[Annotated[int, Doc(ITERATION_DOC)]]


class PassFinished(TypedDict):
    index: int
    name: str
    options: PassOptions
    duration_ms: Number
    changed: bool
    ir: Annotated[str, Doc("Printed IR after the pass: the graph IR (one node a line), or for `level: \"onnx\"` the "
                           "ONNX model as `onnx.printer` writes it (large tensors' data left out).")]
    stats: PassStats
    remarks: list[Remark]
    level: NotRequired[Annotated[PassLevel, Doc(PASS_LEVEL_DOC)]]
    iteration: NotRequired[Annotated[int, Doc(ITERATION_DOC)]]


class GraphFused(TypedDict):
    nodes: list[FusedNode]
    edges: list[FusedEdge]
    groups: list[FusedGroup]
    control: NotRequired[Annotated[list[ControlDecision], Doc(
        "A model with run-time If/Loop/Scan (compiler.driver.control): one decision per such node; the nodes "
        "and groups are every top-level part's, group ids and kernels prefixed with their part.")]]


class MemoryPlanned(TypedDict):
    arena_bytes: int
    no_sharing_bytes: int
    lower_bound_bytes: int
    buffers: list[BufferPlan]


class KernelLowered(TypedDict):
    kernel: str
    group: str
    loop_ir: str
    schedule: Annotated[Any, Doc("The printed schedule.")]
    nodes: NotRequired[Annotated[list[str], Doc(
        "The ONNX nodes the kernel computes (the fused group's, in order): every loop-IR line's origin.")]]


class KernelCompiled(TypedDict):
    kernel: str
    llvm_ir: str
    llvm_ir_optimized: str
    asm: str
    compile_ms: Number
    cached: NotRequired[Annotated[bool, Doc("Served from the kernel cache (an identical kernel compiled before).")]]
    symbol: NotRequired[Annotated[str, Doc("The kernel's symbol in the object code (identical kernels share one).")]]
    asm_loop_lines: NotRequired[Annotated[list[int], Doc(
        "Per line of asm, the kernel.lowered loop_ir line (1-based) its instruction came from (its .loc); 0: none.")]]
    llvm_ir_loop_lines: NotRequired[Annotated[list[int], Doc(
        "Per line of llvm_ir, the loop_ir line of its !dbg location; 0: none.")]]
    llvm_ir_optimized_loop_lines: NotRequired[Annotated[list[int], Doc(
        "Per line of llvm_ir_optimized, the loop_ir line of its !dbg location; 0: none.")]]


class KernelTimed(TypedDict):
    kernel: str
    median_us: Number
    flops: int
    bytes: int
    gflops: Number
    gbps: Number
    threads: NotRequired[Annotated[int, Doc("The threads median_us was measured at (Prism's pool; compile option threads).")]]
    median_us_1t: NotRequired[Annotated[Number, Doc("The same kernel's median time at 1 thread, when threads > 1.")]]


class ModelTimed(TypedDict):
    prism_ms: Number
    onnxruntime_ms: Annotated[Number | None, Doc("null when ONNX Runtime could not run the model.")]
    ratio: Annotated[Number | None, Doc("prism_ms / onnxruntime_ms: below 1 means Prism is faster.")]
    repeats: int
    prism_kernel_calls_ms: NotRequired[Annotated[Number, Doc(
        "The same kernels run one ctypes call each from Python (prism_ms: one call of the entry function).")]]
    threads: NotRequired[Annotated[int, Doc(
        "The threads Prism's parallel loops and ONNX Runtime's intra-op pool ran on, in the same child.")]]
    prism_ms_1t: NotRequired[Annotated[Number, Doc("prism_ms at 1 thread, when threads > 1.")]]
    precision: NotRequired[Annotated[str, Doc('Present for a quantized compilation: the precision Prism ran at ("int8", "bf16", "fp16").')]]
    onnxruntime_int8_ms: NotRequired[Annotated[Number | None, Doc("ONNX Runtime on the equivalent QDQ model, same run.")]]
    ratio_int8: NotRequired[Annotated[Number | None, Doc("prism_ms / onnxruntime_int8_ms.")]]
    notes: NotRequired[list[str]]


class ModelAccuracy(TypedDict):
    dtype: str
    method: str
    samples: int
    calibration: Calibration
    layers: list[AccuracyLayer]
    outputs: dict[str, AccuracyOutput]
    criterion: AccuracyCriterion
    fallbacks: list[AccuracyFallback]


class ModelVerified(TypedDict):
    """The comparison with ONNX Runtime (compiler/driver/run.py ``verify``). Three states: verified and
    ``passed: true`` (the outputs match); verified and ``passed: false`` (they differ); ``verified: false``,
    ``passed: null`` and null errors (ONNX Runtime could not run the model; ``message`` says why)."""

    passed: bool | None
    verified: NotRequired[Annotated[bool, Doc("Absent in logs from before it existed (they always verified).")]]
    message: NotRequired[str]
    notes: NotRequired[Annotated[list[str], Doc("Remarks on how the reference ran.")]]
    max_abs_error: Number | None
    max_rel_error: Number | None
    rtol: Annotated[Number | None, Doc("The loosest of the outputs' tolerances.")]
    atol: Number | None
    atol_floor: NotRequired[Number]
    outputs: NotRequired[dict[str, OutputVerification]]


class CompileFinished(TypedDict):
    duration_ms: Number
    stage_ms: Annotated[dict[str, Number], KeysOf(STAGE_KEYS, "Stage"), Doc("Wall time per stage, ms.")]


# The functional form: one field is named "pass", a Python keyword.
CompileFailed = TypedDict("CompileFailed", {
    "stage": Annotated[str, OneOf(FAILURE_STAGES + SERVICE_FAILURE_STAGES, "FailureStage"),
                       Doc("The stage that failed.")],
    "message": Annotated[str, Doc("One line naming what is wrong (node, op, attribute, limit).")],
    "pass": NotRequired[str],
    "node": NotRequired[str],
    "op": NotRequired[Annotated[str, Doc("The ONNX op of `node`, where known.")]],
    "kernel": NotRequired[str],
    "attribute": NotRequired[str],
    "reason": NotRequired[Annotated[str, Doc('Set by the service when it ended the log itself: "worker_lost", '
                                             '"time_limit", "queue_lost", "internal".')]],
})
CompileFailed.__doc__ = "The compilation failed: the stage, a one-line message and, where known, the place."


EVENTS: tuple[EventSpec, ...] = (
    EventSpec("compile.started", CompileStarted, "import"),
    EventSpec("pass.started", PassStarted, "passes"),
    EventSpec("pass.finished", PassFinished, "passes"),
    EventSpec("graph.fused", GraphFused, "passes"),
    EventSpec("memory.planned", MemoryPlanned, "passes"),
    EventSpec("kernel.lowered", KernelLowered, "lowering"),
    EventSpec("kernel.compiled", KernelCompiled, "codegen"),
    EventSpec("kernel.timed", KernelTimed, "run"),
    EventSpec("model.timed", ModelTimed, "run"),
    EventSpec("model.verified", ModelVerified, "verify"),
    EventSpec("model.accuracy", ModelAccuracy, "passes"),
    EventSpec("compile.finished", CompileFinished, None, terminal=True),
    EventSpec("compile.failed", CompileFailed, None, terminal=True),
)
