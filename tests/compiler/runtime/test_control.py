"""Runtime control flow (issue 13 item 2): If decided at run time, Loop and Scan bodies compiled once
and called per iteration (compiler.driver.control, compiler.runtime.control).

Expected values come from ONNX Runtime and onnx.reference on the same model, never from Prism.
"""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper
from onnx.reference import ReferenceEvaluator

import compiler
from compiler import CompileError
from compiler.backend import PrismBackend
from compiler.driver import compile_program
from compiler.frontend.control_flow import MAX_UNROLL_STEPS
from compiler.runtime.control import ControlProgram
from compiler.runtime.execute import run_program


def _vi(name, elem=T.FLOAT, shape=None):
    return h.make_tensor_value_info(name, elem, shape)


def _c(name, arr):
    return numpy_helper.from_array(np.asarray(arr), name)


def _model(nodes, inputs, outputs, inits=(), opset=17) -> onnx.ModelProto:
    m = h.make_model(h.make_graph(nodes, "g", inputs, outputs, list(inits)), opset_imports=[h.make_opsetid("", opset)])
    m.ir_version = 8
    return m


def _graph(nodes, name, inputs, outputs, inits=()):
    return h.make_graph(nodes, name, inputs, outputs, list(inits))


def _oracles(m: onnx.ModelProto, feeds: dict, reference: bool = True) -> list[list[np.ndarray]]:
    sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    return [sess.run(None, feeds)] + ([ReferenceEvaluator(m).run(None, feeds)] if reference else [])


def _check(m: onnx.ModelProto, feeds_list: list[dict], reference: bool = True) -> ControlProgram:
    comp = compile_program(m, None)
    assert isinstance(comp.program, ControlProgram)  # run-time control flow, not unrolled or folded
    for feeds in feeds_list:
        got = run_program(comp.program, [feeds[i.name] for i in m.graph.input])
        for ref in _oracles(m, feeds, reference):
            for g, r in zip(got, ref, strict=True):
                assert g.shape == r.shape
                np.testing.assert_allclose(g, r, rtol=1e-5, atol=1e-6)
    return comp.program


def data_if(rows: int = 2) -> onnx.ModelProto:
    """``y = relu(sum(x) > 0 ? x * 2 : x - 1) + b``: the condition is computed from the data; the If's
    output feeds a later node; the else branch reads an outer value computed before the If."""
    then = _graph([h.make_node("Mul", ["x", "two"], ["t"])], "then", [], [_vi("t", shape=[rows, 3])],
                  [_c("two", np.float32(2))])
    els = _graph([h.make_node("Sub", ["x", "shift"], ["e"])], "else", [], [_vi("e", shape=[rows, 3])])
    return _model([h.make_node("ReduceSum", ["x"], ["s"], keepdims=0), h.make_node("Greater", ["s", "zero"], ["c"]),
                   h.make_node("Abs", ["b"], ["shift"]),
                   h.make_node("If", ["c"], ["z"], then_branch=then, else_branch=els, name="sign_if"),
                   h.make_node("Relu", ["z"], ["r"]), h.make_node("Add", ["r", "b"], ["y"])],
                  [_vi("x", shape=[rows, 3]), _vi("b", shape=[3])], [_vi("y", shape=[rows, 3])],
                  [_c("zero", np.float32(0))])


def test_data_dependent_if_takes_both_branches() -> None:
    m = data_if()
    b = np.array([0.5, -1.0, 2.0], np.float32)
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    prog = _check(m, [{"x": x, "b": b}, {"x": -x - 1, "b": b}])
    assert [s.kind for s in prog.steps] == ["part", "If", "part"]


def test_branches_of_different_shapes_as_graph_outputs_and_refused_when_read() -> None:
    from tests.compiler.frontend.test_input_values import if_on_mode

    m = if_on_mode()
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    _check(m, [{"x": x, "mode": np.array(v, np.int64)} for v in (1, 0, -5)])
    m.graph.node.append(h.make_node("Relu", ["y"], ["r"]))
    m.graph.output[0].name = "r"
    with pytest.raises(CompileError) as info:
        compile_program(m, None)
    assert info.value.node == "select" and "the shapes [2, 3] and [3, 2]" in info.value.message


def while_loop(with_trip: bool) -> onnx.ModelProto:
    """Doubles ``acc`` while ``sum(acc) < limit`` (the body's condition: an early exit), at most ``m``
    iterations when ``with_trip``; scan output: each iteration's acc; reads the outer value ``scale``."""
    body = _graph([h.make_node("Mul", ["a", "scale"], ["a2"]), h.make_node("ReduceSum", ["a2"], ["s"], keepdims=0),
                   h.make_node("Less", ["s", "limit"], ["go"]), h.make_node("Identity", ["a2"], ["each"])], "body",
                  [_vi("i", T.INT64, []), _vi("c", T.BOOL, []), _vi("a", shape=[3])],
                  [_vi("go", T.BOOL, []), _vi("a2", shape=[3]), _vi("each", shape=[3])])
    ins = [_vi("x", shape=[3]), _vi("limit", shape=[]), _vi("start", T.BOOL, [])] + ([_vi("m", T.INT64, [])] if with_trip else [])
    return _model([h.make_node("Abs", ["x"], ["x0"]), h.make_node("Add", ["x0", "one"], ["a0"]),
                   h.make_node("Loop", ["m" if with_trip else "", "start", "a0"], ["final", "steps"], body=body,
                               name="grow"), h.make_node("Neg", ["final"], ["neg_final"])],
                  ins, [_vi("neg_final", shape=[3]), _vi("steps", shape=["n", 3])],
                  [_c("one", np.float32(1)), _c("scale", np.float32(2))])


@pytest.mark.parametrize("with_trip", [True, False])
def test_loop_early_exit_zero_trips_and_trip_count(with_trip: bool) -> None:
    m = while_loop(with_trip)
    x = np.array([0.5, -1.0, 0.25], np.float32)
    cases: dict[bool, list[dict]] = {True: [], False: []}
    for limit, start, trips in ((100.0, True, 10), (100.0, True, 2), (1.0, True, 5), (100.0, False, 4), (5.0, True, 0)):
        f = {"x": x, "limit": np.array(limit, np.float32), "start": np.array(start)}
        if with_trip:
            f["m"] = np.array(trips, np.int64)
        cases[start and (trips > 0 or not with_trip)].append(f)
    _check(m, cases[True])
    _check(m, cases[False], reference=False)  # zero iterations: onnx.reference cannot stack no scan output


@pytest.mark.parametrize("axis", [0, 1])
def test_long_static_scan_runs_per_step_both_directions(axis: int) -> None:
    steps = MAX_UNROLL_STEPS + 8
    body = _graph([h.make_node("Add", ["s", "xt"], ["s2"]), h.make_node("Mul", ["s2", "w"], ["y"])], "body",
                  [_vi("s", shape=[2]), _vi("xt", shape=[2])], [_vi("s2", shape=[2]), _vi("y", shape=[2])])
    shape = [steps, 2] if axis == 0 else [2, steps]
    for in_dir, out_dir in ((0, 0), (1, 0), (0, 1), (1, 1)):
        m = _model([h.make_node("Scan", ["s0", "xs"], ["final", "ys"], body=body, num_scan_inputs=1,
                                scan_input_axes=[axis], scan_input_directions=[in_dir], scan_output_axes=[axis],
                                scan_output_directions=[out_dir], name="rnn")],
                   [_vi("s0", shape=[2]), _vi("xs", shape=shape)],
                   [_vi("final", shape=[2]), _vi("ys", shape=shape)], [_c("w", np.float32(0.5))])
        rng = np.random.default_rng(in_dir * 2 + out_dir)
        feeds = {"s0": rng.standard_normal(2).astype(np.float32), "xs": rng.standard_normal(shape).astype(np.float32)}
        # onnx.reference runs Scan only along axis 0 (and ignores the directions); ONNX Runtime is the oracle there
        prog = _check(m, [feeds], reference=axis == 0 and in_dir == out_dir == 0)
        assert [s.kind for s in prog.steps] == ["Scan"]


def test_nested_if_in_loop_body_decided_per_iteration() -> None:
    """Even iterations add 1, odd ones double: the If on the iteration number runs inside the body."""
    even = _graph([h.make_node("Add", ["a", "one"], ["e"])], "even", [], [_vi("e", shape=[2])])
    odd = _graph([h.make_node("Mul", ["a", "two"], ["o"])], "odd", [], [_vi("o", shape=[2])])
    body = _graph([h.make_node("Mod", ["i", "two_i"], ["r"]), h.make_node("Equal", ["r", "zero_i"], ["is_even"]),
                   h.make_node("If", ["is_even"], ["a2"], then_branch=even, else_branch=odd, name="parity"),
                   h.make_node("Identity", ["c"], ["c2"])], "body",
                  [_vi("i", T.INT64, []), _vi("c", T.BOOL, []), _vi("a", shape=[2])],
                  [_vi("c2", T.BOOL, []), _vi("a2", shape=[2])])
    m = _model([h.make_node("Loop", ["m", "", "x"], ["y"], body=body, name="alternate")],
               [_vi("x", shape=[2]), _vi("m", T.INT64, [])], [_vi("y", shape=[2])],
               [_c("one", np.float32(1)), _c("two", np.float32(2)), _c("two_i", np.int64(2)), _c("zero_i", np.int64(0))])
    x = np.array([1.0, -3.0], np.float32)
    comp = compile_program(m, None, input_values=None)
    assert isinstance(comp.program, ControlProgram)
    assert isinstance(comp.program.steps[0].parts[0].program, ControlProgram)  # the body's If at run time
    # onnx.reference (1.2x) returns x unchanged here: its If inside a Loop body does not see the body's
    # input 'a' as updated per iteration; ONNX Runtime is the oracle
    _check(m, [{"x": x, "m": np.array(n, np.int64)} for n in (0, 1, 5)], reference=False)


def test_loop_carried_value_changing_shape_is_named() -> None:
    body = _graph([h.make_node("Concat", ["a", "a"], ["a2"], axis=0), h.make_node("Identity", ["c"], ["c2"])], "body",
                  [_vi("i", T.INT64, []), _vi("c", T.BOOL, []), _vi("a", shape=[2])],
                  [_vi("c2", T.BOOL, []), _vi("a2", shape=[4])])
    m = _model([h.make_node("Loop", ["m", "", "x"], ["y"], body=body, name="doubling")],
               [_vi("x", shape=[2]), _vi("m", T.INT64, [])], [_vi("y", shape=["n"])])
    with pytest.raises(CompileError) as info:
        compile_program(m, None)
    assert info.value.node == "doubling" and "enters the body as [2] and leaves it as [4]" in info.value.message


def test_compile_verifies_and_reports_the_decision() -> None:
    from tests.compiler.frontend.test_input_values import if_on_mode

    res = compiler.compile(if_on_mode(), benchmark=False)
    assert res.ok, res.error
    assert next(e for e in res.events if e["type"] == "model.verified")["passed"] is True
    fused = next(e for e in res.events if e["type"] == "graph.fused")
    node = next(n for n in fused["nodes"] if n["id"] == "select")
    assert node["op_type"] == "If" and "input_values={'mode': [V]}" in node["control"]["decision"]
    bodies = {b["name"]: b["kernels"] for b in node["control"]["bodies"]}
    assert bodies == {"select.then_branch": ["select.then_branch/fused_mul_0"],
                      "select.else_branch": ["select.else_branch/fused_transpose_0"]}
    compiled = {e["kernel"] for e in res.events if e["type"] == "kernel.compiled"}
    assert {"select.then_branch/fused_mul_0", "select.else_branch/fused_transpose_0"} <= compiled


def test_backend_runs_a_data_dependent_if() -> None:
    m = data_if(rows=30)  # 90 elements: above the backend's limit for binding a control input by value
    rep = PrismBackend.prepare(m, isolate=False)
    b = np.array([0.5, -1.0, 2.0], np.float32)
    for sign in (1, -1):
        x = sign * (np.arange(90, dtype=np.float32).reshape(30, 3) + 1)
        (got,) = rep.run([x, b])
        np.testing.assert_allclose(got, ReferenceEvaluator(m).run(None, {"x": x, "b": b})[0], rtol=1e-6)
    assert len(rep.programs) == 1  # one program, both branches


def test_long_static_loop_runs_per_step_and_is_timed() -> None:
    """A Loop whose trip count is an initializer above MAX_UNROLL_STEPS: run per step, not unrolled;
    compile() times it against ONNX Runtime and verifies it."""
    steps = MAX_UNROLL_STEPS + 8
    body = _graph([h.make_node("Mul", ["a", "k"], ["am"]), h.make_node("Add", ["am", "x"], ["a2"]),
                   h.make_node("Identity", ["c"], ["c2"])], "body",
                  [_vi("i", T.INT64, []), _vi("c", T.BOOL, []), _vi("a", shape=[16])],
                  [_vi("c2", T.BOOL, []), _vi("a2", shape=[16])], [_c("k", np.float32(0.5))])
    m = _model([h.make_node("Loop", ["m", "", "x"], ["y"], body=body, name="L")], [_vi("x", shape=[16])],
               [_vi("y", shape=[16])], [_c("m", np.int64(steps))])
    # onnx.reference (1.2x) runs no iteration of this Loop (M given, cond ''): ONNX Runtime is the oracle
    prog = _check(m, [{"x": np.linspace(-1, 1, 16, dtype=np.float32)}], reference=False)
    assert [s.kind for s in prog.steps] == ["Loop"] and "m" in prog.constants
    res = compiler.compile(m, threads=1)
    assert res.ok, res.error
    timed = next(e for e in res.events if e["type"] == "model.timed")
    assert timed["threads"] == 1 and timed["prism_ms"] > 0
    kernels = {e["kernel"] for e in res.events if e["type"] == "kernel.timed"}  # the body's, by their part
    assert kernels and all(k.startswith("L.body/") for k in kernels)
    assert kernels <= {e["kernel"] for e in res.events if e["type"] == "kernel.compiled"}
    assert next(e for e in res.events if e["type"] == "model.verified")["passed"] is True


def _squeezing_loop() -> onnx.ModelProto:
    """Loop M times: x = Unsqueeze(Squeeze(x, 0), 0) * 2, with a scan output of x + 1 per iteration;
    the body is valid only where x's axis 0 is 1."""
    ax = _c("ax0", np.array([0], np.int64))
    body = _graph([h.make_node("Squeeze", ["xi", "ax0"], ["sq"]), h.make_node("Unsqueeze", ["sq", "ax0"], ["us"]),
                   h.make_node("Mul", ["us", "two"], ["xo"]), h.make_node("Add", ["xo", "two"], ["so"]),
                   h.make_node("Identity", ["ci"], ["co"])], "body",
                  [_vi("i", T.INT64, []), _vi("ci", T.BOOL, []), _vi("xi", shape=None)],
                  [_vi("co", T.BOOL, []), _vi("xo", shape=None), _vi("so", shape=[3, 4])])
    return _model([h.make_node("Loop", ["m", "", "x"], ["y", "scans"], body=body, name="squeezing")],
                  [_vi("x", shape=[3, 4]), _vi("m", T.INT64, [])], [_vi("y", shape=[3, 4]), _vi("scans", shape=None)],
                  [ax, _c("two", np.float32(2))])


def test_a_loop_body_invalid_at_the_compiled_shapes_fails_only_when_entered() -> None:
    """Compiled at x [3, 4] with the trip count M known at run time: the body cannot Squeeze axis 0;
    the compile goes on, M = 0 returns x and an empty scan output as ONNX Runtime does, M = 1 is a
    run-time error naming the Loop (ONNX Runtime refuses it too)."""
    m = _squeezing_loop()
    sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    comp = compile_program(m, None)
    assert isinstance(comp.program, ControlProgram)
    x = np.random.default_rng(5).standard_normal((3, 4)).astype(np.float32)
    got = run_program(comp.program, [x, np.array(0, np.int64)])
    for g, r in zip(got, sess.run(None, {"x": x, "m": np.array(0, np.int64)}), strict=True):
        assert g.shape == r.shape
        np.testing.assert_array_equal(g, r)
    with pytest.raises(Exception):  # noqa: B017 (ONNX Runtime's own error type)
        sess.run(None, {"x": x, "m": np.array(1, np.int64)})
    with pytest.raises(CompileError) as info:
        run_program(comp.program, [x, np.array(1, np.int64)])
    assert info.value.stage == "run" and info.value.node == "squeezing" and info.value.op == "Loop"
    assert "Loop 'squeezing' ran its body, which does not compile at the compiled shapes" in info.value.message


def _scan(steps: int, valid: bool, scan_outputs: bool = True, axis: int = 0) -> onnx.ModelProto:
    """Scan over xs [steps, 3, 2] (or [3, steps, 2] with axis=1): s = (s + x_t) * 0.5, scan output the
    new s; an invalid body first Squeezes axis 0 of the [3, 2] state (valid only where it is 1)."""
    nodes = [h.make_node("Add", ["s", "xt"], ["s2"]), h.make_node("Mul", ["s2", "w"], ["y"])]
    if not valid:
        nodes = [h.make_node("Squeeze", ["s", "ax0"], ["sq"]), h.make_node("Add", ["sq", "xt"], ["s2"]), nodes[1]]
    outs = [_vi("s2", shape=[3, 2])] + ([_vi("y", shape=[3, 2])] if scan_outputs else [])
    body = _graph(nodes, "body", [_vi("s", shape=[3, 2]), _vi("xt", shape=[3, 2])], outs)
    xs = [steps, 3, 2] if axis == 0 else [3, steps, 2]
    ys = [steps, 3, 2] if axis == 0 else [3, steps, 2]
    return _model([h.make_node("Scan", ["s0", "xs"], ["final"] + (["ys"] if scan_outputs else []), body=body,
                               num_scan_inputs=1, scan_input_axes=[axis], name="rnn",
                               **({"scan_output_axes": [axis]} if scan_outputs else {}))],
                  [_vi("s0", shape=[3, 2]), _vi("xs", shape=xs)],
                  [_vi("final", shape=[3, 2])] + ([_vi("ys", shape=ys)] if scan_outputs else []),
                  [_c("w", np.float32(0.5)), _c("ax0", np.array([0], np.int64))])


@pytest.mark.parametrize("valid", [True, False])
def test_a_scan_of_zero_steps_returns_its_initial_states(valid: bool) -> None:
    """Zero steps (scan inputs of length 0) never run the body, so a body that does not compile at the
    per-step shapes does not matter: the final state is the initial one (onnx.reference, for the form
    without scan outputs, which it supports) and each scan output is empty with the body's declared
    per-step shape and a 0-length axis at its scan_output_axes entry (the ONNX Scan spec: the stack of
    no values; ONNX Runtime and onnx.reference refuse this form). This failed with an internal
    IndexError (a Concat of nothing)."""
    s0 = np.random.default_rng(2).standard_normal((3, 2)).astype(np.float32)
    m = _scan(0, valid, scan_outputs=False)
    got = run_program(compile_program(m, None).program, [s0, np.zeros((0, 3, 2), np.float32)])
    ref = ReferenceEvaluator(m).run(None, {"s0": s0, "xs": np.zeros((0, 3, 2), np.float32)})
    np.testing.assert_array_equal(got[0], ref[0])
    for axis in (0, 1):
        xs = np.zeros((0, 3, 2) if axis == 0 else (3, 0, 2), np.float32)
        final, ys = run_program(compile_program(_scan(0, valid, axis=axis), None).program, [s0, xs])
        np.testing.assert_array_equal(final, s0)
        assert ys.shape == xs.shape and ys.dtype == np.float32


def test_a_scan_body_invalid_at_its_shapes_is_named() -> None:
    """A Scan that runs its body (a static length over the unroll limit: the runtime runs it) whose body
    does not compile at the per-step shapes: a compile error naming the Scan and the body's node
    (ONNX Runtime refuses the model too)."""
    m = _scan(MAX_UNROLL_STEPS + 8, valid=False)
    with pytest.raises(Exception):  # noqa: B017 (ONNX Runtime's own error type)
        ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    with pytest.raises(CompileError) as info:
        compile_program(m, None)
    assert info.value.stage == "shape" and info.value.op == "Scan" and "rnn (Scan): its body does not compile at the " \
        "per-step types it is given (f32[3, 2], f32[3, 2]): Squeeze:sq (Squeeze): cannot squeeze axis 0" in info.value.message


def test_an_unrolled_body_invalid_at_its_shapes_names_the_control_node_and_body_node() -> None:
    """A Scan (3 steps) and a Loop (trip count 2, an initializer) within the unroll limit are unrolled
    (inline-control-flow), so the body's nodes are checked as copies with prefixed names: the error names
    the control node, the step and the body node as the user wrote them, not the copy ("body__cf3_Squeeze"),
    with ``node``/``op`` the control node's. ONNX Runtime refuses both models too. A Scan body holding an If
    on a constant (inlined in the next round) names the chain: Scan step, If branch, body node."""
    m = _scan(3, valid=False)
    with pytest.raises(Exception):  # noqa: B017 (ONNX Runtime's own error type)
        ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(
            None, {"s0": np.zeros((3, 2), np.float32), "xs": np.zeros((3, 3, 2), np.float32)})
    with pytest.raises(CompileError) as info:
        compile_program(m, None)
    assert (info.value.stage, info.value.node, info.value.op) == ("shape", "rnn", "Scan")
    assert info.value.message == "rnn (Scan, step 0 of 3, unrolled): body node Squeeze:sq (Squeeze): cannot squeeze " \
                                 "axis 0 of size 3"
    loop = _squeezing_loop()
    loop.graph.input.pop()  # m: an initializer of 2 (the trip count known at compile time)
    loop.graph.initializer.append(_c("m", np.array(2, np.int64)))
    with pytest.raises(CompileError) as info:
        compile_program(loop, None)
    assert (info.value.node, info.value.op) == ("squeezing", "Loop")
    assert info.value.message.startswith("squeezing (Loop, iteration 0 of 2, unrolled): body node Squeeze:sq (Squeeze): ")
    inner = _graph([h.make_node("Squeeze", ["s", "ax0"], ["sq"], name="squash"), h.make_node("Add", ["sq", "xt"], ["t"])],
                   "then", [], [_vi("t", shape=[3, 2])])
    other = _graph([h.make_node("Add", ["s", "xt"], ["e"])], "else", [], [_vi("e", shape=[3, 2])])
    nested = _scan(3, valid=True)
    body = nested.graph.node[0].attribute[0].g
    body.node[0].CopyFrom(h.make_node("If", ["yes"], ["s2"], then_branch=inner, else_branch=other, name="pick"))
    body.initializer.append(numpy_helper.from_array(np.array(True), "yes"))
    with pytest.raises(CompileError) as info:
        compile_program(nested, None)
    assert (info.value.node, info.value.op) == ("rnn", "Scan")
    assert info.value.message.startswith("rnn (Scan, step 0 of 3, unrolled): body node pick (If), then_branch inlined: "
                                         "body node squash (Squeeze): cannot squeeze axis 0")


def test_a_lowering_error_in_an_unrolled_body_names_the_scan_and_the_expanded_body_node() -> None:
    """Bernoulli in a 3-step Scan body: unrolled, then expanded to its ONNX function (RandomUniformLike,
    which Prism does not lower); the error names the Scan, the step and the body node as written, not the
    copy's name (it said 'node RandomUniformLike:body__cf3_coin_x0_2_X_random'). An If on a constant
    whose taken branch has a Conv of the wrong channel count names the If and the Conv."""
    body = _graph([h.make_node("Sigmoid", ["s"], ["p"]), h.make_node("Bernoulli", ["p"], ["b"], name="coin"),
                   h.make_node("Add", ["b", "xt"], ["s2"])], "body", [_vi("s", shape=[4]), _vi("xt", shape=[4])],
                  [_vi("s2", shape=[4])])
    m = _model([h.make_node("Scan", ["s0", "xs"], ["fin"], body=body, num_scan_inputs=1, name="rs")],
               [_vi("s0", shape=[4]), _vi("xs", shape=[3, 4])], [_vi("fin", shape=[4])])
    with pytest.raises(CompileError) as info:
        compile_program(m, None)
    assert (info.value.stage, info.value.node, info.value.op) == ("lowering", "rs", "Scan")
    assert info.value.message == ("rs (Scan, step 0 of 3, unrolled): body node coin (Bernoulli), expanded to "
                                  "RandomUniformLike: no lowering for op RandomUniformLike")
    then = _graph([h.make_node("Conv", ["x", "w"], ["t"], name="bad_conv")], "then", [], [_vi("t")])
    other = _graph([h.make_node("Identity", ["x"], ["e"])], "else", [], [_vi("e")])
    m = _model([h.make_node("If", ["yes"], ["y"], then_branch=then, else_branch=other, name="cfg_if")],
               [_vi("x", shape=[1, 3, 8, 8])], [_vi("y")], [_c("yes", np.array(True)), _c("w", np.ones((4, 2, 3, 3), np.float32))])
    with pytest.raises(Exception):  # noqa: B017 (ONNX Runtime's own error type)
        ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(
            None, {"x": np.zeros((1, 3, 8, 8), np.float32)})
    with pytest.raises(CompileError) as info:
        compile_program(m, None)
    assert (info.value.node, info.value.op) == ("cfg_if", "If")
    assert info.value.message.startswith("cfg_if (If, then_branch inlined): body node bad_conv (Conv): ")
