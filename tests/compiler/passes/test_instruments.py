"""The pass instruments as objects (MLIR's PassInstrumentation, TVM's PassContext(instruments=...)):
each one on its own, their nesting order, and events from typed pass results rather than pass names."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from compiler.errors import CompileError
from compiler.events import EventStream
from compiler.frontend import import_model, specialize
from compiler.ir import Graph, print_graph
from compiler.passes import (
    REGISTRY,
    ModelPass,
    ModelPassResult,
    Pass,
    PassContext,
    PassResult,
    load_passes,
)
from compiler.passes.base import FusionResult, MemoryPlanResult
from compiler.passes.instruments import (
    CheckPassesInstrument,
    EventInstrument,
    PassInstrument,
    PassRun,
    SnapshotInstrument,
    TimingInstrument,
    VerifierInstrument,
    default_instruments,
)
from compiler.passes.manager import PassManager
from compiler.passes.model_ir import print_model
from compiler.passes.pipeline import parse_pipeline

load_passes()


def _model():
    w = numpy_helper.from_array(np.arange(6, dtype=np.float32).reshape(3, 2), "w")
    g = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["m"], name="mm"),
                           helper.make_node("Relu", ["m"], ["y"], name="relu")], "tiny",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 2])], [w])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def _graph() -> Graph:
    g = import_model(_model())
    specialize(g, None)
    return g


class _Recorder(PassInstrument):
    def __init__(self, name: str, log: list[str]) -> None:
        self.name, self.log = name, log

    def run_before_pass(self, run: PassRun) -> None:
        self.log.append(f"{self.name}.before({run.spec.name})")

    def run_after_pass(self, run: PassRun) -> None:
        self.log.append(f"{self.name}.after({run.spec.name})")


class _ClaimsFusion(Pass):
    """Test pass: changes nothing, returns a FusionResult (its name is not fuse-ops)."""

    name = "test-claims-fusion"

    def run(self, graph: Graph, ctx: PassContext) -> PassResult:
        return FusionResult(False)


class _PlansNothing(Pass):
    """Test pass: returns a MemoryPlanResult with a hand-made plan (its name is not plan-memory)."""

    name = "test-plans"

    def run(self, graph: Graph, ctx: PassContext) -> PassResult:
        return MemoryPlanResult(False, plan={"arena_bytes": 64, "no_sharing_bytes": 128, "lower_bound_bytes": 64,
                                             "buffers": []})


class _DropsInput(ModelPass):
    """Test model pass: removes the graph input, so the MatMul reads an undefined value."""

    name = "test-drops-input"

    def run(self, model, ctx):
        out = type(model)()
        out.CopyFrom(model)
        del out.graph.input[:]
        return ModelPassResult(True, model=out)


@pytest.fixture
def test_passes():
    for cls in (_ClaimsFusion, _PlansNothing, _DropsInput):
        REGISTRY[cls.name] = cls
    yield
    for cls in (_ClaimsFusion, _PlansNothing, _DropsInput):
        del REGISTRY[cls.name]


def test_before_hooks_run_in_order_and_after_hooks_in_reverse() -> None:
    log: list[str] = []
    pm = PassManager(PassContext(), [_Recorder("outer", log), _Recorder("inner", log)])
    pm.run_graph(_graph(), parse_pipeline("eliminate-dead-code"))
    assert log == ["outer.before(eliminate-dead-code)", "inner.before(eliminate-dead-code)",
                   "inner.after(eliminate-dead-code)", "outer.after(eliminate-dead-code)"]
    assert pm.index == 1


def test_timing_instrument_times_each_pass_and_keeps_them() -> None:
    timing = TimingInstrument()
    pm = PassManager(PassContext(), [timing])
    pm.run_graph(_graph(), parse_pipeline("fold-constants,eliminate-dead-code"))
    assert [(i, n) for i, n, _ in timing.timings] == [(0, "fold-constants"), (1, "eliminate-dead-code")]
    assert all(ms >= 0.0 for _, _, ms in timing.timings)


def test_snapshot_instrument_prints_each_level_with_its_own_printer_and_flags_changes() -> None:
    snap, runs = SnapshotInstrument(), []

    class Keep(PassInstrument):
        def run_after_pass(self, run: PassRun) -> None:
            runs.append(run)

    pm = PassManager(PassContext(), [Keep(), snap])
    model = _model()
    out = pm.run_model(model, parse_pipeline("unroll-rnn,legalize-narrow-types"))
    g = _graph()
    pm.run_graph(g, parse_pipeline("eliminate-dead-code"))
    assert out is model  # nothing to rewrite
    assert [r.text for r in runs[:2]] == [print_model(model)] * 2 and runs[0].text.startswith("<")
    assert runs[0].stats == {"nodes": 2, "initializers": 1, "constant_bytes": 24, "inputs": 1, "outputs": 1,
                             "functions": 0, "unrolled": 0, "ir_changed": False}
    assert runs[2].text == print_graph(g) and runs[2].stats["nodes"] == 2 and runs[2].stats["ir_changed"] is False
    assert [r.index for r in runs] == [0, 1, 2]  # numbered across both levels


def test_verifier_instrument_names_the_model_pass_that_broke_the_model(test_passes) -> None:
    pm = PassManager(PassContext(), [VerifierInstrument()])
    with pytest.raises(CompileError) as info:
        pm.run_model(_model(), parse_pipeline("test-drops-input"))
    err = info.value
    assert err.stage == "import" and err.pass_name == "test-drops-input"
    assert err.message == "IR verification failed after pass test-drops-input: node mm (MatMul) reads %x, which " \
                          "nothing defines"


def test_event_instrument_emits_from_typed_results_not_pass_names(test_passes) -> None:
    events = EventStream()
    pm = PassManager(PassContext(), default_instruments(events))
    pm.run_graph(_graph(), parse_pipeline("test-claims-fusion,test-plans,eliminate-dead-code"))
    types = [(e["type"], e.get("name")) for e in events.events]
    assert types == [("pass.started", "test-claims-fusion"), ("pass.finished", "test-claims-fusion"),
                     ("graph.fused", None), ("pass.started", "test-plans"), ("pass.finished", "test-plans"),
                     ("memory.planned", None), ("pass.started", "eliminate-dead-code"),
                     ("pass.finished", "eliminate-dead-code")]
    fused = events.events[2]
    assert {n["op_type"] for n in fused["nodes"]} == {"MatMul", "Relu"} and fused["groups"] == []
    assert events.events[5]["arena_bytes"] == 64 and events.events[5]["no_sharing_bytes"] == 128
    finished = events.events[1]
    assert finished["level"] == "graph" and "iteration" not in finished and finished["ir"].startswith("graph @")


def test_check_passes_instrument_checks_graph_passes_only() -> None:
    seen: list[tuple[int, str]] = []
    pm = PassManager(PassContext(), [CheckPassesInstrument(lambda i, spec, graph: seen.append((i, spec.name)))])
    model = pm.run_model(_model(), parse_pipeline("fixed-point(unroll-rnn,expand-functions)"))
    g = import_model(model)
    specialize(g, None)
    pm.run_graph(g, parse_pipeline("simplify,eliminate-dead-code"))
    assert seen == [(2, "simplify"), (3, "eliminate-dead-code")]


def test_a_fixed_point_group_numbers_its_rounds() -> None:
    instruments = default_instruments(EventStream())
    pm = PassManager(PassContext(), instruments)
    pm.run_model(_model(), parse_pipeline("fixed-point{max-iterations=4}(unroll-rnn,expand-functions)"))
    emitter = next(i for i in instruments if isinstance(i, EventInstrument))
    # nothing changes in round 1, so there is no round 2
    assert [(p["name"], p["iteration"], p["level"]) for p in emitter.finished] == [
        ("unroll-rnn", 1, "onnx"), ("expand-functions", 1, "onnx")]
