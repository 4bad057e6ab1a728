"""Reduced float precision (``quantize{dtype=bf16}`` / ``quantize{dtype=fp16}``): Conv, MatMul and Gemm
layers computed on bfloat16 / float16 operands with float32 accumulation.

Semantics of a reduced layer (what every path computes, and what the tests' numpy reference does):
its activation input and its constant weight are rounded to the format (round to nearest, ties to even,
overflow to inf: ``ml_dtypes`` ``astype``, the ONNX ``Cast`` rule), then the layer runs as in float32
(products exact in float32 for both formats: 8 x 8 and 11 x 11 significand bits fit in 24; sums and
the bias in float32). The graph IR says so in ONNX terms: the weight becomes its rounded float32
constant and the activation goes through ``prism.NarrowCast{to=bfloat16|float16}`` (an elementwise
node: it fuses into the producer's kernel). The ONNX form of the same model (``Cast`` to the format
and back to float) is what ONNX Runtime runs for the accuracy report and the verification.

Paths: on targets with AVX-512 BF16 a bf16 Conv runs on ``vdpbf16ps`` (``compiler.schedule.reduced``);
elsewhere, and for fp16, the float32 micro-kernel computes the same values from the rounded operands
(a remark says which). Left alone: layers whose weight is not a constant, grouped Conv, Gemm with
``transA`` or ``beta != 1``, non-float32 layers.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import ml_dtypes
import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from ..ir import Graph, Node, Value
from ..ir.rewrite import set_constant
from ..ops import infer_node
from ..ops.infer import ShapeEnv
from ..schedule.reduced import fast_path
from .accuracy import fmt_error
from .evaluate import evaluate
from .session import QuantSession

#: The verification note of a reduced-precision compilation (``model.verified.notes``): what it compared.
REDUCED_NOTE = ("compared with ONNX Runtime running the model's reduced-precision ONNX form (each reduced layer's "
                "activation and weight rounded through Cast to the format and back, as this pass computes them): this "
                "checks Prism's kernels, not what the precision costs; that is the precision report's SQNR and error "
                "against FP32")
FORMATS = {"bf16": "bfloat16", "fp16": "float16"}  # pass option -> prism.NarrowCast / ONNX format name
NUMPY = {"bf16": ml_dtypes.bfloat16, "fp16": np.float16}
ANCHORS = ("Conv", "MatMul", "Gemm")


@dataclass
class ReducedLayer:
    """A layer computed in the reduced format: ``node`` (name), ``op``, ``input`` (activation tensor),
    ``weight`` (constant's name), ``output`` (its float32 result)."""

    node: str
    op: str
    input: str
    weight: str
    output: str


def round_to(x: np.ndarray, dtype: str) -> np.ndarray:
    """``x`` rounded to bf16/fp16 (ties to even, ``ml_dtypes``/numpy ``astype``) and back to float32."""
    return np.asarray(x, np.float32).astype(NUMPY[dtype]).astype(np.float32)


def _eligible(n: Node) -> bool:
    if n.domain or n.op_type not in ANCHORS or n.input(0) is None or n.input(1) is None:
        return False
    x, w = n.input(0), n.input(1)
    if x.const is not None or x.type is None or x.type.short != "f32" or w.const is None or w.const.dtype != np.float32:  # type: ignore[union-attr]
        return False
    if n.op_type == "Conv":
        return w.const.ndim == 4 and int(n.attr("group", 1)) == 1  # type: ignore[union-attr]
    if n.op_type == "Gemm":
        return w.const.ndim == 2 and not int(n.attr("transA", 0)) and float(n.attr("beta", 1.0)) == 1.0  # type: ignore[union-attr]
    return w.const.ndim == 2  # type: ignore[union-attr]


def plan_reduced(graph: Graph, exclude: set[str]) -> list[ReducedLayer]:
    """The layers of ``graph`` (top level) computed in the reduced format, ``exclude`` left in FP32."""
    return [ReducedLayer(n.name or n.label, n.op_type, n.input(0).name, n.input(1).name, n.outputs[0].name)  # type: ignore[union-attr]
            for n in graph.nodes if (n.name or n.label) not in exclude and _eligible(n)]


def apply_reduced(graph: Graph, layers: list[ReducedLayer], dtype: str) -> int:
    """Rewrite ``graph`` in place (module docstring): one ``prism.NarrowCast`` per distinct activation,
    each weight replaced by its rounded copy. Returns the number of NarrowCast nodes inserted."""

    env = ShapeEnv(int(graph.opset_imports.get("", 17)))
    by_name = {n.name or n.label: n for n in graph.nodes}
    casts: dict[str, Value] = {}
    for lay in layers:
        node = by_name[lay.node]
        x, w = node.input(0), node.input(1)
        assert x is not None and w is not None and w.const is not None
        if lay.input not in casts:
            nc = graph.add_node("NarrowCast", [x], [graph.fresh_name(f"{x.name}_{dtype}")], {"to": FORMATS[dtype]},
                                name=graph.fresh_node_name(f"{x.name}_NarrowCast_{dtype}"), domain="prism",
                                before=node)
            infer_node(nc, env)
            casts[lay.input] = nc.outputs[0]
        node.set_input(0, casts[lay.input])
        rounded = round_to(w.const, dtype)
        if len(w.consumers()) == 1:
            set_constant(graph, w, rounded)
        else:
            node.set_input(1, graph.add_constant(graph.fresh_name(f"{w.name}_{dtype}"), rounded))
    if casts:
        graph.opset_imports.setdefault("prism", 1)
        graph.topological_sort()
    return len(casts)


def reduced_onnx(fp32: Any, layers: list[ReducedLayer], dtype: str) -> Any:
    """The ONNX form of the reduced model (module docstring): a copy of ``fp32`` (ModelProto) with
    ``Cast(to=format) -> Cast(to=float)`` on each reduced layer's activation and its weight initializer
    rounded (a copy of the initializer where other nodes read it too)."""
    m = onnx.ModelProto()
    m.CopyFrom(fp32)
    g = m.graph
    inits = {t.name: t for t in g.initializer}
    users: dict[str, int] = {}
    for n in g.node:
        for i in n.input:
            users[i] = users.get(i, 0) + 1
    to = TensorProto.BFLOAT16 if dtype == "bf16" else TensorProto.FLOAT16
    by_out = {lay.output: lay for lay in layers}
    nodes, casts = [], {}
    for n in g.node:
        lay = by_out.get(n.output[0]) if n.output else None
        if lay is not None and n.op_type == lay.op and lay.weight in inits:
            if lay.input not in casts:
                mid, out = f"{lay.input}__{dtype}", f"{lay.input}__{dtype}_f32"
                nodes += [helper.make_node("Cast", [lay.input], [mid], to=to, name=f"{lay.input}__Cast_{dtype}"),
                          helper.make_node("Cast", [mid], [out], to=TensorProto.FLOAT, name=f"{lay.input}__Cast_f32")]
                casts[lay.input] = out
            rounded = round_to(numpy_helper.to_array(inits[lay.weight]), dtype)
            wname = lay.weight if users.get(lay.weight, 0) == 1 else f"{lay.weight}__{dtype}"
            if wname == lay.weight:
                inits[lay.weight].CopyFrom(numpy_helper.from_array(rounded, lay.weight))
            else:
                g.initializer.append(numpy_helper.from_array(rounded, wname))
            n.input[0], n.input[1] = casts[lay.input], wname
        nodes.append(n)
    del g.node[:]
    g.node.extend(nodes)
    return m


class ReducedSession(QuantSession):
    """``QuantSession`` for bf16/fp16 (same search, fallback and payload): no calibration (a float format
    needs no ranges); each plan is evaluated as its ONNX form (:func:`reduced_onnx`) in ONNX Runtime against
    the FP32 model on the given inputs, per layer at its float32 result."""

    method = ("the reduced model (Cast to the format and back before each layer, weights rounded) in ONNX Runtime "
              "against the FP32 model on the same inputs")
    calibration_method = "none"

    def _calibrate(self) -> None:
        self.precision = str(self.opts["dtype"])
        self.ranges, self.params = {}, {}

    def plan(self, exclude: set[str]) -> list[ReducedLayer]:  # type: ignore[override]
        key = frozenset(exclude)
        if key not in self._plans:
            self._plans[key] = plan_reduced(self._clone(), set(exclude))
        return self._plans[key]

    def layers(self, final: set[str]) -> list[tuple[str, str, str | None]]:
        return [(lay.node, lay.op, lay.output) for lay in self.plan(final)]

    def evaluate(self, exclude: set[str]) -> dict[str, Any]:
        layers = self.plan(exclude)
        self.qdq_model = reduced_onnx(self.fp32, layers, self.precision)
        inputs = {lay.node: [(lay.input, f"{lay.input}__{self.precision}_f32")] for lay in layers}
        return evaluate(self.fp32, self.qdq_model, [(lay.node, lay.output, lay.output) for lay in layers],
                        self.outputs, self.data, float(self.opts["min-sqnr"]), float(self.opts["min-top1"]), inputs)

    def reduced_remarks(self, final: set[str], report: dict[str, Any], p: Any) -> list[Any]:
        by = {r["node"]: r for r in report["layers"]}
        out = []
        for lay in self.plan(final):
            r = by.get(lay.node, {})
            out.append(p.remark("applied", f"{lay.node} ({lay.op}) in {self.precision}: activation and weight rounded "
                                f"to {FORMATS[self.precision]}, float32 accumulation; SQNR {r.get('sqnr_db', '?')} dB, "
                                f"max abs error {fmt_error(r.get('max_abs_error', 0))}", [lay.node],
                                sqnr_db=r.get("sqnr_db"), max_abs_error=r.get("max_abs_error")))
        out += [p.remark("analysis", f"{name} stays in FP32 (excluded)", [name]) for name in sorted(final)]
        return out


def path_remark(p: Any, dtype: str, target: str, nodes: list[str]) -> Any:
    """The remark saying how ``target`` runs the reduced layers (a warning where it lacks the instructions)."""
    how = fast_path(dtype, target)
    if how is not None:
        return p.remark("analysis", f"{dtype} layers on {target}: {how}", nodes, target=target, instructions=how)
    need = "AVX-512 BF16 (vdpbf16ps)" if dtype == "bf16" else "a reduced-precision dot product"
    return p.remark("missed", f"{dtype} layers on {target}: the target has no {need} kernel here, so they run on the "
                    f"float32 kernels from the operands rounded to {FORMATS[dtype]} (the same values, no speed-up)",
                    nodes, target=target, warning=True)
