"""Compile an ONNX model through the real pipeline and compare it with ONNX Runtime, in process.

``check_model`` compiles through the one driver (``compiler.driver.compile_program``: the pass
pipeline, lowering and schedules of every kernel as ``compiler.driver.lower.lower_graph`` chooses them,
micro-kernels included, codegen and linking), runs the program in this process, and compares every output with ONNX Runtime's (the oracle) on seeded random inputs.
It returns the lowered kernels and the pass remarks, so a test can also assert which schedule ran.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

from compiler.driver import compile_program
from compiler.runtime.execute import run_program


@dataclass
class Checked:
    """What :func:`check_model` saw: the lowered kernels, the graph after the passes, the remarks."""

    kernels: list[Any]
    graph: Any
    remarks: list[dict[str, Any]] = field(default_factory=list)
    max_abs_error: float = 0.0

    def schedules(self) -> str:
        return "\n".join("\n".join(k.func.attrs.get("schedule", [])) for k in self.kernels)

    def kernel_names(self) -> list[str]:
        return [k.name for k in self.kernels]


def ort_run(model: onnx.ModelProto, feeds: dict[str, np.ndarray], threads: int = 1) -> list[np.ndarray]:
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    m = onnx.ModelProto()
    m.CopyFrom(model)
    m.ir_version = min(m.ir_version, 8)
    return ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"]).run(None, feeds)


def check_model(model: onnx.ModelProto, feeds: dict[str, np.ndarray] | None = None, *, pipeline: str = "O2",
                rtol: float = 1e-4, atol: float = 1e-5, seed: int = 0) -> Checked:
    """Compile ``model`` with ``pipeline`` for the host, run it here, assert it matches ONNX Runtime
    (``|prism - ort| <= atol * max|ort| + rtol * |ort|``, per output) and return what ran."""
    rng = np.random.default_rng(seed)
    if feeds is None:
        feeds = {}
        for vi in model.graph.input:
            shape = [d.dim_value for d in vi.type.tensor_type.shape.dim]
            feeds[vi.name] = rng.standard_normal(shape).astype(np.float32)
    ref = ort_run(model, feeds)
    comp = compile_program(model, None, pipeline=pipeline, target="host")  # the one driver
    remarks = [r for e in comp.events.events if e["type"] == "pass.finished" for r in e["remarks"]]
    graph, kernels = comp.graph, comp.kernels
    assert graph is not None and comp.program is not None
    prog = comp.program
    got = run_program(prog, [feeds[v.name] for v in graph.inputs])
    err = 0.0
    for g, r in zip(got, ref, strict=True):
        assert g.shape == r.shape, (g.shape, r.shape)
        scale = float(np.max(np.abs(r))) if r.size else 0.0
        np.testing.assert_allclose(g, r, rtol=rtol, atol=atol * max(scale, 1.0))
        err = max(err, float(np.max(np.abs(g - r))) if r.size else 0.0)
    return Checked(kernels, graph, remarks, err)


def tensor(name: str, shape: list[int] | tuple[int, ...]) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, list(shape))


def model(nodes: list[onnx.NodeProto], inputs: list[onnx.ValueInfoProto], outputs: list[str],
          inits: dict[str, np.ndarray] | None = None, opset: int = 17) -> onnx.ModelProto:
    """A model of ``nodes`` (outputs with unknown shape: ONNX Runtime infers them)."""
    g = helper.make_graph(nodes, "t", inputs, [helper.make_tensor_value_info(o, TensorProto.FLOAT, None)
                                               for o in outputs],
                          [numpy_helper.from_array(v, k) for k, v in (inits or {}).items()])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    return m
