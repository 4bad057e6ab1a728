"""plan-memory: liveness and placement on small graphs (figures worked out by hand), brute-force
checks of the placement invariants, and the light_resnet50 O2 target of issue 2."""

import os

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper
from pass_testing import from_onnx, model

from compiler.passes.base import PassContext
from compiler.passes.fuse_ops import FuseOps
from compiler.passes.plan_memory import ORDERS, MemoryPlan, PlanMemory, place

F = T.FLOAT


def _chain():
    # x -> a -> b -> c -> d -> y, each f32[1, 100] = 400 bytes (448 aligned to 64)
    names = ["x", "a", "b", "c", "d", "y"]
    nodes = [helper.make_node("Relu" if i % 2 else "Neg", [names[i]], [names[i + 1]])
             for i in range(5)]
    return model(nodes, [("x", F, [1, 100])], [("y", F, [1, 100])])


def test_chain_reuses_two_slots_and_leaves_out_inputs_and_outputs():
    g = from_onnx(_chain())
    ctx = PassContext()
    result = PlanMemory().run(g, ctx)
    plan = ctx.artifacts.memory_plan
    assert isinstance(plan, MemoryPlan) and g.metadata["memory_plan"] is plan
    assert not result.changed
    assert plan.to_dict() == {
        "arena_bytes": 896,
        "no_sharing_bytes": 1792,
        "lower_bound_bytes": 896,
        "buffers": [
            {"value": "a", "offset": 0, "size": 400, "first": 0, "last": 1},
            {"value": "b", "offset": 448, "size": 400, "first": 1, "last": 2},
            {"value": "c", "offset": 0, "size": 400, "first": 2, "last": 3},
            {"value": "d", "offset": 448, "size": 400, "first": 3, "last": 4},
        ],
    }
    assert result.remarks[0].message == (
        "arena 896 bytes for 4 buffers over 5 steps: 2.00x smaller than no sharing (1792 bytes), "
        "1.000x the max-live lower bound (896 bytes); best-fit in size order")


def test_fused_schedule_has_no_buffers_inside_groups():
    rng = np.random.default_rng(0)
    m = model([
        helper.make_node("Conv", ["x", "w"], ["c"]),
        helper.make_node("Relu", ["c"], ["r"]),            # fused into the Conv: no buffer for c
        helper.make_node("Conv", ["r", "w"], ["c2"]),
        helper.make_node("Add", ["c2", "r"], ["y"]),
    ], [("x", F, [1, 2, 4, 4])], [("y", F, [1, 2, 4, 4])],
        inits=[("w", rng.standard_normal((2, 2, 1, 1)).astype(np.float32))])
    g = from_onnx(m)
    FuseOps().run(g, PassContext())
    ctx = PassContext()
    PlanMemory().run(g, ctx)
    assert ctx.artifacts.memory_plan.to_dict()["buffers"] == [
        {"value": "r", "offset": 0, "size": 128, "first": 0, "last": 1}]


def _random_intervals(rng, n):
    out = []
    for i in range(n):
        first = int(rng.integers(0, 30))
        out.append((f"v{i}", int(rng.integers(1, 5000)), first, first + int(rng.integers(0, 8))))
    return out


@pytest.mark.parametrize("seed", range(20))
def test_placement_invariants_brute_force(seed):
    rng = np.random.default_rng(seed)
    intervals = _random_intervals(rng, 40)
    for order in list(ORDERS) + [None]:
        plan = place(intervals, 64, order)
        bufs = plan.buffers
        assert {b.value for b in bufs} == {n for n, *_ in intervals}
        for b in bufs:
            assert b.offset % 64 == 0 and b.offset + b.size <= plan.arena_bytes
        for i, p in enumerate(bufs):
            for q in bufs[i + 1:]:
                in_time = p.first <= q.last and q.first <= p.last
                in_memory = p.offset < q.offset + q.size and q.offset < p.offset + p.size
                assert not (in_time and in_memory), (p, q)
        # the bound recomputed independently, step by step
        steps = max(last for *_, last in intervals) + 1
        bound = max(sum(-(-size // 64) * 64 for _, size, f, la in intervals if f <= t <= la)
                    for t in range(steps))
        assert plan.lower_bound_bytes == bound <= plan.arena_bytes <= plan.no_sharing_bytes
        assert plan.no_sharing_bytes == sum(-(-size // 64) * 64 for _, size, *_ in intervals)


LIGHT = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "light")


def test_light_resnet50_o2_fusion_and_arena_targets():
    from compiler.frontend import load
    from compiler.passes import REGISTRY, load_passes

    load_passes()
    g, _ = load(os.path.join(LIGHT, "light_resnet50.onnx"))
    ctx = PassContext()
    for name in ["fold-constants", "simplify", "fold-batchnorm", "eliminate-common-subexpressions",
                 "eliminate-dead-code", "fuse-ops", "plan-memory"]:
        REGISTRY[name]().run(g, ctx)
    # every Conv is in a group with its folded BN (no BN left), its Relu and/or residual Sum
    assert not [n for n in g.walk() if n.op_type == "BatchNormalization"]
    convs = [(grp, [n.op_type for n in grp.body.nodes]) for grp in g.groups()
             if grp.body.nodes[0].op_type == "Conv"]
    assert len(convs) == 53
    alone = [ops for _, ops in convs if ops == ["Conv"]]
    assert len(alone) == 4  # the projection shortcuts: their Sum is the other Conv's epilogue
    assert sum(ops == ["Conv", "Sum", "Relu"] for _, ops in convs) == 16
    plan = ctx.artifacts.memory_plan
    assert plan.no_sharing_bytes >= 5 * plan.arena_bytes
    assert plan.arena_bytes <= 1.1 * plan.lower_bound_bytes
