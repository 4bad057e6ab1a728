"""Registry entries of the ``com.microsoft`` quantized ops that ONNX Runtime's quantizer writes in
QOperator form (``QLinearAdd``, ``QLinearMul``, ``QGemm``, ``QLinearGlobalAveragePool``), and the fusion
kinds of the integer ops. Semantics: ONNX Runtime's ``docs/ContribOperators.md``; lowerings in
``compiler.loops.ops_qlinear``.

QLinearConv, QLinearMatMul, ConvInteger, MatMulInteger and QGemm are ``out-elementwise-fusable``
anchors (like Conv/MatMul/Gemm): the integer micro-kernels (``compiler.schedule.int8``) apply the
requantization and what follows (a residual QLinearAdd, a zero-point Max for a folded Relu) to their
int32 accumulators before the one store.
"""

from __future__ import annotations

from onnx import TensorProto

from ..ir import TensorType
from .registry import InferContext, broadcast
from .registry import op as _op

DOMAIN = "com.microsoft"


@_op("QLinearAdd", kind="broadcast", domain=DOMAIN)
@_op("QLinearMul", kind="broadcast", domain=DOMAIN)
def infer_qlinear_binary(ctx: InferContext) -> list[TensorType]:
    elem = ctx.type(7).elem_type if ctx.has(7) else ctx.type(0).elem_type
    return [TensorType(elem, broadcast(ctx, ctx.shape(0), ctx.shape(3)))]


@_op("QGemm", kind="out-elementwise-fusable", domain=DOMAIN)
def infer_qgemm(ctx: InferContext) -> list[TensorType]:
    a, b = ctx.shape(0), ctx.shape(3)
    if len(a) != 2 or len(b) != 2:
        raise ctx.fail(f"A {list(a)} and B {list(b)} must be 2-D")
    m, ka = (a[1], a[0]) if ctx.attr("transA", 0) else (a[0], a[1])
    kb, n = (b[1], b[0]) if ctx.attr("transB", 0) else (b[0], b[1])
    if isinstance(ka, int) and isinstance(kb, int) and ka != kb:
        raise ctx.fail(f"inner dims differ: A {list(a)} and B {list(b)}")
    elem = ctx.type(8).elem_type if ctx.has(8) else ctx.type(0).elem_type if ctx.has(7) else TensorProto.FLOAT
    return [TensorType(elem, (m, n))]


@_op("QLinearGlobalAveragePool", kind="reduction", domain=DOMAIN)
def infer_qgap(ctx: InferContext) -> list[TensorType]:
    x = ctx.shape(0)
    elem = ctx.type(4).elem_type if ctx.has(4) else ctx.type(0).elem_type
    return [TensorType(elem, (*x[:2], *([1] * (len(x) - 2))))]
