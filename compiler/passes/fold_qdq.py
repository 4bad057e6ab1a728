"""``fold-qdq``: turn ``DequantizeLinear -> op -> QuantizeLinear`` into one integer op.

First, an elementwise chain between two quantized tensors (``DQ -> Sigmoid -> Q``, YOLO's SiLU, HardSwish,
LeakyRelu ... any chain of elementwise ops of one 8-bit value) becomes ``prism.QLinearLookup`` with a
256-entry table evaluated at compile time by ``onnx.reference`` (``compiler.quant.lookup``).

A model in QDQ form (as ``onnxruntime.quantization.quantize_static`` writes it) computes every
quantized layer as: dequantize the int8 inputs, run the float op, quantize the result. This pass
rewrites each such neighbourhood into the integer op with the requantization in its epilogue
(``compiler.loops.ops_qlinear.requantize``: float32 multiplier, round half to even, saturate), as
ONNX Runtime's QDQ transformer does:

- ``Conv(DQ(x), DQ(w), [DQ(b)]) -> Q``: ``QLinearConv`` (x per tensor; w constant, per tensor or per
  output channel; a bias dequantized with scale ``x_scale * w_scale`` and zero point 0 is read as the
  int32 bias; a float bias is quantized to that scale, round half to even);
- ``MatMul(DQ(a), DQ(b)) -> Q``: ``QLinearMatMul`` (b per tensor, or per column when constant);
- ``Gemm(DQ(a), DQ(b), [DQ(c)]) -> Q`` with ``beta = 1``: ``com.microsoft.QGemm``;
- ``Add`` (or a two-input ``Sum``) / ``Mul`` of two dequantized values ``-> Q``: ``com.microsoft.QLinearAdd`` /
  ``QLinearMul``;
- a ``Relu`` (or ``Clip``) between the op and the Q becomes ``Max`` (``Clip``) of the integer result
  with the quantized bounds (exact: quantization is monotonic, and ``Q(0)`` is the zero point);
- data movement between a DQ and a Q with the same scale and zero point (``MaxPool``, ``Reshape``,
  ``Flatten``, ``Transpose``, ``Squeeze``, ``Unsqueeze``, ``Concat``, ``Slice``, ``Resize`` nearest)
  runs on the integers directly.
The Q's output value keeps its name and its consumers; DQ nodes left without consumers are removed.
Each fold is an ``applied`` remark; each Conv/MatMul/Gemm/Add/Mul with a dequantized input that is
not folded is a ``missed`` remark with the reason (a parameter that is not a constant, a per-axis
activation, a non-8-bit type, a second consumer of the float result ...) and stays in float, as does
every DQ/Q pair around other ops (computed as dequantize, float op, quantize).

Run it before ``fold-constants`` (the O1-O3 presets do): folding a weight's DequantizeLinear into a
float constant first would leave nothing to fold.
"""

from __future__ import annotations

from ..ir import Graph
from ..quant import fold
from .base import Pass, PassContext, PassResult, register


@register
class FoldQDQ(Pass):
    """Fold QDQ neighbourhoods into integer ops (see module docstring)."""

    name = "fold-qdq"
    options = ()

    def run(self, graph: Graph, ctx: PassContext) -> PassResult:
        result = fold.fold_graph(graph)
        remarks = [self.remark(kind, msg, nodes, **data) for kind, msg, nodes, data in result.remarks]
        if result.folded:
            summary = ", ".join(f"{n} {op}" for op, n in sorted(result.by_op.items()))
            remarks.append(self.remark("analysis", f"folded {result.folded} QDQ neighbourhoods into integer ops "
                                       f"({summary}); {result.missed} left in float", [],
                                       folded=result.folded, missed=result.missed, by_op=dict(result.by_op)))
        return PassResult(result.folded > 0, remarks, {"qdq_folded": result.folded, "qdq_missed": result.missed})
