"""Elementwise and broadcast ops: unary math and activations, binary and variadic arithmetic,
comparisons, logic, ``Where``, ``Cast``, quantization (ONNX operator spec, per op).

Unary ops keep their input's type (kind ``elementwise``); binary and variadic ops broadcast
multidirectionally (kind ``broadcast``); comparisons give ``bool``.
"""

from __future__ import annotations

from onnx import TensorProto

from ..ir import TensorType
from .registry import InferContext, broadcast, op

UNARY = (
    "Abs", "Acos", "Acosh", "Asin", "Asinh", "Atan", "Atanh", "Ceil", "Celu", "Cos", "Cosh", "Elu", "Erf",
    "Exp", "Floor", "Gelu", "HardSigmoid", "HardSwish", "LeakyRelu", "Log", "Mish", "Neg", "Reciprocal",
    "Relu", "Round", "Selu", "Shrink", "Sigmoid", "Sign", "Sin", "Sinh", "Softplus", "Softsign", "Sqrt",
    "Tan", "Tanh", "ThresholdedRelu", "Not", "BitwiseNot", "Identity",
)


@op(*UNARY, kind="elementwise")
def infer_unary(ctx: InferContext) -> list[TensorType]:
    return [ctx.type(0)]


@op("Clip", kind="elementwise")
def infer_clip(ctx: InferContext) -> list[TensorType]:
    for i in (1, 2):
        if ctx.has(i) and ctx.type(i).shape not in ((), None, (1,)):
            raise ctx.fail(f"input {i} ({'min' if i == 1 else 'max'}) must be a scalar, got {ctx.type(i)}")
    return [ctx.type(0)]


@op("Dropout", kind="elementwise")
def infer_dropout(ctx: InferContext) -> list[TensorType]:
    t = ctx.type(0)
    # the optional mask output is of the input's type before opset 10, bool from opset 10
    return [t, t if ctx.opset < 10 else TensorType(TensorProto.BOOL, t.shape)]


@op("IsNaN", "IsInf", kind="elementwise")
def infer_is(ctx: InferContext) -> list[TensorType]:
    return [TensorType(TensorProto.BOOL, ctx.shape(0))]


@op("Cast", kind="elementwise")
def infer_cast(ctx: InferContext) -> list[TensorType]:
    to = ctx.attr("to")
    if to is None:
        raise ctx.fail("attribute 'to' is required", attribute="to")
    if isinstance(to, str):  # Cast-1 used a string
        to = TensorProto.DataType.Value(to.upper())
    try:
        return [TensorType.of(int(to), ctx.shape(0))]
    except ValueError as exc:
        raise ctx.fail(str(exc), attribute="to") from None


@op("CastLike", kind="elementwise")
def infer_castlike(ctx: InferContext) -> list[TensorType]:
    return [TensorType(ctx.type(1).elem_type, ctx.shape(0))]


BINARY = ("Add", "Sub", "Mul", "Div", "Pow", "Mod", "BitShift", "BitwiseAnd", "BitwiseOr", "BitwiseXor", "PRelu")


def _legacy_broadcast(ctx: InferContext) -> list[tuple]:
    """Opset < 7 ``broadcast=1, axis=k`` is not in our opset range; shapes broadcast numpy-style."""
    return [ctx.shape(i) for i in range(ctx.n_inputs) if ctx.has(i)]


@op(*BINARY, kind="broadcast")
def infer_binary(ctx: InferContext) -> list[TensorType]:
    if ctx.n_inputs != 2:
        raise ctx.fail(f"expects 2 inputs, got {ctx.n_inputs}")
    a, b = ctx.type(0), ctx.type(1)
    if ctx.node.op_type not in ("Pow", "PRelu") and a.elem_type != b.elem_type:
        raise ctx.fail(f"input types differ: {a.short} and {b.short}")
    return [TensorType(a.elem_type, broadcast(ctx, *_legacy_broadcast(ctx)))]


@op("Sum", "Mean", "Max", "Min", kind="broadcast")
def infer_variadic(ctx: InferContext) -> list[TensorType]:
    if ctx.n_inputs < 1:
        raise ctx.fail("expects at least one input")
    return [TensorType(ctx.type(0).elem_type, broadcast(ctx, *_legacy_broadcast(ctx)))]


@op("Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual", "And", "Or", "Xor", kind="broadcast")
def infer_compare(ctx: InferContext) -> list[TensorType]:
    return [TensorType(TensorProto.BOOL, broadcast(ctx, ctx.shape(0), ctx.shape(1)))]


@op("Where", kind="broadcast")
def infer_where(ctx: InferContext) -> list[TensorType]:
    return [TensorType(ctx.type(1).elem_type, broadcast(ctx, ctx.shape(0), ctx.shape(1), ctx.shape(2)))]


@op("QuantizeLinear", kind="broadcast")
def infer_quantize(ctx: InferContext) -> list[TensorType]:
    if ctx.has(2):
        elem = ctx.type(2).elem_type
    else:
        elem = int(ctx.attr("output_dtype", 0)) or TensorProto.UINT8
    return [TensorType.of(elem, ctx.shape(0))]


@op("DequantizeLinear", kind="broadcast")
def infer_dequantize(ctx: InferContext) -> list[TensorType]:
    return [TensorType(ctx.type(1).elem_type, ctx.shape(0))]
