"""eliminate-common-subexpressions: before/expected IR, output names, what is left alone."""

import numpy as np
from onnx import TensorProto as T
from onnx import helper
from pass_testing import from_onnx, model, run_ort, run_reference, text

from compiler.ir import print_graph
from compiler.passes.base import PassContext
from compiler.passes.eliminate_common_subexpressions import EliminateCommonSubexpressions


def _dup_model():
    return model([
        helper.make_node("Add", ["x", "w"], ["y1"]),
        helper.make_node("Add", ["w2", "x"], ["y2"]),      # commutative, equal constant
        helper.make_node("Relu", ["y1"], ["z1"]),
        helper.make_node("Relu", ["y2"], ["z2"]),          # becomes equal once y2 -> y1
        helper.make_node("Mul", ["z1", "z2"], ["z"]),
        helper.make_node("LeakyRelu", ["x"], ["l1"], alpha=0.5),
        helper.make_node("LeakyRelu", ["x"], ["l2"], alpha=0.25),  # different attribute
        helper.make_node("Sub", ["z", "l1"], ["s1"]),
        helper.make_node("Sub", ["l2", "z"], ["s2"]),
    ], [("x", T.FLOAT, [2])], [("s1", T.FLOAT, [2]), ("s2", T.FLOAT, [2]), ("z2", T.FLOAT, [2])],
        inits=[("w", np.ones(2, np.float32)), ("w2", np.ones(2, np.float32)),
               ("w3", np.ones(2, np.float64))])


def test_chain_collapses_and_output_keeps_its_name():
    m = _dup_model()
    g = from_onnx(m)
    result = EliminateCommonSubexpressions().run(g, PassContext())
    assert result.changed
    assert print_graph(g) == text("""
        graph @main(%x: f32[2]) {
          %w = constant f32[2] dense<[1.0, 1.0]>
          %w3 = constant f64[2] dense<[1.0, 1.0]>
          %y1 = Add(%x, %w) : f32[2]  // Add
          %z2 = Relu(%y1) : f32[2]  // Relu
          %z = Mul(%z2, %z2) : f32[2]  // Mul
          %l1 = LeakyRelu(%x) {alpha = 0.5} : f32[2]  // LeakyRelu
          %l2 = LeakyRelu(%x) {alpha = 0.25} : f32[2]  // LeakyRelu_1
          %s1 = Sub(%z, %l1) : f32[2]  // Sub
          %s2 = Sub(%l2, %z) : f32[2]  // Sub_1
          return %s1, %s2, %z2
        }""")
    assert [r.message for r in result.remarks] == [
        "merged 1 constant into equal ones (8 bytes saved)",
        "merged Add_1 into Add (same op, attributes and inputs)",
        "merged Relu_1 into Relu (same op, attributes and inputs)"]
    assert result.remarks[0].data == {"merged": [["w2", "w"]], "bytes": 8}
    assert result.remarks[1].nodes == ["Add_1", "Add"]
    assert result.stats == {"nodes_merged": 2, "constants_merged": 1}
    x = np.array([-3.0, 2.0], np.float32)
    for got, want in zip(run_reference(g, {"x": x}), run_ort(m, {"x": x}), strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-6)


def test_tensor_attributes_compared_by_value_and_random_ops_kept():
    def cos(name, v):
        return helper.make_node("ConstantOfShape", ["shape"], [name],
                                value=helper.make_tensor("v", T.FLOAT, [1], [v]))
    m = model([
        cos("a", 1.0), cos("b", 1.0), cos("c", 2.0),
        helper.make_node("RandomUniformLike", ["x"], ["r1"], seed=3.0),
        helper.make_node("RandomUniformLike", ["x"], ["r2"], seed=3.0),
        helper.make_node("Sum", ["a", "b", "c", "r1", "r2"], ["y"]),
    ], [("x", T.FLOAT, [2])], [("y", T.FLOAT, [2])],
        inits=[("shape", np.array([2], np.int64))])
    g = from_onnx(m)
    EliminateCommonSubexpressions().run(g, PassContext())
    assert [n.op_type for n in g.nodes] == ["ConstantOfShape", "ConstantOfShape",
                                            "RandomUniformLike", "RandomUniformLike", "Sum"]
    assert [v.name for v in g.nodes[-1].inputs] == ["a", "a", "c", "r1", "r2"]


def test_two_graph_outputs_are_not_merged():
    m = model([helper.make_node("Relu", ["x"], ["a"]), helper.make_node("Relu", ["x"], ["b"])],
              [("x", T.FLOAT, [2])], [("a", T.FLOAT, [2]), ("b", T.FLOAT, [2])])
    g = from_onnx(m)
    assert not EliminateCommonSubexpressions().run(g, PassContext()).changed
    assert [v.name for v in g.outputs] == ["a", "b"]
