"""fuse-layer-norm: before/expected IR of the decomposed PyTorch form, the variants it accepts,
missed remarks for chains that break off, and numerics of the grouped graph against ONNX Runtime."""

import numpy as np
import pytest
from onnx import TensorProto as T
from onnx import helper
from pass_testing import from_onnx, model, run_ort, run_reference, text

from compiler.ir import FusedGroup, print_graph
from compiler.passes.base import PassContext
from compiler.passes.fuse_layer_norm import FuseLayerNorm
from compiler.passes.verify import verify_graph

F = T.FLOAT


def _ln(pow_form=True, divide=True, affine=True, extra_use=False, axes=(-1,), eps=1e-5):
    nodes = [helper.make_node("ReduceMean", ["x"], ["m"], axes=list(axes), name="mean"),
             helper.make_node("Sub", ["x", "m"], ["d"], name="sub")]
    nodes.append(helper.make_node("Pow", ["d", "two"], ["sq"], name="pow") if pow_form
                 else helper.make_node("Mul", ["d", "d"], ["sq"], name="square"))
    nodes += [helper.make_node("ReduceMean", ["sq"], ["var"], axes=list(axes), name="var"),
              helper.make_node("Add", ["var", "eps"], ["ve"], name="add_eps"),
              helper.make_node("Sqrt", ["ve"], ["std"], name="sqrt")]
    if divide:
        nodes.append(helper.make_node("Div", ["d", "std"], ["n"], name="div"))
    else:
        nodes += [helper.make_node("Reciprocal", ["std"], ["r"], name="rcp"),
                  helper.make_node("Mul", ["d", "r"], ["n"], name="div")]
    out = "n"
    if affine:
        nodes += [helper.make_node("Mul", ["g", "n"], ["ng"], name="scale"),
                  helper.make_node("Add", ["ng", "b"], ["y"], name="shift")]
        out = "y"
    outs = [(out, F, [2, 3, 8])] + ([("d", F, [2, 3, 8])] if extra_use else [])
    rng = np.random.default_rng(0)
    inits = [("two", np.array(2.0, np.float32)), ("eps", np.array(eps, np.float32)),
             ("g", (1 + rng.standard_normal(8)).astype(np.float32)), ("b", np.arange(8, dtype=np.float32) / 8)]
    return model(nodes, [("x", F, [2, 3, 8])], outs, inits=inits, opset=13)


def test_decomposed_layer_norm_becomes_one_group():
    g = from_onnx(_ln())
    result = FuseLayerNorm().run(g, PassContext())
    assert result.changed
    verify_graph(g)
    assert print_graph(g) == text("""
        graph @main(%x: f32[2, 3, 8]) {
          %b = constant f32[8] dense<[0.0, 0.125, 0.25, 0.375, 0.5, 0.625, 0.75, 0.875]>
          %eps = constant f32[] dense<[9.999999747378752e-06]>
          %g = constant f32[8] dense<[1.125730276107788, 0.8678951263427734, 1.6404227018356323, 1.1049001216888428, 0.46433061361312866, 1.3615950345993042, 2.30400013923645, 1.9470809698104858]>
          %two = constant f32[] dense<[2.0]>
          %y = prism.fused_group @fused_layer_norm_0 [reduction](%x, %two, %eps, %g, %b) {axis = -1, epsilon = 9.999999747378752e-06, mean = "mean", normalized = "div", pattern = "LayerNormalization"} : f32[2, 3, 8] {
            ^args(%x: f32[2, 3, 8], %two: f32[], %eps: f32[], %g: f32[8], %b: f32[8])
            %m = ReduceMean(%x) {axes = [-1]} : f32[2, 3, 1]  // mean
            %d = Sub(%x, %m) : f32[2, 3, 8]  // sub
            %sq = Pow(%d, %two) : f32[2, 3, 8]  // pow
            %var = ReduceMean(%sq) {axes = [-1]} : f32[2, 3, 1]
            %ve = Add(%var, %eps) : f32[2, 3, 1]  // add_eps
            %std = Sqrt(%ve) : f32[2, 3, 1]  // sqrt
            %n = Div(%d, %std) : f32[2, 3, 8]  // div
            %ng = Mul(%g, %n) : f32[2, 3, 8]  // scale
            %y = Add(%ng, %b) : f32[2, 3, 8]  // shift
            yield %y
          }
          return %y
        }""")  # noqa: E501
    (r,) = [r for r in result.remarks if r.kind == "applied"]
    assert r.message.startswith("recognised LayerNormalization over axis -1 (N = 8, epsilon 1e-05)")
    assert r.nodes == ["mean", "sub", "pow", "var", "add_eps", "sqrt", "div", "scale", "shift"]


@pytest.mark.parametrize("kw", [{"pow_form": False}, {"divide": False}, {"affine": False}, {"axes": (1, 2)}])
def test_variants_recognised_and_numerics_kept(kw):
    m = _ln(**kw)
    g = from_onnx(m)
    assert FuseLayerNorm().run(g, PassContext()).changed
    (grp,) = [n for n in g.nodes if isinstance(n, FusedGroup)]
    assert grp.attrs["pattern"] == "LayerNormalization"
    assert grp.attrs["axis"] == (-2 if kw.get("axes") == (1, 2) else -1)
    x = np.random.default_rng(1).standard_normal((2, 3, 8)).astype(np.float32)
    np.testing.assert_allclose(run_reference(g, {"x": x})[0], run_ort(m, {"x": x})[0], rtol=1e-5, atol=1e-6)


def test_deviation_used_elsewhere_is_a_missed_remark():
    g = from_onnx(_ln(extra_use=True))
    result = FuseLayerNorm().run(g, PassContext())
    assert not result.changed
    (r,) = [r for r in result.remarks if r.kind == "missed"]
    assert r.message == "not a LayerNormalization: sub: %d is read by pow, div, not by a square and a division only"


def test_non_suffix_axes_and_bad_power_are_missed():
    g = from_onnx(_ln(axes=(0,)))
    (r,) = FuseLayerNorm().run(g, PassContext()).remarks
    assert r.kind == "missed" and "axes [0] are not the last 1 axes" in r.message
