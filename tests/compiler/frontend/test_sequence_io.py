"""Sequence and optional values at the backend boundary (compiler.frontend.sequence_io).

Expected values from onnx.reference; the flattened model is checked structurally."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator

from compiler.backend import PrismBackend
from compiler.errors import CompileError
from compiler.frontend.sequence_io import flatten_inputs, rebuild_outputs

F = TensorProto.FLOAT


def _concat_model():
    s = helper.make_tensor_sequence_value_info("s", F, None)
    y = helper.make_tensor_value_info("y", F, None)
    n = helper.make_tensor_value_info("n", TensorProto.INT64, None)
    g = helper.make_graph([helper.make_node("ConcatFromSequence", ["s"], ["y"], axis=0),
                           helper.make_node("SequenceLength", ["s"], ["n"])], "t", [s], [y, n])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def test_flatten_inputs_gives_each_element_an_input():
    m = _concat_model()
    a, b = np.ones((2, 3), np.float64), np.zeros((1, 3), np.float32)
    flat_model, flat = flatten_inputs(m, {"s": [a, b]})
    assert [i.name for i in flat_model.graph.input] == ["s__in0", "s__in1"]
    assert [d.dim_value for d in flat_model.graph.input[0].type.tensor_type.shape.dim] == [2, 3]
    assert flat_model.graph.node[0].op_type == "SequenceConstruct"
    assert list(flat_model.graph.node[0].input) == ["s__in0", "s__in1"]
    assert flat["s__in0"].dtype == np.float32  # the declared element type


def test_each_length_compiles_its_own_program_and_matches_the_reference():
    m = _concat_model()
    rep = PrismBackend.prepare(m, isolate=False)
    ref = ReferenceEvaluator(m)
    rng = np.random.default_rng(3)
    for k in (1, 3, 3):
        s = [rng.standard_normal((j + 1, 4)).astype(np.float32) for j in range(k)]
        y, n = rep.run([s])
        ry, rn = ref.run(None, {"s": s})
        np.testing.assert_array_equal(y, ry)
        assert n == rn and n.dtype == rn.dtype
    assert len(rep.children) == 2


@pytest.mark.parametrize("value, msg", [(np.zeros(3, np.float32), "is a sequence: pass a list"),
                                        (None, "is a sequence: pass a list")])
def test_a_sequence_input_needs_a_list(value, msg):
    with pytest.raises(CompileError, match=msg) as ei:
        PrismBackend.prepare(_concat_model(), isolate=False).run([value])
    assert ei.value.stage == "request"


def test_a_tensor_input_given_a_list_is_a_request_error():
    x = helper.make_tensor_value_info("x", F, [2])
    s = helper.make_tensor_sequence_value_info("s", F, None)
    g = helper.make_graph([helper.make_node("SequenceInsert", ["s", "x"], ["y"])], "t", [s, x],
                          [helper.make_tensor_sequence_value_info("y", F, None)])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    with pytest.raises(CompileError, match="input 'x' is a tensor") as ei:
        PrismBackend.prepare(m, isolate=False).run([[], [np.zeros(2, np.float32)]])
    assert ei.value.stage == "request"


def test_rebuild_outputs_follows_the_layout():
    layout = {"s": {"kind": "sequence", "names": ["s__seq0", "s__seq1"]}, "o": {"kind": "absent", "names": []},
              "t": {"kind": "tensor", "names": ["t__opt"]}}
    outs = rebuild_outputs(["s", "x", "o", "t"], ["s__seq0", "s__seq1", "x", "t__opt"], [1, 2, 3, 4], layout)
    assert outs == [[1, 2], 3, None, 4]


def test_float16_sequences_in_and_out():
    f16 = TensorProto.FLOAT16
    body = helper.make_graph([helper.make_node("Mul", ["e", "e"], ["sq"])], "body",
                             [helper.make_tensor_value_info("e", f16, None)], [helper.make_tensor_value_info("sq", f16, None)])
    g = helper.make_graph([helper.make_node("SequenceMap", ["s"], ["q"], body=body),
                           helper.make_node("ConcatFromSequence", ["q"], ["y"], axis=0)], "t",
                          [helper.make_tensor_sequence_value_info("s", f16, None)],
                          [helper.make_tensor_sequence_value_info("q", f16, None), helper.make_tensor_value_info("y", f16, None)])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)])
    rng = np.random.default_rng(5)
    s = [(rng.standard_normal((k + 1, 3)) * 3).astype(np.float16) for k in range(2)]
    q, y = PrismBackend.prepare(m, isolate=False).run([s])
    rq, ry = ReferenceEvaluator(m).run(None, {"s": s})
    assert y.dtype == np.float16 and all(a.dtype == np.float16 for a in q)
    np.testing.assert_array_equal(y, ry)
    for a, b in zip(q, rq, strict=True):
        np.testing.assert_array_equal(a, b)
