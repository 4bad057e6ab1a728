"""The ONNX-level rewrites as passes (level ``onnx``): remarks with their numbers, ONNX-text snapshots,
one pass.started/pass.finished each, the fixed-point group, and numerics against ONNX Runtime and
onnx.reference (the oracles), never against Prism's own numbers."""

from __future__ import annotations

import difflib

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

import compiler
from compiler.passes import REGISTRY, ModelPass, ModelPassResult, PassContext, load_passes
from compiler.passes.pipeline import ONNX_PASSES, parse_pipeline

load_passes()
T, B, IN, H = 5, 2, 3, 4  # sequence length, batch, input size, hidden size


def _vi(name: str, shape: list[int] | None, elem: int = TensorProto.FLOAT) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, elem, shape)


def if_lstm_function_model() -> onnx.ModelProto:
    """x -> If 'n3' (constant condition: Relu branch) -> bidirectional LSTM 'lstm0' -> Mish 'mish0'
    (a function op: no lowering, its schema has a body)."""
    rng = np.random.default_rng(0)
    inits = [numpy_helper.from_array(rng.standard_normal((2, 4 * H, IN)).astype(np.float32) * 0.5, "W"),
             numpy_helper.from_array(rng.standard_normal((2, 4 * H, H)).astype(np.float32) * 0.5, "R"),
             numpy_helper.from_array(rng.standard_normal((2, 8 * H)).astype(np.float32) * 0.1, "Bias"),
             numpy_helper.from_array(np.array(True), "cond")]
    then_g = helper.make_graph([helper.make_node("Relu", ["x"], ["t_out"], name="then_relu")], "then", [],
                               [_vi("t_out", [T, B, IN])])
    else_g = helper.make_graph([helper.make_node("Neg", ["x"], ["e_out"], name="else_neg")], "else", [],
                               [_vi("e_out", [T, B, IN])])
    nodes = [helper.make_node("If", ["cond"], ["xi"], name="n3", then_branch=then_g, else_branch=else_g),
             helper.make_node("LSTM", ["xi", "W", "R", "Bias"], ["Y", "Yh"], name="lstm0", hidden_size=H,
                              direction="bidirectional"),
             helper.make_node("Mish", ["Y"], ["z"], name="mish0")]
    g = helper.make_graph(nodes, "if_lstm_mish", [_vi("x", [T, B, IN])], [_vi("z", [T, 2, B, H])], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)], ir_version=8)


def _finished(r: compiler.CompileResult, name: str) -> list[dict]:
    return [e for e in r.of_type("pass.finished") if e["name"] == name]


def _removed(before: str, after: str) -> list[str]:
    return [x[1:].strip() for x in difflib.ndiff(before.splitlines(), after.splitlines()) if x.startswith("- ")]


def test_if_lstm_and_function_op_each_rewrite_is_a_pass_with_remarks_and_an_ir_diff() -> None:
    """Issue 10's target: each ONNX-level rewrite in the timeline with its remarks and IR diff;
    the compiled program agrees with ONNX Runtime on the original model."""
    model = if_lstm_function_model()
    events: list[dict] = []
    r = compiler.compile(model, pipeline="O2", on_event=events.append, benchmark=False)
    assert r.ok, r.error
    assert events == r.events and r.events[0]["pipeline"].startswith(ONNX_PASSES)
    started = [(e["index"], e["name"]) for e in r.of_type("pass.started")]
    finished = r.of_type("pass.finished")
    assert started == [(e["index"], e["name"]) for e in finished]  # one pass.started and pass.finished each
    onnx_level = [e for e in finished if e["level"] == "onnx"]
    # round 1 rewrites, round 2 finds nothing left, then the final sequence check, legalize and bound
    assert [(e["name"], e.get("iteration")) for e in onnx_level] == [
        ("resolve-sequences", 1), ("inline-control-flow", 1), ("unroll-rnn", 1), ("expand-functions", 1),
        ("resolve-sequences", 2), ("inline-control-flow", 2), ("unroll-rnn", 2), ("expand-functions", 2),
        ("resolve-sequences", None), ("legalize-narrow-types", None), ("bound-outputs", None)]
    assert [e["changed"] for e in onnx_level] == [False, True, True, True] + [False] * 7

    inline, unroll, expand = (_finished(r, n)[0] for n in ("inline-control-flow", "unroll-rnn", "expand-functions"))
    assert [m["message"] for m in inline["remarks"]] == ["inlined If 'n3' (then-branch, condition %cond folded to true)"]
    assert inline["remarks"][0]["kind"] == "applied" and inline["remarks"][0]["nodes"] == ["n3"]
    (lstm,) = unroll["remarks"]
    assert lstm["message"].startswith(f"unrolled LSTM 'lstm0': {T} steps, 2 directions (bidirectional), "
                                      f"hidden size {H}, batch {B}: ")
    assert lstm["data"]["steps"] == T and lstm["data"]["directions"] == 2
    (mish,) = expand["remarks"]
    assert mish["message"].startswith("expanded Mish 'mish0' into its function body (opset 18): ")
    # the schema's body (onnx.defs): Softplus, Tanh, Mul
    body = onnx.defs.get_schema("Mish", 18).function_body
    assert mish["data"]["new_nodes"] == len(body.node)

    # the IR diff of each rewrite: the ONNX text before (the pass before it) and after
    by_index = {e["index"]: e for e in finished}
    assert inline["ir"].startswith("<") and "If (cond)" in by_index[inline["index"] - 1]["ir"]
    assert any(x.startswith("[n3] xi = If (cond) <else_branch: graph = else ()")
               for x in _removed(by_index[inline["index"] - 1]["ir"], inline["ir"]))
    assert "If (" not in inline["ir"] and "= Relu (x)" in inline["ir"]
    assert any(x.startswith("[lstm0] Y, Yh = LSTM <") for x in _removed(inline["ir"], unroll["ir"]))
    assert " = LSTM " not in unroll["ir"]
    assert "[mish0] z = Mish (Y)" in _removed(unroll["ir"], expand["ir"]) and "Softplus" in expand["ir"]
    # Relu, the Identity binding its output to %xi, LSTM, Mish
    assert inline["stats"]["ir_changed"] and inline["stats"]["nodes"] == 4 and inline["stats"]["inlined_if"] == 1
    # weights are not printed: the [2,16,4] W is elided, the scalar condition is not
    assert "   <float[2,16,3] W = {...}," in inline["ir"].splitlines() and "    bool cond = {1}>" in inline["ir"].splitlines()

    # verified against ONNX Runtime on the same inputs (the runner's model.verified) ...
    (verified,) = r.of_type("model.verified")
    assert verified["verified"] is True and verified["passed"] is True and verified["max_abs_error"] < 1e-4
    # ... and ONNX Runtime itself agrees with onnx.reference on the original model (the oracle holds)
    x = np.random.default_rng(1).standard_normal((T, B, IN)).astype(np.float32)
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    (want,) = sess.run(None, {"x": x})
    (ref,) = ReferenceEvaluator(model).run(None, {"x": x})
    np.testing.assert_allclose(want, ref, rtol=1e-4, atol=1e-5)


def _run_pass(name: str, model: onnx.ModelProto, **opts):
    ctx = PassContext()
    return REGISTRY[name](**opts).run(model, ctx), ctx


def _loop_model(trip: int) -> onnx.ModelProto:
    """y = x * 2**trip, as a Loop with a constant trip count over a carried value."""
    body = helper.make_graph(
        [helper.make_node("Identity", ["c_in"], ["c_out"]), helper.make_node("Add", ["v_in", "v_in"], ["v_out"])],
        "body", [_vi("i", [], TensorProto.INT64), _vi("c_in", [], TensorProto.BOOL), _vi("v_in", [3])],
        [_vi("c_out", [], TensorProto.BOOL), _vi("v_out", [3])])
    g = helper.make_graph([helper.make_node("Loop", ["M", "", "x"], ["y"], name="loop0", body=body)], "loop",
                          [_vi("x", [3])], [_vi("y", [3])], [numpy_helper.from_array(np.array(trip, np.int64), "M")])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def test_inline_control_flow_unrolls_a_loop_with_its_trip_count_and_numerics_kept() -> None:
    model = _loop_model(3)
    res, _ = _run_pass("inline-control-flow", model)
    assert res.changed and res.model is not model
    assert [m.message for m in res.remarks] == ["unrolled Loop 'loop0': 3 steps (trip count 3)"]
    assert not any(n.op_type == "Loop" for n in res.model.graph.node)
    x = np.array([1.0, -2.0, 0.5], np.float32)
    np.testing.assert_array_equal(ReferenceEvaluator(res.model).run(None, {"x": x})[0], x * 8)


def test_inline_control_flow_keeps_a_data_dependent_if_with_a_missed_remark() -> None:
    then_g = helper.make_graph([helper.make_node("Relu", ["x"], ["a"])], "t", [], [_vi("a", [2])])
    else_g = helper.make_graph([helper.make_node("Neg", ["x"], ["b"])], "e", [], [_vi("b", [2])])
    g = helper.make_graph([helper.make_node("ReduceMax", ["x"], ["m"], keepdims=0),
                           helper.make_node("Greater", ["m", "zero"], ["c"]),
                           helper.make_node("If", ["c"], ["y"], name="gate", then_branch=then_g, else_branch=else_g)],
                          "g", [_vi("x", [2])], [_vi("y", [2])], [numpy_helper.from_array(np.array(0, np.float32), "zero")])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    res, _ = _run_pass("inline-control-flow", model)
    assert not res.changed and res.model is model
    (rm,) = res.remarks
    assert rm.kind == "missed" and rm.nodes == ["gate"]
    assert rm.message == "If 'gate' not inlined: its condition %c is not a compile-time constant (it depends on the data)"


def test_unroll_rnn_leaves_an_unbound_sequence_length_with_a_missed_remark() -> None:
    rng = np.random.default_rng(0)
    g = helper.make_graph([helper.make_node("GRU", ["x", "W", "R"], ["y"], name="gru0", hidden_size=2)], "g",
                          [_vi("x", ["T", 1, 3])], [_vi("y", None)],
                          [numpy_helper.from_array(rng.standard_normal((1, 6, 3)).astype(np.float32), "W"),
                           numpy_helper.from_array(rng.standard_normal((1, 6, 2)).astype(np.float32), "R")])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    res, _ = _run_pass("unroll-rnn", model)
    assert not res.changed and res.model is model
    assert [(m.kind, m.message) for m in res.remarks] == [("missed", "GRU 'gru0' not unrolled: input %x has no static shape")]


def _seq_from_if_model() -> onnx.ModelProto:
    """An If (constant condition) whose branch builds a sequence that SequenceAt reads outside: the
    sequence resolves only after the If is inlined (the fixed-point group's second round)."""
    then_g = helper.make_graph([helper.make_node("SequenceConstruct", ["x", "x"], ["s"])], "t", [],
                               [helper.make_tensor_sequence_value_info("s", TensorProto.FLOAT, [2])])
    else_g = helper.make_graph([helper.make_node("SequenceConstruct", ["x"], ["s2"])], "e", [],
                               [helper.make_tensor_sequence_value_info("s2", TensorProto.FLOAT, [2])])
    g = helper.make_graph([helper.make_node("If", ["c"], ["seq"], name="pick", then_branch=then_g, else_branch=else_g),
                           helper.make_node("SequenceAt", ["seq", "one"], ["y"], name="at1")],
                          "g", [_vi("x", [2])], [_vi("y", [2])],
                          [numpy_helper.from_array(np.array(True), "c"), numpy_helper.from_array(np.array(1, np.int64), "one")])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def test_fixed_point_group_runs_a_second_round_for_what_the_first_exposed() -> None:
    r = compiler.compile(_seq_from_if_model(), pipeline="O1", benchmark=False)
    assert r.ok, r.error
    runs = [(e["name"], e.get("iteration"), e["changed"]) for e in r.of_type("pass.finished") if e["level"] == "onnx"]
    assert runs[:5] == [("resolve-sequences", 1, False), ("inline-control-flow", 1, True), ("unroll-rnn", 1, False),
                        ("expand-functions", 1, False), ("resolve-sequences", 2, True)]
    first = _finished(r, "resolve-sequences")[0]
    assert [m["kind"] for m in first["remarks"]] == ["missed"] and "'at1' left in place" in first["remarks"][0]["message"]
    second = _finished(r, "resolve-sequences")[1]
    assert second["remarks"][0]["message"] == "resolved 2 sequence/optional node(s) into tensors (SequenceConstruct ×1, SequenceAt ×1)"
    assert r.of_type("model.verified")[0]["passed"] is True


def test_fixed_point_stops_at_max_iterations() -> None:
    r = compiler.compile(_seq_from_if_model(), pipeline="fixed-point{max-iterations=1}(resolve-sequences,"
                         "inline-control-flow),resolve-sequences{final=true}", backend=False)
    assert r.ok, r.error
    # one round only, although it changed the model; the final resolve-sequences catches up
    assert [(e["name"], e.get("iteration"), e["changed"]) for e in r.of_type("pass.finished")] == [
        ("resolve-sequences", 1, False), ("inline-control-flow", 1, True), ("resolve-sequences", None, True)]


def test_legalize_narrow_types_counts_its_rounding_steps() -> None:
    g = helper.make_graph([helper.make_node("Cast", ["x"], ["h"], to=TensorProto.BFLOAT16),
                           helper.make_node("Cast", ["h"], ["y"], to=TensorProto.FLOAT)],
                          "g", [_vi("x", [4])], [_vi("y", [4])])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 19)], ir_version=9)
    res, ctx = _run_pass("legalize-narrow-types", model)
    steps = sum(1 for n in res.model.graph.node if n.op_type == "NarrowCast" and n.domain == "prism")
    assert res.changed and steps >= 1 and ctx.artifacts.rounding_steps == steps
    (rm,) = res.remarks
    assert rm.message == f"legalized narrow storage types (in node attributes) to their compute types with {steps} " \
        "prism.NarrowCast rounding step(s)"
    res2, _ = _run_pass("legalize-narrow-types", res.model)
    assert not res2.changed and res2.model is res.model  # legal already


def test_bound_outputs_records_trims_and_the_unbounded_model() -> None:
    g = helper.make_graph([helper.make_node("NonZero", ["x"], ["nz"], name="nz0")], "g",
                          [_vi("x", [2, 3])], [_vi("nz", None, TensorProto.INT64)])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    res, ctx = _run_pass("bound-outputs", model)
    assert res.changed and ctx.artifacts.unbounded is model
    assert ctx.artifacts.trims == [(0, "nz__count", 1)]
    assert [o.name for o in res.model.graph.output] == ["nz", "nz__count"]
    (rm,) = res.remarks
    assert rm.message == "bounded NonZero 'nz0': result padded to its upper bound (input %x of shape [2, 3]) plus " \
        "the int64 count %nz__count; output(s) %nz cut to the count by the runtime"
    x = np.array([[0, 1, 0], [2, 0, 3]], np.float32)
    padded, count = ReferenceEvaluator(res.model).run(None, {"x": x})
    np.testing.assert_array_equal(padded[:, :int(count)], np.stack(np.nonzero(x)))  # numpy: the spec's row-major order


def test_model_passes_are_listed_with_their_level_and_docs() -> None:
    listed = {p["name"]: p for p in compiler.list_passes()}
    for name in ("resolve-sequences", "inline-control-flow", "unroll-rnn", "expand-functions",
                 "legalize-narrow-types", "bound-outputs"):
        assert listed[name]["level"] == "onnx" and listed[name]["doc"].startswith(name + ":")
    assert listed["fuse-ops"]["level"] == "graph"
    assert {s.name for s in parse_pipeline("O3").level("onnx").specs()} == {
        "resolve-sequences", "inline-control-flow", "unroll-rnn", "expand-functions", "legalize-narrow-types",
        "bound-outputs"}


def test_a_failing_model_pass_is_an_import_error_naming_the_pass() -> None:
    rng = np.random.default_rng(0)
    g = helper.make_graph([helper.make_node("LSTM", ["x", "W", "R"], ["y"], name="lstm_if", hidden_size=2,
                                            input_forget=1)], "g", [_vi("x", [2, 1, 3])], [_vi("y", None)],
                          [numpy_helper.from_array(rng.standard_normal((1, 8, 3)).astype(np.float32), "W"),
                           numpy_helper.from_array(rng.standard_normal((1, 8, 2)).astype(np.float32), "R")])
    r = compiler.compile(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8), backend=False)
    assert not r.ok and r.error["stage"] == "import" and r.error["pass"] == "unroll-rnn"
    assert "input_forget=1 is not supported" in r.error["message"] and "lstm_if" in r.error["message"]
    assert r.events[-1]["type"] == "compile.failed" and r.events[-2] == {**r.events[-2], "type": "pass.started",
                                                                        "name": "unroll-rnn"}


@pytest.mark.parametrize("name", ["inline-control-flow", "unroll-rnn", "expand-functions", "resolve-sequences",
                                  "legalize-narrow-types", "bound-outputs"])
def test_a_model_pass_with_nothing_to_do_returns_its_input(name: str) -> None:
    model = _loop_model(0)
    model.graph.node[0].op_type = "Identity"
    del model.graph.node[0].attribute[:]
    del model.graph.node[0].input[:]
    model.graph.node[0].input.append("x")
    res, _ = _run_pass(name, model)
    assert not res.changed and res.model is model and not res.remarks


def test_the_onnx_model_after_a_model_pass_is_an_artifact() -> None:
    from compiler.artifacts import model_after_pass

    model = if_lstm_function_model()
    r = compiler.compile(model, pipeline="O1", backend=False)
    levels = [e["level"] for e in r.of_type("pass.started")]
    inline = _finished(r, "inline-control-flow")[0]
    after = model_after_pass(model, target="host", pipeline=r.pipeline, index=inline["index"], levels=levels)
    assert [n.op_type for n in after.graph.node] == ["Relu", "Identity", "LSTM", "Mish"]
    x = np.random.default_rng(2).standard_normal((T, B, IN)).astype(np.float32)
    np.testing.assert_allclose(ReferenceEvaluator(after).run(None, {"x": x})[0],
                               ReferenceEvaluator(model).run(None, {"x": x})[0], rtol=1e-6, atol=1e-7)
    # a graph pass's artifact is the graph exported; the first one comes after all the model passes
    first_graph = levels.index("graph")
    exported = model_after_pass(model, target="host", pipeline=r.pipeline, index=first_graph, levels=levels)
    assert "LSTM" not in {n.op_type for n in exported.graph.node}


class _FlipRelu(ModelPass):
    """Test model pass: every Relu becomes a Sigmoid (same types, different numbers)."""

    name = "test-flip-relu"

    def run(self, model, ctx):
        out = onnx.ModelProto()
        out.CopyFrom(model)
        for n in out.graph.node:
            if n.op_type == "Relu":
                n.op_type = "Sigmoid"
        return ModelPassResult(True, model=out)


def test_check_passes_validates_each_model_pass_in_onnx_runtime() -> None:
    r = compiler.compile(if_lstm_function_model(), pipeline="O1", check_passes=True, backend=False)
    assert r.ok, r.error
    model_level = [c for c in r.checks if c.get("level") == "onnx"]
    assert [(c["after"], c["passed"]) for c in model_level] == [
        ("inline-control-flow", True), ("unroll-rnn", True), ("expand-functions", True)]  # the passes that changed it
    REGISTRY[_FlipRelu.name] = _FlipRelu
    try:
        bad = compiler.compile(if_lstm_function_model(), pipeline="inline-control-flow,test-flip-relu,unroll-rnn",
                               check_passes=True, backend=False)
    finally:
        del REGISTRY[_FlipRelu.name]
    assert not bad.ok and bad.error["stage"] == "import" and bad.error["pass"] == "test-flip-relu"
    assert "--check-passes: after test-flip-relu, output 'z' differs" in bad.error["message"]
    assert [(c["after"], c["passed"]) for c in bad.checks] == [("inline-control-flow", True), ("test-flip-relu", False)]
