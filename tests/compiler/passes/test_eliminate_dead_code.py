"""eliminate-dead-code: before/expected IR, subgraph liveness."""

import numpy as np
from onnx import TensorProto as T
from onnx import helper
from pass_testing import from_onnx, model, text

from compiler.ir import print_graph
from compiler.passes.base import PassContext
from compiler.passes.eliminate_dead_code import EliminateDeadCode


def _if_model(cond_used=True):
    then = helper.make_graph([helper.make_node("Relu", ["a"], ["t"])], "then", [],
                             [helper.make_tensor_value_info("t", T.FLOAT, [2])])
    els = helper.make_graph([helper.make_node("Neg", ["b"], ["e"])], "else", [],
                            [helper.make_tensor_value_info("e", T.FLOAT, [2])])
    nodes = [
        helper.make_node("Exp", ["x"], ["a"]),
        helper.make_node("Abs", ["x"], ["b"]),
        helper.make_node("Sqrt", ["x"], ["dead1"]),
        helper.make_node("Abs", ["dead1"], ["dead2"]),
        helper.make_node("If", ["c"], ["r"], then_branch=then, else_branch=els),
        helper.make_node("Add", ["x", "w"], ["y"]),
    ]
    outputs = [("y", T.FLOAT, [2])] + ([("r", T.FLOAT, [2])] if cond_used else [])
    return model(nodes, [("x", T.FLOAT, [2]), ("c", T.BOOL, [])], outputs,
                 inits=[("w", np.ones(2, np.float32)), ("unused", np.ones(3))])


def test_dead_chain_and_unused_constant_removed_outer_values_of_subgraphs_live():
    g = from_onnx(_if_model())
    result = EliminateDeadCode().run(g, PassContext())
    assert result.changed
    assert print_graph(g) == text("""
        graph @main(%x: f32[2], %c: bool[]) {
          %w = constant f32[2] dense<[1.0, 1.0]>
          %a = Exp(%x) : f32[2]  // Exp
          %b = Abs(%x) : f32[2]  // Abs
          %r = If(%c) : f32[2]  // If
            else_branch = graph @else() {
              %e = Neg(%b) : f32[2]  // Neg
              return %e
            }
            then_branch = graph @then() {
              %t = Relu(%a) : f32[2]  // Relu
              return %t
            }
          %y = Add(%x, %w) : f32[2]  // Add
          return %y, %r
        }""")
    assert result.stats == {"nodes_removed": 2, "constants_removed": 1, "constant_bytes_removed": 24}
    assert result.remarks[0].nodes == ["Abs_1", "Sqrt"]


def test_dead_if_releases_the_outer_values_its_branches_read():
    g = from_onnx(_if_model(cond_used=False))
    EliminateDeadCode().run(g, PassContext())
    assert print_graph(g) == text("""
        graph @main(%x: f32[2], %c: bool[]) {
          %w = constant f32[2] dense<[1.0, 1.0]>
          %y = Add(%x, %w) : f32[2]  // Add
          return %y
        }""")
    assert g.inputs[1].uses() == [] and [v.name for v in g.inputs] == ["x", "c"]


def test_nothing_dead_is_unchanged():
    g = from_onnx(model([helper.make_node("Relu", ["x"], ["y"])],
                        [("x", T.FLOAT, [2])], [("y", T.FLOAT, [2])]))
    before = print_graph(g)
    result = EliminateDeadCode().run(g, PassContext())
    assert not result.changed and result.remarks == [] and print_graph(g) == before
