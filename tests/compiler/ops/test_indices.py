"""Indices known at compile time outside their axis are refused naming the node, the position and
the value (compiler.ops.indices; issue 17 item 6). The oracle that they are errors is ONNX Runtime,
which refuses the same models at run time; in-range (also negative) indices still compile and match it."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import compiler

F, I64 = TensorProto.FLOAT, TensorProto.INT64


def _model(op: str, data_shape, idx, out_shape, **attrs) -> bytes:
    nodes = [helper.make_node(op, ["d", "i"] + (["u"] if op.startswith("Scatter") else []), ["y"], name="n", **attrs)]
    inits = [numpy_helper.from_array(np.asarray(idx, np.int64), "i")]
    inputs = [helper.make_tensor_value_info("d", F, list(data_shape))]
    if op.startswith("Scatter"):
        upd = np.ones(np.asarray(idx).shape[:-1] if op == "ScatterND" else np.asarray(idx).shape, np.float32)
        inits.append(numpy_helper.from_array(upd, "u"))
    g = helper.make_graph(nodes, "g", inputs, [helper.make_tensor_value_info("y", F, out_shape)], initializer=inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m.SerializeToString()


def _ort_refuses(model: bytes, data_shape) -> bool:
    sess = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
    try:
        sess.run(None, {"d": np.zeros(data_shape, np.float32)})
    except Exception:  # onnxruntime's errors have no common public base class
        return True
    return False


CASES = [
    ("Gather", (4, 2), [0, 5], None, {}, "n (Gather): indices[1] = 5 is out of range for axis 0 of size 4 "
                                          "(ONNX Gather: indices must be in [-4, 3])"),
    ("Gather", (4, 3), [[0, -4]], None, {"axis": 1}, "n (Gather): indices[0, 1] = -4 is out of range for axis 1 "
                                                     "of size 3 (ONNX Gather: indices must be in [-3, 2])"),
    ("GatherElements", (2, 3), [[0, 3, 1]], None, {"axis": 1}, "n (GatherElements): indices[0, 1] = 3 is out of "
                                                              "range for axis 1 of size 3"),
    ("GatherND", (2, 3), [[1, 2], [2, 0]], None, {}, "n (GatherND): indices[1, 0] = 2 is out of range for axis 0 "
                                                     "of size 2"),
    ("ScatterElements", (2, 3), [[0, 7, 1]], (2, 3), {"axis": 1}, "n (ScatterElements): indices[0, 1] = 7 is out "
                                                                  "of range for axis 1 of size 3"),
    ("ScatterND", (2, 3), [[1, 3]], (2, 3), {}, "n (ScatterND): indices[0, 1] = 3 is out of range for axis 1 of "
                                                "size 3"),
]


@pytest.mark.parametrize("op,shape,idx,out,attrs,message", CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_out_of_range_constant_indices_are_refused(op, shape, idx, out, attrs, message):
    model = _model(op, shape, idx, out, **attrs)
    assert _ort_refuses(model, shape), "the oracle accepts it: not an error case"
    r = compiler.compile(model, pipeline="O1", backend=False)
    assert not r.ok
    assert r.error["stage"] == "shape" and r.error["node"] == "n" and r.error["op"] == op, r.error
    assert r.error["message"].startswith(message), r.error


def test_negative_indices_in_range_compile_and_match_onnx_runtime():
    r = compiler.compile(_model("Gather", (4, 2), [-4, 3, -1], None), pipeline="O1", benchmark=False)
    assert r.ok, r.error
    assert r.of_type("model.verified")[0]["passed"] is True
