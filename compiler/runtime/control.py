"""Runtime control flow: a model run as compiled parts with ``If``, ``Loop`` and ``Scan`` between them.

When a model keeps an ``If`` whose condition, or a ``Loop``/``Scan`` whose trip count or condition, is
known only at run time (``compiler.driver.control`` builds it), it is compiled as a
:class:`ControlProgram`: steps in the model's order, each a compiled part (a
:class:`~compiler.runtime.program.Program`, or a nested ControlProgram) or a control-flow node whose
branches or body are compiled parts. Running it (:class:`ControlBound`), as ONNX Runtime's and TVM
Relax VM's executors do, evaluates an ``If`` condition and runs only the branch taken; a ``Loop`` calls
its body once per iteration (the body compiled once as kernels, bound to memory once, its
loop-carried values fed back, at most the trip count ``M`` iterations while the condition holds;
zero iterations give the initial values and empty scan outputs; where the driver compiled a loop
function for it, ``compiler.runtime.native_loop``, the iterations run in generated code, else each
is dispatched from here); a ``Scan`` calls its body per slice
of its scan inputs (``scan_input_axes``, ``scan_input_directions``) and stacks the per-iteration
outputs (``scan_output_axes``, ``scan_output_directions``). Semantics: the ONNX specs of If, Loop
(opset 11+) and Scan (opset 9+).

Values between parts are numpy arrays (each part has its own arena). A ControlProgram offers what
the runtime's child and limits read of a Program: ``inputs``, ``outputs``, ``arena_bytes``,
``values``, ``calls`` and ``consts`` (the parts' together).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import CompileError
from .native_loop import run_native, run_native_scan
from .pool import available_threads
from .program import Program, bind, check_inputs


@dataclass
class Part:
    """A compiled sub-model and its wiring: ``inputs`` are the outer (or step-local) values fed to
    its graph inputs in order, ``outputs`` the names its graph outputs define in order."""

    program: Any  # Program | ControlProgram
    inputs: list[str]
    outputs: list[str]
    label: str = ""


@dataclass
class InvalidBranch:
    """The program of an ``If`` branch or a ``Loop`` body (``op``) that does not compile at the
    compiled shapes (its condition or trip count is decided at run time, so it may never run): taking
    it raises CompileError(stage="run") with ``message``, which names the node."""

    message: str
    op: str = "If"
    arena_bytes: int = 0
    calls: list[Any] = field(default_factory=list)
    values: dict[str, Any] = field(default_factory=dict)
    consts: list[Any] = field(default_factory=list)
    threads: int | None = None


@dataclass
class Step:
    """One step: ``kind`` ``part`` (run ``parts[0]``), ``If`` (``inputs[0]`` the condition, ``parts``
    then/else), ``Loop`` (``inputs`` = [M or "", cond or "", carried...], ``parts[0]`` the body taking
    ``[iteration, cond, carried..., captured...]``) or ``Scan`` (``inputs`` = [states..., scans...]).
    ``attrs``: Loop ``n_carried``, ``scan_shapes`` (per-iteration shape and dtype of each scan output,
    for zero iterations), ``captured``; Scan ``n_state``, ``in_axes``, ``in_dirs``, ``out_axes``,
    ``out_dirs``, ``scan_shapes``, ``captured``."""

    kind: str
    name: str
    parts: list[Part]
    inputs: list[str]
    outputs: list[str]
    attrs: dict[str, Any] = field(default_factory=dict)


@dataclass
class ControlProgram(Program):
    """A model with runtime control flow (see the module docstring; picklable). A Program whose
    ``steps`` run it: ``inputs``/``outputs`` are the model's (outputs ``[(name, "value", name)]``);
    ``arena_bytes``, ``calls``, ``values`` (heap) and ``consts`` are its parts' together (every part
    is bound at once), for the limits checked before a run (``compiler.runtime.limits``); it has no
    entry function of its own (each part has one)."""

    steps: list[Step] = field(default_factory=list)
    constants: dict[str, np.ndarray] = field(default_factory=dict)  # initializers a step reads (a Loop's M ...)

    def __post_init__(self) -> None:
        parts = self.parts()
        self.arena_bytes = sum(int(p.arena_bytes) for p in parts)
        self.calls = [c for p in parts for c in p.calls]
        self.values = {k: v for p in parts for k, v in p.values.items() if v["kind"] == "heap"}
        self.consts = [c for p in parts for c in p.consts] + list(self.constants.values())

    def parts(self) -> list[Any]:
        return [p.program for s in self.steps for p in s.parts]

    def bind(self, inputs: Sequence[np.ndarray]) -> ControlBound:
        return ControlBound(self, inputs)


class _Runner:
    """A part bound to memory on its first call, its inputs replaced on later ones."""

    def __init__(self, part: Part) -> None:
        self.part = part
        self.bound: Any = None
        self.native_fn: Any = None  # a native Loop's function over this binding (compiler.runtime.native_loop)

    def prepare(self, arrays: list[np.ndarray]) -> Any:
        """The part bound to ``arrays`` (bound on the first call, fed on later ones), not run."""
        if isinstance(self.part.program, InvalidBranch):
            raise CompileError("run", self.part.program.message, node=self.part.label.rsplit(".", 1)[0],
                               op=self.part.program.op)
        if self.bound is None:
            self.bound = bind(self.part.program, arrays)
        else:  # the arrays have the dtypes and shapes compiled for (checked on the first call)
            self.bound.feed(arrays)
        return self.bound

    def __call__(self, arrays: list[np.ndarray]) -> list[np.ndarray]:
        self.prepare(arrays).run()
        return self.bound.outputs()


class ControlBound:
    """``prog`` bound for ``inputs`` (one array per graph input, checked as a Program's are). Offers
    what ``compiler.runtime.program.Bound`` does: ``run``, ``outputs``, ``set_inputs``, ``inputs``,
    ``threads``, ``calls`` (the bound parts' kernels) and ``entry`` (None: :meth:`run` runs the steps)."""

    def __init__(self, prog: ControlProgram, inputs: Sequence[np.ndarray]) -> None:
        self.prog = prog
        self.entry = None
        self.threads = prog.threads or available_threads()
        for p in prog.parts():  # every part's parallel loops on the program's threads
            p.threads = prog.threads
        self.set_inputs(inputs)
        self._runners = [[_Runner(p) for p in s.parts] for s in prog.steps]
        self._env: dict[str, np.ndarray] = {}

    def feed(self, inputs: Sequence[np.ndarray]) -> None:
        self.set_inputs(inputs)

    def set_inputs(self, inputs: Sequence[np.ndarray]) -> None:
        checked = check_inputs(self.prog, inputs)  # a scalar comes back one-dimensional
        self.inputs = {n: x.reshape(shape) for (n, _, shape), x in zip(self.prog.inputs, checked, strict=True)}

    def run(self, progress: Path | None = None, per_kernel: bool = False) -> None:
        """Run every step (module docstring). With ``progress``, append ``start <step>`` before each
        and ``done`` at the end, as ``Bound.run`` does per kernel. Raises CompileError(stage="run")
        for a condition that is not one element or a Loop body whose carried value changes shape."""
        env = {**self.prog.constants, **self.inputs}
        fd = os.open(progress, os.O_WRONLY | os.O_CREAT | os.O_APPEND) if progress is not None else None
        try:
            for step, runners in zip(self.prog.steps, self._runners, strict=True):
                if fd is not None:
                    os.write(fd, f"start {step.kind} {step.name}\n".encode())
                outs = _STEPS[step.kind](step, runners, env)
                env.update((n, v) for n, v in zip(step.outputs, outs, strict=True) if n)
            if fd is not None:
                os.write(fd, b"done\n")
        finally:
            if fd is not None:
                os.close(fd)
        self._env = env

    def outputs(self) -> list[np.ndarray]:
        return [np.array(self._env[name]) for name, _, _ in self.prog.outputs]

    @property
    def calls(self) -> list[tuple[str, Any, tuple[int, ...]]]:
        """The kernel calls of every part bound so far (a part binds on its first run: a branch never
        taken has none), named ``<part>/<kernel>`` as the compiler's kernel events, for timing each
        kernel on its own; the model's time is :meth:`run`'s."""
        return [(f"{r.part.label}/{name}", fn, ptrs) for rs in self._runners for r in rs if r.bound is not None
                for name, fn, ptrs in r.bound.calls]


def _scalar(step: Step, value: np.ndarray, what: str) -> Any:
    if value.size != 1:
        raise CompileError("run", f"{step.kind} {step.name!r}: its {what} has {value.size} elements; the spec asks for one")
    return value.reshape(-1)[0]


def _run_part(step: Step, runners: list[_Runner], env: dict[str, np.ndarray]) -> list[np.ndarray]:
    return runners[0]([env[n] for n in step.parts[0].inputs])


def _run_if(step: Step, runners: list[_Runner], env: dict[str, np.ndarray]) -> list[np.ndarray]:
    k = 0 if bool(_scalar(step, env[step.inputs[0]], "condition")) else 1
    return runners[k]([env[n] for n in step.parts[k].inputs])


def _run_loop(step: Step, runners: list[_Runner], env: dict[str, np.ndarray]) -> list[np.ndarray]:
    trip, cond_name = step.inputs[0], step.inputs[1]
    n_c = step.attrs["n_carried"]
    limit = int(_scalar(step, env[trip], "trip count M")) if trip else None
    cond = bool(_scalar(step, env[cond_name], "condition")) if cond_name else True
    carried = [env[n] for n in step.inputs[2:]]
    captured = [env[n] for n in step.attrs["captured"]]
    if "native" in step.attrs and cond and (limit is None or limit > 0):  # iterations in generated code
        done = run_native(step, runners[0], limit, carried, captured)
        if done is not None:
            return done
    scans: list[list[np.ndarray]] = [[] for _ in step.attrs["scan_shapes"]]
    i = 0
    while cond and (limit is None or i < limit):
        outs = runners[0]([np.array(i, np.int64), np.array(cond), *carried, *captured])
        cond = bool(_scalar(step, outs[0], "body's condition output"))
        for k, (old, new) in enumerate(zip(carried, outs[1:1 + n_c], strict=True)):
            if old.shape != new.shape:
                raise CompileError("run", f"Loop {step.name!r}: loop-carried value {k} changed shape from "
                                   f"{list(old.shape)} to {list(new.shape)} in iteration {i}")
        carried = outs[1:1 + n_c]
        for per, v in zip(scans, outs[1 + n_c:], strict=True):
            per.append(v)
        i += 1
    stacked = [np.stack(per) if per else np.zeros((0, *shape), dtype)
               for per, (shape, dtype) in zip(scans, step.attrs["scan_shapes"], strict=True)]
    return [*carried, *stacked]


def _run_scan(step: Step, runners: list[_Runner], env: dict[str, np.ndarray]) -> list[np.ndarray]:
    a = step.attrs
    n = a["n_state"]
    states = [env[x] for x in step.inputs[:n]]
    scans = [env[x] for x in step.inputs[n:]]
    captured = [env[x] for x in a["captured"]]
    length = scans[0].shape[a["in_axes"][0]] if scans else 0
    if "native" in a and length > 0:  # iterations in generated code (compiler.runtime.native_loop)
        return run_native_scan(step, runners[0], states, scans, captured)
    per: list[list[np.ndarray]] = []
    for t in range(length):
        slices = [np.take(x, length - 1 - t if d else t, axis=ax) for x, ax, d in zip(scans, a["in_axes"], a["in_dirs"],
                                                                                      strict=True)]
        outs = runners[0]([*states, *slices, *captured])
        states = outs[:n]
        per.append(outs[n:])
    stacked = []
    for j, (ax, d) in enumerate(zip(a["out_axes"], a["out_dirs"], strict=True)):
        vals = [p[j] for p in per][::-1] if d else [p[j] for p in per]
        shape, dtype = a["scan_shapes"][j]
        stacked.append(np.stack(vals, axis=ax) if vals else np.zeros((*shape[:ax], 0, *shape[ax:]), dtype))
    return [*states, *stacked]


_STEPS = {"part": _run_part, "If": _run_if, "Loop": _run_loop, "Scan": _run_scan}
