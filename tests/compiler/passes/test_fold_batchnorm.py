"""fold-batchnorm: Conv/Gemm(transB)/MatMul folds checked against ONNX Runtime on the original
model, and every refusal with its reason."""

import numpy as np
import pytest
from onnx import TensorProto as T
from onnx import helper
from pass_testing import from_onnx, model, run_ort, run_reference, text, to_onnx

from compiler.ir import print_graph
from compiler.passes.base import PassContext
from compiler.passes.eliminate_dead_code import EliminateDeadCode
from compiler.passes.fold_batchnorm import FoldBatchNorm


def _bn_inits(rng, prefix, c):
    return [(f"{prefix}_s", rng.uniform(0.5, 2, c).astype(np.float32)),
            (f"{prefix}_b", rng.standard_normal(c).astype(np.float32)),
            (f"{prefix}_m", rng.standard_normal(c).astype(np.float32)),
            (f"{prefix}_v", rng.uniform(0.5, 2, c).astype(np.float32))]


def _bn(prefix, x, y):
    return helper.make_node("BatchNormalization", [x] + [f"{prefix}_{k}" for k in "sbmv"], [y],
                            epsilon=1e-3)


def _foldable_model():
    rng = np.random.default_rng(0)
    f32 = np.float32
    return model([
        helper.make_node("Conv", ["x", "w", "cb"], ["c"], pads=[1, 1, 1, 1], group=2),
        _bn("bn1", "c", "c_bn"),
        helper.make_node("Flatten", ["c_bn"], ["f"]),
        helper.make_node("Gemm", ["f", "gw", "gc"], ["g"], transB=1, beta=0.5, alpha=2.0),
        _bn("bn2", "g", "g_bn"),
        helper.make_node("MatMul", ["g_bn", "mw"], ["mm"]),
        _bn("bn3", "mm", "y"),
    ], [("x", T.FLOAT, [2, 4, 5, 5])], [("y", T.FLOAT, [2, 3])],
        inits=[("w", rng.standard_normal((6, 2, 3, 3)).astype(f32)),
               ("cb", rng.standard_normal(6).astype(f32)),
               ("gw", rng.standard_normal((7, 150)).astype(f32)),
               ("gc", rng.standard_normal((1, 7)).astype(f32)),
               ("mw", rng.standard_normal((7, 3)).astype(f32))]
        + _bn_inits(rng, "bn1", 6) + _bn_inits(rng, "bn2", 7) + _bn_inits(rng, "bn3", 3))


def test_conv_gemm_transb_and_matmul_fold_and_match_onnxruntime():
    m = _foldable_model()
    g = from_onnx(m)
    result = FoldBatchNorm().run(g, PassContext())
    EliminateDeadCode().run(g, PassContext())
    body = [line for line in print_graph(g).splitlines() if " = constant " not in line]
    assert "\n".join(body) == text("""
        graph @main(%x: f32[2, 4, 5, 5]) {
          %c = Conv(%x, %w_bn, %Conv_bias_bn) {group = 2, pads = [1, 1, 1, 1]} : f32[2, 6, 5, 5]  // Conv
          %f = Flatten(%c) : f32[2, 150]  // Flatten
          %g = Gemm(%f, %gw_bn, %Gemm_bias_bn) {alpha = 2.0, beta = 1.0, transB = 1} : f32[2, 7]  // Gemm
          %mm = MatMul(%g, %mw_bn) : f32[2, 3]  // MatMul
          %y = Add(%mm, %MatMul_bias_bn) : f32[2, 3]  // BatchNormalization_2_bias
          return %y
        }""")
    assert sorted(g.constants) == ["Conv_bias_bn", "Gemm_bias_bn", "MatMul_bias_bn", "gw_bn",
                                   "mw_bn", "w_bn"]
    assert g.constants["Gemm_bias_bn"].type.shape == (1, 7)
    assert [r.message for r in result.remarks] == [
        "folded BatchNormalization into Conv (Conv) weights and bias",
        "folded BatchNormalization_1 into Gemm (Gemm) weights and bias",
        "folded BatchNormalization_2 into MatMul (MatMul) weights and bias",
    ]
    x = np.random.default_rng(1).standard_normal((2, 4, 5, 5)).astype(np.float32)
    np.testing.assert_allclose(run_reference(g, {"x": x})[0], run_ort(m, {"x": x})[0],
                               rtol=1e-4, atol=1e-4)


def test_refusals_name_the_reason():
    rng = np.random.default_rng(2)
    f32 = np.float32
    m = model([
        helper.make_node("MatMul", ["x", "mw"], ["mm"]),            # [2, 3, 4]: axis 1 is rows
        _bn("bn1", "mm", "a"),
        helper.make_node("Conv", ["x4", "w"], ["c"]),
        _bn("bn2", "c", "c_bn"),
        helper.make_node("Relu", ["c"], ["r"]),                    # c has 2 consumers
        helper.make_node("Relu", ["x4"], ["r2"]),
        _bn("bn4", "r2", "r2_bn"),                                # producer is Relu
        helper.make_node("Conv", ["x4", "wdyn"], ["c2"]),
        _bn("bn2", "c2", "c2_bn"),                                # weight not constant
    ], [("x", T.FLOAT, [2, 3, 5]), ("x4", T.FLOAT, [1, 2, 3, 3]), ("wdyn", T.FLOAT, [3, 2, 1, 1])],
        [("a", T.FLOAT, [2, 3, 4]), ("c_bn", T.FLOAT, [1, 3, 3, 3]), ("r", T.FLOAT, [1, 3, 3, 3]),
         ("r2_bn", T.FLOAT, [1, 2, 3, 3]), ("c2_bn", T.FLOAT, [1, 3, 3, 3])],
        inits=[("mw", rng.standard_normal((5, 4)).astype(f32)),
               ("w", rng.standard_normal((3, 2, 1, 1)).astype(f32))]
        + _bn_inits(rng, "bn1", 3) + _bn_inits(rng, "bn2", 3) + _bn_inits(rng, "bn4", 2))
    g = from_onnx(m)
    before = print_graph(g)
    result = FoldBatchNorm().run(g, PassContext())
    assert not result.changed and print_graph(g) == before
    assert [(r.kind, r.message) for r in result.remarks] == [
        ("missed", "not folded: BatchNormalization: MatMul (MatMul): its output f32[2, 3, 4] is "
                   "not 2-D: BN normalizes axis 1, which is not the axis B's columns produce"),
        ("missed", "not folded: BatchNormalization_1: %c has 2 consumers "
                   "(BatchNormalization_1, Relu)"),
        ("missed", "not folded: BatchNormalization_2: its input comes from Relu_1 (Relu), "
                   "not Conv/ConvTranspose/Gemm/MatMul"),
        ("missed", "not folded: BatchNormalization_3: Conv_1 (Conv): its weight is not a constant"),
    ]
    assert result.remarks[1].nodes == ["BatchNormalization_1", "Conv"]


def test_matmul_rank2_fold_with_graph_output_name():
    rng = np.random.default_rng(3)
    m = model([helper.make_node("MatMul", ["x", "mw"], ["mm"]), _bn("bn", "mm", "y")],
              [("x", T.FLOAT, [4, 5])], [("y", T.FLOAT, [4, 3])],
              inits=[("mw", rng.standard_normal((5, 3)).astype(np.float32))]
              + _bn_inits(rng, "bn", 3))
    g = from_onnx(m)
    FoldBatchNorm().run(g, PassContext())
    x = rng.standard_normal((4, 5)).astype(np.float32)
    assert [v.name for v in g.outputs] == ["y"]
    # onnx.reference's ConvTranspose mishandles group > 1: both sides run in ONNX Runtime
    np.testing.assert_allclose(run_ort(to_onnx(g), {"x": x})[0], run_ort(m, {"x": x})[0],
                               rtol=1e-4, atol=1e-5)


def test_decomposed_batchnorm_mul_add_folds_into_conv_and_gemm():
    rng = np.random.default_rng(4)
    f32 = np.float32
    m = model([
        helper.make_node("Conv", ["x", "w"], ["c"]),
        helper.make_node("Mul", ["c", "scale"], ["cm"]),          # [2, 1, 1]: per channel
        helper.make_node("Add", ["shift", "cm"], ["ca"]),         # [1, 2, 1, 1], operand 0
        helper.make_node("Mul", ["ca", "nope"], ["y"]),           # [3]: varies along W, left
        helper.make_node("Gemm", ["g_in", "gw", "gb"], ["g"]),
        helper.make_node("Add", ["g", "gshift"], ["gy"]),         # [4]: per column
    ], [("x", T.FLOAT, [1, 3, 3, 3]), ("g_in", T.FLOAT, [2, 5])],
        [("y", T.FLOAT, [1, 2, 3, 3]), ("gy", T.FLOAT, [2, 4])],
        inits=[("w", rng.standard_normal((2, 3, 1, 1)).astype(f32)),
               ("scale", rng.uniform(0.5, 2, (2, 1, 1)).astype(f32)),
               ("shift", rng.standard_normal((1, 2, 1, 1)).astype(f32)),
               ("nope", rng.standard_normal(3).astype(f32)),
               ("gw", rng.standard_normal((5, 4)).astype(f32)),
               ("gb", rng.standard_normal(4).astype(f32)),
               ("gshift", rng.standard_normal(4).astype(f32))])
    g = from_onnx(m)
    result = FoldBatchNorm().run(g, PassContext())
    EliminateDeadCode().run(g, PassContext())
    body = [line for line in print_graph(g).splitlines() if " = constant " not in line]
    assert "\n".join(body) == text("""
        graph @main(%x: f32[1, 3, 3, 3], %g_in: f32[2, 5]) {
          %c = Conv(%x, %w_bn, %Conv_bias_bn_1) : f32[1, 2, 3, 3]  // Conv
          %y = Mul(%c, %nope) : f32[1, 2, 3, 3]  // Mul_1
          %gy = Gemm(%g_in, %gw, %Gemm_bias_bn) {beta = 1.0} : f32[2, 4]  // Gemm
          return %y, %gy
        }""")
    assert [r.message for r in result.remarks] == [
        "folded Mul (Mul, per-channel scale) into Conv (Conv) weights and bias",
        "folded Add (Add, per-channel shift) into Conv (Conv) weights and bias",
        "folded Add_1 (Add, per-channel shift) into Gemm (Gemm) weights and bias",
    ]
    feeds = {"x": rng.standard_normal((1, 3, 3, 3)).astype(f32),
             "g_in": rng.standard_normal((2, 5)).astype(f32)}
    for got, want in zip(run_reference(g, feeds), run_ort(m, feeds), strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("group", [1, 2])
def test_conv_transpose_with_groups_then_bias_add_and_bn(group):
    rng = np.random.default_rng(5)
    f32 = np.float32
    m = model([
        helper.make_node("ConvTranspose", ["x", "w"], ["ct"], strides=[2, 2], group=group),
        helper.make_node("Add", ["ct", "b"], ["a"]),              # bias as a separate Add
        _bn("bn", "a", "y"),
    ], [("x", T.FLOAT, [1, 4, 3, 3])], [("y", T.FLOAT, [1, 6, 6, 6])],
        inits=[("w", rng.standard_normal((4, 6 // group, 2, 2)).astype(f32)),
               ("b", rng.standard_normal((6, 1, 1)).astype(f32))] + _bn_inits(rng, "bn", 6))
    g = from_onnx(m)
    result = FoldBatchNorm().run(g, PassContext())
    assert [r.message for r in result.remarks] == [
        "folded Add (Add, per-channel shift) into ConvTranspose (ConvTranspose) weights and bias",
        "folded BatchNormalization into ConvTranspose (ConvTranspose) weights and bias",
    ]
    assert [n.op_type for n in g.nodes] == ["ConvTranspose"] and g.outputs[0].name == "y"
    x = rng.standard_normal((1, 4, 3, 3)).astype(f32)
    # onnx.reference's ConvTranspose mishandles group > 1: both sides run in ONNX Runtime
    np.testing.assert_allclose(run_ort(to_onnx(g), {"x": x})[0], run_ort(m, {"x": x})[0],
                               rtol=1e-4, atol=1e-5)
