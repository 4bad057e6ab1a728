"""One artifact for a range of sizes of one input dim (``compiler.driver.dim_range`` builds it).

A :class:`DimRangeProgram` holds one compiled Program per size ``N`` of the ranged dim (every kernel
specialized to its ``N``, as TensorRT's optimization profiles hold kernels per profile; kernels taking
``N`` as a run-time parameter are not implemented). Binding it to inputs reads ``N`` from their
shapes and binds that size's Program; a size outside the range, or inputs that disagree on ``N``, is
a CompileError(stage="request") naming the input. As a Program it describes its largest size: its
``inputs``, ``arena_bytes``, ``calls``, ``values`` and ``consts`` are those of the maximum (what the
limits check and what the runner's seeded inputs use).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import CompileError
from .program import Program, bind


@dataclass
class DimRangeProgram(Program):
    """``programs`` {N: Program} for ``dim`` from ``lo`` to ``hi``; ``axes`` {input: [axes of dim]}."""

    programs: dict[int, Any] = field(default_factory=dict)
    dim: str = "N"
    lo: int = 1
    hi: int = 1
    axes: dict[str, list[int]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        top = self.programs[self.hi]
        self.inputs, self.outputs = list(top.inputs), list(top.outputs)
        self.arena_bytes, self.calls, self.values, self.consts = top.arena_bytes, top.calls, top.values, top.consts

    def size_of(self, inputs: Sequence[np.ndarray]) -> int:
        """The size of the ranged dim in ``inputs`` (graph-input order). Raises CompileError naming the
        input when the count of inputs is wrong, the inputs disagree or the size is outside the range."""
        names = [n for n, _, _ in self.inputs]
        if len(inputs) != len(names):
            raise CompileError("request", f"the model takes {len(names)} inputs, {len(inputs)} were given")
        found: tuple[str, int] | None = None
        for name, x in zip(names, inputs, strict=True):
            shape = np.shape(x)
            for ax in self.axes.get(name, []):
                n = int(shape[ax]) if ax < len(shape) else -1
                if found is not None and n != found[1]:
                    raise CompileError("request", f"input {name!r} has {self.dim} = {n} (axis {ax}), input "
                                       f"{found[0]!r} has {self.dim} = {found[1]}")
                found = found or (name, n)
                if not self.lo <= n <= self.hi:
                    raise CompileError("request", f"input {name!r} has {self.dim} = {n} (axis {ax}), outside the "
                                       f"compiled range {self.dim}={self.lo}..{self.hi}")
        assert found is not None
        return found[1]

    def bind(self, inputs: Sequence[np.ndarray]) -> DimRangeBound:
        return DimRangeBound(self, inputs)


class DimRangeBound:
    """The Program of the inputs' size bound to them (``compiler.runtime.program.bind``); rebound when
    :meth:`set_inputs` brings another size. Offers what a ``Bound`` does, delegated."""

    def __init__(self, prog: DimRangeProgram, inputs: Sequence[np.ndarray]) -> None:
        self.range = prog
        self.n = prog.size_of(inputs)
        self._adopt(bind(prog.programs[self.n], inputs))

    def _adopt(self, bound: Any) -> None:
        """Take ``bound``'s methods as this object's own: a run costs what the size's Bound's does."""
        self.bound = bound
        self.run, self.outputs = bound.run, bound.outputs

    def set_inputs(self, inputs: Sequence[np.ndarray]) -> None:
        n = self.range.size_of(inputs)
        if n != self.n:
            self.n = n
            self._adopt(bind(self.range.programs[n], inputs))
        else:
            self.bound.set_inputs(inputs)

    def feed(self, inputs: Sequence[np.ndarray]) -> None:
        self.set_inputs(inputs)

    def __getattr__(self, name: str) -> Any:  # inputs, calls, entry, threads, prog
        return getattr(self.bound, name)
