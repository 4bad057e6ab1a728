"""``prism.QLinearLookup``: an 8-bit tensor mapped element by element through a 256-entry table.

``Y[i] = table[X[i] - min(X's type)]``: ``X`` is uint8 (index ``X``) or int8 (index ``X + 128``), ``table``
a constant 1-D tensor of 256 uint8 or int8 values (``table[k]`` is the output for the k-th smallest input
value), ``Y`` has ``X``'s shape and ``table``'s type. ``compiler.quant.lookup`` writes it for an elementwise
chain between two quantized tensors (``DequantizeLinear -> f -> QuantizeLinear``), with the table
evaluated at compile time by ``onnx.reference``: ONNX Runtime's ``QLinearLookupBase`` (QLinearSigmoid,
QLinearLeakyRelu) and TensorRT compute such chains the same way. The node is elementwise (it fuses into
its producer's epilogue); ``compiler.codegen.lookup`` emits it as ``vpermi2b`` on AVX-512 VBMI, as one
byte load per element elsewhere. Registered as an ONNX schema of domain ``prism`` (version 1), so that
a model holding it passes ``onnx.checker``; :class:`QLinearLookup` is its ``onnx.reference`` OpRun.
"""

from __future__ import annotations

import numpy as np
from onnx import TensorProto, defs
from onnx.reference.op_run import OpRun

from ..ir import TensorType
from .registry import InferContext, op

DOMAIN = "prism"
OP = "QLinearLookup"
BYTES = (TensorProto.UINT8, TensorProto.INT8)


def infer_lookup(ctx: InferContext) -> list[TensorType]:
    """Output: ``table``'s type, ``X``'s shape. Raises CompileError (stage ``shape``) for an ``X`` that is
    not uint8/int8 or a table that is not 256 uint8/int8 values."""
    x, t = ctx.type(0), ctx.type(1)
    if x.elem_type not in BYTES:
        raise ctx.fail(f"X is {x.short}; QLinearLookup takes uint8 or int8")
    if t.elem_type not in BYTES or tuple(t.shape or ()) != (256,):
        raise ctx.fail(f"table is {t.short}{list(t.shape or ())}; QLinearLookup takes 256 uint8 or int8 values")
    return [TensorType(t.elem_type, x.shape)]


op(OP, kind="elementwise", domain=DOMAIN)(infer_lookup)


def lookup_reference(x: np.ndarray, table: np.ndarray) -> np.ndarray:
    """``table[x - min(x.dtype)]`` (numpy); raises ValueError for a non-8-bit ``x`` or a table of other size."""
    x, table = np.asarray(x), np.asarray(table)
    if x.dtype not in (np.uint8, np.int8) or table.shape != (256,):
        raise ValueError(f"QLinearLookup: X {x.dtype}, table {table.dtype}{list(table.shape)}")
    return table[x.astype(np.int64) - int(np.iinfo(x.dtype).min)]


class QLinearLookup(OpRun):
    """``prism.QLinearLookup`` for ``onnx.reference.ReferenceEvaluator(new_ops=[QLinearLookup])``."""

    op_domain = DOMAIN

    def _run(self, x, table):  # type: ignore[no-untyped-def]
        return (lookup_reference(x, table),)


def _register_schema() -> None:
    if defs.has(OP, DOMAIN):
        return
    schema = defs.OpSchema(
        OP, DOMAIN, 1, "An 8-bit tensor mapped element by element through a 256-entry table (Prism).",
        inputs=[defs.OpSchema.FormalParameter("X", "T1"), defs.OpSchema.FormalParameter("table", "T2")],
        outputs=[defs.OpSchema.FormalParameter("Y", "T2")],
        type_constraints=[("T1", ["tensor(uint8)", "tensor(int8)"], "input"),
                          ("T2", ["tensor(uint8)", "tensor(int8)"], "table and output")],
    )
    defs.register_schema(schema)


_register_schema()
