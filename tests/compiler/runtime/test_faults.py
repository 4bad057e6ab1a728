"""Run-time checks inside the kernels (compiler.runtime.faults; issue 17 item 6): an index computed in
the model outside its axis, and integer Div/Mod by zero, fail the run with an error naming the node,
in the ONNX backend's execution path and in compile()'s measuring child, also when the node is fused
with others. ONNX Runtime, the oracle, refuses the same inputs (its run raises); on good inputs Prism
gives ONNX Runtime's outputs."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import compiler
import compiler.backend as backend
from compiler.errors import CompileError

F, I32, I64 = TensorProto.FLOAT, TensorProto.INT32, TensorProto.INT64
DATA = np.arange(12, dtype=np.float32).reshape(4, 3)


def _model(nodes, inputs, outputs, inits=()):
    g = helper.make_graph(nodes, "g", inputs, outputs, list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m


def _indexing(op: str, idx_shape, out_shape, fused: bool, **attrs):
    """``y = op(d, i + 1)`` (then Relu when ``fused``): the index operand is computed in the model."""
    vi = helper.make_tensor_value_info
    ins = ["d", "j", "u"] if op.startswith("Scatter") else ["d", "j"]
    nodes = [helper.make_node("Add", ["i", "one"], ["j"], name="plus"), helper.make_node(op, ins, ["g"], name="ix", **attrs),
             helper.make_node("Relu" if fused else "Identity", ["g"], ["y"], name="after")]
    inits = [numpy_helper.from_array(DATA, "d"), numpy_helper.from_array(np.array(1, np.int64), "one")]
    if op.startswith("Scatter"):
        upd = np.full(idx_shape[:-1] if op == "ScatterND" else idx_shape, 50.0, np.float32)
        inits.append(numpy_helper.from_array(upd, "u"))
    return _model(nodes, [vi("i", I64, list(idx_shape))], [vi("y", F, list(out_shape))], inits)


INDEXING = [  # op, attrs, index shape, output shape, good indices (before the +1), bad ones, the axis and size named
    ("Gather", {}, (3,), (3, 3), [-5, 2, 0], [0, 3, 1], (0, 4)),
    ("Gather", {"axis": 1}, (2,), (4, 2), [-4, 1], [1, -5], (1, 3)),
    ("GatherElements", {"axis": 1}, (4, 3), (4, 3), [[-1, 0, 1]] * 4, [[0, 1, 1]] * 3 + [[0, 2, 0]], (1, 3)),
    ("GatherND", {}, (2, 2), (2,), [[2, 1], [-1, -4]], [[2, 1], [3, 0]], (0, 4)),
    ("ScatterND", {}, (1, 2), (4, 3), [[2, 1]], [[1, 2]], (1, 3)),
    ("ScatterElements", {"axis": 0}, (1, 3), (4, 3), [[2, -1, 0]], [[0, 3, 1]], (0, 4)),
]


@pytest.mark.parametrize("fused", [False, True])
@pytest.mark.parametrize("op,attrs,idx_shape,out_shape,good,bad_idx,named", INDEXING,
                         ids=[f"{c[0]}-{i}" for i, c in enumerate(INDEXING)])
def test_a_computed_index_out_of_range_fails_the_run_naming_the_node(op, attrs, idx_shape, out_shape, good, bad_idx,
                                                                       named, fused):
    m = _indexing(op, idx_shape, out_shape, fused, **attrs)
    sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    rep = backend.prepare(m)
    good_i = np.array(good, np.int64)
    np.testing.assert_array_equal(rep.run([good_i])[0], sess.run(None, {"i": good_i})[0])
    bad_i = np.array(bad_idx, np.int64)
    with pytest.raises(Exception):  # noqa: B017 - ONNX Runtime's errors have no common public class
        sess.run(None, {"i": bad_i})
    with pytest.raises(CompileError) as err:
        rep.run([bad_i])
    axis, size = named
    assert err.value.stage == "run" and err.value.node == "ix" and err.value.op == op
    assert err.value.message == (f"ix ({op}): an index computed in the model is out of range for axis {axis} of size "
                                 f"{size} (valid: -{size} to {size - 1})")


def _division(op: str, elem: int, fused: bool, **attrs):
    vi = helper.make_tensor_value_info
    nodes = [helper.make_node(op, ["a", "b"], ["q"], name="div", **attrs),
             helper.make_node("Abs" if fused else "Identity", ["q"], ["y"], name="after")]
    return _model(nodes, [vi("a", elem, [6]), vi("b", elem, [6])], [vi("y", elem, [6])])


DIVISION = [("Div", {}, I32), ("Div", {}, I64), ("Mod", {}, I32), ("Mod", {"fmod": 1}, I64)]


@pytest.mark.parametrize("fused", [False, True])
@pytest.mark.parametrize("op,attrs,elem", DIVISION, ids=[f"{c[0]}-{c[1]}-{c[2]}" for c in DIVISION])
def test_integer_division_by_zero_fails_the_run_naming_the_node(op, attrs, elem, fused):
    m = _division(op, elem, fused, **attrs)
    dt = np.int32 if elem == I32 else np.int64
    sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    rep = backend.prepare(m)
    a = np.array([7, 9, 20, 5, 100, 3], dt)
    b = np.array([2, 3, 6, 5, 7, 4], dt)
    np.testing.assert_array_equal(rep.run([a, b])[0], sess.run(None, {"a": a, "b": b})[0])
    b[4] = 0
    with pytest.raises(Exception, match="by zero"):
        sess.run(None, {"a": a, "b": b})
    with pytest.raises(CompileError) as err:
        rep.run([a, b])
    what = "modulo" if op == "Mod" else "division"
    short = "i32" if elem == I32 else "i64"
    assert err.value.stage == "run" and err.value.node == "div" and err.value.op == op
    assert err.value.message == (f"div ({op}): integer {what} by zero ({short}; undefined in the ONNX spec, ONNX "
                                 f"Runtime stops with 'Integer {what} by zero')")


def test_compile_reports_the_check_from_its_measuring_child():
    """compile() runs the kernels in a child process (its integer inputs are zeros: 0 / 0): the
    result's error is the check's, stage run, with the node; the passes and kernels before it are kept."""
    result = compiler.compile(_division("Div", I32, fused=True).SerializeToString(), benchmark=False)
    assert result.error is not None and result.error["stage"] == "run" and result.error["node"] == "div"
    assert result.error["message"].startswith("div (Div): integer division by zero (i32;")
    assert not result.ok and {"pass.finished", "kernel.compiled"} <= {e["type"] for e in result.events}


def test_float_division_and_integer_index_math_are_not_checked():
    """Float Div by zero is IEEE (inf/nan, as ONNX Runtime gives); the check is on what the spec
    calls an error only."""
    vi = helper.make_tensor_value_info
    m = _model([helper.make_node("Div", ["a", "b"], ["y"], name="fdiv")], [vi("a", F, [3]), vi("b", F, [3])],
               [vi("y", F, [3])])
    a, b = np.array([1, -1, 0], np.float32), np.zeros(3, np.float32)
    want = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"a": a, "b": b})[0]
    np.testing.assert_array_equal(backend.prepare(m).run([a, b])[0], want)


def test_a_shared_library_of_checked_kernels_defines_the_fault_word(tmp_path):
    """Kernels linked outside the runtime (compiler.standalone) carry the word their checks write:
    the library loads (no undefined prism_fault) and it reads 0."""
    import ctypes

    from compiler.driver import compile_program
    from compiler.standalone import shared_library

    m = _indexing("Gather", (3,), (3, 3), fused=False)
    path = tmp_path / "m.so"
    path.write_bytes(shared_library(compile_program(m, None).program, "host"))
    assert ctypes.c_int64.in_dll(ctypes.CDLL(str(path)), "prism_fault").value == 0
