"""The verifier: accepts well-formed IR (plain and fused) and rejects each broken invariant with
a message naming the node or value."""

from __future__ import annotations

import numpy as np
import pytest

from compiler.ir import Graph, IRError, TensorType
from compiler.ir.rewrite import group_nodes
from compiler.passes.verify import verify_graph

F = TensorType.of("f32", (2, 3))


def _graph() -> Graph:
    g = Graph("g")
    x = g.add_input("x", F)
    c = g.add_constant("c", np.ones((2, 3), np.float32))
    a = g.add_node("Add", [x, c], ["a"], name="add").outputs[0]
    r = g.add_node("Relu", [a], ["r"], name="relu").outputs[0]
    for v in (a, r):
        v.type = F
    g.outputs = [r]
    return g


def test_well_formed_graph_passes() -> None:
    verify_graph(_graph())


def test_fused_group_passes() -> None:
    g = _graph()
    group_nodes(g, list(g.nodes), kind="elementwise", kernel="fused_add_relu")
    verify_graph(g)


def test_use_before_definition() -> None:
    g = _graph()
    g.nodes.reverse()
    with pytest.raises(IRError, match="add .*reads %a|relu .*reads %a"):
        verify_graph(g)


def test_missing_type() -> None:
    g = _graph()
    g.nodes[0].outputs[0].type = None
    with pytest.raises(IRError, match="%a has no type"):
        verify_graph(g)


def test_output_not_defined() -> None:
    g = _graph()
    stray = g.new_value("stray", F)
    g.outputs = [stray]
    with pytest.raises(IRError, match="graph output %stray"):
        verify_graph(g)


def test_broken_use_list() -> None:
    g = _graph()
    relu = g.nodes[1]
    relu.inputs[0]._uses.clear()  # corrupt the IR behind its back
    with pytest.raises(IRError, match="missing from the value's uses"):
        verify_graph(g)


def test_fused_group_type_mismatch() -> None:
    g = _graph()
    grp = group_nodes(g, list(g.nodes), kind="elementwise", kernel="k")
    grp.body.inputs[0].type = TensorType.of("f32", (3, 2))
    with pytest.raises(IRError, match="fused group"):
        verify_graph(g)
