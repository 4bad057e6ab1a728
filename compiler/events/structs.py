"""The structs inside event payloads (a tensor, a remark, a fused node, a buffer, a layer's accuracy ...),
declared as TypedDicts in the vocabulary of :mod:`compiler.events.spec`. The event payloads that use
them, the stages and the list of event types are in :mod:`compiler.events.schema`.
"""

# No `from __future__ import annotations`: Python 3.11's TypedDict reads NotRequired only from real annotations.
from typing import Annotated, Any, Literal, NotRequired, TypedDict

from .spec import Doc, Named, open_struct

Dim = Annotated[int | str | None, Named("Dim", "A dimension: a size, a symbolic name, or null when unknown.")]
Number = int | float


class TensorInfo(TypedDict):
    """One graph input or output as declared in the model."""

    name: str
    dtype: Annotated[str, Doc('ONNX element type name, e.g. "float32".')]
    shape: Annotated[list[Dim] | None, Doc("null when the model does not declare the rank.")]


class StorageValue(TypedDict):
    """One graph input or output whose declared (storage) type is narrower than the type Prism computes in."""

    name: str
    role: Literal["input", "output"]
    storage: Annotated[str, Doc('The declared element type, e.g. "float16", "bfloat16", "float8e4m3fn".')]
    compute: Annotated[str, Doc('The element type the kernels compute in, e.g. "float32".')]


class StorageSummary(TypedDict):
    """``model.storage`` (compiler.runtime.narrow_io.describe_storage): only for a model with narrow element
    types; ``notes`` are sentences for the user ("float16 storage computed in float32: ...")."""

    values: list[StorageValue]
    notes: list[str]


@open_struct
class ModelInfo(TypedDict):
    """The model as read: its graph name, content hash, default-domain opset and declared inputs/outputs."""

    name: str
    sha256: Annotated[str, Doc("sha256 of the model bytes (hex).")]
    opset: NotRequired[int]
    inputs: list[TensorInfo]
    outputs: list[TensorInfo]
    storage: NotRequired[StorageSummary]
    input_values: NotRequired[Annotated[dict[str, list[int | float | bool]], Doc(
        "Inputs bound to constant values (compiler.frontend.input_values), each flattened; the compiled model "
        "no longer takes them.")]]


RemarkKind = Annotated[Literal["applied", "missed", "analysis"], Named("RemarkKind")]


# A TypedDict's functional form: one field is named "pass", a Python keyword.
Remark = TypedDict("Remark", {
    "kind": RemarkKind,
    "pass": Annotated[str, Doc("The pass that made the decision.")],
    "message": Annotated[str, Doc("The decision in words, with its numbers.")],
    "nodes": Annotated[list[str], Doc("The graph nodes it is about.")],
    "data": NotRequired[dict[str, Any]],
})
Remark.__doc__ = "One optimization decision: ``nodes`` are graph node names, ``data`` its numbers."

PassOptions = Annotated[dict[str, Any], Named("PassOptions", "A pass's effective options by name.")]


@open_struct
class PassStats(TypedDict):
    """Graph statistics after a pass (``compiler.passes.manager.graph_stats``) plus the pass's own counters."""

    nodes: NotRequired[int]
    groups: NotRequired[int]
    constant_bytes: NotRequired[int]
    ir_changed: NotRequired[Annotated[bool, Doc("The printed IR differs from the one before the pass.")]]


class ControlBody(TypedDict):
    """A branch or body of a run-time control-flow node, compiled once (compiler.driver.control)."""

    name: Annotated[str, Doc('The part\'s label, e.g. "select.then_branch".')]
    kernels: Annotated[list[str], Doc('Its kernels, named "<part>/<kernel>" as their kernel events.')]


class ControlInfo(TypedDict):
    """How an If, Loop or Scan left to run time is run."""

    decision: Annotated[str, Doc("In words: what runs at run time and why (which bound input value would decide it: `--input-value` on the command line, `input_values` in the API).")]
    bodies: list[ControlBody]


class ControlDecision(TypedDict):
    """One run-time control-flow node: its name, op and ControlInfo's decision and body names."""

    node: str
    op: str
    decision: str
    bodies: list[str]


class FusedNode(TypedDict):
    id: str
    name: str
    op_type: str
    group: str | None
    attributes: NotRequired[dict[str, Any]]
    control: NotRequired[Annotated[ControlInfo, Doc("Only on an If/Loop/Scan run at run time.")]]


class FusedEdge(TypedDict):
    source: str
    target: str
    value: str
    dtype: str
    shape: list[Dim]


class FusedGroup(TypedDict):
    id: str
    kernel: str
    kind: str
    nodes: list[str]


class BufferPlan(TypedDict):
    value: str
    offset: Annotated[int, Doc("Byte offset in the arena.")]
    size: Annotated[int, Doc("Bytes.")]
    first: Annotated[int, Doc("Index of the first step that uses the buffer.")]
    last: Annotated[int, Doc("Index of the last step that uses the buffer.")]


class AccuracyLayer(TypedDict):
    """One layer of the accuracy report (compiler/quant/session.py): int8 with its SQNR, or kept in fp32."""

    node: str
    op: str | None
    output: str | None
    precision: str
    sqnr_db: Annotated[Number | None, Doc("20·log10(‖x‖/‖x−y‖) against FP32 in dB; 999 when equal; null for fp32.")]
    max_abs_error: Number | None


@open_struct
class AccuracyOutput(TypedDict):
    """Whole-model figures per output against FP32 (compiler/quant/accuracy.py ``compare``)."""

    sqnr_db: Number | None
    max_abs_error: Annotated[Number | None, Doc("null when the reduced-precision output is not finite (overflow).")]
    max_rel_error: Annotated[Number | None, Doc("null when the reduced-precision output is not finite (overflow).")]
    top1: NotRequired[Number]
    top5: NotRequired[Number]


class AccuracyFallback(TypedDict):
    node: str
    layer_sqnr_db: Number
    input_sqnr_db: NotRequired[Annotated[Number | None, Doc(
        "The lowest SQNR of the layer's quantized inputs (dB; null: none); the fallback returns the layer that "
        "adds the most noise (input_sqnr_db - layer_sqnr_db) first.")]]
    output_sqnr_db_before: Number
    output_sqnr_db_after: Number
    passed: bool


class Calibration(TypedDict):
    method: str
    samples: int
    random: Annotated[bool, Doc("Random inputs (no calibration data was given).")]
    activation: str
    per_channel: bool
    weight_qmax: NotRequired[Annotated[int, Doc(
        "The int8 weights' range [-weight_qmax, weight_qmax]: 127, or 64 with reduce-range (7 bits, ONNX "
        "Runtime's reduce_range; the default on AVX2 targets without VNNI).")]]


class AccuracyCriterion(TypedDict):
    min_sqnr_db: Number
    min_top1: Number
    passed: bool
    reasons: list[str]


@open_struct
class OutputVerification(TypedDict):
    """One output's comparison with ONNX Runtime (compiler/runtime/child.py ``_compare``): its own
    ``rtol``/``atol`` (a narrow output's are its storage type's); ``message`` says why it failed outright.
    Errors are null where they were not finite (the service stores no NaN or infinity)."""

    passed: bool
    max_abs_error: Number | None
    max_rel_error: Number | None
    rtol: NotRequired[Number]
    atol: NotRequired[Number]
    scale: NotRequired[Number]
    atol_effective: NotRequired[Number]
    quantization_step: NotRequired[Annotated[Number, Doc("One quantization step of the output (a quantized model).")]]
    sqnr_db: NotRequired[Annotated[Number | None, Doc("SQNR against the reference in dB (a quantized model).")]]
    min_sqnr_db: NotRequired[Annotated[Number, Doc("The SQNR at which the output passes regardless of atol.")]]
    storage: NotRequired[str]
    message: NotRequired[str]


class MachineCeilings(TypedDict):
    """The worker's roofline ceilings, measured by Prism-generated kernels (``compiler.runtime.ceilings``)."""

    peak_gflops: Annotated[Number, Doc("Peak FP32 GFLOP/s of a vector FMA kernel at `threads` threads.")]
    peak_gbps: Annotated[Number, Doc("Memory bandwidth in GB/s of a streaming copy (bytes read + written).")]
    threads: Annotated[int, Doc("The threads both kernels ran on at once.")]
    target: Annotated[str, Doc("The target the kernels were generated for.")]
    lanes: Annotated[int, Doc("f32 lanes per vector of the FMA kernel.")]
    copy_bytes: Annotated[int, Doc("Bytes per array of the copy.")]
    method: Annotated[str, Doc("How they were measured, in words.")]
    l2_gbps: NotRequired[Annotated[Number, Doc("GB/s of the same copy with both arrays inside the L2 (absent: cache not reported).")]]
    l2_bytes: NotRequired[Annotated[int, Doc("Bytes of one L2 cache.")]]
    l3_gbps: NotRequired[Annotated[Number, Doc("GB/s of the same copy with both arrays inside the L3 (absent: cache not reported).")]]
    l3_bytes: NotRequired[Annotated[int, Doc("Bytes of one L3 cache.")]]
    host: NotRequired[Annotated[str, Doc(
        "The host name of the machine that measured them: a result served from the cache keeps the first worker's.")]]
    cpu: NotRequired[Annotated[str, Doc('That machine\'s CPU: LLVM\'s name and the model it reports ("znver3 (AMD EPYC 7763 ...)").')]]
