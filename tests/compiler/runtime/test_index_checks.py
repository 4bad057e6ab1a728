"""Index inputs out of their axis are a run-time error naming the node, the input, the position and
the value (compiler.runtime.index_checks; issue 17 item 6), in the ONNX backend's execution path, also
when the indexing node is fused with others. ONNX Runtime, the oracle, refuses the same inputs; in-range
ones (negative included) give ONNX Runtime's outputs."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import compiler.backend as backend
from compiler.errors import CompileError

F, I64 = TensorProto.FLOAT, TensorProto.INT64
DATA = np.arange(12, dtype=np.float32).reshape(4, 3)


def _model(op: str, idx_shape, out_shape, fused: bool = False, **attrs):
    nodes = [helper.make_node(op, ["d", "i"], ["g"], name="ix", **attrs)]
    nodes.append(helper.make_node("Relu" if fused else "Identity", ["g"], ["y"], name="after"))
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("i", I64, list(idx_shape))],
                          [helper.make_tensor_value_info("y", F, list(out_shape))],
                          initializer=[numpy_helper.from_array(DATA, "d")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m


CASES = [  # op, attrs, index shape, output shape, a bad index, the message after the node
    ("Gather", {}, (3,), (3, 3), [0, 4, 1], "input 'i' index[1] = 4 is out of range for axis 0 of size 4"),
    ("Gather", {"axis": 1}, (2,), (4, 2), [-4, 0], "input 'i' index[0] = -4 is out of range for axis 1 of size 3"),
    ("GatherElements", {"axis": 1}, (4, 3), (4, 3), [[0, 1, 2]] * 3 + [[0, 3, 0]],
     "input 'i' index[3, 1] = 3 is out of range for axis 1 of size 3"),
    ("GatherND", {}, (2, 2), (2,), [[3, 2], [1, 3]], "input 'i' index[1, 1] = 3 is out of range for axis 1 of size 3"),
]


@pytest.mark.parametrize("fused", [False, True])
@pytest.mark.parametrize("op,attrs,ishape,oshape,bad,message", CASES, ids=[f"{c[0]}{i}" for i, c in enumerate(CASES)])
def test_out_of_range_index_inputs_are_refused_before_the_run(op, attrs, ishape, oshape, bad, message, fused):
    model = _model(op, ishape, oshape, fused=fused, **attrs)
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    with pytest.raises(Exception):  # noqa: B017 - the oracle: ONNX Runtime refuses it too
        sess.run(None, {"i": np.array(bad, np.int64)})
    rep = backend.prepare(model)
    with pytest.raises(CompileError) as err:
        rep.run([np.array(bad, np.int64)])
    assert err.value.stage == "run" and err.value.node == "ix" and err.value.op == op
    assert err.value.message.startswith(f"node ix ({op}): {message}"), err.value.message
    good = np.where(np.array(bad) >= 0, np.minimum(np.array(bad), 2), np.array(bad) % 3 - 3)  # in range
    (want,) = sess.run(None, {"i": good.astype(np.int64)})
    np.testing.assert_array_equal(rep.run([good.astype(np.int64)])[0], want)
