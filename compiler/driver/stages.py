"""The staged driver: every entry point compiles through :func:`run_stages` over :data:`STAGES`.

The stages, in order (each runs at most once per compilation)::

    request      check the target and parse the pipeline              compiler.driver.request
    read         read the model, describe it, emit compile.started    compiler.driver.request
    dim-range    a ranged dim: the model compiled once per size        compiler.driver.dim_range
                 (then the stages onnx-passes ... link do not run)
    onnx-passes  ONNX-level rewrites on the ModelProto                compiler.driver.prepare
    control-flow run-time If/Loop/Scan: the model compiled in parts   compiler.driver.control
                 (then the stages import ... link do not run)
    import       the graph IR from the rewritten model                compiler.driver.frontend
    specialize   bind the input shapes, infer every type              compiler.driver.frontend
    passes       the graph pipeline (compiler.passes)                 compiler.driver.frontend
    lowering     loop IR and schedules per kernel                     compiler.driver.lower
    codegen      LLVM IR, assembly and object code per kernel         compiler.driver.lower
    link         the Program: kernels, call list, memory plan         compiler.driver.run
    run          run it against ONNX Runtime in a child; time it      compiler.driver.run
    verify       compare the outputs, emit model.verified             compiler.driver.run

A :class:`Stage` is data: its name, the CompileError stage an unexpected error inside it reports
(``compiler.errors.STAGES``), the ``stage_ms`` key its wall time adds to (``compiler.events.STAGE_KEYS``, the
``compile.finished`` payload), the function that runs it (``module:function``, imported when the
stage first runs: the back-end stages load llvmlite, which a caller that only inspects models or
stops after the graph passes never needs) and when it runs (a predicate of the request). Callers:
``compiler.compile`` (``compiler.api``), the ONNX backend (``compiler.backend``, through
:func:`compiler.driver.compile_program`; the conformance runner uses that backend), the CLI and the
explorer's task (both through ``compiler.compile``).
"""

from __future__ import annotations

import importlib
import time
from collections.abc import Callable
from dataclasses import dataclass

from ..errors import CompileError
from ..frontend.origin import place_error
from ..runtime.limits import memory_error_message
from .state import Compilation

StageFn = Callable[[Compilation], None]


def _always(c: Compilation) -> bool:
    return True


def _backend(c: Compilation) -> bool:
    return c.request.backend


def _runs(c: Compilation) -> bool:  # code runs here only for a target this host runs
    r = c.request
    return r.backend and (r.verify or r.benchmark) and c.target is not None and c.target.runnable


def _links(c: Compilation) -> bool:
    return ((c.request.backend and c.request.link) or _runs(c)) and _whole(c)


def _whole(c: Compilation) -> bool:  # one graph IR for the model: not compiled in parts (control flow, dim range)
    return c.control is None and c.program is None


def _whole_backend(c: Compilation) -> bool:
    return _backend(c) and _whole(c)


def _verifies(c: Compilation) -> bool:
    return _runs(c) and c.request.verify


@dataclass(frozen=True)
class Stage:
    """One step of the driver (see the module docstring).

    Attributes:
        name: the stage's name (``compiler.driver.STAGES`` order).
        fails_as: the ``CompileError`` stage of an unexpected error raised inside it.
        timed_as: the ``stage_ms`` key its wall time adds to (None: not timed).
        target: ``"module:function"`` (relative to ``compiler.driver``) that runs it.
        when: whether it runs, given what the stages before it found; a skipped stage adds no time.
    """

    name: str
    fails_as: str
    timed_as: str | None
    target: str
    when: Callable[[Compilation], bool] = _always

    def function(self) -> StageFn:
        module, _, name = self.target.partition(":")
        fn: StageFn = getattr(importlib.import_module(f"{__package__}.{module}"), name)
        return fn


STAGES: tuple[Stage, ...] = (
    Stage("request", "request", None, "request:check_request"),
    Stage("read", "import", "import", "request:read"),
    Stage("dim-range", "request", None, "dim_range:compile_dim_range"),
    Stage("onnx-passes", "import", "import", "prepare:run_onnx_passes", _whole),
    Stage("control-flow", "lowering", None, "control:compile_control", _whole),
    Stage("import", "import", "import", "frontend:import_graph", _whole),
    Stage("specialize", "shape", "import", "frontend:specialize_graph", _whole),
    Stage("passes", "passes", "passes", "frontend:run_graph_passes", _whole),
    Stage("lowering", "lowering", "lowering", "lower:lower", _whole_backend),
    Stage("codegen", "codegen", "codegen", "lower:codegen", _whole_backend),
    Stage("link", "lowering", "run", "run:link_stage", _links),
    Stage("run", "run", "run", "run:run", _runs),
    Stage("verify", "verify", "verify", "run:verify", _verifies),
)


def run_stages(comp: Compilation, stages: tuple[Stage, ...] = STAGES) -> None:
    """Run every stage of ``stages`` that applies to ``comp.request``, in order, adding each one's
    wall time (ms) to ``comp.stage_ms[stage.timed_as]``.

    Raises CompileError: the one a stage raised, or, for any other exception, one with the stage's
    ``fails_as`` and the exception's type and message ("internal error: ..."); a RecursionError
    (a model nested too deep for Python's stack) and a MemoryError (over the process's address-space
    limit: ``compiler.runtime.limits.memory_error_message``) say so.
    """
    for stage in stages:
        if not stage.when(comp):
            continue
        fn = stage.function()
        t0 = time.perf_counter()
        try:
            fn(comp)
        except CompileError as exc:  # about a node inlined from a control-flow body: named as the user wrote it
            placed = place_error(comp.proto, exc)
            if placed is exc:
                raise
            raise placed from None
        except MemoryError as exc:  # over the process's RLIMIT_AS (compiler.runtime.limits)
            raise CompileError(stage.fails_as, memory_error_message(exc)) from None
        except RecursionError:
            raise CompileError(stage.fails_as, "internal error: recursion too deep (model too deep?)") from None
        except Exception as exc:  # an internal bug still ends in a CompileError naming the stage
            msg = " ".join(f"internal error: {type(exc).__name__}: {exc}".split())
            raise CompileError(stage.fails_as, msg[:500]) from exc
        finally:
            if stage.timed_as is not None:
                key = stage.timed_as
                comp.stage_ms[key] = comp.stage_ms.get(key, 0.0) + (time.perf_counter() - t0) * 1e3
