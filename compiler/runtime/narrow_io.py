"""Narrow storage types at the boundary of a compiled model (``compiler.compile`` and its runner).

A model whose tensors have a narrow element type (float16, bfloat16, the float8 formats, float8e8m0,
float4e2m1, int4, uint4, int2, uint2) is compiled legalized: computed in its compute type (float32,
int8 or uint8) with explicit ``prism.NarrowCast`` rounding steps (``compiler.frontend.narrow_types``;
float16 has none inside the graph and is rounded once where it leaves it). The compiled program's
graph inputs and outputs therefore have the compute type; this module keeps the model's declared
*storage* types next to them:

- :func:`storage_io` reads them from the original model, :func:`describe_storage` says them to the user;
- :func:`storage_inputs`: the runner's seeded random inputs are values of the storage type (drawn in
  float32, then rounded to the format on the host: input preparation, not compiled computation);
  ONNX Runtime gets them in the storage type, Prism widened (exact);
- :func:`encode`: Prism's outputs are encoded to the storage type (exact for the narrow formats with
  rounding steps; float16's single rounding) before they are compared with ONNX Runtime's;
- :func:`tolerance`: the comparison's ``(rtol, atol)`` for an output's storage type.

Tolerance rule (``|p - o| <= max(atol * max|o|, 1e-6) + rtol * |o|``, as ``compiler.runtime.runner``):

=================================  =========  =========  =============================================
storage type                       rtol       atol       source
=================================  =========  =========  =============================================
float32 and every non-narrow type  1e-3       1e-4       Prism's fp32 rule (``compiler.runtime.runner``)
float16                            1e-3       2.5e-3     ONNX Runtime ``test/providers/checkers.cc``,
                                                         ``DefaultTolerance<MLFloat16>``
bfloat16                           1e-2       2e-2       same file, ``DefaultTolerance<BFloat16>``
float8/float4 formats, float8e8m0  2^-m       2^-m       one step of the format's grid (m mantissa bits:
                                                         e4m3 3, e5m2 2, e2m1 1, e8m0 0)
int4, uint4, int2, uint2           1e-3       1e-4       as int8 (exact in practice)
=================================  =========  =========  =============================================

ONNX Runtime computes float16 ops on the CPU in float32 between inserted casts (its
InsertCastTransformer) or natively in float16, rounding after every op, while Prism rounds float16
once at the outputs: differences of a few float16 ulps are expected, which ``atol`` (scaled by the
output's largest magnitude) absorbs.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from onnx import ModelProto, TensorProto, helper

from ..frontend.narrow_types import storage_dtype
from ..ops.narrow import BY_ELEM, FORMATS

FP32_RTOL, FP32_ATOL = 1e-3, 1e-4
_TOLERANCE: dict[str, tuple[float, float]] = {
    "float16": (1e-3, 2.5e-3),
    "bfloat16": (1e-2, 2e-2),
    "float8e4m3fn": (2.0 ** -3, 2.0 ** -3),
    "float8e4m3fnuz": (2.0 ** -3, 2.0 ** -3),
    "float8e5m2": (2.0 ** -2, 2.0 ** -2),
    "float8e5m2fnuz": (2.0 ** -2, 2.0 ** -2),
    "float4e2m1": (0.5, 0.5),
    "float8e8m0": (1.0, 1.0),
}


def storage_io(model: ModelProto) -> dict[str, dict[str, int]]:
    """``{"inputs": {name: elem}, "outputs": {name: elem}}``: the graph inputs (initializers excluded)
    and outputs of ``model`` whose declared tensor type is narrow (ONNX elem type codes)."""
    inits = {t.name for t in model.graph.initializer}

    def narrow(vis: Any) -> dict[str, int]:
        return {vi.name: int(vi.type.tensor_type.elem_type) for vi in vis if vi.name not in inits and
                vi.type.WhichOneof("value") == "tensor_type" and vi.type.tensor_type.elem_type in BY_ELEM}

    return {"inputs": narrow(model.graph.input), "outputs": narrow(model.graph.output)}


def type_name(elem: int) -> str:
    """``"float16"``, ``"bfloat16"``, ``"float32"``, ``"int8"`` ...: the name of ONNX elem type ``elem``."""
    if elem in BY_ELEM:
        return BY_ELEM[elem]
    return np.dtype(helper.tensor_dtype_to_np_dtype(elem)).name


def compute_name(elem: int) -> str:
    """The name of the compute type of narrow elem type ``elem`` (``"float32"``, ``"int8"``, ``"uint8"``)."""
    return type_name(FORMATS[BY_ELEM[elem]][1])


def describe_storage(io: dict[str, dict[str, int]], rounding_steps: int) -> dict[str, Any]:
    """The user-facing description of a legalized model's storage types: ``{"values": [{"name",
    "role": "input" | "output", "storage", "compute"}], "notes": [str]}``, one note per storage type
    (e.g. ``"float16 storage computed in float32 ..."``)."""
    values = [{"name": n, "role": role[:-1], "storage": type_name(e), "compute": compute_name(e)}
              for role in ("inputs", "outputs") for n, e in io[role].items()]
    kinds = dict.fromkeys(v["storage"] for v in values)
    notes = []
    for k in kinds:
        comp = compute_name(FORMATS[k][0])
        if k == "float16":
            notes.append(f"float16 storage computed in {comp}: inputs widened exactly, results rounded to "
                         "float16 once, where they leave the graph")
        else:
            notes.append(f"{k} storage computed in {comp}, rounded to {k} by prism.NarrowCast steps")
    if rounding_steps:
        notes.append(f"{rounding_steps} prism.NarrowCast rounding step(s) in the graph")
    return {"values": values, "notes": notes}


def storage_inputs(arrays: dict[str, np.ndarray], inputs: dict[str, int]) -> dict[str, np.ndarray]:
    """``arrays`` (seeded compute-type inputs) with the narrow ones (``inputs``: {name: elem}) rounded
    to their storage format and widened back to the compute dtype: every value is one of the format.
    float8e8m0 (powers of two, no sign) takes the magnitude first."""
    out = dict(arrays)
    for name, elem in inputs.items():
        if name not in out:
            continue
        a = out[name]
        if elem == TensorProto.FLOAT8E8M0:
            a = np.abs(a)
        out[name] = a.astype(storage_dtype(elem)).astype(a.dtype)
    return out


def encode(a: np.ndarray, elem: int) -> np.ndarray:
    """``a`` (a compute-type array) in storage elem type ``elem`` (``ml_dtypes`` rounding)."""
    return np.asarray(a).astype(storage_dtype(elem))


def ort_boundary(model: ModelProto, io: dict[str, dict[str, int]]) -> tuple[ModelProto, dict[str, str], list[str]]:
    """``model`` as ONNX Runtime is given it for verification, with numpy-readable graph inputs and outputs.

    ONNX Runtime's Python API exchanges float16 as numpy's float16, but it has no numpy type for
    bfloat16, float8, float4 or int4/int2 (it refuses them, or returns float8 as raw uint8 bits). For
    those, the graph input ``x`` becomes a compute-type input ``x__prism_feed`` followed by
    ``Cast(to=storage)`` into ``x``, and each such output ``y`` is followed by a ``Cast`` to its compute
    type written to the new graph output ``y__prism_fetch``: both casts are exact for values of the
    format (the runner's inputs are), and ONNX Runtime runs them itself (where it has no Cast kernel
    for the type, the model is reported as not verified). float16 inputs and outputs stay as they are.

    Returns ``(model, {input name: feed name}, [graph output names, in order])``; ``model`` is not
    modified (a copy is returned when anything changes).
    """
    wrap_in = {n: e for n, e in io["inputs"].items() if e != TensorProto.FLOAT16}
    wrap_out = {n: e for n, e in io["outputs"].items() if e != TensorProto.FLOAT16}
    feeds = {n: n for n in io["inputs"]}
    if not wrap_in and not wrap_out:
        return model, feeds, [o.name for o in model.graph.output]
    m = ModelProto()
    m.CopyFrom(model)
    g = m.graph
    casts = []
    for vi in g.input:
        elem = wrap_in.get(vi.name)
        if elem is None:
            continue
        feed = f"{vi.name}__prism_feed"
        casts.append(helper.make_node("Cast", [feed], [vi.name], to=elem, name=f"{feed}_cast"))
        feeds[vi.name] = feed
        vi.name = feed
        vi.type.tensor_type.elem_type = FORMATS[BY_ELEM[elem]][1]
    nodes = casts + list(g.node)
    for o in g.output:
        elem = wrap_out.get(o.name)
        if elem is not None:
            fetch = f"{o.name}__prism_fetch"
            comp = FORMATS[BY_ELEM[elem]][1]
            nodes.append(helper.make_node("Cast", [o.name], [fetch], to=comp, name=f"{fetch}_cast"))
            o.name = fetch
            o.type.tensor_type.elem_type = comp
    del g.node[:]
    g.node.extend(nodes)
    return m, feeds, [o.name for o in g.output]


def tolerance(elem: int | None) -> tuple[float, float]:
    """``(rtol, atol)`` for an output of storage elem type ``elem`` (None: not narrow); module docstring."""
    name = BY_ELEM.get(elem) if elem is not None else None
    return _TOLERANCE.get(name, (FP32_RTOL, FP32_ATOL)) if name else (FP32_RTOL, FP32_ATOL)


__all__ = ["compute_name", "describe_storage", "encode", "ort_boundary", "storage_inputs", "storage_io",
           "tolerance", "type_name"]
