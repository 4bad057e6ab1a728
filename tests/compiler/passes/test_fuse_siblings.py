"""fuse-siblings: before/expected IR of a merged MatMul pair, numerics of merged MatMul (with bias
Adds), Gemm (mixed transB, C) and Conv siblings against ONNX Runtime on the original model, a
Q/K/V attention block through the whole O2 pipeline, and the missed remarks of each refusal."""

import numpy as np
import pytest
from onnx import TensorProto as T
from onnx import helper
from pass_testing import from_onnx, model, run_ort, text, to_onnx

from compiler.ir import print_graph
from compiler.passes.base import PassContext
from compiler.passes.fuse_siblings import FuseSiblings
from compiler.passes.verify import verify_graph
from tests.compiler.schedule.model_check import check_model, tensor
from tests.compiler.schedule.model_check import model as loose_model

F = T.FLOAT
R = np.random.default_rng(0)


def f(*s: int) -> np.ndarray:
    return R.standard_normal(s).astype(np.float32)


def _run(m, **opts):  # type: ignore[no-untyped-def]
    g = from_onnx(m)
    res = FuseSiblings(**opts).run(g, PassContext())
    verify_graph(g)
    return g, res


def _same_as_ort(m, g, feeds) -> None:  # type: ignore[no-untyped-def]
    want = run_ort(m, feeds)
    got = run_ort(to_onnx(g), feeds)
    for a, b in zip(got, want, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)


def test_two_matmuls_become_one_and_two_slices():
    m = model([helper.make_node("MatMul", ["x", "a"], ["p"], name="mm_a"),
               helper.make_node("MatMul", ["x", "b"], ["q"], name="mm_b")],
              [("x", F, [2, 3])], [("p", F, [2, 2]), ("q", F, [2, 1])],
              inits=[("a", np.arange(6, dtype=np.float32).reshape(3, 2)), ("b", np.ones((3, 1), np.float32))])
    g, res = _run(m)
    assert res.changed
    assert print_graph(g) == text("""
        graph @main(%x: f32[2, 3]) {
          %mm_a.merged_w = constant f32[3, 3] <digest 8925cad3>
          %mm_a.slice_axis = constant i64[1] dense<[1]>
          %mm_a.slice_end = constant i64[1] dense<[2]>
          %mm_a.slice_start = constant i64[1] dense<[0]>
          %mm_b.slice_end = constant i64[1] dense<[3]>
          %mm_b.slice_start = constant i64[1] dense<[2]>
          %mm_a.merged = MatMul(%x, %mm_a.merged_w) : f32[2, 3]
          %p = Slice(%mm_a.merged, %mm_a.slice_start, %mm_a.slice_end, %mm_a.slice_axis) : f32[2, 2]  // mm_a.slice
          %q = Slice(%mm_a.merged, %mm_b.slice_start, %mm_b.slice_end, %mm_a.slice_axis) : f32[2, 1]  // mm_b.slice
          return %p, %q
        }""")
    np.testing.assert_array_equal(g.constants["mm_a.merged_w"].const, [[0, 1, 1], [2, 3, 1], [4, 5, 1]])
    [r] = [r for r in res.remarks if r.kind == "applied"]
    assert r.nodes == ["mm_a", "mm_b"] and r.data["widths"] == [2, 1]


def test_qkv_matmuls_with_bias_adds_match_onnxruntime():
    nodes, inits = [], []
    for i, nm in enumerate("qkv"):
        nodes.append(helper.make_node("MatMul", ["x", f"w{nm}"], [f"m{nm}"], name=f"mm_{nm}"))
        inits.append((f"w{nm}", f(16, 24)))
        if i < 2:  # v has no bias: its slice of the merged bias is zeros
            nodes.append(helper.make_node("Add", [f"b{nm}", f"m{nm}"], [f"y{nm}"], name=f"add_{nm}"))
            inits.append((f"b{nm}", f(24)))
        else:
            nodes.append(helper.make_node("Relu", [f"m{nm}"], [f"y{nm}"], name="relu_v"))
    m = model(nodes, [("x", F, [2, 5, 16])], [(f"y{nm}", F, [2, 5, 24]) for nm in "qkv"], inits=inits)
    g, res = _run(m)
    ops = [n.op_type for n in g.nodes]
    assert ops.count("MatMul") == 1 and ops.count("Add") == 1 and ops.count("Slice") == 3, ops
    assert "2 bias Add(s) absorbed" in res.remarks[0].message
    _same_as_ort(m, g, {"x": f(2, 5, 16)})


def test_gemm_siblings_with_mixed_transb_and_c_match_onnxruntime():
    m = model([helper.make_node("Gemm", ["x", "b1", "c1"], ["y1"], transB=1, alpha=0.5, name="g1"),
               helper.make_node("Gemm", ["x", "b2"], ["y2"], alpha=0.5, name="g2"),
               helper.make_node("Gemm", ["x", "b3", "c3"], ["y3"], alpha=0.5, name="g3")],
              [("x", F, [4, 8])], [("y1", F, [4, 6]), ("y2", F, [4, 3]), ("y3", F, [4, 5])],
              inits=[("b1", f(6, 8)), ("c1", f(6)), ("b2", f(8, 3)), ("b3", f(8, 5)), ("c3", f(1, 5))])
    g, res = _run(m)
    assert [n.op_type for n in g.nodes].count("Gemm") == 1
    _same_as_ort(m, g, {"x": f(4, 8)})


def test_conv_siblings_merge_with_conv_true_and_match_onnxruntime():
    nodes = [helper.make_node("Conv", ["x", f"w{i}"] + ([f"b{i}"] if i else []), [f"y{i}"], name=f"conv{i}",
                              kernel_shape=[3, 3], pads=[1, 1, 1, 1]) for i in range(3)]
    inits = [(f"w{i}", f(4 + i, 3, 3, 3)) for i in range(3)] + [(f"b{i}", f(4 + i)) for i in (1, 2)]
    m = model(nodes, [("x", F, [1, 3, 7, 7])], [(f"y{i}", F, [1, 4 + i, 7, 7]) for i in range(3)], inits=inits)
    g, res = _run(m, conv=True)
    assert [n.op_type for n in g.nodes].count("Conv") == 1
    _same_as_ort(m, g, {"x": f(1, 3, 7, 7)})
    chk = check_model(m, pipeline="fold-constants,fuse-siblings{conv=true},fuse-ops,plan-memory")  # compiled
    assert sum("Conv" in k.func.attrs.get("ops", []) for k in chk.kernels) == 1
    g, res = _run(m)  # the default: Conv siblings left alone, with the reason
    assert not res.changed and "option conv=false" in res.remarks[0].message


def test_refusals_name_the_nodes_and_the_reason():
    nodes = [helper.make_node("Conv", ["x", "w1"], ["y1"], name="c1x1", kernel_shape=[1, 1]),
             helper.make_node("Conv", ["x", "w3"], ["y3"], name="c3x3", kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
             helper.make_node("Conv", ["x", "wd"], ["yd"], name="cdw", kernel_shape=[3, 3], pads=[1, 1, 1, 1], group=4),
             helper.make_node("Conv", ["x", "wr"], ["yr"], name="crun", kernel_shape=[1, 1])]
    m = model(nodes, [("x", F, [1, 4, 5, 5]), ("wr", F, [2, 4, 1, 1])],
              [("y1", F, [1, 2, 5, 5]), ("y3", F, [1, 2, 5, 5]), ("yd", F, [1, 4, 5, 5]), ("yr", F, [1, 2, 5, 5])],
              inits=[("w1", f(2, 4, 1, 1)), ("w3", f(2, 4, 3, 3)), ("wd", f(4, 1, 3, 3))])
    g, res = _run(m, conv=True)
    assert not res.changed
    msgs = {r.nodes[-1]: r.message for r in res.remarks}
    assert all(r.kind == "missed" for r in res.remarks)
    assert "group = 4" in msgs["cdw"]
    assert "computed at run time" in msgs["crun"]
    assert "weight shapes per output channel differ: [4, 1, 1] vs [4, 3, 3]" in msgs["c3x3"] or \
        "weight shapes per output channel differ: [4, 3, 3] vs [4, 1, 1]" in msgs["c1x1"], msgs


def test_gemm_with_other_alpha_is_refused():
    m = model([helper.make_node("Gemm", ["x", "b1"], ["y1"], alpha=2.0, name="g1"),
               helper.make_node("Gemm", ["x", "b2"], ["y2"], name="g2")],
              [("x", F, [2, 4])], [("y1", F, [2, 3]), ("y2", F, [2, 3])], inits=[("b1", f(4, 3)), ("b2", f(4, 3))])
    g, res = _run(m)
    assert not res.changed and "alpha/beta or K differ" in res.remarks[0].message


@pytest.mark.parametrize("heads", [2])
def test_attention_qkv_through_o2_matches_onnxruntime(heads: int):
    """Q/K/V projections of one attention layer: one merged GEMM, the slices read in place."""
    seq, hid = 8, 32
    d = hid // heads
    nodes, inits = [], {"shape": np.array([1, seq, heads, d], np.int64), "scale": np.array(np.sqrt(d), np.float32)}
    for nm, perm in (("q", [0, 2, 1, 3]), ("k", [0, 2, 3, 1]), ("v", [0, 2, 1, 3])):
        inits[f"w{nm}"], inits[f"b{nm}"] = f(hid, hid), f(hid)
        nodes += [helper.make_node("MatMul", ["x", f"w{nm}"], [f"m{nm}"]),
                  helper.make_node("Add", [f"m{nm}", f"b{nm}"], [f"a{nm}"]),
                  helper.make_node("Reshape", [f"a{nm}", "shape"], [f"r{nm}"]),
                  helper.make_node("Transpose", [f"r{nm}"], [f"t{nm}"], perm=perm)]
    nodes += [helper.make_node("MatMul", ["tq", "tk"], ["s"]), helper.make_node("Div", ["s", "scale"], ["sd"]),
              helper.make_node("Softmax", ["sd"], ["p"], axis=-1), helper.make_node("MatMul", ["p", "tv"], ["y"])]
    m = loose_model(nodes, [tensor("x", [1, seq, hid])], ["y"], inits, opset=13)
    chk = check_model(m, pipeline="O2")
    applied = [r for r in chk.remarks if r["pass"] == "fuse-siblings" and r["kind"] == "applied"]
    assert len(applied) == 1 and applied[0]["data"]["widths"] == [hid] * 3
    assert not any(k.func.attrs.get("ops") == ["Slice"] for k in chk.kernels)  # no slice is copied
