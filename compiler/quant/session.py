"""One post-training quantization (``compiler.passes.quantize``): calibrated parameters computed once,
plans evaluated on copies of the FP32 graph, the accuracy-driven fallback search, and the remarks and
``model.accuracy`` payload that describe the result."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import onnx.version_converter

from ..export import export_model
from ..frontend import import_model, specialize
from ..ir import Graph
from . import calibrate, insert
from .accuracy import fmt_error
from .evaluate import evaluate

METHOD = ("QDQ model in ONNX Runtime with graph optimizations off (DequantizeLinear, float op, QuantizeLinear "
          "as written) against the FP32 model on the same inputs, as onnxruntime.quantization.qdq_loss_debug")


class QuantSession:
    """Calibration of ``graph`` (the FP32 IR at the ``quantize`` pass) on ``data`` with pass options ``opts``."""

    def __init__(self, graph: Graph, data: Mapping[str, np.ndarray], opts: dict[str, Any],
                 weight_qmax: int = insert.WEIGHT_QMAX) -> None:
        self.opts, self.data, self.weight_qmax = opts, data, weight_qmax
        self.fp32 = _at_least_opset(export_model(graph), 13)
        self.outputs = [v.name for v in graph.outputs]
        self._plans: dict[frozenset[str], Any] = {}
        self.qdq_model: Any = None
        self.fallbacks: list[dict[str, Any]] = []
        self._calibrate()

    def _calibrate(self) -> None:
        """``ranges`` {tensor: (lo, hi)} by the calibration method, and ``params`` {tensor: (scale, zp)}."""
        o = self.opts
        full = self.plan(set())
        self.ranges = calibrate.activation_ranges(self.fp32, full.tensors, self.data, o["calibration"], o["percentile"])
        self.params = {t: insert.activation_params(lo, hi, o["activation"]) for t, (lo, hi) in self.ranges.items()}

    precision = "int8"  # the precision of the quantized layers' rows in model.accuracy
    method = METHOD
    calibration_method = property(lambda self: self.opts["calibration"])

    def layers(self, final: set[str]) -> list[tuple[str, str, str | None]]:
        """``(node, op, output point)`` of the quantized layers with ``final`` left in FP32."""
        return [(lay.node, lay.op, lay.output) for lay in self.plan(final).layers]

    def _clone(self) -> Graph:
        g = import_model(self.fp32)
        specialize(g, None)
        return g

    def plan(self, exclude: set[str]) -> insert.Plan:
        key = frozenset(exclude)
        if key not in self._plans:
            self._plans[key] = insert.plan_layers(self._clone(), set(exclude))
        return self._plans[key]

    def evaluate(self, exclude: set[str]) -> dict[str, Any]:
        """The accuracy of the plan without the layers in ``exclude``; keeps its QDQ model."""
        g = self._clone()
        plan = insert.plan_layers(g, set(exclude))
        dq = insert.insert_qdq(g, plan, self.params, bool(self.opts["per-channel"]), self.weight_qmax)
        self.qdq_model = export_model(g)
        layers = [(lay.node, lay.output, dq[lay.output]) for lay in plan.layers if lay.output in dq]
        inputs = {lay.node: [(a, dq[a]) for a in lay.inputs if a in dq] for lay in plan.layers}
        return evaluate(self.fp32, self.qdq_model, layers, self.outputs, self.data, float(self.opts["min-sqnr"]),
                        float(self.opts["min-top1"]), inputs)

    def search(self, exclude: set[str], remarks: list[Any], p: Any) -> tuple[dict[str, Any], set[str]]:
        """Evaluate, and with ``fallback`` return the worst layer to FP32 until the criterion holds."""
        cur = set(exclude)
        report = self.evaluate(cur)
        while not report["passed"] and self.opts["fallback"]:
            rows = sorted((r for r in report["layers"] if r["node"] not in cur), key=_added_noise, reverse=True)
            if not rows:
                break
            worst = rows[0]
            cur.add(worst["node"])
            before = _worst_output(report)
            report = self.evaluate(cur)
            after = _worst_output(report)
            step = {"node": worst["node"], "layer_sqnr_db": worst["sqnr_db"], "input_sqnr_db": worst.get("input_sqnr_db"),
                    "output_sqnr_db_before": before, "output_sqnr_db_after": after, "passed": report["passed"]}
            self.fallbacks.append(step)
            remarks.append(p.remark("applied", f"fallback: {worst['node']} back to FP32 (SQNR {_in_db(worst)} -> "
                                    f"{worst['sqnr_db']:.1f} dB across it, the most noise added of {len(rows)} "
                                    f"{self.precision} layers): worst output SQNR {before:.1f} -> {after:.1f} dB; "
                                    f"criterion {'holds' if report['passed'] else 'still fails'}", [worst["node"]], **step))
        return report, cur

    def layer_remarks(self, plan: insert.Plan, final: set[str], report: dict[str, Any], p: Any) -> list[Any]:
        by = {r["node"]: r for r in report["layers"]}
        bits = "int8" if self.weight_qmax == insert.WEIGHT_QMAX else f"int8 in [-{self.weight_qmax}, {self.weight_qmax}]"
        out = []
        for lay in plan.layers:
            r = by.get(lay.node, {})
            rng = self.ranges.get(lay.output or "", (0.0, 0.0))
            sq = r.get("sqnr_db")
            where = f"output range [{rng[0]:.4g}, {rng[1]:.4g}] as {self.opts['activation']}" if lay.output else \
                "output float32 (a graph output)"
            out.append(p.remark("applied", f"quantized {lay.node} ({lay.op}) to int8: {where}"
                                f"{', weight per-channel ' + bits if lay.weight and self.opts['per-channel'] else ''}"
                                f"; SQNR {sq if sq is not None else '?'} dB, max abs error {fmt_error(r.get('max_abs_error', 0))}",
                                [lay.node], sqnr_db=sq, max_abs_error=r.get("max_abs_error"), range=list(rng)))
        for name in sorted(final):
            out.append(p.remark("analysis", f"{name} stays in FP32 (excluded)", [name]))
        return out

    def payload(self, report: dict[str, Any], final: set[str], samples: int, random: bool) -> dict[str, Any]:
        """The ``model.accuracy`` event payload (see DESIGN.md "Events")."""
        by = {r["node"]: r for r in report["layers"]}
        layers = [{"node": node, "op": op, "output": output, "precision": self.precision,
                   "sqnr_db": by.get(node, {}).get("sqnr_db"),
                   "max_abs_error": by.get(node, {}).get("max_abs_error")} for node, op, output in self.layers(final)]
        layers += [{"node": n, "op": None, "output": None, "precision": "fp32", "sqnr_db": None, "max_abs_error": None}
                   for n in sorted(final)]
        return {"dtype": self.opts["dtype"], "method": self.method, "samples": samples,
                "calibration": {"method": self.calibration_method, "samples": samples, "random": random,
                                "activation": self.opts["activation"], "per_channel": bool(self.opts["per-channel"]),
                                "weight_qmax": self.weight_qmax},
                "layers": layers, "outputs": report["outputs"],
                "criterion": {"min_sqnr_db": float(self.opts["min-sqnr"]), "min_top1": float(self.opts["min-top1"]),
                              "passed": report["passed"], "reasons": report["reasons"]},
                "fallbacks": self.fallbacks}


def _at_least_opset(model: Any, version: int) -> Any:
    """``model`` converted by ``onnx.version_converter`` when its default-domain opset is below ``version``
    (QuantizeLinear/DequantizeLinear with ``axis`` need opset 13); the copies evaluated and the QDQ model
    ONNX Runtime runs are built from it."""
    current = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), version)
    if current >= version:
        return model

    return onnx.version_converter.convert_version(model, version)


def _added_noise(row: dict[str, Any]) -> float:
    """The fallback order: the noise a layer adds, as the SQNR drop from its quantized inputs to its output
    (dB); a layer without quantized inputs counts from a clean input (999 dB). Ranking by the output SQNR
    alone would pick the last layers of a deep network, which only carry the noise added before them
    (YOLOv8n: 120 of 128 layers back to FP32 that way, where the first two layers held most of the loss)."""
    src = row.get("input_sqnr_db")
    return (999.0 if src is None else float(src)) - float(row["sqnr_db"])


def _in_db(row: dict[str, Any]) -> str:
    return "clean input" if row.get("input_sqnr_db") is None else f"{row['input_sqnr_db']:.1f}"


def _worst_output(report: dict[str, Any]) -> float:
    vals = [o["sqnr_db"] for o in report["outputs"].values() if o.get("sqnr_db") is not None]
    return min(vals) if vals else float("nan")
