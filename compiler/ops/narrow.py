"""``prism.NarrowCast``: a value converted to a narrow storage format, kept in its compute type.

Prism computes narrow element types in a wider compute type (``compiler.frontend.narrow_types``):
float16, bfloat16, the float8 formats, float8e8m0 and float4e2m1 in float32; int4/int2 in int8,
uint4/uint2 in uint8. Where the ONNX model produces a value of such a type (a ``Cast`` to it, a
``QuantizeLinear`` to it, any op whose output has it), the legalization inserts one
``prism.NarrowCast`` node: its output is the input converted to the format (rounded to its grid,
or wrapped/saturated to its integer range), stored in the compute type. The graph IR printer shows
it as ``prism.NarrowCast(%x) {saturate=1, to="float8e4m3fn"}``.

Attributes:
    to (str): a key of :data:`FORMATS`.
    saturate (int, default 0): float8 formats: out-of-range values give +-max instead of inf/NaN
        (ONNX Cast ``saturate``, opset 19); integer formats: clip to the range (as QuantizeLinear)
        instead of wrapping (as Cast). float4e2m1 always saturates (it has no inf/NaN).
    round_mode (str, default ``"up"``): float8e8m0 only: ``up``, ``down`` or ``nearest`` (ONNX Cast
        ``round_mode``, opset 24).

Types: float formats take float32 or float64 (float64 is first rounded to float32) and give
float32; integer formats take any integer or float type (floats truncate toward zero first, as
``ml_dtypes`` does) and give int8 (int4, int2) or uint8 (uint4, uint2); same shape. Semantics:
``onnx.reference``'s Cast / QuantizeLinear for the format (see ``compiler.codegen.narrow``).
The node is elementwise (fuses like any elementwise op). It is registered as an ONNX schema of
domain ``prism`` (version 1) so that a legalized ModelProto passes ``onnx.checker``.
"""

from __future__ import annotations

import numpy as np
from onnx import TensorProto, defs, helper
from onnx.reference.op_run import OpRun

from ..ir import TensorType, as_text
from .registry import InferContext, op

DOMAIN = "prism"
OP = "NarrowCast"
F32, I8, U8 = TensorProto.FLOAT, TensorProto.INT8, TensorProto.UINT8

# format name -> (ONNX storage elem type, compute elem type)
FORMATS: dict[str, tuple[int, int]] = {
    "float16": (TensorProto.FLOAT16, F32),
    "bfloat16": (TensorProto.BFLOAT16, F32),
    "float8e4m3fn": (TensorProto.FLOAT8E4M3FN, F32),
    "float8e4m3fnuz": (TensorProto.FLOAT8E4M3FNUZ, F32),
    "float8e5m2": (TensorProto.FLOAT8E5M2, F32),
    "float8e5m2fnuz": (TensorProto.FLOAT8E5M2FNUZ, F32),
    "float8e8m0": (TensorProto.FLOAT8E8M0, F32),
    "float4e2m1": (TensorProto.FLOAT4E2M1, F32),
    "int4": (TensorProto.INT4, I8),
    "uint4": (TensorProto.UINT4, U8),
    "int2": (TensorProto.INT2, I8),
    "uint2": (TensorProto.UINT2, U8),
}
BY_ELEM: dict[int, str] = {elem: name for name, (elem, _) in FORMATS.items()}
INT_BITS = {"int4": (4, True), "uint4": (4, False), "int2": (2, True), "uint2": (2, False)}
ROUND_MODES = ("up", "down", "nearest")


def infer_narrow_cast(ctx: InferContext) -> list[TensorType]:
    """Output: the compute type of ``to``, the input's shape. Raises CompileError (stage ``shape``)
    for an unknown format or round_mode, or a float format applied to a non-float input."""
    to = ctx.attr("to")
    if to not in FORMATS:
        raise ctx.fail(f"unknown format {to!r} (known: {', '.join(FORMATS)})", attribute="to")
    mode = ctx.attr("round_mode", "up")
    if mode not in ROUND_MODES:
        raise ctx.fail(f"round_mode {mode!r} is not one of {', '.join(ROUND_MODES)}", attribute="round_mode")
    t = ctx.type(0)
    if to not in INT_BITS and t.elem_type not in (TensorProto.FLOAT, TensorProto.DOUBLE):
        raise ctx.fail(f"format {to} takes a float32 or float64 input, got {t.short}")
    return [TensorType(FORMATS[to][1], t.shape)]


op(OP, kind="elementwise", domain=DOMAIN)(infer_narrow_cast)


def narrow_reference(x: np.ndarray, to: str, saturate: int = 0, round_mode: str = "up") -> np.ndarray:
    """``x`` converted to format ``to`` as ``onnx.reference`` converts (``op_cast.cast_to``: ``ml_dtypes``
    and ``onnx.numpy_helper``; integer formats with ``saturate`` clip first, as QuantizeLinear does),
    returned in the compute type. For compile time only (fold-constants on constant inputs); the
    compiled program computes it with ``compiler.codegen.narrow``. Raises KeyError for an unknown
    format."""
    # deferred: onnx.reference loads all its op modules
    from onnx.reference.ops.op_cast import cast_to

    elem, compute = FORMATS[to]
    x = np.asarray(x)
    if to in INT_BITS:
        bits, signed = INT_BITS[to]
        if saturate:
            lo, hi = (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if signed else (0, (1 << bits) - 1)
            x = np.clip(x, lo, hi)
        y = x.astype(helper.tensor_dtype_to_np_dtype(elem))
    else:
        y = cast_to(x.astype(np.float32), elem, bool(saturate), round_mode)  # type: ignore[arg-type]
    return np.asarray(y).astype(helper.tensor_dtype_to_np_dtype(compute))


class NarrowCast(OpRun):
    """``prism.NarrowCast`` for ``onnx.reference.ReferenceEvaluator(new_ops=[NarrowCast])`` (compile
    time: fold-constants), by :func:`narrow_reference`."""

    op_domain = DOMAIN

    def _run(self, x, to=None, saturate=None, round_mode=None):  # type: ignore[no-untyped-def]
        mode = as_text(round_mode) if round_mode is not None else ""
        return (narrow_reference(x, as_text(to), int(saturate or 0), mode or "up"),)


def _register_schema() -> None:
    if defs.has(OP, DOMAIN):
        return
    every = [f"tensor({t})" for t in ("float", "double", "int8", "uint8", "int16", "uint16", "int32", "uint32",
                                       "int64", "uint64")]
    schema = defs.OpSchema(
        OP, DOMAIN, 1, "A value converted to a narrow storage format, kept in its compute type (Prism).",
        inputs=[defs.OpSchema.FormalParameter("input", "T1")],
        outputs=[defs.OpSchema.FormalParameter("output", "T2")],
        type_constraints=[("T1", every, "input types"), ("T2", ["tensor(float)", "tensor(int8)", "tensor(uint8)"],
                                                           "compute types")],
        attributes=[defs.OpSchema.Attribute("to", defs.OpSchema.AttrType.STRING, "format name"),
                    defs.OpSchema.Attribute("saturate", defs.OpSchema.AttrType.INT, "saturate", required=False),
                    defs.OpSchema.Attribute("round_mode", defs.OpSchema.AttrType.STRING, "float8e8m0 rounding",
                                            required=False)],
    )
    defs.register_schema(schema)


_register_schema()
