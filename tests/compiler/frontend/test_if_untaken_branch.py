"""Issue 13 (dynamic models): an ``If`` whose condition comes from the input's shape, with a branch
valid only at other shapes (silero_vad's unbatched-input branch Squeezes axis 0 of the batch).

At a given shape the condition is a compile-time constant: only the taken branch must be valid, the
other one never runs. Expected values come from ONNX Runtime on the same model, never from Prism.
"""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper

from compiler import CompileError
from compiler.backend import PrismBackend
from compiler.driver import compile_program
from compiler.runtime.control import ControlProgram
from compiler.runtime.execute import run_program


def _c(name, arr):
    return numpy_helper.from_array(np.asarray(arr), name)


def _batch1_squeeze_model() -> onnx.ModelProto:
    """y = r of batch 1 ? Unsqueeze(Squeeze(r, 0), 0) * 2 : r + 1, for r = Reshape(x, [N, 4]) and x of
    shape [N, 2, 2]: r's shape comes from a computed shape, which onnx.shape_inference leaves unknown
    and Prism's inference knows (as silero_vad's Pad of computed pads before its If)."""
    then_g = h.make_graph(
        [h.make_node("Squeeze", ["r", "ax0"], ["sq"]), h.make_node("Unsqueeze", ["sq", "ax0"], ["usq"]),
         h.make_node("Mul", ["usq", "two"], ["ty"])],
        "then", [], [h.make_tensor_value_info("ty", T.FLOAT, None)])
    else_g = h.make_graph([h.make_node("Add", ["r", "one"], ["ey"])], "else", [],
                          [h.make_tensor_value_info("ey", T.FLOAT, None)])
    nodes = [h.make_node("Shape", ["x"], ["xs"]), h.make_node("Slice", ["xs", "zero1", "one1"], ["lead"]),
             h.make_node("Concat", ["lead", "four"], ["rs"], axis=0), h.make_node("Reshape", ["x", "rs"], ["r"]),
             h.make_node("Shape", ["r"], ["shp"]), h.make_node("Gather", ["shp", "zero"], ["n"], axis=0),
             h.make_node("Equal", ["n", "one_i"], ["is1"]),
             h.make_node("If", ["is1"], ["y"], "if1", then_branch=then_g, else_branch=else_g)]
    g = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", T.FLOAT, ["N", 2, 2])],
                     [h.make_tensor_value_info("y", T.FLOAT, ["N", 4])],
                     [_c("ax0", np.array([0], np.int64)), _c("two", np.float32(2)), _c("one", np.float32(1)),
                      _c("zero", np.array(0, np.int64)), _c("one_i", np.array(1, np.int64)),
                      _c("zero1", np.array([0], np.int64)), _c("one1", np.array([1], np.int64)),
                      _c("four", np.array([4], np.int64))])
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.checker.check_model(m)
    return m


@pytest.mark.parametrize("batch", [1, 3])
def test_if_on_the_batch_size_compiles_only_the_taken_branch(batch):
    m = _batch1_squeeze_model()
    x = np.random.default_rng(batch).standard_normal((batch, 2, 2)).astype(np.float32)
    ref = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    (y,) = PrismBackend.prepare(m, isolate=False).run([x])
    assert y.shape == ref.shape == (batch, 4)
    np.testing.assert_allclose(y, ref, rtol=1e-6)


def _runtime_cond_model() -> onnx.ModelProto:
    """y = c ? Unsqueeze(Squeeze(x, 0), 0) * 2 : x + 1: the condition c is data, x of shape [N, 4]."""
    m = _batch1_squeeze_model()
    g = m.graph
    if_node = next(n for n in g.node if n.op_type == "If")
    for a in if_node.attribute:  # the branches read x itself (no Reshape), as the model's input
        for n in a.g.node:
            n.input[:] = ["x" if i == "r" else i for i in n.input]
    if_node.input[0] = "c"
    del g.node[:]
    g.node.append(if_node)
    g.input[0].type.tensor_type.shape.dim[1].dim_value = 4
    del g.input[0].type.tensor_type.shape.dim[2:]
    g.input.append(h.make_tensor_value_info("c", T.BOOL, []))
    onnx.checker.check_model(m)
    return m


def test_a_branch_invalid_at_the_shapes_of_a_run_time_if_fails_only_when_taken():
    """Compiled at x [3, 4] with c decided at run time: the then-branch cannot Squeeze axis 0; the
    compile goes on, the else-branch runs as ONNX Runtime's, taking the then-branch is a run-time error
    naming the If (ONNX Runtime refuses it too)."""
    m = _runtime_cond_model()
    sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    comp = compile_program(m, {"x": [3, 4]})
    assert isinstance(comp.program, ControlProgram)
    x = np.random.default_rng(3).standard_normal((3, 4)).astype(np.float32)
    (y,) = run_program(comp.program, [x, np.array(False)])
    np.testing.assert_allclose(y, sess.run(None, {"x": x, "c": np.array(False)})[0], rtol=1e-6)
    with pytest.raises(Exception):  # noqa: B017 (ONNX Runtime's own error type)
        sess.run(None, {"x": x, "c": np.array(True)})
    with pytest.raises(CompileError) as info:
        run_program(comp.program, [x, np.array(True)])
    assert info.value.stage == "run" and info.value.node == "if1"
    assert "If 'if1' took its then_branch, which does not compile at the compiled shapes" in info.value.message
    assert "cannot squeeze axis 0 of size 3" in info.value.message
    comp1 = compile_program(m, {"x": [1, 4]})  # at batch 1 both branches are valid
    x1 = x[:1]
    for c in (True, False):
        (y,) = run_program(comp1.program, [x1, np.array(c)])
        np.testing.assert_allclose(y, sess.run(None, {"x": x1, "c": np.array(c)})[0], rtol=1e-6)
