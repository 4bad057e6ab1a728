"""Schedule knobs (compiler.schedule.knobs): outside a tuning context the default schedules are
unchanged; a trace replays deterministically; a value outside a knob's choices is refused."""

from __future__ import annotations

import pytest

from compiler.driver.lower import graph_opset, lower_node
from compiler.loops.printer import print_func
from compiler.schedule.knobs import KnobError, apply_trace, choose
from compiler.tune.tasks import compile_graph
from tests.compiler.tune.models import conv_tail, matmul_relu


def _step(model):  # type: ignore[no-untyped-def]
    g, target = compile_graph(model)
    return g.nodes[0], graph_opset(g), target


def test_choose_returns_the_default_outside_a_context_and_records_inside():
    assert choose("tile", "8x2", ["4x2"]) == "8x2"
    with apply_trace({"tile": "4x2"}) as ctx:
        assert choose("tile", "8x2", ["4x2"]) == "4x2"
        assert choose("tile", "8x2", ["4x2"]) == "4x2"  # asked twice: the same value
    assert ctx.seen["tile"].choices == ("8x2", "4x2") and ctx.taken == {"tile": "4x2"}
    with apply_trace({"tile": "3x3"}), pytest.raises(KnobError, match="tile.*'3x3'.*choices"):
        choose("tile", "8x2", ["4x2"])


@pytest.mark.parametrize("model", [matmul_relu, conv_tail])
def test_the_empty_trace_is_the_default_schedule(model):  # type: ignore[no-untyped-def]
    node, opset, target = _step(model())
    with apply_trace(None):
        pass
    plain, _ = lower_node(node, "k", opset, target)
    again, ctx = lower_node(node, "k", opset, target, {})
    assert print_func(plain.func) == print_func(again.func)
    assert ctx.taken == {k.name: k.default for k in ctx.seen.values()} and "tile" in ctx.taken


def test_a_trace_replays_deterministically_and_changes_the_loop_nest():
    node, opset, target = _step(matmul_relu())
    trace = {"tile": "4x3", "block_tiles": 1, "grain_us": "serial"}
    a, ctx = lower_node(node, "k", opset, target, trace)
    b, _ = lower_node(node, "k", opset, target, trace)
    default, _ = lower_node(node, "k", opset, target)
    assert print_func(a.func) == print_func(b.func) != print_func(default.func)
    assert ctx.taken == trace
    text = print_func(a.func)
    assert f"4x{3 * target.vector_width_f32} register tile" in text and "parallel(mo)" in text  # 3 vectors of W lanes
    assert "T.parallel" not in text  # grain "serial": no parallel loop left


def test_a_value_outside_the_choices_is_refused_naming_the_knob():
    node, opset, target = _step(matmul_relu(m=4))
    with pytest.raises(KnobError, match="knob tile: value '8x2'"):  # M = 4: no 8-row tile
        lower_node(node, "k", opset, target, {"tile": "8x2"})
