"""Execute a linked :class:`~compiler.runtime.program.Program` on given inputs, returning its outputs.

This is the runtime path behind :mod:`compiler.backend` (the ``onnx.backend.base.Backend``
interface) and the conformance runner; the Program comes from the driver
(``compiler.driver.compile_program``): the kernel objects, the call list with every parameter's
binding and where each graph output comes from (a kernel-written value, a graph input, or a constant).

:func:`run_program` binds and runs it in this process (``compiler.runtime.program.Bound``);
:func:`run_program_isolated` does the same in a fresh interpreter (``compiler.runtime.child``, started
by ``compiler.runtime.process.run_child``) so that a crash of generated code becomes a
``CompileError(stage="run")`` naming the kernel, as it does for ``compiler.runtime.runner``.

Inputs are cast to the graph inputs' dtypes; outputs are numpy arrays of the graph outputs'
dtypes and shapes (``bool`` is one byte per element in memory, as numpy's). Dtypes the code
generator handles: f32, f64, i64, i32, i8, u8, bool.
"""

from __future__ import annotations

import pickle
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from .index_checks import check_index_inputs
from .limits import check_program
from .process import run_child, run_dir
from .program import NP_DTYPES, Program, bind, check_inputs

__all__ = ["NP_DTYPES", "Program", "check_inputs", "run_program", "run_program_isolated"]


def run_program(prog: Program, inputs: Sequence[np.ndarray], progress: Path | None = None) -> list[np.ndarray]:
    """Execute ``prog`` on ``inputs`` (one array per graph input, in order) in this process
    (``compiler.runtime.program.Bound``).

    Returns the graph outputs (fresh arrays). With ``progress``, appends ``start <kernel>`` before
    each kernel and ``done`` at the end (unbuffered), for crash attribution by a parent process.
    Raises CompileError(stage="request") when the inputs do not match what ``prog`` was compiled for.
    """
    _check_indices(prog, inputs)
    bound = bind(prog, inputs)
    bound.run(progress)
    return bound.outputs()


def _check_indices(prog: Program, inputs: Sequence[np.ndarray]) -> None:
    """The index inputs of a linked Program against their axes (``compiler.runtime.index_checks``)."""
    checks = getattr(prog, "index_checks", None)
    names = [n for n, _, _ in getattr(prog, "inputs", [])]
    if checks and len(names) == len(inputs):
        check_index_inputs(checks, dict(zip(names, inputs, strict=True)))


def run_program_isolated(prog: Program, inputs: Sequence[np.ndarray], timeout_s: float = 300.0) -> list[np.ndarray]:
    """:func:`run_program` in a fresh interpreter (``compiler.runtime.child``, the process that also
    verifies and times for ``compiler.runtime.runner``). A crash (signal, non-zero exit) or a timeout
    raises ``CompileError(stage="run")`` naming the kernel that was running; this process carries on."""
    check_inputs(prog, inputs)
    _check_indices(prog, inputs)
    check_program(prog)
    with run_dir("exec") as d:
        with open(d / "job.pkl", "wb") as f:
            pickle.dump({"program": prog, "inputs": [np.asarray(x) for x in inputs], "measure": None}, f,
                        protocol=pickle.HIGHEST_PROTOCOL)
        run_child(d, timeout_s, after="the executing process")
        with open(d / "outputs.pkl", "rb") as f:
            return pickle.load(f)
