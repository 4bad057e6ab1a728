"""compiler.ir.rewrite: grouping nodes, forwarding values with output names kept, constants."""

import numpy as np
import pytest

from compiler.ir import FusedGroup, Graph, IRError, TensorType, print_graph
from compiler.ir.rewrite import forward_value, group_nodes, remove_node_deep, set_constant

F4 = TensorType.of("float32", (4,))


def _graph():
    g = Graph("g")
    x = g.add_input("x", F4)
    w = g.add_constant("w", np.ones(4, np.float32))
    a = g.add_node("Add", [x, w], ["a"], name="add").outputs[0]
    r = g.add_node("Relu", [a], ["r"], name="relu").outputs[0]
    n = g.add_node("Neg", [a], ["n"], name="neg").outputs[0]
    for v in (a, r, n):
        v.type = F4
    g.outputs = [r, n]
    return g


def test_group_nodes_exposes_values_used_outside_and_keeps_names():
    g = _graph()
    add, relu, neg = g.nodes
    grp = group_nodes(g, [relu, add], kind="elementwise", kernel="fused_add_relu_0")
    g.topological_sort()
    assert isinstance(grp, FusedGroup) and g.nodes == [grp, neg]
    # %a is read by Neg outside the group, %r is a graph output: both are group outputs
    assert [v.name for v in grp.outputs] == ["a", "r"]
    assert [v.name for v in grp.inputs] == ["x", "w"]
    assert g.lookup("a").producer is grp and neg.inputs[0] is g.lookup("a")
    assert print_graph(g) == "\n".join([
        "graph @g(%x: f32[4]) {",
        "  %w = constant f32[4] dense<[1.0, 1.0, 1.0, 1.0]>",
        "  %a, %r = prism.fused_group @fused_add_relu_0 [elementwise](%x, %w) : f32[4], f32[4] {",
        "    ^args(%x: f32[4], %w: f32[4])",
        "    %a = Add(%x, %w) : f32[4]  // add",
        "    %r = Relu(%a) : f32[4]  // relu",
        "    yield %a, %r",
        "  }",
        "  %n = Neg(%a) : f32[4]  // neg",
        "  return %r, %n",
        "}",
    ])


def test_forward_value_keeps_graph_output_name_or_refuses():
    g = _graph()
    add, relu, neg = g.nodes
    a = add.outputs[0]
    assert forward_value(g, relu.outputs[0], a)   # %a takes the name %r
    g.remove_node(relu)
    assert a.name == "r" and g.outputs[0] is a and neg.inputs[0] is a
    x = g.inputs[0]
    assert not forward_value(g, neg.outputs[0], x)  # a graph input cannot be renamed


def test_set_constant_in_place_and_remove_node_deep_checks_uses():
    g = _graph()
    add = g.nodes[0]
    a = add.outputs[0]
    with pytest.raises(IRError):
        set_constant(g, a, np.zeros(4, np.float32))
    with pytest.raises(IRError):
        remove_node_deep(g, add)  # %a is still used
    g.remove_node(add, force=True)
    set_constant(g, a, np.zeros(4, np.float32))
    assert g.constants["a"] is a and a.is_constant and a.uses()
