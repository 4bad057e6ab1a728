"""``quantize``: post-training quantization of an FP32 model to INT8, with calibration and an
accuracy report (``quantize{dtype=int8 calibration=minmax per-channel=true exclude=NAME;NAME}``).

Rewrites, in order:
1. the calibration inputs (``calibration_data`` of the compilation: an ``.npz`` with one array per graph
   input, samples along a leading axis; ``compiler.quant.calibrate``) run through the FP32 model (the IR
   at this point); without them, 8 seeded random inputs, with a ``missed`` remark saying that the ranges
   then mean little;
2. every quantizable layer (Conv, MatMul, Gemm with a constant weight; Add/Mul of two activations;
   GlobalAveragePool; data movement after a quantized tensor: ``compiler.quant.insert``) not named in
   ``exclude`` gets QuantizeLinear/DequantizeLinear pairs on its activations (ranges by ``calibration``:
   minmax, percentile, entropy) and its weight quantized to int8 (per output channel with
   ``per-channel``; in 7 bits, [-64, 64], with ``reduce-range``, which ``auto`` turns on for targets with
   AVX2 and no AVX-512 VNNI, whose u8 x s8 step is exact only then: ``compiler.quant.pack.pairs_fit_i16``),
   as ONNX Runtime's ``quantize_static`` writes the QDQ form;
3. the QDQ form is folded into integer ops (``fold-qdq``'s rewrites, ``compiler.quant.fold``); weights of
   layers left in float are dequantized back at compile time.
The accuracy of the plan is measured against the FP32 model on the calibration inputs (per quantized
layer and per output: ``compiler.quant.evaluate``) and stored for the ``model.accuracy`` event; with
``fallback=true`` the layer with the worst SQNR goes back to FP32, one at a time, until the criterion
(``min-sqnr`` dB on every output, ``min-top1`` agreement on class scores) holds, each a remark with its
numbers. The QDQ model is kept (``ctx.artifacts.qdq_model``) so that ONNX Runtime runs the same
quantization for verification and timing.

Left alone: graph outputs stay float32; nodes of other domains; grouped graphs (run it before
``fuse-ops``: a pipeline that names it after a preset or after ``fuse-ops`` places it right before
``fuse-ops``). An ``exclude`` naming no node is an error that lists the closest node names.

``dtype=bf16`` / ``dtype=fp16`` (``compiler.quant.reduced``): Conv/MatMul/Gemm with a constant weight compute
on operands rounded to bfloat16 / float16 with float32 accumulation (the activation through
``prism.NarrowCast``, the weight rounded at compile time), with the same accuracy report, criterion and
fallback (no calibration ranges: the inputs serve only the report); a remark says whether the target
runs them on ``vdpbf16ps`` (AVX-512 BF16) or on the float32 kernels; ONNX Runtime verifies against the
same model in ONNX form (``ctx.artifacts.reduced_model``).
"""

from __future__ import annotations

import difflib

from ..errors import CompileError
from ..ir import Graph
from ..quant import calibrate, fold, insert, reduced
from ..quant.session import QuantSession
from ..targets import get_target
from .base import Option, Pass, PassContext, PassResult, Remark, register

METHODS = ("minmax", "percentile", "entropy")
DTYPES = ("int8", "bf16", "fp16")


@register
class Quantize(Pass):
    """Post-training INT8 quantization with calibration and accuracy-driven fallback (see module)."""

    name = "quantize"
    before = ("fuse-ops", "plan-memory")
    options = (
        Option("dtype", str, "int8", "the reduced precision: int8, bf16 or fp16 (compiler.quant.reduced)", choices=DTYPES),
        Option("calibration", str, "minmax", "activation range method: minmax, percentile or entropy", choices=METHODS),
        Option("percentile", float, 99.99, "the percentile of |x| kept by calibration=percentile", minimum=0.0,
               maximum=100.0),
        Option("per-channel", bool, True, "weights quantized per output channel (else per tensor)"),
        Option("activation", str, "u8", "activation type: u8 (asymmetric uint8) or s8 (asymmetric int8)",
               choices=("u8", "s8")),
        Option("exclude", str, "", "node names left in FP32, separated by ';'"),
        Option("reduce-range", str, "auto", "weights in 7 bits, [-64, 64] (ONNX Runtime's reduce_range): true, false, "
               "or auto: true where the target has AVX2 but no AVX-512 VNNI (its u8 x s8 step, vpmaddubsw, sums "
               "byte pairs in saturating int16, exact only for such weights)", choices=("auto", "true", "false")),
        Option("fallback", bool, False, "return the worst-SQNR layers to FP32 one by one until the criterion holds"),
        Option("min-sqnr", float, 20.0, "criterion: every output's SQNR against FP32 at least this (dB)"),
        Option("min-top1", float, 0.99, "criterion: top-1 agreement with FP32 at least this, for class scores",
               minimum=0.0, maximum=1.0),
    )

    def run(self, graph: Graph, ctx: PassContext) -> PassResult:
        o = self.opts
        if any(n.op_type == "FusedGroup" for n in graph.nodes):
            raise CompileError("passes", "quantize must run before fuse-ops (the graph is already fused)",
                               pass_name=self.name)
        exclude = self._exclude(graph)
        remarks: list[Remark] = []
        raw = ctx.artifacts.calibration_data
        if raw is None:
            data = calibrate.random_calibration(graph)
            what = ("the activation ranges come", "mean") if o["dtype"] == "int8" else ("the accuracy report comes", "means")
            remarks.append(self.remark("missed", f"calibration: no calibration data was given, so {what[0]} from "
                                       f"{calibrate.RANDOM_SAMPLES} seeded random inputs and {what[1]} little for real "
                                       "inputs; give --calibration-data FILE.npz", [],
                                       warning=True, samples=calibrate.RANDOM_SAMPLES))
        else:
            data = calibrate.load_calibration(raw, graph)
        samples = len(calibrate.samples_of(data))
        if o["dtype"] != "int8":
            return self._reduced(graph, ctx, data, exclude, remarks, samples, raw is None)

        qmax, why = self._weight_qmax(ctx)
        remarks.append(self.remark("analysis", why, [], weight_qmax=qmax))
        qs = QuantSession(graph, data, o, qmax)
        report, final = qs.search(exclude, remarks, self)
        plan = qs.plan(final)
        dq_names = insert.insert_qdq(graph, plan, qs.params, bool(o["per-channel"]), qmax)
        result = fold.fold_graph(graph)
        consts = insert.fold_constant_dq(graph)
        for kind, msg, nodes, data_ in result.remarks:
            if kind == "missed":
                remarks.append(self.remark(kind, msg, nodes, **data_))
        remarks += qs.layer_remarks(plan, final, report, self)
        ctx.artifacts.qdq_model = qs.qdq_model
        ctx.artifacts.accuracy = qs.payload(report, final, samples, raw is None)
        remarks.append(self.remark(
            "analysis", f"quantized {len(plan.layers)} layers to int8 ({result.folded} integer ops, "
            f"{len(final)} layers in FP32, {consts} weights dequantized back); calibration {o['calibration']} on "
            f"{samples} samples; criterion {'passed' if report['passed'] else 'FAILED: ' + '; '.join(report['reasons'])}",
            [], layers=len(plan.layers), folded=result.folded, fp32_layers=sorted(final),
            passed=report["passed"], dequantized=len(dq_names)))
        return PassResult(True, remarks, {"quantized_layers": len(plan.layers), "fp32_layers": len(final)})

    def _reduced(self, graph: Graph, ctx: PassContext, data: dict, exclude: set[str], remarks: list[Remark],
                 samples: int, random: bool) -> PassResult:
        """dtype=bf16/fp16 (``compiler.quant.reduced``): the same search and report, no integer ops."""
        qs = reduced.ReducedSession(graph, data, self.opts)
        report, final = qs.search(exclude, remarks, self)
        layers = qs.plan(final)
        casts = reduced.apply_reduced(graph, layers, qs.precision)
        remarks += qs.reduced_remarks(final, report, self)
        remarks.append(reduced.path_remark(self, qs.precision, ctx.target, [lay.node for lay in layers]))
        ctx.artifacts.reduced_model = qs.qdq_model
        ctx.artifacts.accuracy = qs.payload(report, final, samples, random)
        remarks.append(self.remark(
            "analysis", f"{len(layers)} Conv/MatMul/Gemm layers in {qs.precision} ({casts} activations rounded, "
            f"{len(final)} layers in FP32); criterion {'passed' if report['passed'] else 'FAILED: ' + '; '.join(report['reasons'])}",
            [], layers=len(layers), fp32_layers=sorted(final), passed=report["passed"]))
        return PassResult(bool(layers), remarks, {"reduced_layers": len(layers), "fp32_layers": len(final)})

    def _weight_qmax(self, ctx: PassContext) -> tuple[int, str]:
        """The weights' range [-qmax, qmax] by ``reduce-range`` and the target, and the remark saying why."""
        rr = str(self.opts["reduce-range"]).lower()  # auto, true or false (Option choices)
        feats = set(get_target(ctx.target).features.split(","))
        avx2_only = "+avx2" in feats and not {"+avx512vnni", "+avx512f"} <= feats
        if rr == "true" or (rr == "auto" and avx2_only):
            why = "reduce-range=true" if rr == "true" else (
                f"reduce-range=auto: target {ctx.target} has AVX2 but no AVX-512 VNNI, so its u8 x s8 kernels use "
                "vpmaddubsw, whose int16 pair sums are exact only for 7-bit weights")
            return insert.REDUCED_QMAX, f"weights quantized to 7 bits, [-64, 64] ({why}; ONNX Runtime's reduce_range)"
        why = "reduce-range=false" if rr == "false" else f"reduce-range=auto: target {ctx.target} " + (
            "has AVX-512 VNNI (vpdpbusd sums in int32)" if "+avx2" in feats else "has no AVX2 u8 x s8 step")
        return insert.WEIGHT_QMAX, f"weights quantized to 8 bits, [-127, 127] ({why})"

    def _exclude(self, graph: Graph) -> set[str]:
        names = [x.strip() for x in str(self.opts["exclude"]).split(";") if x.strip()]
        known = {n.name or n.label for n in graph.nodes}
        for x in names:
            if x not in known:
                close = difflib.get_close_matches(x, sorted(known), n=5, cutoff=0.4)
                hint = f"; closest node names: {', '.join(close)}" if close else ""
                raise CompileError("request", f"quantize: exclude={x!r} names no node of the graph{hint}",
                                   pass_name=self.name)
        return set(names)

