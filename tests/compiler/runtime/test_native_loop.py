"""Loop iterations in generated code (compiler.codegen.loop_entry, compiler.runtime.native_loop): the
body's entry function called from a native loop, loop-carried values copied between its buffers,
scan outputs stacked; Python dispatch kept where the loop function cannot serve. Expected values
from ONNX Runtime (and onnx.reference where it runs the case)."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper
from onnx.reference import ReferenceEvaluator

import compiler
from compiler.driver import compile_program
from compiler.frontend.control_flow import MAX_UNROLL_STEPS
from compiler.runtime.control import ControlProgram
from compiler.runtime.program import bind


def _vi(name, elem=T.FLOAT, shape=None):
    return h.make_tensor_value_info(name, elem, shape)


def _model(nodes, inputs, outputs, inits=()) -> onnx.ModelProto:
    m = h.make_model(h.make_graph(nodes, "g", inputs, outputs, list(inits)), opset_imports=[h.make_opsetid("", 17)])
    m.ir_version = 8
    return m


def grow(trip: bool) -> onnx.ModelProto:
    """``a <- a * 2 + x`` while ``sum(a) < limit`` (at most ``m`` times when ``trip``); a second carried
    value passed through unchanged (an Identity kernel: the part wiring adds one); each iteration's ``a`` and ``i * a`` stacked."""
    body = h.make_graph([h.make_node("Mul", ["a", "two"], ["am"]), h.make_node("Add", ["am", "x"], ["a2"]),
                         h.make_node("ReduceSum", ["a2"], ["s"], keepdims=0), h.make_node("Less", ["s", "limit"], ["go"]),
                         h.make_node("Cast", ["i"], ["fi"], to=T.FLOAT), h.make_node("Mul", ["a2", "fi"], ["ia"]),
                         h.make_node("Identity", ["a2"], ["each"])], "body",
                        [_vi("i", T.INT64, []), _vi("c", T.BOOL, []), _vi("a", shape=[5]), _vi("keep", shape=[2])],
                        [_vi("go", T.BOOL, []), _vi("a2", shape=[5]), _vi("keep", shape=[2]), _vi("each", shape=[5]),
                         _vi("ia", shape=[5])], [numpy_helper.from_array(np.float32(2), "two")])
    ins = [_vi("x", shape=[5]), _vi("limit", shape=[]), _vi("k", shape=[2]), _vi("start", T.BOOL, [])]
    ins += [_vi("m", T.INT64, [])] if trip else []
    return _model([h.make_node("Loop", ["m" if trip else "", "start", "x", "k"], ["final", "kept", "steps", "isteps"],
                               body=body, name="grow")], ins,
                  [_vi("final", shape=[5]), _vi("kept", shape=[2]), _vi("steps", shape=["n", 5]),
                   _vi("isteps", shape=["n", 5])])


def _run_all(m: onnx.ModelProto, feeds_list: list[dict], reference: bool) -> ControlProgram:
    prog = compile_program(m, None).program
    assert isinstance(prog, ControlProgram)
    sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    bound = None
    for feeds in feeds_list:
        args = [feeds[i.name] for i in m.graph.input]
        if bound is None:
            bound = bind(prog, args)
        else:  # one binding, run again with other inputs: the body's buffers are reset by the feed
            bound.set_inputs(args)
        bound.run()
        refs = [sess.run(None, feeds)] + ([ReferenceEvaluator(m).run(None, feeds)] if reference else [])
        for ref in refs:
            for g, r in zip(bound.outputs(), ref, strict=True):
                assert g.shape == r.shape
                np.testing.assert_allclose(g, r, rtol=1e-5, atol=1e-5)
    return prog


def test_loop_with_trip_count_runs_in_generated_code() -> None:
    m = grow(trip=True)
    x = np.array([0.5, 1.0, 0.25, 2.0, 0.1], np.float32)
    k = np.array([3.0, -4.0], np.float32)
    cases = [{"x": x, "limit": np.array(lim, np.float32), "k": k, "start": np.array(True), "m": np.array(t, np.int64)}
             for lim, t in ((1e9, 20), (100.0, 50), (1e9, 1), (5.0, 10))]
    prog = _run_all(m, cases, reference=True)
    native = prog.steps[0].attrs["native"]
    assert native["cond_out"] and native["carried"] == [20, 8] and native["scans"] == [20, 20]
    # zero trips, or a false condition on entry: the initial values and empty scans (onnx.reference cannot
    # stack no scan output)
    _run_all(m, [{**cases[0], "m": np.array(0, np.int64)}, {**cases[1], "start": np.array(False)}], reference=False)


def test_loop_without_trip_count_falls_back_for_its_scan_outputs() -> None:
    """No M: the stacked scan outputs cannot be sized before the run; Python dispatches, same results."""
    m = grow(trip=False)
    x = np.array([0.5, 1.0, 0.25, 2.0, 0.1], np.float32)
    _run_all(m, [{"x": x, "limit": np.array(lim, np.float32), "k": np.zeros(2, np.float32), "start": np.array(True)}
                 for lim in (100.0, 1e6)], reference=True)


def test_long_loop_result_and_decision() -> None:
    body = h.make_graph([h.make_node("Mul", ["a", "k"], ["am"]), h.make_node("Add", ["am", "x"], ["a2"]),
                         h.make_node("Identity", ["c"], ["c2"])], "body",
                        [_vi("i", T.INT64, []), _vi("c", T.BOOL, []), _vi("a", shape=[64])],
                        [_vi("c2", T.BOOL, []), _vi("a2", shape=[64])], [numpy_helper.from_array(np.float32(0.9), "k")])
    m = _model([h.make_node("Loop", ["m", "", "x"], ["y"], body=body, name="L")],
               [_vi("x", shape=[64]), _vi("m", T.INT64, [])], [_vi("y", shape=[64])])
    x = np.linspace(-1, 1, 64, dtype=np.float32)
    # onnx.reference (1.2x) runs no iteration of a Loop with M given and cond '': ONNX Runtime is the oracle
    _run_all(m, [{"x": x, "m": np.array(t, np.int64)} for t in (1000, 3)], reference=False)
    res = compiler.compile(m, benchmark=False)
    assert res.ok, res.error
    (decision,) = next(e for e in res.events if e["type"] == "graph.fused")["control"]
    assert "the iterations run in generated code" in decision["decision"]


def _scan(axis: int, dirs: tuple[int, int, int, int]) -> onnx.ModelProto:
    """``s <- s + a_t * b_t`` over two scan inputs; outputs each ``s`` and each ``relu(a_t - s)``."""
    steps = MAX_UNROLL_STEPS + 8
    body = h.make_graph([h.make_node("Mul", ["at", "bt"], ["ab"]), h.make_node("Add", ["s", "ab"], ["s2"]),
                         h.make_node("Sub", ["at", "s2"], ["d"]), h.make_node("Relu", ["d"], ["r"]),
                         h.make_node("Identity", ["s2"], ["each"])], "body",
                        [_vi("s", shape=[3]), _vi("at", shape=[3]), _vi("bt", shape=[3])],
                        [_vi("s2", shape=[3]), _vi("each", shape=[3]), _vi("r", shape=[3])])
    shape = [steps, 3] if axis == 0 else [3, steps]
    return _model([h.make_node("Scan", ["s0", "xa", "xb"], ["final", "ys", "rs"], body=body, num_scan_inputs=2,
                               scan_input_axes=[axis, axis], scan_input_directions=list(dirs[:2]),
                               scan_output_axes=[axis, axis], scan_output_directions=list(dirs[2:]), name="acc")],
                  [_vi("s0", shape=[3]), _vi("xa", shape=shape), _vi("xb", shape=shape)],
                  [_vi("final", shape=[3]), _vi("ys", shape=shape), _vi("rs", shape=shape)])


def test_scan_runs_in_generated_code_in_both_directions() -> None:
    rng = np.random.default_rng(5)
    for dirs in ((0, 0, 0, 0), (1, 0, 0, 1), (0, 1, 1, 0)):
        m = _scan(0, dirs)
        feeds = {"s0": rng.standard_normal(3).astype(np.float32),
                 "xa": rng.standard_normal((MAX_UNROLL_STEPS + 8, 3)).astype(np.float32),
                 "xb": rng.standard_normal((MAX_UNROLL_STEPS + 8, 3)).astype(np.float32)}
        # onnx.reference ignores the scan directions: ONNX Runtime is the oracle for reversed ones
        prog = _run_all(m, [feeds, {**feeds, "s0": -feeds["s0"]}], reference=dirs == (0, 0, 0, 0))
        assert prog.steps[0].attrs["native"]["scan_ins"] == [(12, bool(dirs[0])), (12, bool(dirs[1]))]
    m = _scan(1, (0, 0, 0, 0))  # axis 1: slices not contiguous, dispatched from Python
    feeds = {k: rng.standard_normal(v).astype(np.float32)
             for k, v in (("s0", 3), ("xa", (3, MAX_UNROLL_STEPS + 8)), ("xb", (3, MAX_UNROLL_STEPS + 8)))}
    prog = _run_all(m, [feeds], reference=False)
    assert "native" not in prog.steps[0].attrs
