"""The pass manager's instruments: events per pass, verifier, failures naming the pass."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

import compiler
from compiler.frontend import load
from compiler.ir import Graph
from compiler.passes import REGISTRY, Pass, PassContext, PassResult
from compiler.passes.pipeline import ONNX_PASSES, parse_pipeline
from compiler.passes.verify import verify_graph


class _BreakIR(Pass):
    """Test pass: makes the first node read a value defined after it (breaks def-before-use)."""

    name = "test-break-ir"

    def run(self, graph: Graph, ctx: PassContext) -> PassResult:
        graph.nodes.reverse()
        return PassResult(True)


class _Crash(Pass):
    """Test pass: raises."""

    name = "test-crash"

    def run(self, graph: Graph, ctx: PassContext) -> PassResult:
        raise RuntimeError("boom")


class _WrongNumerics(Pass):
    """Test pass: turns every Relu into a Sigmoid (same types, different numbers)."""

    name = "test-wrong-numerics"

    def run(self, graph: Graph, ctx: PassContext) -> PassResult:
        for n in graph.nodes:
            if n.op_type == "Relu":
                n.op_type = "Sigmoid"
        return PassResult(True)


@pytest.fixture
def test_passes() -> Iterator[None]:
    REGISTRY[_BreakIR.name] = _BreakIR
    REGISTRY[_Crash.name] = _Crash
    REGISTRY[_WrongNumerics.name] = _WrongNumerics
    yield
    del REGISTRY[_BreakIR.name], REGISTRY[_Crash.name], REGISTRY[_WrongNumerics.name]


def test_pass_events_and_stats(squeezenet_path) -> None:
    got: list[dict] = []
    r = compiler.compile(squeezenet_path, pipeline="fold-constants,eliminate-dead-code", on_event=got.append,
                         backend=False)
    assert r.ok, r.error
    assert got == r.events
    types = [e["type"] for e in got]
    assert types[0] == "compile.started" and types[-1] == "compile.finished"
    started = [e for e in got if e["type"] == "pass.started"]
    finished = [e for e in got if e["type"] == "pass.finished"]
    assert [e["name"] for e in started] == [e["name"] for e in finished]
    assert [e["index"] for e in finished] == list(range(len(finished)))
    # the ONNX-level passes come first (the pipeline names none, so ONNX_PASSES runs), each with its
    # ONNX text snapshot; squeezenet has nothing for them to rewrite
    model_level = [e for e in finished if e["level"] == "onnx"]
    assert [e["name"] for e in model_level] == [s.name for s in parse_pipeline(ONNX_PASSES).specs()]
    assert all(not e["changed"] and not e["stats"]["ir_changed"] and e["ir"].startswith("<") for e in model_level)
    assert [e["name"] for e in finished if e["level"] == "graph"] == ["fold-constants", "eliminate-dead-code"]
    fold = finished[len(model_level)]
    assert fold["index"] == len(model_level) and fold["changed"] is True and fold["duration_ms"] >= 0
    assert fold["options"] == {"max-bytes": 512 * 1024 * 1024}
    # 39 ConstantOfShape weights fold into constants: 105 nodes -> 66 (counted from the ONNX file)
    assert fold["stats"]["nodes"] == 66 and fold["stats"]["groups"] == 0
    assert fold["ir"].startswith("graph @") and "ConstantOfShape" not in fold["ir"]
    assert all(r_["pass"] == "fold-constants" and r_["kind"] in ("applied", "missed", "analysis") for r_ in fold["remarks"])


def test_verifier_failure_names_the_pass(squeezenet_path, test_passes) -> None:
    r = compiler.compile(squeezenet_path, pipeline="fold-constants,test-break-ir", backend=False)
    assert not r.ok
    assert r.error["stage"] == "passes" and r.error["pass"] == "test-break-ir"
    assert "verification failed after pass test-break-ir" in r.error["message"]
    assert r.events[-1]["type"] == "compile.failed"


def test_crashing_pass_is_compile_failed(squeezenet_path, test_passes) -> None:
    r = compiler.compile(squeezenet_path, pipeline="test-crash", backend=False)
    assert not r.ok and r.error["pass"] == "test-crash" and "boom" in r.error["message"]
    types = [e["type"] for e in r.events]
    assert types[0] == "compile.started" and types[-2:] == ["pass.started", "compile.failed"]
    assert r.events[-2]["name"] == "test-crash" and all(e["name"] != "test-crash" for e in r.of_type("pass.finished"))


def test_verifier_accepts_imported_models(squeezenet_path, silero_path) -> None:
    g, _ = load(squeezenet_path)
    verify_graph(g)
    g2, _ = load(silero_path, {"input": [1, 512], "state": [2, 1, 128]})
    verify_graph(g2)


def test_o2_emits_graph_fused_and_memory_planned(light_dir) -> None:
    r = compiler.compile(light_dir / "light_resnet50.onnx", pipeline="O2", backend=False)
    assert r.ok, r.error
    seqs = [e["seq"] for e in r.events]
    assert seqs == list(range(len(seqs)))
    types = [e["type"] for e in r.events]
    assert sum(t in ("compile.finished", "compile.failed") for t in types) == 1
    i_fuse = next(i for i, e in enumerate(r.events) if e["type"] == "pass.finished" and e["name"] == "fuse-ops")
    assert types[i_fuse + 1] == "graph.fused"
    fused = r.events[i_fuse + 1]
    ids = {n["id"] for n in fused["nodes"]}
    assert fused["groups"] and all(set(g["nodes"]) <= ids for g in fused["groups"])
    assert all(e["source"] in ids and e["target"] in ids for e in fused["edges"])
    # every Conv of resnet50 is in a group (53 convolutions in the ONNX file)
    assert sum(1 for n in fused["nodes"] if n["op_type"] == "Conv" and n["group"]) == 53
    mem = r.of_type("memory.planned")
    assert len(mem) == 1 and mem[0]["arena_bytes"] <= mem[0]["no_sharing_bytes"]
    assert mem[0]["lower_bound_bytes"] <= mem[0]["arena_bytes"]
    rep = r.to_dict()
    assert rep["fusion"]["groups"] == fused["groups"] and rep["memory"]["arena_bytes"] == mem[0]["arena_bytes"]
    assert rep["error"] is None and len(rep["passes"]) == len(list(parse_pipeline("O2").specs()))


def test_check_passes_names_the_pass_that_changes_numerics(squeezenet_path, test_passes) -> None:
    from compiler.samples import randomized

    r = compiler.compile(randomized(squeezenet_path), pipeline="fold-constants,test-wrong-numerics,simplify",
                         check_passes=True, backend=False)
    assert not r.ok and r.error["pass"] == "test-wrong-numerics" and r.error["stage"] == "passes"
    assert "differs" in r.error["message"]
    assert [c["after"] for c in r.checks] == ["import", "fold-constants", "test-wrong-numerics"]
    assert [c["passed"] for c in r.checks] == [True, True, False]
