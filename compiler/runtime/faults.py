"""Run-time checks inside generated kernels: a fault word the kernels set, read after each run.

What the ONNX spec calls an error but only the data shows, where the data is computed inside the
model (an index operand that is a graph input is checked before the run: ``index_checks``):

- an index outside its axis, ``[-s, s-1]`` (Gather, GatherElements, GatherND);
- integer division or modulo by zero (Div, Mod on integer tensors): undefined in the spec; ONNX Runtime
  (1.31, CPU) stops the run with "Integer division by zero" / "Integer modulo by zero".

The lowering wraps the value it computes in a ``check`` call (``compiler.loops.registry.LowerCtx.checked``):
the kernel still computes a value that stays in memory (the index clamped, the divisor 1) and, where
the condition holds in any lane that is stored, writes the node's code into the process-wide word
``prism_fault`` (a branch to a cold block: nothing is written while the data is good;
``compiler.codegen.checks``). The word is :data:`WORD`, registered as an LLVM process symbol beside the
thread pool's (``compiler.runtime.pool``). ``Bound.run`` clears it before a run and, when a kernel set
it, raises CompileError(stage="run") naming the node (:func:`raise_if_set`). One word per process: two
programs running at once in one process (threads) may see each other's fault.

Cost: one or two compares, a lane reduction and a branch that is not taken per vector of the checked
value. ``scripts/bench_checks.py`` (one thread, medians of 100 runs, a shared 2-core machine), checked
over unchecked: Gather of 65,536 computed indices (64 MiB out) 1.04, GatherElements 512 x 1024 1.02,
an int32 Div over 1M values 1.10.
"""

from __future__ import annotations

import ctypes
from collections.abc import Mapping

from ..errors import CompileError

SYMBOL = "prism_fault"
WORD = ctypes.c_int64(0)


def clear() -> None:
    """Reset the word before a run."""
    WORD.value = 0


def raise_if_set(faults: Mapping[int, tuple[str, str, str]]) -> None:
    """After a run: raise CompileError(stage="run", node=..., op=...) with the message of the code a
    kernel stored (``faults``: ``{code: (node, op, message)}``, ``Program.faults``); nothing when none did."""
    code = int(WORD.value)
    if not code:
        return
    WORD.value = 0
    node, op, message = faults.get(code, ("", "", f"a run-time check in the generated code failed (code {code})"))
    raise CompileError("run", message, node=node or None, op=op or None)
