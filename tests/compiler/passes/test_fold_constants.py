"""fold-constants: before/expected IR, limits, and numerics against ONNX Runtime."""

import numpy as np
from onnx import TensorProto as T
from onnx import helper
from pass_testing import from_onnx, model, run_ort, run_reference, text

from compiler.ir import print_graph
from compiler.passes.base import PassContext
from compiler.passes.fold_constants import FoldConstants


def _shape_chain_model():
    return model([
        helper.make_node("Shape", ["x"], ["s"]),
        helper.make_node("ConstantOfShape", ["s"], ["c"],
                         value=helper.make_tensor("v", T.FLOAT, [1], [2.0])),
        helper.make_node("Add", ["x", "c"], ["y"]),
        helper.make_node("Mul", ["w", "w"], ["w2"]),
        helper.make_node("Add", ["y", "w2"], ["z"]),
    ], [("x", T.FLOAT, [2, 3])], [("z", T.FLOAT, [2, 3])],
        inits=[("w", np.arange(3, dtype=np.float32))])


def test_shape_constant_of_shape_and_constant_inputs_fold():
    g = from_onnx(_shape_chain_model())
    result = FoldConstants().run(g, PassContext())
    assert result.changed
    assert print_graph(g) == text("""
        graph @main(%x: f32[2, 3]) {
          %c = constant f32[2, 3] dense<[2.0, 2.0, 2.0, 2.0, 2.0, 2.0]>
          %s = constant i64[2] dense<[2, 3]>
          %w = constant f32[3] dense<[0.0, 1.0, 2.0]>
          %w2 = constant f32[3] dense<[0.0, 1.0, 4.0]>
          %y = Add(%x, %c) : f32[2, 3]  // Add
          %z = Add(%y, %w2) : f32[2, 3]  // Add_1
          return %z
        }""")
    assert [r.kind for r in result.remarks] == ["applied"] * 3
    assert result.remarks[0].message == "folded Shape (Shape) into constant %s: i64[2] (16 bytes)"
    assert result.stats["folded"] == 3


def test_folded_graph_matches_onnxruntime_on_original():
    m = _shape_chain_model()
    g = from_onnx(m)
    FoldConstants().run(g, PassContext())
    x = np.random.default_rng(0).standard_normal((2, 3)).astype(np.float32)
    np.testing.assert_allclose(run_reference(g, {"x": x})[0], run_ort(m, {"x": x})[0], rtol=1e-6)


def test_max_bytes_refuses_before_materializing():
    m = model([
        helper.make_node("ConstantOfShape", ["shape"], ["big"],
                         value=helper.make_tensor("v", T.FLOAT, [1], [1.0])),
        helper.make_node("Add", ["x", "big"], ["y"]),
    ], [("x", T.FLOAT, [1000, 1000])], [("y", T.FLOAT, [1000, 1000])],
        inits=[("shape", np.array([1000, 1000], np.int64))])
    g = from_onnx(m)
    result = FoldConstants(**{"max-bytes": 1024}).run(g, PassContext())
    assert not result.changed
    (r,) = result.remarks
    assert r.kind == "missed"
    assert r.message == ("not folded: ConstantOfShape (ConstantOfShape) would materialize "
                         "4000000 bytes > max-bytes 1024")
    assert r.data == {"bytes": 4_000_000, "limit": 1024}
    # a 10^12-element shape is refused by the default limit without allocating anything
    g.constants["shape"].const = np.array([10**6, 10**6], np.int64)
    result = FoldConstants().run(g, PassContext())
    assert result.remarks[0].data["bytes"] == 4 * 10**12


def test_graph_output_keeps_name_and_shape_start_end():
    m = model([
        helper.make_node("Shape", ["x"], ["s"], start=1, end=-1),
        helper.make_node("Size", ["x"], ["n"]),
        helper.make_node("Relu", ["x"], ["y"]),
    ], [("x", T.FLOAT, [2, 3, 4, 5])],
        [("s", T.INT64, [2]), ("n", T.INT64, []), ("y", T.FLOAT, [2, 3, 4, 5])], opset=17)
    g = from_onnx(m)
    FoldConstants().run(g, PassContext())
    assert print_graph(g) == text("""
        graph @main(%x: f32[2, 3, 4, 5]) {
          %n = constant i64[] dense<[120]>
          %s = constant i64[2] dense<[3, 4]>
          %y = Relu(%x) : f32[2, 3, 4, 5]  // Relu
          return %s, %n, %y
        }""")
    ref = run_ort(m, {"x": np.zeros((2, 3, 4, 5), np.float32)})
    np.testing.assert_array_equal(g.constants["s"].const, ref[0])
    np.testing.assert_array_equal(g.constants["n"].const, ref[1])


def test_random_ops_are_left_alone():
    m = model([
        helper.make_node("RandomNormal", [], ["r"], shape=[2], seed=1.0),
        helper.make_node("Add", ["r", "w"], ["y"]),
    ], [], [("y", T.FLOAT, [2])], inits=[("w", np.ones(2, np.float32))])
    g = from_onnx(m)
    assert not FoldConstants().run(g, PassContext()).changed
    assert [n.op_type for n in g.nodes] == ["RandomNormal", "Add"]
