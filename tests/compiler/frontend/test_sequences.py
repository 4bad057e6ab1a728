"""Sequence and optional values resolved at compile time (compiler.frontend.sequences).

Numerics against onnx.reference (the oracle) through Prism's backend; errors name the node."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator

from compiler.backend import PrismBackend
from compiler.errors import CompileError
from compiler.frontend.sequences import SEQ_OPS, resolve_sequences
from compiler.driver import compile_program
from compiler.driver.prepare import prepare_model

R = np.random.default_rng(11)
F = TensorProto.FLOAT


def _model(nodes, inputs, outputs, opset=18, inits=()):
    g = helper.make_graph(nodes, "t", inputs, outputs, list(inits))
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])


def _seq(name, elem=F):
    return helper.make_tensor_sequence_value_info(name, elem, None)


def _t(name, elem=F, shape=None):
    return helper.make_tensor_value_info(name, elem, shape)


def _const(name, arr):
    return helper.make_node("Constant", [], [name], value=helper.make_tensor(
        name, helper.np_dtype_to_tensor_dtype(arr.dtype), arr.shape, arr.reshape(-1).tolist()))


def _check(model, feeds):
    got = PrismBackend.prepare(model, isolate=False).run([feeds[i.name] for i in model.graph.input])
    ref = ReferenceEvaluator(model).run(None, feeds)
    assert len(got) == len(ref)
    for g, r, vo in zip(got, ref, model.graph.output, strict=True):
        opt_tensor = vo.type.HasField("optional_type") and vo.type.optional_type.elem_type.HasField("tensor_type")
        if opt_tensor and isinstance(r, list):
            r = r[0]  # onnx.reference's Optional gives [x] / [None]; the backend API gives x / None
        if isinstance(r, list):
            assert isinstance(g, list) and len(g) == len(r)
            for a, b in zip(g, r, strict=True):
                assert a.shape == b.shape and a.dtype == b.dtype
                np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-6)
        elif r is None:
            assert g is None
        else:
            g = np.asarray(g)
            assert g.shape == np.asarray(r).shape and g.dtype == np.asarray(r).dtype
            np.testing.assert_allclose(g, r, rtol=1e-6, atol=1e-6)


def test_split_to_sequence_with_remainder_then_stack_with_new_axis():
    # split 3 along an axis of 8: pieces 3, 3, 2; every piece then reduced to [4] and stacked at axis -1
    nodes = [_const("sp", np.array(3, np.int64)),
             helper.make_node("SplitToSequence", ["x", "sp"], ["s"], axis=1),
             helper.make_node("SequenceLength", ["s"], ["n"]),
             helper.make_node("SequenceMap", ["s"], ["m"], body=helper.make_graph(
                 [helper.make_node("ReduceSum", ["e", "ax"], ["r"], keepdims=0)], "body", [_t("e")], [_t("r")],
                 [helper.make_tensor("ax", TensorProto.INT64, [1], [1])])),
             helper.make_node("ConcatFromSequence", ["m"], ["y"], axis=-1, new_axis=1)]
    m = _model(nodes, [_t("x", F, [4, 8])], [_t("y"), _t("n", TensorProto.INT64)])
    _check(m, {"x": R.standard_normal((4, 8)).astype(np.float32)})


def test_split_to_sequence_without_split_and_keepdims_0():
    nodes = [helper.make_node("SplitToSequence", ["x"], ["s"], axis=0, keepdims=0),
             helper.make_node("ConcatFromSequence", ["s"], ["y"], axis=0)]
    m = _model(nodes, [_t("x", F, [3, 5])], [_t("y")])
    _check(m, {"x": R.standard_normal((3, 5)).astype(np.float32)})


def test_insert_erase_at_with_negative_positions_and_sequence_io():
    i64 = TensorProto.INT64
    nodes = [_const("m1", np.array(-1, np.int64)), _const("m2", np.array(-2, np.int64)),
             helper.make_node("SequenceInsert", ["s", "t", "m1"], ["s1"]),    # before the last
             helper.make_node("SequenceErase", ["s1"], ["s2"]),              # drop the last
             helper.make_node("SequenceErase", ["s2", "m2"], ["s3"]),        # drop the one before the last
             helper.make_node("SequenceAt", ["s3", "m1"], ["last"]),
             helper.make_node("SequenceLength", ["s3"], ["n"])]
    m = _model(nodes, [_seq("s", i64), _t("t", i64, [2])], [_seq("s3", i64), _t("last", i64), _t("n", i64)])
    s = [np.arange(k + 1, dtype=np.int64) * (k + 1) for k in range(4)]
    _check(m, {"s": s, "t": np.array([7, 8], np.int64)})


def test_empty_sequence_input_and_insert():
    nodes = [helper.make_node("SequenceInsert", ["s", "t"], ["y"])]
    m = _model(nodes, [_seq("s"), _t("t", F, [3])], [_seq("y")])
    _check(m, {"s": [], "t": np.array([1, 2, 3], np.float32)})


def test_sequence_map_with_a_tensor_input_and_two_outputs():
    body = helper.make_graph([helper.make_node("Mul", ["a", "b"], ["p"]), helper.make_node("Shape", ["a"], ["sh"])],
                             "body", [_t("a"), _t("b")], [_t("p"), _t("sh", TensorProto.INT64)])
    m = _model([helper.make_node("SequenceMap", ["s", "w"], ["p", "sh"], body=body)],
               [_seq("s"), _t("w", F, [3])], [_seq("p"), _seq("sh", TensorProto.INT64)])
    _check(m, {"s": [R.standard_normal((k + 1, 3)).astype(np.float32) for k in range(3)],
               "w": np.array([1, -2, 3], np.float32)})


@pytest.mark.parametrize("present", [True, False])
def test_optional_input_decides_a_branch(present):
    opt = helper.make_tensor_type_proto(F, [2])
    then_g = helper.make_graph([helper.make_node("OptionalGetElement", ["o"], ["g"]),
                                helper.make_node("Add", ["g", "x"], ["r1"])], "then", [], [_t("r1")])
    else_g = helper.make_graph([helper.make_node("Neg", ["x"], ["r2"])], "else", [], [_t("r2")])
    nodes = [helper.make_node("OptionalHasElement", ["o"], ["has"]),
             helper.make_node("If", ["has"], ["y"], then_branch=then_g, else_branch=else_g)]
    m = _model(nodes, [helper.make_value_info("o", helper.make_optional_type_proto(opt)), _t("x", F, [2])],
               [_t("y"), _t("has", TensorProto.BOOL)])
    _check(m, {"o": np.array([5, 6], np.float32) if present else None, "x": np.array([1, 2], np.float32)})


def test_optional_output_absent_and_present():
    tp = helper.make_tensor_type_proto(F, [2])
    nodes = [helper.make_node("Optional", [], ["none"], type=tp), helper.make_node("Optional", ["x"], ["some"])]
    otp = helper.make_optional_type_proto(tp)
    m = _model(nodes, [_t("x", F, [2])], [helper.make_value_info("none", otp), helper.make_value_info("some", otp)])
    _check(m, {"x": np.array([3, 4], np.float32)})


def test_loop_builds_a_sequence_then_concatenated():
    i64 = TensorProto.INT64
    body = helper.make_graph(
        [helper.make_node("Identity", ["c"], ["c2"]),
         helper.make_node("Cast", ["i"], ["fi"], to=F),
         helper.make_node("Mul", ["x", "fi"], ["xi"]),
         helper.make_node("SequenceInsert", ["acc", "xi"], ["acc2"])],
        "body", [_t("i", i64, []), _t("c", TensorProto.BOOL, []), _seq("acc")], [_t("c2", TensorProto.BOOL), _seq("acc2")])
    nodes = [_const("trip", np.array(4, np.int64)), _const("cond", np.array(True)),
             helper.make_node("SequenceEmpty", [], ["e"], dtype=F),
             helper.make_node("Loop", ["trip", "cond", "e"], ["s"], body=body),
             helper.make_node("ConcatFromSequence", ["s"], ["y"], axis=0)]
    m = _model(nodes, [_t("x", F, [2, 3])], [_t("y")])
    _check(m, {"x": R.standard_normal((2, 3)).astype(np.float32)})


def test_resolved_model_has_no_sequence_values_and_computes_the_same():
    nodes = [helper.make_node("SequenceConstruct", ["a", "b"], ["s"]),
             helper.make_node("Identity", ["s"], ["s2"]),
             helper.make_node("ConcatFromSequence", ["s2"], ["y"], axis=1)]
    m = _model(nodes, [_t("a", F, [2, 2]), _t("b", F, [2, 3])], [_t("y")])
    r = resolve_sequences(m, final=True)
    assert not [n.op_type for n in r.graph.node if n.op_type in SEQ_OPS]
    assert [n.op_type for n in r.graph.node] == ["Concat"]
    feeds = {"a": R.standard_normal((2, 2)).astype(np.float32), "b": R.standard_normal((2, 3)).astype(np.float32)}
    np.testing.assert_array_equal(ReferenceEvaluator(r).run(None, feeds)[0], ReferenceEvaluator(m).run(None, feeds)[0])
    plain = _model([helper.make_node("Relu", ["a"], ["y"])], [_t("a", F, [2])], [_t("y")])
    assert resolve_sequences(plain) is plain


def test_data_dependent_position_names_the_node():
    nodes = [helper.make_node("SplitToSequence", ["x"], ["s"], axis=0),
             helper.make_node("SequenceAt", ["s", "p"], ["y"], name="pick")]
    m = _model(nodes, [_t("x", F, [3, 2]), _t("p", TensorProto.INT64, [])], [_t("y")])
    with pytest.raises(CompileError) as ei:
        compile_program(m, {"x": [3, 2], "p": []})
    e = ei.value
    assert e.stage == "import" and e.node == "pick" and e.op == "SequenceAt"
    assert "position 'p' is not a compile-time constant" in e.message


@pytest.mark.parametrize("pos, why", [(3, "position 3 is out of range for a sequence of 3 tensors"),
                                      (-4, "position -4 is out of range")])
def test_position_out_of_range_is_an_error(pos, why):
    nodes = [_const("p", np.array(pos, np.int64)), helper.make_node("SplitToSequence", ["x"], ["s"], axis=0),
             helper.make_node("SequenceAt", ["s", "p"], ["y"], name="at")]
    m = _model(nodes, [_t("x", F, [3, 2])], [_t("y")])
    with pytest.raises(CompileError, match=why) as ei:
        prepare_model(m, {"x": [3, 2]})
    assert ei.value.node == "at"


def test_element_of_an_absent_optional_is_an_error():
    nodes = [helper.make_node("Optional", [], ["o"], type=helper.make_tensor_type_proto(F, [2])),
             helper.make_node("OptionalGetElement", ["o"], ["y"], name="get")]
    m = _model(nodes, [], [_t("y")])
    with pytest.raises(CompileError, match="optional 'o' is empty") as ei:
        prepare_model(m, {})
    assert ei.value.op == "OptionalGetElement"


def test_sequence_graph_input_outside_the_backend_is_an_error():
    m = _model([helper.make_node("SequenceLength", ["s"], ["n"])], [_seq("s")], [_t("n", TensorProto.INT64)])
    with pytest.raises(CompileError, match="graph input 's' is a sequence or optional"):
        prepare_model(m, {})


def test_names_made_in_later_rounds_do_not_collide():
    # SequenceMap A is inlined in the first round; the Loop is unrolled by control flow, so SequenceMap B
    # (on the loop's sequence) is inlined in a later round: its copies must get names of their own
    i64 = TensorProto.INT64
    neg = helper.make_graph([helper.make_node("Neg", ["e"], ["r"])], "neg", [_t("e")], [_t("r")])
    body = helper.make_graph(
        [helper.make_node("Identity", ["c"], ["c2"]), helper.make_node("SequenceInsert", ["acc", "x"], ["acc2"])],
        "body", [_t("i", i64, []), _t("c", TensorProto.BOOL, []), _seq("acc")], [_t("c2", TensorProto.BOOL),
                                                                                 _seq("acc2")])
    nodes = [_const("trip", np.array(2, np.int64)), _const("cond", np.array(True)),
             helper.make_node("SplitToSequence", ["x"], ["s"], axis=0),
             helper.make_node("SequenceMap", ["s"], ["a"], body=neg),
             helper.make_node("ConcatFromSequence", ["a"], ["ya"], axis=0),
             helper.make_node("SequenceEmpty", [], ["e0"], dtype=F),
             helper.make_node("Loop", ["trip", "cond", "e0"], ["l"], body=body),
             helper.make_node("SequenceMap", ["l"], ["b"], body=neg),
             helper.make_node("ConcatFromSequence", ["b"], ["yb"], axis=0)]
    m = _model(nodes, [_t("x", F, [2, 3])], [_t("ya"), _t("yb")])
    _check(m, {"x": R.standard_normal((2, 3)).astype(np.float32)})
