"""simplify: before/expected IR for each rule, numerics against ONNX Runtime."""

import numpy as np
import pytest
from onnx import TensorProto as T
from onnx import helper
from pass_testing import from_onnx, model, run_ort, run_reference, text

from compiler.ir import print_graph
from compiler.passes.base import PassContext
from compiler.passes.eliminate_dead_code import EliminateDeadCode
from compiler.passes.simplify import Simplify
from compiler.passes.verify import verify_graph


def _chain_model():
    return model([
        helper.make_node("Identity", ["x"], ["i"]),
        helper.make_node("Dropout", ["i"], ["d", "mask"]),
        helper.make_node("Transpose", ["d"], ["t1"], perm=[0, 2, 1]),
        helper.make_node("Transpose", ["t1"], ["t2"], perm=[1, 0, 2]),
        helper.make_node("Transpose", ["t2"], ["t3"], perm=[0, 1, 2]),
        helper.make_node("Sum", ["t3"], ["s"]),
        helper.make_node("Cast", ["s"], ["c"], to=T.FLOAT),
        helper.make_node("Flatten", ["c"], ["f"], axis=1),
        helper.make_node("Reshape", ["f", "shp"], ["r"]),
        helper.make_node("Unsqueeze", ["r", "ax"], ["u"]),
        helper.make_node("Squeeze", ["u", "ax"], ["q"]),
        helper.make_node("Identity", ["q"], ["y"]),
    ], [("x", T.FLOAT, [2, 3, 4])], [("y", T.FLOAT, [4, 6]), ("mask", T.BOOL, [2, 3, 4])],
        inits=[("shp", np.array([4, 6])), ("ax", np.array([0]))])


def test_every_rule_on_one_chain():
    m = _chain_model()
    g = from_onnx(m)
    result = Simplify().run(g, PassContext())
    EliminateDeadCode().run(g, PassContext())
    assert print_graph(g) == text("""
        graph @main(%x: f32[2, 3, 4]) {
          %mask_shape = constant i64[3] dense<[2, 3, 4]>
          %q_shape = constant i64[2] dense<[4, 6]>
          %mask = ConstantOfShape(%mask_shape) {value = bool[1] dense<[true]>} : bool[2, 3, 4]  // Dropout_mask
          %t2 = Transpose(%x) {perm = [2, 0, 1]} : f32[4, 2, 3]  // Transpose_1
          %y = Reshape(%t2, %q_shape) : f32[4, 6]  // Squeeze
          return %y, %mask
        }""")
    assert [r.message for r in result.remarks] == [
        "simplified Identity (Identity) to %x",
        "simplified Dropout (Dropout) to %x",
        "simplified Transpose_1 (Transpose) composed with Transpose into perm [2, 0, 1]",
        "simplified Transpose_2 (Transpose) to %t2",
        "simplified Sum (Sum) to %t2",
        "simplified Cast (Cast) to %t2",
        "simplified Flatten (Flatten) to Reshape(%t2) with shape [4, 6]",
        "simplified Reshape (Reshape) to %f",
        "simplified Unsqueeze (Unsqueeze) to Reshape(%t2) through Flatten with shape [1, 4, 6]",
        "simplified Squeeze (Squeeze) to Reshape(%t2) through Unsqueeze with shape [4, 6]",
        "simplified Identity_1 (Identity) to %q (renamed %y, a graph output)",
    ]
    x = np.random.default_rng(1).standard_normal((2, 3, 4)).astype(np.float32)
    for got, want in zip(run_reference(g, {"x": x}), run_ort(m, {"x": x}), strict=True):
        np.testing.assert_array_equal(got, want)


def test_left_alone_training_dropout_cast_transpose_and_graph_input_output():
    m = model([
        helper.make_node("Dropout", ["x", "ratio", "train"], ["d"]),
        helper.make_node("Cast", ["d"], ["c"], to=T.DOUBLE),
        helper.make_node("Transpose", ["c"], ["t"], perm=[1, 0]),
        helper.make_node("Reshape", ["t", "shp"], ["r"]),
        helper.make_node("Identity", ["x"], ["y"]),
    ], [("x", T.FLOAT, [2, 3]), ("train", T.BOOL, [])],
        [("r", T.DOUBLE, [6]), ("y", T.FLOAT, [2, 3])],
        inits=[("ratio", np.array(0.5, np.float32)), ("shp", np.array([6]))])
    g = from_onnx(m)
    before = print_graph(g)
    result = Simplify().run(g, PassContext())
    assert not result.changed and print_graph(g) == before
    assert before == text("""
        graph @main(%x: f32[2, 3], %train: bool[]) {
          %ratio = constant f32[] dense<[0.5]>
          %shp = constant i64[1] dense<[6]>
          %d = Dropout(%x, %ratio, %train) : f32[2, 3]  // Dropout
          %c = Cast(%d) {to = 11} : f64[2, 3]  // Cast
          %t = Transpose(%c) {perm = [1, 0]} : f64[3, 2]  // Transpose
          %r = Reshape(%t, %shp) : f64[6]  // Reshape
          %y = Identity(%x) : f32[2, 3]  // Identity
          return %r, %y
        }""")


def test_transposes_cancel_and_noop_reshape():
    m = model([
        helper.make_node("Transpose", ["x"], ["a"], perm=[1, 2, 0]),
        helper.make_node("Transpose", ["a"], ["b"], perm=[2, 0, 1]),
        helper.make_node("Reshape", ["b", "shp"], ["c"]),
        helper.make_node("Relu", ["c"], ["y"]),
    ], [("x", T.FLOAT, [2, 3, 4])], [("y", T.FLOAT, [2, 3, 4])],
        inits=[("shp", np.array([2, -1, 4]))])
    g = from_onnx(m)
    Simplify().run(g, PassContext())
    EliminateDeadCode().run(g, PassContext())
    assert print_graph(g) == text("""
        graph @main(%x: f32[2, 3, 4]) {
          %y = Relu(%x) : f32[2, 3, 4]  // Relu
          return %y
        }""")


def _random_view_chain(seed: int):
    """A chain of Transpose/Reshape/Flatten/Squeeze/Unsqueeze/Identity/Cast on f32[2, 3, 1, 4]."""
    rng = np.random.default_rng(seed)
    shape, cur, nodes, inits = [2, 3, 1, 4], "x", [], []
    for i in range(int(rng.integers(2, 9))):
        out = f"v{i}"
        op = rng.choice(["Transpose", "Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity",
                         "Cast"])
        if op == "Transpose":
            perm = [int(p) for p in rng.permutation(len(shape))]
            nodes.append(helper.make_node(op, [cur], [out], perm=perm))
            shape = [shape[p] for p in perm]
        elif op == "Reshape":
            dims = [int(d) for d in rng.permutation([2, 3, 4])]
            new = dims[: int(rng.integers(1, 4))]
            new[-1] = -1
            inits.append((f"s{i}", np.array(new, np.int64)))
            nodes.append(helper.make_node(op, [cur, f"s{i}"], [out]))
            shape = [d for d in new if d != -1]
            shape.append(24 // int(np.prod(shape)))
        elif op == "Flatten":
            axis = int(rng.integers(0, len(shape) + 1))
            nodes.append(helper.make_node(op, [cur], [out], axis=axis))
            shape = [int(np.prod(shape[:axis])), int(np.prod(shape[axis:]))]
        elif op == "Squeeze":
            ones = [a for a, d in enumerate(shape) if d == 1]
            if not ones:
                continue
            inits.append((f"a{i}", np.array(ones[:1], np.int64)))
            nodes.append(helper.make_node(op, [cur, f"a{i}"], [out]))
            shape = [d for a, d in enumerate(shape) if a != ones[0]]
        elif op == "Unsqueeze":
            axis = int(rng.integers(0, len(shape) + 1))
            inits.append((f"a{i}", np.array([axis], np.int64)))
            nodes.append(helper.make_node(op, [cur, f"a{i}"], [out]))
            shape = shape[:axis] + [1] + shape[axis:]
        elif op == "Cast":
            nodes.append(helper.make_node(op, [cur], [out], to=T.FLOAT))
        else:
            nodes.append(helper.make_node(op, [cur], [out]))
        cur = out
    nodes.append(helper.make_node("Relu", [cur], ["y"]))
    return model(nodes, [("x", T.FLOAT, [2, 3, 1, 4])], [("y", T.FLOAT, shape)], inits=inits)


@pytest.mark.parametrize("seed", range(60))
def test_random_view_chains_simplify_to_the_same_values(seed):
    m = _random_view_chain(seed)
    g = from_onnx(m)
    before = len(g.nodes)
    Simplify().run(g, PassContext())
    EliminateDeadCode().run(g, PassContext())
    verify_graph(g)
    assert len(g.nodes) <= before
    views = {"Reshape", "Flatten", "Squeeze", "Unsqueeze"}
    for n in g.nodes:
        assert n.op_type not in ("Identity", "Cast")
        p = n.inputs[0].producer
        if p is not None:  # no view after a view, no Transpose after a Transpose
            assert not (n.op_type in views and p.op_type in views), (p.label, n.label)
            assert not (n.op_type == p.op_type == "Transpose"), (p.label, n.label)
    x = np.random.default_rng(seed).standard_normal((2, 3, 1, 4)).astype(np.float32)
    np.testing.assert_array_equal(run_reference(g, {"x": x})[0], run_ort(m, {"x": x})[0])
