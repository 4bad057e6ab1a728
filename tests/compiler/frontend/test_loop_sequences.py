"""A Loop that appends one tensor per iteration to a sequence stacked after it, with a run-time trip count
(compiler.frontend.loop_sequences, in resolve-sequences): the sequence becomes a scan output, so the model
compiles with the Loop run at run time. Expected values from ONNX Runtime (onnx.reference's Loop loses the
outer-scope value in this form); zero iterations, which ORT refuses (ConcatFromSequence of nothing), give
the empty stack."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper

from compiler import CompileError
from compiler.driver import compile_program
from compiler.frontend.loop_sequences import sequence_loops_to_scans
from compiler.runtime.execute import run_program

V = h.make_tensor_value_info


def _model(new_axis: int = 1, with_scan: bool = False) -> onnx.ModelProto:
    """y = stack([x * i for i in range(M)]) (torch's list-append loop), a carried acc += x beside it, and
    with ``with_scan`` a scan output acc too."""
    seq = h.make_tensor_sequence_value_info
    nodes = [h.make_node("Cast", ["i"], ["fi"], to=T.FLOAT), h.make_node("Mul", ["x", "fi"], ["xi"]),
             h.make_node("SequenceInsert", ["seq", "xi"], ["seq2"]), h.make_node("Add", ["acc", "x"], ["acc2"]),
             h.make_node("Identity", ["ci"], ["co"])]
    outs = [V("co", T.BOOL, []), V("acc2", T.FLOAT, [3]), seq("seq2", T.FLOAT, None)]
    if with_scan:
        nodes.append(h.make_node("Identity", ["acc2"], ["accs"]))
        outs.append(V("accs", T.FLOAT, [3]))
    body = h.make_graph(nodes, "body", [V("i", T.INT64, []), V("ci", T.BOOL, []), V("acc", T.FLOAT, [3]),
                                        seq("seq", T.FLOAT, None)], outs)
    loop_outs = ["accf", "sf"] + (["trace"] if with_scan else [])
    g = h.make_graph([h.make_node("SequenceEmpty", [], ["s0"], dtype=T.FLOAT),
                      h.make_node("Loop", ["M", "", "a0", "s0"], loop_outs, body=body, name="append_loop"),
                      h.make_node("ConcatFromSequence", ["sf"], ["y"], axis=0, new_axis=new_axis)], "m",
                     [V("M", T.INT64, []), V("x", T.FLOAT, [3])],
                     [V("y", T.FLOAT, [None, 3]), V("accf", T.FLOAT, [3])] + ([V("trace", T.FLOAT, [None, 3])] if with_scan else []),
                     [numpy_helper.from_array(np.zeros(3, np.float32), "a0")])
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.checker.check_model(m)
    return m


@pytest.mark.parametrize("with_scan", [False, True])
def test_a_list_appended_in_a_run_time_loop_is_a_scan_output(with_scan: bool) -> None:
    m = _model(with_scan=with_scan)
    out, loops = sequence_loops_to_scans(m)
    assert loops == ["append_loop"] and not any(n.op_type.startswith(("Sequence", "Concat")) for n in out.graph.node
                                                if n.op_type != "SequenceEmpty")
    prog = compile_program(m, None).program
    sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    x = np.array([1, -2, 3], np.float32)
    for trips in (1, 4, 9):
        feeds = {"M": np.array(trips, np.int64), "x": x}
        got = run_program(prog, [feeds["M"], x])
        for g, r in zip(got, sess.run(None, feeds), strict=True):
            assert g.shape == r.shape
            np.testing.assert_array_equal(g, r)
    y = run_program(prog, [np.array(0, np.int64), x])[0]
    assert y.shape == (0, 3) and y.dtype == np.float32


def test_other_forms_stay_sequences() -> None:
    """Concatenated along the existing axis (new_axis=0) it is not a stack: left as it was, and the
    sequence of run-time length is still named at resolve-sequences."""
    m = _model(new_axis=0)
    out, loops = sequence_loops_to_scans(m)
    assert out is m and loops == []
    with pytest.raises(CompileError) as info:
        compile_program(m, None)
    assert "ConcatFromSequence" in info.value.message and "not known at compile time" in info.value.message


def test_a_stack_of_run_time_length_read_by_a_later_node_names_that_node_and_the_loop() -> None:
    """The stack's length is the run-time trip count; a node after the Loop that reads it (a Relu) needs
    a static shape where the model is compiled in parts: the error names the Relu and the Loop, not the
    internal part ('part1 reads %ys ...')."""
    m = _model()
    m.graph.node[2].output[0] = "ys"
    m.graph.node.append(h.make_node("Relu", ["ys"], ["y"]))
    with pytest.raises(CompileError) as info:
        compile_program(m, None)
    assert info.value.stage == "shape" and info.value.node == "Relu:y"
    assert info.value.message.startswith("Relu:y (Relu), after Loop 'append_loop', reads %ys, whose shape is known "
                                         "only at run time")
