"""fuse-ops: before/expected IR for epilogues, SiLU, residual add, chains, the broadcast edge
case, multi-consumer and size-limit remarks; numerics of the grouped graph against ONNX Runtime."""

import numpy as np
import pytest
from onnx import TensorProto as T
from onnx import helper
from pass_testing import from_onnx, model, run_ort, run_reference, text

from compiler.ir import FusedGroup, print_graph
from compiler.passes.base import PassContext
from compiler.passes.fuse_ops import FuseOps
from compiler.passes.verify import verify_graph

F = T.FLOAT


def _block_model():
    rng = np.random.default_rng(0)
    return model([
        helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c"], ["r"]),
        helper.make_node("Conv", ["r", "w"], ["c2"], pads=[1, 1, 1, 1]),
        helper.make_node("Add", ["c2", "r"], ["a"]),
        helper.make_node("Sigmoid", ["a"], ["s"]),
        helper.make_node("Mul", ["a", "s"], ["y"]),
    ], [("x", F, [1, 4, 5, 5])], [("y", F, [1, 4, 5, 5])],
        inits=[("w", rng.standard_normal((4, 4, 3, 3)).astype(np.float32)),
               ("b", np.arange(4, dtype=np.float32) / 4)])


def test_conv_epilogues_residual_add_and_silu():
    m = _block_model()
    g = from_onnx(m)
    result = FuseOps().run(g, PassContext())
    assert result.changed
    assert print_graph(g) == text("""
        graph @main(%x: f32[1, 4, 5, 5]) {
          %b = constant f32[4] dense<[0.0, 0.25, 0.5, 0.75]>
          %w = constant f32[4, 4, 3, 3] <digest 0bc5997b>
          %r = prism.fused_group @fused_conv2d_relu_0 [out-elementwise-fusable](%x, %w, %b) : f32[1, 4, 5, 5] {
            ^args(%x: f32[1, 4, 5, 5], %w: f32[4, 4, 3, 3], %b: f32[4])
            %c = Conv(%x, %w, %b) {pads = [1, 1, 1, 1]} : f32[1, 4, 5, 5]  // Conv
            %r = Relu(%c) : f32[1, 4, 5, 5]  // Relu
            yield %r
          }
          %y = prism.fused_group @fused_conv2d_add_sigmoid_mul_0 [out-elementwise-fusable](%r, %w) : f32[1, 4, 5, 5] {
            ^args(%r: f32[1, 4, 5, 5], %w: f32[4, 4, 3, 3])
            %c2 = Conv(%r, %w) {pads = [1, 1, 1, 1]} : f32[1, 4, 5, 5]  // Conv_1
            %a = Add(%c2, %r) : f32[1, 4, 5, 5]  // Add
            %s = Sigmoid(%a) : f32[1, 4, 5, 5]  // Sigmoid
            %y = Mul(%a, %s) : f32[1, 4, 5, 5]  // Mul
            yield %y
          }
          return %y
        }""")
    assert [(r.kind, r.message) for r in result.remarks[:-1]] == [
        ("applied", "fused Conv + Relu (activation) as elementwise epilogue"),
        ("applied", "fused Conv_1 + Add (residual add) as elementwise epilogue"),
        ("applied", "fused Conv_1 + Sigmoid (activation) + Mul (SiLU: x*sigmoid(x)) as "
                    "elementwise epilogue"),
        ("missed", "not fused: %r has 2 consumers (Conv_1, Add); its paths re-converge at Add "
                   "only through out-elementwise-fusable ops"),
    ]
    assert result.remarks[-1].kind == "analysis"
    assert result.stats == {"groups": 2, "fused_nodes": 6, "largest_group": 4,
                            "nodes_per_group": {"2": 1, "4": 1}}
    x = np.random.default_rng(1).standard_normal((1, 4, 5, 5)).astype(np.float32)
    np.testing.assert_allclose(run_reference(g, {"x": x})[0], run_ort(m, {"x": x})[0],
                               rtol=1e-5, atol=1e-5)


def test_broadcasting_add_is_not_an_epilogue():
    # MatMul [3,3]x[3,1] -> [3,1]; Add with [1,4] broadcasts to [3,4]: not the anchor's shape
    m = model([helper.make_node("MatMul", ["m", "mw"], ["mm"]),
               helper.make_node("Add", ["mm", "mb"], ["z"])],
              [("m", F, [3, 3])], [("z", F, [3, 4])],
              inits=[("mw", np.ones((3, 1), np.float32)), ("mb", np.ones((1, 4), np.float32))])
    g = from_onnx(m)
    result = FuseOps().run(g, PassContext())
    assert print_graph(g) == text("""
        graph @main(%m: f32[3, 3]) {
          %mb = constant f32[1, 4] dense<[1.0, 1.0, 1.0, 1.0]>
          %mw = constant f32[3, 1] dense<[1.0, 1.0, 1.0]>
          %mm = prism.fused_group @fused_matmul_0 [out-elementwise-fusable](%m, %mw) : f32[3, 1] {
            ^args(%m: f32[3, 3], %mw: f32[3, 1])
            %mm = MatMul(%m, %mw) : f32[3, 1]  // MatMul
            yield %mm
          }
          %z = prism.fused_group @fused_add_0 [broadcast](%mm, %mb) : f32[3, 4] {
            ^args(%mm: f32[3, 1], %mb: f32[1, 4])
            %z = Add(%mm, %mb) : f32[3, 4]  // Add
            yield %z
          }
          return %z
        }""")
    (missed,) = [r for r in result.remarks if r.kind == "missed"]
    assert missed.message == ("not fused: Add (Add) output f32[3, 4] is not the shape of MatMul "
                              "output f32[3, 1]: a broadcasting epilogue would change MatMul's "
                              "output shape")
    assert missed.nodes == ["MatMul", "Add"]


def test_gemm_bias_and_clip_then_matmul_with_same_shape_add():
    m = model([
        helper.make_node("Gemm", ["x", "w"], ["g"], transB=1),
        helper.make_node("Add", ["g", "b"], ["a"]),
        helper.make_node("Clip", ["a", "lo", "hi"], ["y"]),
    ], [("x", F, [2, 3])], [("y", F, [2, 4])],
        inits=[("w", np.ones((4, 3), np.float32)), ("b", np.arange(4, dtype=np.float32)),
               ("lo", np.array(0.0, np.float32)), ("hi", np.array(6.0, np.float32))])
    g = from_onnx(m)
    result = FuseOps().run(g, PassContext())
    assert [n.kernel for n in g.nodes] == ["fused_gemm_add_clip_0"]
    assert [r.message for r in result.remarks if r.kind == "applied"] == [
        "fused Gemm + Add (bias add) as elementwise epilogue",
        "fused Gemm + Clip (activation) as elementwise epilogue",
    ]


def test_elementwise_injective_and_reduction_chains_and_multi_consumer():
    m = model([
        helper.make_node("Exp", ["x"], ["e"]),
        helper.make_node("Mul", ["e", "two"], ["m"]),
        helper.make_node("ReduceSum", ["m", "axes"], ["s"], keepdims=1),
        helper.make_node("Transpose", ["x"], ["t"], perm=[1, 0]),
        helper.make_node("Reshape", ["t", "shape"], ["r"]),
        helper.make_node("Neg", ["x"], ["n"]),                 # 2 consumers, never re-converge
        helper.make_node("Relu", ["n"], ["o1"]),
        helper.make_node("Softmax", ["n"], ["o2"]),
    ], [("x", F, [2, 3])],
        [("s", F, [2, 1]), ("r", F, [6]), ("o1", F, [2, 3]), ("o2", F, [2, 3])],
        inits=[("two", np.array(2.0, np.float32)), ("axes", np.array([1])),
               ("shape", np.array([6]))])
    g = from_onnx(m)
    result = FuseOps().run(g, PassContext())
    assert [(n.kernel, n.kind, [b.name for b in n.body.nodes]) for n in g.nodes] == [
        ("fused_exp_mul_reduce_sum_0", "reduction", ["Exp", "Mul", "ReduceSum"]),
        ("fused_transpose_reshape_0", "injective", ["Transpose", "Reshape"]),
        ("fused_neg_0", "elementwise", ["Neg"]),
        ("fused_relu_0", "elementwise", ["Relu"]),
        ("fused_softmax_0", "opaque", ["Softmax"]),
    ]
    assert [r.message for r in result.remarks if r.kind != "analysis"] == [
        "fused Exp + Mul as elementwise chain (Mul: broadcast)",
        "fused Exp + Mul + ReduceSum into the reduction as its elementwise producers "
        "(ReduceSum: reduction)",
        "fused Transpose + Reshape as injective chain (Reshape: injective)",
        "not fused: %n has 2 consumers (Relu, Softmax); its paths do not re-converge before "
        "a graph output",
    ]
    x = np.random.default_rng(2).standard_normal((2, 3)).astype(np.float32)
    for got, want in zip(run_reference(g, {"x": x}), run_ort(m, {"x": x}), strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_max_group_size_and_one_anchor_per_group():
    m = model([
        helper.make_node("MatMul", ["x", "w"], ["a"]),
        helper.make_node("MatMul", ["x", "w"], ["b"]),
        helper.make_node("Add", ["a", "b"], ["c"]),
        helper.make_node("Relu", ["c"], ["y"]),
    ], [("x", F, [2, 2])], [("y", F, [2, 2])], inits=[("w", np.eye(2, dtype=np.float32))])
    g = from_onnx(m)
    result = FuseOps(**{"max-group-size": 2}).run(g, PassContext())
    assert [n.kernel for n in g.nodes] == ["fused_matmul_0", "fused_matmul_add_0", "fused_relu_0"]
    assert [r.message for r in result.remarks if r.kind == "missed"] == [
        "not fused: Add is already the epilogue of MatMul; a group has one anchor, so MatMul_1 "
        "stays apart",
        "not fused: Add + Relu would make a group of 3 nodes > max-group-size 2",
    ]


def test_idempotent_on_fused_graph():
    g = from_onnx(_block_model())
    FuseOps().run(g, PassContext())
    before = print_graph(g)
    result = FuseOps().run(g, PassContext())
    assert not result.changed and print_graph(g) == before


def test_multi_output_node_read_twice_by_one_consumer():
    # Split's two outputs both feed one node (YOLOv8n's C2f blocks): one edge per consumer node
    m = model([
        helper.make_node("Split", ["x"], ["s0", "s1"], axis=1, num_outputs=2),
        helper.make_node("Relu", ["s1"], ["r"]),
        helper.make_node("Concat", ["s0", "s1", "r"], ["y"], axis=1),
        helper.make_node("Split", ["z"], ["t0", "t1"], axis=0, num_outputs=2),
        helper.make_node("MatMul", ["t0", "t1"], ["w"]),
    ], [("x", F, [1, 4]), ("z", F, [4, 2])], [("y", F, [1, 6]), ("w", F, [2, 2])], opset=18)
    g = from_onnx(m)
    result = FuseOps().run(g, PassContext())
    assert [(n.kernel, [b.name for b in n.body.nodes]) for n in g.nodes] == [
        ("fused_split_relu_concat_0", ["Split", "Relu", "Concat"]),
        ("fused_split_matmul_0", ["Split_1", "MatMul"])]  # a view op read only by a MatMul: its operand access
    assert [r.message for r in result.remarks if r.kind != "analysis"] == [
        "fused Relu + Concat into an injective consumer (Concat: injective)",
        "fused Split + Relu + Concat as injective chain (Concat: injective)",
        "Split_1 fused into MatMul as its operand access: read in place through the index remap, no copy",
    ]
    x = np.arange(4, dtype=np.float32).reshape(1, 4) - 2
    z = np.arange(8, dtype=np.float32).reshape(4, 2)
    for got, want in zip(run_reference(g, {"x": x, "z": z}), run_ort(m, {"x": x, "z": z}),
                         strict=True):
        np.testing.assert_allclose(got, want)


def _random_dag(seed: int, n_nodes: int = 14):
    """A random DAG over f32[3, 3] values mixing every fusion kind."""
    rng = np.random.default_rng(seed)
    values, nodes, inits = ["x"], [], [("w", rng.standard_normal((3, 3)).astype(np.float32)),
                                      ("axes", np.array([1]))]
    for i in range(n_nodes):
        op = rng.choice(["Relu", "Sigmoid", "Add", "Mul", "Transpose", "ReduceSum", "MatMul",
                         "Softmax"])
        a, b = (values[int(j)] for j in rng.integers(0, len(values), 2))
        out = f"v{i}"
        if op in ("Relu", "Sigmoid", "Softmax"):
            nodes.append(helper.make_node(op, [a], [out]))
        elif op in ("Add", "Mul"):
            nodes.append(helper.make_node(op, [a, b], [out]))
        elif op == "Transpose":
            nodes.append(helper.make_node(op, [a], [out], perm=[1, 0]))
        elif op == "MatMul":
            nodes.append(helper.make_node(op, [a, "w" if rng.random() < 0.5 else b], [out]))
        else:  # ReduceSum to [3, 1], broadcast back by an Add
            nodes.append(helper.make_node(op, [a, "axes"], [out + "r"], keepdims=1))
            nodes.append(helper.make_node("Add", [out + "r", b], [out]))
        values.append(out)
    used = {i for n in nodes for i in n.input}
    outs = [v for v in values[1:] if v not in used] + [values[int(rng.integers(1, len(values)))]]
    outs = list(dict.fromkeys(outs))
    return model(nodes, [("x", F, [3, 3])], [(o, F, [3, 3]) for o in outs], inits=inits)


@pytest.mark.parametrize("seed", range(40))
def test_random_dags_fuse_into_a_valid_schedule_with_same_results(seed):
    m = _random_dag(seed)
    g = from_onnx(m)
    FuseOps(**{"max-group-size": 6}).run(g, PassContext())
    verify_graph(g)
    assert all(isinstance(n, FusedGroup) for n in g.nodes)
    assert all(sum(b.op_type == "MatMul" for b in n.body.nodes) <= 1 for n in g.nodes)
    assert all(len(n.body.nodes) <= 6 for n in g.nodes)
    x = np.random.default_rng(seed).standard_normal((3, 3)).astype(np.float32)
    for got, want in zip(run_reference(g, {"x": x}), run_ort(m, {"x": x}), strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_view_ops_fuse_into_matmul_as_operand_access():
    """Reshape -> Transpose feeding only a MatMul join its group (read in place); a Transpose with a
    second consumer stays its own kernel."""
    m = model([
        helper.make_node("Reshape", ["k", "shp"], ["k4"], name="reshape"),
        helper.make_node("Transpose", ["k4"], ["kt"], perm=[0, 2, 3, 1], name="transpose"),
        helper.make_node("MatMul", ["q", "kt"], ["s"], name="scores"),
        helper.make_node("Transpose", ["q"], ["qt"], perm=[0, 1, 3, 2], name="t2"),
        helper.make_node("MatMul", ["s", "q"], ["y"], name="pv"),
        helper.make_node("Add", ["qt", "qt"], ["z"], name="twice"),
    ], [("k", F, [1, 6, 8]), ("q", F, [1, 2, 6, 4])], [("y", F, [1, 2, 6, 4]), ("z", F, [1, 2, 4, 6])],
        inits=[("shp", np.array([1, 6, 2, 4], np.int64))])
    g = from_onnx(m)
    result = FuseOps().run(g, PassContext())
    verify_graph(g)
    groups = {n.kernel: [x.op_type for x in n.body.nodes] for n in g.nodes if isinstance(n, FusedGroup)}
    assert groups["fused_reshape_transpose_matmul_0"] == ["Reshape", "Transpose", "MatMul"]
    assert ["Transpose", "Add"] in groups.values()  # t2 is not read by a MatMul: an ordinary injective chain
    assert ("applied", "reshape + transpose fused into scores as its operand access: read in place through the "
            "index remap, no copy") in [(r.kind, r.message) for r in result.remarks]
    rng = np.random.default_rng(0)
    feeds = {"k": rng.standard_normal((1, 6, 8)).astype(np.float32), "q": rng.standard_normal((1, 2, 6, 4)).astype(
        np.float32)}
    for a, b in zip(run_reference(g, feeds), run_ort(m, feeds), strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
