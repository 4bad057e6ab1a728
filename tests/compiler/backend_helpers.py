"""Helpers for back-end tests: one ONNX node -> graph IR node -> kernel -> run in process.

The oracle is ``onnx.reference.ReferenceEvaluator`` on an equivalent ``onnx.helper`` model,
never the code under test.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import helper
from onnx.reference import ReferenceEvaluator

from compiler.codegen.compile import compile_kernel
from compiler.ir import Graph, TensorType
from compiler.loops.lower import lower_group
from compiler.runtime.jit import JitModule
from compiler.schedule.default import apply_default
from compiler.targets import get_target


def onnx_node_case(op: str, inputs: dict[str, np.ndarray], attrs: dict | None = None, *,
                   consts: dict[str, np.ndarray] | None = None, n_out: int = 1, opset: int = 17,
                   input_order: list[str] | None = None, oracle: str = "reference"):
    """(reference outputs, graph IR node) for one op; ``consts`` become constant inputs.

    ``oracle``: ``reference`` (onnx.reference) or ``ort`` (ONNX Runtime; used where onnx.reference
    departs from the spec, e.g. Softmax before opset 13, which it does not coerce to 2-D)."""
    consts = consts or {}
    names = input_order or list(inputs) + list(consts)
    outs = [f"y{i}" for i in range(n_out)]
    node = helper.make_node(op, names, outs, **(attrs or {}))
    vis = [helper.make_tensor_value_info(k, helper.np_dtype_to_tensor_dtype(v.dtype), v.shape)
           for k, v in inputs.items()]
    inits = [onnx.numpy_helper.from_array(v, k) for k, v in consts.items()]
    ovis = [helper.make_tensor_value_info(o, onnx.TensorProto.UNDEFINED, None) for o in outs]
    model = helper.make_model(helper.make_graph([node], "t", vis, ovis, inits),
                              opset_imports=[helper.make_opsetid("", opset)])
    if oracle == "ort":
        import onnxruntime as ort

        model.ir_version = min(model.ir_version, 8)
        for o in model.graph.output:
            o.type.tensor_type.elem_type = helper.np_dtype_to_tensor_dtype(next(iter(inputs.values())).dtype)
        ref = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, inputs)
    else:
        ref = ReferenceEvaluator(model).run(None, inputs)
    g = Graph("t")
    g.opset_imports = {"": opset}
    vals = {}
    for k, v in inputs.items():
        vals[k] = g.add_input(k, TensorType.of(v.dtype, v.shape))
    for k, v in consts.items():
        vals[k] = g.add_constant(k, v)
    ins = [vals[k] if k else None for k in names]
    n = g.add_node(op, ins, outs, {k: v for k, v in (attrs or {}).items()}, name=f"{op}_0")
    for o, r in zip(n.outputs, ref, strict=True):
        o.type = TensorType.of(np.asarray(r).dtype, np.asarray(r).shape)
    g.outputs = list(n.outputs)
    return [np.asarray(r) for r in ref], n


def run_node(node, inputs: dict[str, np.ndarray], opset: int = 17, target: str = "host", schedule: bool = True):
    """Lower, schedule, compile and run one node in process; returns its outputs."""
    lk = lower_group(node, "k", opset)
    if schedule:
        apply_default(lk.func, get_target(target))
    ck = compile_kernel(lk.func, get_target(target))
    jit = JitModule([ck.obj])
    arrays, outs = [], []
    for a in lk.args:  # every buffer gets 4 KiB of slack after it, as the runtime gives
        dt = np.dtype(_np(a.buffer.dtype))
        n = a.buffer.numel
        buf = np.zeros(n + 4096 // dt.itemsize, dt)
        view = buf[:n].reshape(a.buffer.shape)
        if a.kind == "const":
            view[...] = a.data
        elif a.kind == "value" and a.name in inputs:
            view[...] = inputs[a.name]
        elif a.kind == "value":
            view[...] = np.nan if dt.kind == "f" else 0
            outs.append(view)
        arrays.append(buf)
    jit.call(ck.symbol, arrays)
    return outs, lk, ck


def _np(dt: str):
    return {"f32": np.float32, "f64": np.float64, "i64": np.int64, "i32": np.int32, "bool": np.bool_,
            "i8": np.int8, "u8": np.uint8}[dt]


def check(op, inputs, attrs=None, *, consts=None, opset=17, rtol=1e-4, atol=1e-5, input_order=None, n_out=1,
          oracle="reference"):
    ref, node = onnx_node_case(op, inputs, attrs, consts=consts, opset=opset, input_order=input_order, n_out=n_out,
                               oracle=oracle)
    got, lk, ck = run_node(node, inputs, opset)
    for r, g in zip(ref, got, strict=True):
        assert g.shape == r.shape
        np.testing.assert_allclose(g, r, rtol=rtol, atol=atol)
    return lk, ck
