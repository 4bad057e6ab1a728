"""One compiled program for every batch size in a range: the batch size is a run-time argument.

A :class:`BatchProgram` wraps the Program compiled for ``N = 1`` (``unit``) of a model separable
along its batch dim (``compiler.frontend.batch_split``) and the batch entry function
(``compiler.codegen.batch_entry``) that runs its kernels for ``n`` samples: every kernel that takes a
per-sample buffer in a loop bounded by ``n``, per-sample pointers advanced by one sample per
iteration, the arena's offsets the ``N = 1`` plan's times ``n``. Binding reads ``n`` from the inputs'
axis 0 (a size outside ``lo..hi``, a wrong other dim or inputs that disagree is a
CompileError(stage="request") naming the input and dim); the buffers are allocated once for ``hi``.

As a Program it describes its largest size (what the limits check and the runner's seeded inputs
read): ``inputs`` and ``values`` with axis 0 at ``hi`` for per-sample ones, ``arena_bytes`` the
``N = 1`` arena times ``hi``; ``calls`` and ``consts`` are the unit's.
"""

from __future__ import annotations

import ctypes
import functools
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import CompileError
from .buffers import aligned
from .pool import available_threads, set_threads
from .program import Program, empty, jit_for


def _at(shape: Sequence[int], n: int) -> tuple[int, ...]:
    return (int(shape[0]) * n, *(int(d) for d in shape[1:]))


@dataclass
class BatchProgram(Program):
    """``unit`` (the ``N = 1`` Program), ``per_sample`` (its value and input names whose axis 0 is the
    batch), ``dim``/``lo``/``hi`` the range; ``batch_entry`` the batch entry symbol (its object among
    ``objects``, with the unit's) and ``steps`` its per-call, per-argument sample bytes."""

    unit: Any = None
    per_sample: frozenset[str] = frozenset()
    dim: str = "N"
    lo: int = 1
    hi: int = 1
    batch_entry: str = ""
    steps: list[list[int]] = field(default_factory=list)

    def __post_init__(self) -> None:
        u = self.unit
        self.objects = dict(u.objects)
        self.inputs = [(nm, dt, _at(s, self.hi) if nm in self.per_sample else tuple(s)) for nm, dt, s in u.inputs]
        self.outputs, self.calls, self.consts = list(u.outputs), u.calls, u.consts
        self.values = {k: dict(v, shape=_at(v["shape"], self.hi)) if k in self.per_sample else v
                       for k, v in u.values.items()}
        self.arena_bytes = int(u.arena_bytes) * self.hi
        self.entry, self.entry_layout, self.const_names = "", u.entry_layout, u.const_names
        self.index_checks = u.index_checks

    def size_of(self, inputs: Sequence[np.ndarray]) -> int:
        """The batch size of ``inputs`` (graph-input order). Raises CompileError(stage="request")
        naming the input when the count is wrong, a shape is not the compiled one at some ``n`` in
        ``lo..hi``, or inputs disagree on ``n``."""
        if len(inputs) != len(self.inputs):
            raise CompileError("request", f"the model takes {len(self.inputs)} inputs, {len(inputs)} were given")
        found: tuple[str, int] | None = None
        for (name, _, _), (_, _, unit), x in zip(self.inputs, self.unit.inputs, inputs, strict=True):
            shape = tuple(np.shape(x))
            if name not in self.per_sample:
                if shape != tuple(unit):
                    raise CompileError("request", f"input {name!r} has shape {shape}; compiled for {tuple(unit)}")
                continue
            rows = int(unit[0])
            if len(shape) != len(unit) or shape[1:] != tuple(unit[1:]) or shape[0] % rows:
                raise CompileError("request", f"input {name!r} has shape {shape}; compiled for "
                                   f"({self.dim}{'' if rows == 1 else f'*{rows}'}, {', '.join(map(str, unit[1:]))})")
            n = shape[0] // rows
            if found is not None and n != found[1]:
                raise CompileError("request", f"input {name!r} has {self.dim} = {n} (axis 0), input {found[0]!r} has "
                                   f"{self.dim} = {found[1]}")
            if not self.lo <= n <= self.hi:
                raise CompileError("request", f"input {name!r} has {self.dim} = {n} (axis 0), outside the compiled "
                                   f"range {self.dim}={self.lo}..{self.hi}")
            found = found or (name, n)
        return found[1] if found else self.hi

    def bind(self, inputs: Sequence[np.ndarray]) -> BatchBound:
        return BatchBound(self, inputs)


class BatchBound:
    """``prog`` bound to memory sized for ``hi`` and to ``inputs`` (their ``n``). Offers what
    ``compiler.runtime.program.Bound`` does: ``run``, ``outputs``, ``set_inputs``, ``feed``, ``inputs``,
    ``threads``, ``calls`` (per kernel and sample, for ``n``) and ``entry`` (one native call)."""

    def __init__(self, prog: BatchProgram, inputs: Sequence[np.ndarray]) -> None:
        self.prog, u = prog, prog.unit
        jit = jit_for(prog)
        self.threads = prog.threads or available_threads()
        set_threads(self.threads)
        self._arena = aligned(max(prog.arena_bytes, 64))
        self._bufs: dict[str, np.ndarray] = {name: empty(v["dtype"], prog.values[name]["shape"])
                                             for name, v in u.values.items() if v["kind"] != "arena"}
        consts = [np.array(c, copy=True) for c in u.consts]
        self._consts = [empty(c.dtype.str, c.shape) for c in consts]
        for dst, c in zip(self._consts, consts, strict=True):
            dst[...] = c
        layout = u.entry_layout
        self._table = (ctypes.c_void_p * (len(layout.slots) + 1))()
        self._table[0] = self._arena.ctypes.data
        self._scratch: dict[tuple[int, int], np.ndarray] = {}
        self._dim = np.zeros(1, np.int64)
        for k, key in enumerate(layout.slots, start=1):
            if key[0] == "value":
                arr = self._bufs[key[1]]
            elif key[0] == "const":
                arr = self._consts[key[1]]
            elif key[0] == "dim":  # the batch size, for kernels that take it inside their loops
                arr = self._dim
            else:
                a = u.calls[key[1]]["args"][key[2]]
                copies = self.prog.hi if self.prog.steps[key[1]][key[2]] else 1  # per-sample scratch: one per sample
                arr = self._scratch.setdefault((key[1], key[2]), empty(a["dtype"], (copies, *a["shape"])))
            self._table[k] = arr.ctypes.data
        addr = jit._engine.get_function_address(prog.batch_entry)
        self._entry = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_void_p, ctypes.c_int64)(addr)
        self._kernels = [jit.function(c["symbol"], len(c["args"])) for c in u.calls]
        self.set_inputs(inputs)

    def set_inputs(self, inputs: Sequence[np.ndarray]) -> None:
        """Take ``inputs`` (checked: :meth:`BatchProgram.size_of`), copied into the input buffers."""
        self.n = self.prog.size_of(inputs)
        self._dim[0] = self.n
        self.inputs = {}
        for (name, dt, _), x in zip(self.prog.inputs, inputs, strict=True):
            arr = np.ascontiguousarray(np.asarray(x).astype(dt, copy=False))
            self.inputs[name] = arr
            buf = self._bufs.get(name)
            if buf is not None:
                buf.reshape(-1)[:arr.size] = arr.reshape(-1)

    feed = set_inputs

    @property
    def entry(self) -> Any:
        return lambda: self._run_entry()

    def _run_entry(self) -> None:
        if self._entry(ctypes.addressof(self._table), self.n) != 0:
            raise CompileError("request", f"{self.prog.dim} = {self.n} is outside the compiled range "
                               f"{self.prog.dim}={self.prog.lo}..{self.prog.hi}")

    def _base(self, call: int, arg: int) -> int:
        kind, k = self.prog.unit.entry_layout.args[call][arg]
        return self._arena.ctypes.data + k * self.n if kind == "arena" else int(self._table[k])

    @property
    def calls(self) -> list[tuple[str, Any, tuple[int, ...]]]:
        """``(kernel name, function, ())`` per kernel at the current ``n``, as the batch entry function
        calls it: the function runs the kernel once per sample (once for a kernel over shared buffers),
        so that per-kernel timing covers all ``n`` samples."""
        out: list[tuple[str, Any, tuple[int, ...]]] = []
        for ci, (call, fn, per) in enumerate(zip(self.prog.unit.calls, self._kernels, self.prog.steps, strict=True)):
            bases = [self._base(ci, ai) for ai in range(len(per))]
            ptrs = [tuple(p + i * s for p, s in zip(bases, per, strict=True)) for i in range(self.n if any(per) else 1)]
            out.append((call["name"], functools.partial(_per_sample, fn, ptrs), ()))
        return out

    def run(self, progress: Path | None = None, per_kernel: bool = False) -> None:
        """One call of the batch entry function; with ``progress`` or ``per_kernel`` one ``ctypes`` call
        per kernel and sample (``start <kernel>`` markers as ``Bound.run`` writes them)."""
        if progress is None and not per_kernel:
            self._run_entry()
            return
        calls = self.calls
        with open(progress, "a") if progress is not None else _Null() as f:
            for name, fn, ptrs in calls:
                f.write(f"start {name}\n")
                f.flush()
                fn(*ptrs)
            f.write("done\n")

    def outputs(self) -> list[np.ndarray]:
        """The graph outputs at the current ``n`` (fresh arrays)."""
        u, outs = self.prog.unit, []
        for _name, kind, payload in u.outputs:
            if kind == "input":
                outs.append(self.inputs[payload].copy())
            elif kind == "const":
                outs.append(np.array(payload))
            else:
                v = u.values[payload]
                shape = _at(v["shape"], self.n) if payload in self.prog.per_sample else tuple(v["shape"])
                count = int(np.prod(shape, dtype=np.int64))
                if v["kind"] == "arena":
                    dt = np.dtype(v["dtype"])
                    start = int(v["offset"]) * self.n
                    outs.append(self._arena[start:start + count * dt.itemsize].view(dt).reshape(shape).copy())
                else:
                    outs.append(self._bufs[payload].reshape(-1)[:count].reshape(shape).copy())
        return outs


def _per_sample(fn: Any, ptrs: list[tuple[int, ...]]) -> None:
    for p in ptrs:
        fn(*p)


class _Null:
    def __enter__(self) -> _Null:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def write(self, text: str) -> None:
        return None

    def flush(self) -> None:
        return None
