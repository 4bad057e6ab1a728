"""Dim ranges: one artifact for every size of a symbolic input dim in a range (issue 13 item 3).

``--input-shape images=N,3,224,224 --dim-range N=1..8`` (``input_shapes={"images": ["N", 3, 224,
224]}, dim_ranges={"N": (1, 8)}`` in the API) asks for one compiled artifact that serves every ``N``
from 1 to 8. :func:`parse_dim_range` reads the option, :func:`check_dim_ranges` checks it against
the input shapes, and :func:`shapes_at` gives the concrete input shapes at one size. Two ranged dims
are accepted when one of them is the batch (:func:`batch_dim`: ``--input-shape x=N,S,64 --dim-range
N=1..8 --dim-range S=16..32``): the other is then specialized per size, each size serving every
``N`` (``compiler.driver.dim_range``).

Bad input is a CompileError(stage="request") naming the dim: a range whose minimum is below 1 or
above its maximum, a dim no input shape names, a shape that names a dim without a range, or a range
wider than :data:`MAX_SIZES` sizes (each size is compiled: ``compiler.driver.dim_range``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from ..errors import CompileError, syntax

MAX_SIZES = 16  # sizes one artifact compiles: a range wider than this is refused
DimRanges = Mapping[str, tuple[int, int]]
_RANGE = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_]*)\s*=\s*(-?\d+)\s*\.\.\s*(-?\d+)\s*$")


def parse_dim_range(text: str) -> tuple[str, tuple[int, int]]:
    """``"N=1..8"`` -> ``("N", (1, 8))``. Raises CompileError(stage="request") naming the text for
    anything else and for a bad range (see :func:`check_range`)."""
    m = _RANGE.match(text)
    if not m:
        raise CompileError("request", f"--dim-range {text!r}: expected NAME=MIN..MAX (e.g. N=1..8)")
    name, lo, hi = m.group(1), int(m.group(2)), int(m.group(3))
    check_range(name, lo, hi)
    return name, (lo, hi)


def check_range(name: str, lo: int, hi: int) -> None:
    """Raise CompileError(stage="request") naming ``name`` when ``lo..hi`` is not a valid range."""
    if lo < 1:
        raise CompileError("request", f"dim range {name}={lo}..{hi}: the minimum must be at least 1")
    if lo > hi:
        raise CompileError("request", f"dim range {name}={lo}..{hi}: the minimum is above the maximum")
    if hi - lo + 1 > MAX_SIZES:
        raise CompileError("request", f"dim range {name}={lo}..{hi}: {hi - lo + 1} sizes, above the limit of "
                           f"{MAX_SIZES} sizes one artifact compiles")


def check_dim_ranges(input_shapes: Mapping[str, Sequence[Any]] | None, ranges: DimRanges | None) -> list[str]:
    """Check ``ranges`` against the symbolic dims of ``input_shapes`` (an ``int`` or a dim name per
    dim). Returns the range names in order. Raises CompileError(stage="request") naming the dim or
    input: a bad range, a range no input uses, a named dim without a range, more than two ranged dims,
    or two of which neither is the batch (:func:`batch_dim`)."""
    ranges = dict(ranges or {})
    used: list[str] = []
    for inp, shape in (input_shapes or {}).items():
        for d in shape:
            if isinstance(d, str) and d not in ranges:
                how = syntax(f"--dim-range {d}=MIN..MAX", f"dim_ranges={{{d!r}: (MIN, MAX)}}")
                raise CompileError("request", syntax("--input-shape", "the shape") + f" of input {inp!r}: dim {d!r} is "
                                   f"neither an integer nor a dim with a range; give one with {how}")
            if isinstance(d, str) and d not in used:
                used.append(d)
    for name, (lo, hi) in ranges.items():
        check_range(name, int(lo), int(hi))
        if name not in used:
            raise CompileError("request", f"dim range {name}={lo}..{hi}: no input shape names {name!r} (e.g. " +
                               syntax(f"--input-shape images={name},3,224,224",
                                      f'input_shapes={{"images": ["{name}", 3, 224, 224]}}') + ")")
    if len(used) > 2:
        raise CompileError("request", f"dim ranges {', '.join(used)}: at most two ranged dims per compilation (a batch "
                           "dim and one more) are supported")
    if len(used) == 2 and batch_dim(input_shapes or {}, used) is None:
        a, b = used
        raise CompileError("request", f"dim ranges {a}, {b}: two ranged dims are served when one of them is the batch, "
                           f"axis 0 alone of every input that names it; neither {a!r} nor {b!r} is")
    return used


def batch_dim(input_shapes: Mapping[str, Sequence[Any]], names: Sequence[str]) -> str | None:
    """The first of ``names`` that is axis 0, and no other axis, of every input naming it (the batch
    dim, which can be a run-time argument: ``compiler.driver.batch``), or None."""
    for name in names:
        axes = ranged_axes(input_shapes, name)
        if axes and all(a == [0] for a in axes.values()):
            return name
    return None


def shapes_at(input_shapes: Mapping[str, Sequence[Any]], name: str, size: int) -> dict[str, list[int]]:
    """``input_shapes`` with the dim ``name`` set to ``size``."""
    return {k: [size if d == name else int(d) for d in v] for k, v in input_shapes.items()}


def sizes_at(input_shapes: Mapping[str, Sequence[Any]], sizes: Mapping[str, int]) -> dict[str, list[Any]]:
    """``input_shapes`` with each dim named in ``sizes`` set to its size (other names kept)."""
    return {k: [int(sizes[d]) if isinstance(d, str) and d in sizes else d for d in v] for k, v in input_shapes.items()}


def ranged_axes(input_shapes: Mapping[str, Sequence[Any]], name: str) -> dict[str, list[int]]:
    """``{input: [axes that are the dim name]}`` for the inputs that use it."""
    out = {k: [i for i, d in enumerate(v) if d == name] for k, v in input_shapes.items()}
    return {k: v for k, v in out.items() if v}
