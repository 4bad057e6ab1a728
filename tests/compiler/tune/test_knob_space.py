"""Knobs added to the search space (GEMM ``tile_order``, row kernels' ``row_vectors``, the direct
depthwise schedule's ``dw_tile``, NCHWc Conv's ``nchwc_tile``): every choice lowers, changes the loop
nest as it says, and a compilation on those schedules (through a tuning database) computes what ONNX
Runtime computes on the original model (the oracle: ``model.verified``)."""

from __future__ import annotations

import pytest

import compiler
from compiler.driver.lower import graph_opset, lower_node
from compiler.loops.printer import print_func
from compiler.targets import get_target
from compiler.tune.database import JsonlDatabase, make_record
from compiler.tune.tasks import compile_graph, extract_tasks
from tests.compiler.tune.models import depthwise_relu, matmul_relu, nchwc_chain, norm_softmax


def _tuned(tmp_path, model, knob, value=None, pipeline="O2"):  # type: ignore[no-untyped-def]
    """Compile ``model`` with every task that has ``knob`` on ``value`` (None: its last choice, a
    value other than the default) through a database record each."""
    g, target = compile_graph(model, pipeline=pipeline)
    tasks, _ = extract_tasks(g, target)
    db = JsonlDatabase(tmp_path / f"tuning-{knob}-{value}.jsonl")
    hit = []
    for task in tasks:
        k = next((k for k in task.knobs if k.name == knob), None)
        v = k.choices[-1] if k is not None and value is None else value
        if k is not None and v in k.choices and v != k.default:
            db.add(make_record(task.workload, task.desc, target, {knob: v}, 50.0, 60.0, trials=1, threads=1))
            hit.append(task)
    assert hit, f"no task of {model.graph.name} has {knob}={value}"
    r = compiler.compile(model, tuning_db=str(db.path), pipeline=pipeline, verify=True, benchmark=False, threads=2)
    assert r.ok, r.error
    lowered = {e["kernel"]: e for e in r.events if e["type"] == "kernel.lowered"}
    for task in hit:
        assert lowered[task.kernel]["schedule_source"] == "tuned"
    verified = next(e for e in r.events if e["type"] == "model.verified")
    assert verified["passed"] is True, verified
    return [lowered[t.kernel] for t in hit]


def test_tile_order_puts_column_tiles_outside_and_parallel():  # type: ignore[no-untyped-def]
    g, target = compile_graph(matmul_relu(m=96, n=80))  # fewer columns than rows: mo_nt by default
    node, opset = g.nodes[0], graph_opset(g)
    default, ctx = lower_node(node, "k", opset, target)
    assert ctx.seen["tile_order"].choices == ("mo_nt", "nt_mo")
    swapped, _ = lower_node(node, "k", opset, target, {"tile_order": "nt_mo", "block_tiles": 2})
    text = print_func(swapped.func)
    assert "reorder(nb, nt, mo, k" in text and "parallel(nt)" in text
    assert "reorder(nb, mo, nt, k" in print_func(default.func)


def test_a_gemm_on_the_swapped_tile_order_matches_onnx_runtime(tmp_path):  # type: ignore[no-untyped-def]
    [k] = _tuned(tmp_path, matmul_relu(m=50, k=96, n=40), "tile_order", "nt_mo")  # 50 rows: a rest tile; 40 columns: mo_nt by default
    assert "parallel(nt)" in k["schedule"]


@pytest.mark.parametrize("vectors", [2, 4])
def test_row_kernels_on_wider_statistics_match_onnx_runtime(tmp_path, vectors):  # type: ignore[no-untyped-def]
    kernels = _tuned(tmp_path, norm_softmax(), "row_vectors", vectors)
    assert len(kernels) == 2  # LayerNormalization and Softmax
    width = get_target("host").vector_width_f32 * vectors
    for k in kernels:
        assert f"split(j, {width})" in k["schedule"] and f"T.vectorized({width})" in k["loop_ir"]


@pytest.mark.parametrize(("mult", "tile"), [(1, "1x1"), (1, "1x2"), (2, "2x2"), (2, "1x3")])
def test_a_depthwise_conv_on_another_tile_matches_onnx_runtime(tmp_path, mult, tile):  # type: ignore[no-untyped-def]
    """Output channels x column vectors per tile; 40 columns: a last vector partly past the row."""
    [k] = _tuned(tmp_path, depthwise_relu(mult=mult), "dw_tile", tile)
    mc, nv = tile.split("x")
    assert "depthwise Conv" in k["schedule"]  # one input channel per group
    assert f"split(co, {mc})" in k["schedule"] and f"x {nv}  # output columns in lanes" in k["schedule"]


@pytest.mark.parametrize("tile", ["1x2", "2x2", "last"])
def test_nchwc_convs_on_another_tile_match_onnx_runtime(tmp_path, tile):  # type: ignore[no-untyped-def]
    pipe = f"fold-constants,convert-layout{{block={get_target('host').vector_width_f32}}},fuse-ops,plan-memory"
    kernels = _tuned(tmp_path, nchwc_chain(), "nchwc_tile", None if tile == "last" else tile, pipeline=pipe)
    assert all("NCHW" in k["schedule"] for k in kernels)
    if tile != "last":
        v, r = tile.split("x")
        assert any(f"tile(ox, {r}) x blocks {v}" in k["schedule"] for k in kernels)
