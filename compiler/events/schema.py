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
    MachineCeilings,
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


class DimRangePlan(TypedDict):
    dim: Annotated[str, Doc("The ranged dim (`--dim-range N=1..8`).")]
    min: int
    max: int
    mode: Annotated[Literal["run-time", "specialized"], Doc(
        "`run-time`: one set of kernels compiled for N=1, N a run-time argument of the entry function (each kernel "
        "over per-sample buffers in a loop of N; arena offsets the N=1 plan's times N); `specialized`: one "
        "compilation per size.")]
    message: Annotated[str, Doc("The decision and its reason (for `specialized`: the node that keeps samples "
                                "from being independent).")]


class MemoryPlanned(TypedDict):
    arena_bytes: int
    no_sharing_bytes: int
    lower_bound_bytes: int
    buffers: list[BufferPlan]
    dim_range: NotRequired[Annotated[DimRangePlan, Doc(
        "With `--dim-range` (compiler.driver.dim_range): how the range is served; the figures are at the maximum.")]]


ScheduleSource = Annotated[str, OneOf(("default", "tuned"), "ScheduleSource"), Doc(
    "Where the kernel's schedule came from: the rule-based default, or a tuning database's best record.")]


class TunedSchedule(TypedDict):
    """The tuning record a kernel's schedule came from (compiler.tune)."""

    median_us: Annotated[Number, Doc("The tuned schedule's measured median time when it was recorded, µs.")]
    default_us: Annotated[Number, Doc("The default schedule's median time in the same measurement, µs.")]
    trace: Annotated[dict[str, int | str], Doc("The schedule trace: knob name -> value (compiler.schedule.knobs).")]
    database: str
    workload: str
    found_by: NotRequired[Annotated[dict[str, str], Doc(
        "The tuning run that found the record, where the database says (a JSON-lines record's found_by: "
        "{model, host}).")]]


class KernelLowered(TypedDict):
    kernel: str
    group: str
    loop_ir: str
    schedule: Annotated[Any, Doc("The printed schedule.")]
    nodes: NotRequired[Annotated[list[str], Doc(
        "The ONNX nodes the kernel computes (the fused group's, in order): every loop-IR line's origin.")]]
    ops: NotRequired[Annotated[list[str], Doc("The ONNX op types of `nodes`, in the same order.")]]
    line_nodes: NotRequired[Annotated[list[list[int]], Doc(
        "Per line of loop_ir, the indices into `nodes` of the ONNX nodes that line's statement computes (a "
        "Conv's accumulation: the Conv; its epilogue store: the Conv and the fused Add, Relu ...); [] for "
        "header and comment lines (compiler.loops.provenance).")]]
    schedule_source: NotRequired[Annotated[ScheduleSource, Doc(
        "Present when the compilation had a tuning database (absent: the default schedule).")]]
    tuned: NotRequired[TunedSchedule]
    remarks: NotRequired[Annotated[list[Remark], Doc(
        "Special schedules the kernel did not get (kind missed, pass \"schedule\"): the node and the reason; "
        "absent when there is none.")]]


class TuneApplied(TypedDict):
    """A compilation with a tuning database: how many kernels took a tuned schedule (before kernel.lowered)."""

    database: str
    kernels: int
    tuned: int
    this_run: NotRequired[Annotated[int, Doc("Of the tuned kernels, those whose record this compilation's own tuning found.")]]
    message: Annotated[str, Doc(
        '"23 of 58 kernels on tuned schedules from the database tuning.jsonl", "7 of 39 kernels on tuned schedules '
        '(7 found by this run)", "no tuned schedules in this server\'s tuning database for these 39 kernels"')]
    warnings: Annotated[list[str], Doc("Database lines skipped (invalid, another target), each naming its line.")]


class TuneTask(TypedDict):
    kernel: Annotated[str, Doc("The first kernel of the model with this workload.")]
    workload: str
    summary: Annotated[str, Doc('The workload in one line: "Conv+Relu f32[1, 64, 56, 56] -> f32[1, 64, 56, 56]".')]
    kernels: Annotated[int, Doc("Kernels of the model with this workload.")]
    space_size: Annotated[int, Doc("Candidate schedules in its search space (product of the knobs' choices).")]
    estimated_us: Annotated[Number, Doc("The default schedule's estimated time (flops, bytes), µs: the task order.")]
    seeds: NotRequired[Annotated[int, Doc(
        "Traces from the database's records of similar workloads (same ops, other shapes) its search starts from.")]]


class TuneStarted(TypedDict):
    """A tuning job (python -m compiler tune, compiler.tune.tune_model) begins."""

    model: str
    target: str
    budget_s: Number
    threads: int
    kernels: Annotated[int, Doc("Kernels of the model.")]
    tasks: list[TuneTask]


class TuneProgress(TypedDict):
    """One batch of one tuning task: submitted (``measuring`` set, ``batch_trials`` 0) or measured."""

    kernel: str
    workload: str
    trials: Annotated[int, Doc("Candidates of this task measured so far (valid or not).")]
    trials_total: Annotated[int, Doc("Candidates of every task measured so far.")]
    batch_trials: int
    discarded: Annotated[int, Doc("Candidates of this batch discarded: invalid, crashed, timed out or miscompiled.")]
    mismatched: Annotated[int, Doc("Of those, candidates whose outputs differed from the default schedule's.")]
    best_us: Annotated[Number | None, Doc(
        "The best time of this task so far, µs: the schedule the compilation would take now, the stored candidate's "
        "or else the default's (the default schedule is a point of the space): never above default_us.")]
    default_us: Annotated[Number | None, Doc("The default schedule's median time, µs (same child).")]
    candidate_us: NotRequired[Annotated[Number | None, Doc(
        "The best candidate's time so far, µs; it may be slower than the default (then the default is kept).")]]
    stored: NotRequired[Annotated[bool, Doc(
        "A candidate beat the default (by the store margin, confirmed) and was stored; false: the default is kept.")]]
    elapsed_s: Number
    budget_s: Number
    messages: NotRequired[Annotated[list[str], Doc("Why candidates were discarded (first few).")]]
    measuring: NotRequired[Annotated[int, Doc(
        "Set when the batch is submitted (before any result): its candidates, now being measured.")]]


class TunedKernel(TypedDict):
    kernel: str
    workload: str
    default_us: Number | None
    best_us: Annotated[Number | None, Doc("The kept schedule's time, µs: the stored candidate's, else the default's.")]
    candidate_us: NotRequired[Annotated[Number | None, Doc("The best candidate's time, µs (may be above default_us).")]]
    trials: int
    trace: Annotated[dict[str, int | str], Doc("The kept schedule's trace ({}: the default schedule).")]
    stored: Annotated[bool, Doc("Whether a record was added to the database (a trace better than the default).")]


TuneReason = Annotated[str, OneOf(("budget", "stopped", "exhausted", "error"), "TuneReason"), Doc(
    "Why a tuning job ended: its budget spent (no further candidate fitted in the time left), a stop request, "
    "every search space measured (or nothing to tune), or an error (see `error`).")]


class TuneFinished(TypedDict):
    """The tuning job ended (its budget spent, every space exhausted, stopped, or an error); what was found is stored."""

    trials: int
    duration_s: Number
    stopped: Annotated[bool, Doc("Ended by a stop request before the budget was spent.")]
    reason: TuneReason
    database: str
    tuned: list[TunedKernel]
    error: NotRequired[Annotated[str, Doc(
        "Why the search could not run (one line), when the service ended it: e.g. a model compiled in parts.")]]


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
    fp32_median_us: NotRequired[Annotated[Number, Doc(
        "A quantized kernel: the median time of Prism FP32's kernels for the same layers, same run settings "
        "(compiler.driver.fp32).")]]
    fp32_kernels: NotRequired[Annotated[list[str], Doc("Those FP32 kernels' names.")]]
    remarks: NotRequired[Annotated[list[Remark], Doc(
        "A quantized kernel slower than Prism FP32's for the same layers: a missed remark with both times.")]]


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
    prism_fp32_ms: NotRequired[Annotated[Number | None, Doc(
        "A quantized compilation: Prism's FP32 compilation of the same model, timed after it (compiler.driver.fp32).")]]
    notes: NotRequired[list[str]]
    ceilings: NotRequired[Annotated[MachineCeilings, Doc(
        "The worker's measured peak FP32 FLOP/s and memory bandwidth at these threads (the roofline's ceilings).")]]


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
                                             '"time_limit", "queue_lost", "internal", "compiler_lost" (the '
                                             'compiling child process died), "memory_cap" (refused under the '
                                             "worker's memory cap).")]],
})
CompileFailed.__doc__ = "The compilation failed: the stage, a one-line message and, where known, the place."


EVENTS: tuple[EventSpec, ...] = (
    EventSpec("compile.started", CompileStarted, "import"),
    EventSpec("pass.started", PassStarted, "passes"),
    EventSpec("pass.finished", PassFinished, "passes"),
    EventSpec("graph.fused", GraphFused, "passes"),
    EventSpec("memory.planned", MemoryPlanned, "passes"),
    EventSpec("tune.applied", TuneApplied, "lowering"),
    EventSpec("kernel.lowered", KernelLowered, "lowering"),
    EventSpec("kernel.compiled", KernelCompiled, "codegen"),
    EventSpec("kernel.timed", KernelTimed, "run"),
    EventSpec("model.timed", ModelTimed, "run"),
    EventSpec("model.verified", ModelVerified, "verify"),
    EventSpec("model.accuracy", ModelAccuracy, "passes"),
    EventSpec("tune.started", TuneStarted, "run"),
    EventSpec("tune.progress", TuneProgress, "run"),
    EventSpec("tune.finished", TuneFinished, "run"),
    EventSpec("compile.finished", CompileFinished, None, terminal=True),
    EventSpec("compile.failed", CompileFailed, None, terminal=True),
)
