"""What the driver's stages read and fill in: the :class:`Request` and the :class:`Compilation`.

A stage (``compiler.driver.stages``) reads the fields the stages before it filled in and fills in
its own; nothing else is passed between stages. Each field says which stage sets it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from onnx import ModelProto

from ..events import EventStream
from ..frontend import ModelSource
from ..ir import Graph
from ..passes import PassContext
from ..passes.manager import PassManager
from ..passes.pipeline import Pipeline
from ..targets import Target

if TYPE_CHECKING:  # the back end's types: importing them loads llvmlite (see compiler.driver.stages)
    from ..codegen.compile import CompiledKernel
    from ..loops.lower import LoweredKernel
    from ..runtime.program import Program


@dataclass(frozen=True)
class Request:
    """One compilation as its caller asks for it.

    Attributes:
        model: ONNX bytes, a path, a ``ModelProto`` or a sample name (``compiler.samples``).
        target: a target name (``compiler.targets``).
        pipeline: pipeline text or a preset (``O0``..``O3``).
        input_shapes: ``{input name: [dim, ...]}`` binding symbolic input dims.
        dim_ranges: ``{dim name: (min, max)}`` for a dim named in ``input_shapes`` (one artifact for
            every size: ``compiler.driver.dim_range``).
        input_values: ``{input name: value(s)}`` binding inputs to constant values
            (``compiler.frontend.input_values``): the compiled model no longer takes them.
        verify, benchmark: run the program against ONNX Runtime / time it (the ``run`` and
            ``verify`` stages; only on a target runnable here).
        check_passes: after every graph pass, run the exported IR in ONNX Runtime and compare.
        backend: lower and generate code (False: stop after the graph passes).
        link: always link a :class:`~compiler.runtime.program.Program`, also without ``verify`` and
            ``benchmark`` (the ONNX backend runs it itself).
        upgrade_opset: convert a model below opset 7 with ``onnx.version_converter`` (the ONNX
            backend, as ONNX's test runner feeds such models); ``compiler.compile`` refuses them.
        kernel_events: emit ``kernel.lowered``/``kernel.compiled`` (their loop IR, LLVM IR and
            assembly texts); the ONNX backend, which keeps no events, does not print them.
        codegen_threads: kernels compiled at once (llvmlite releases the GIL inside LLVM).
        threads: the threads the program's parallel loops, and ONNX Runtime beside it, run on
            (1..the CPUs this process may use; None: all of them, ``os.sched_getaffinity``).
        compare_fp32: for a quantized compilation, also compile and time Prism's FP32 compilation of the model
            and compare it kernel by kernel (``compiler.driver.fp32``); None: whenever it is benchmarked.
        schedules: where tuned schedules come from (``compiler.driver.lower.ScheduleSource``, e.g. a
            tuning database: ``compiler.tune.apply.DatabaseSchedules``); None: every default schedule.
    """

    model: ModelSource
    target: str = "host"
    pipeline: str = "O2"
    input_shapes: Mapping[str, Sequence[Any]] | None = None  # ints; a dim name where dim_ranges ranges it
    input_values: Mapping[str, Any] | None = None
    dim_ranges: Mapping[str, tuple[int, int]] | None = None
    verify: bool = True
    benchmark: bool = True
    check_passes: bool = False
    backend: bool = True
    link: bool = False
    upgrade_opset: bool = False
    kernel_events: bool = True
    codegen_threads: int = 2
    threads: int | None = None
    calibration_data: Any = None  # the quantize pass's calibration inputs (compiler.quant.calibrate)
    schedules: Any = None  # tuned schedules (compiler.driver.lower.ScheduleSource; compiler.tune.apply)
    compare_fp32: bool | None = None  # quantized: time Prism FP32 beside it (compiler.driver.fp32)


@dataclass
class Compilation:
    """The state of one compilation, filled in stage by stage (``compiler.driver.stages.STAGES``).

    ``request``, ``events`` and ``stage_ms`` are given; the other fields are set by the stage named
    in their comment. ``stage_ms`` holds the wall time in ms per stage key (``STAGE_KEYS``).
    """

    request: Request
    events: EventStream
    stage_ms: dict[str, float] = field(default_factory=dict)
    # request
    pipeline: Pipeline | None = None
    target: Target | None = None
    # read
    model: dict[str, Any] | None = None  # the compile.started ``model`` payload
    proto: ModelProto | None = None  # the model as read (then as each later stage leaves it)
    storage: dict[str, Any] | None = None  # {"io": {"inputs", "outputs"}, "summary"}: narrow storage types
    input_values: dict[str, Any] = field(default_factory=dict)  # {input: array}: inputs bound to values
    # onnx-passes (the pass manager and context serve the graph passes too)
    passes: PassManager | None = None
    ctx: PassContext | None = None
    reference: ModelProto | None = None  # the model ONNX Runtime runs to verify and --check-passes
    unbounded: ModelProto | None = None  # comp.proto before bound-outputs
    trims: list[tuple[int, str, int]] = field(default_factory=list)  # bounded outputs (bound-outputs)
    flat_outputs: list[str] = field(default_factory=list)  # graph outputs before bounding
    sequence_layout: dict[str, Any] = field(default_factory=dict)  # compiler.frontend.sequence_io
    # control-flow
    control: list[dict[str, Any]] | None = None  # run-time If/Loop/Scan decisions (compiler.driver.control)
    # import, specialize
    graph: Graph | None = None
    # passes
    checks: list[dict[str, Any]] = field(default_factory=list)  # --check-passes records
    # lowering, codegen, link, run
    kernels: list[LoweredKernel] = field(default_factory=list)
    compiled: list[CompiledKernel] = field(default_factory=list)
    program: Program | None = None  # a ControlProgram (compiler.runtime.control) for run-time control flow
    measured: dict[str, Any] = field(default_factory=dict)  # compiler.runtime.runner's result
