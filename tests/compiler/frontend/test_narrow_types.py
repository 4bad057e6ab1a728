"""Narrow element types (``compiler.frontend.narrow_types``, ``prism.NarrowCast``,
``compiler.codegen.narrow``) through the real compiled code.

Every expected value comes from ``onnx.reference.ReferenceEvaluator`` (which converts with
``ml_dtypes`` and ``onnx.numpy_helper``) on the same model; float results are compared bit for bit
(NaN with NaN), never against numbers computed by the code under test.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper, numpy_helper
from onnx.reference import ReferenceEvaluator

from compiler.backend import PrismBackend
from compiler.errors import CompileError
from compiler.frontend import import_model, specialize
from compiler.frontend.narrow_types import legalize, uses_narrow_types
from compiler.ir.printer import print_graph

FLOAT8 = [T.FLOAT8E4M3FN, T.FLOAT8E4M3FNUZ, T.FLOAT8E5M2, T.FLOAT8E5M2FNUZ]
FLOATS = [T.BFLOAT16, T.FLOAT16, T.FLOAT4E2M1, *FLOAT8]
INTS = [T.INT4, T.UINT4, T.INT2, T.UINT2]


def _model(nodes, inputs, outputs, inits=(), opset=25):
    g = helper.make_graph(nodes, "t", inputs, outputs, [numpy_helper.from_array(v, k) for k, v in inits])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])


def _cast_model(to, n, src=T.FLOAT, **attrs):
    return _model([helper.make_node("Cast", ["x"], ["y"], to=to, **attrs)],
                  [helper.make_tensor_value_info("x", src, [n])], [helper.make_tensor_value_info("y", to, [n])])


def _run(model, feeds):
    got = PrismBackend.prepare(model, isolate=False).run(list(feeds.values()))
    ref = ReferenceEvaluator(model).run(None, feeds)
    return got, ref


def _assert_same(got, ref):
    got, ref = np.asarray(got), np.asarray(ref)
    assert got.dtype == ref.dtype and got.shape == ref.shape
    g, r = got.astype(np.float32), ref.astype(np.float32)
    same = (g.view(np.uint32) == r.view(np.uint32)) | (np.isnan(g) & np.isnan(r))
    bad = np.flatnonzero(~same)[:5]
    assert same.all(), f"{(~same).sum()} differ, e.g. got {g[bad]} expected {r[bad]}"


def _edges(to):
    """max, just above max, halfway points and their neighbours, subnormals, NaN, inf, -0."""
    dt = helper.tensor_dtype_to_np_dtype(to)
    grid = np.arange(256, dtype=np.uint8).view(dt) if np.dtype(dt).itemsize == 1 else \
        np.arange(0, 65536, 3, dtype=np.uint16).view(dt)
    g = np.unique(grid.astype(np.float64)[np.isfinite(grid.astype(np.float64))])
    mid = ((g[:-1] + g[1:]) / 2).astype(np.float32)
    big = float(ml_dtypes.finfo(dt).max)
    tiny = float(ml_dtypes.finfo(dt).smallest_subnormal)
    special = np.array([big, -big, big * 1.01, big * 1.2, -big * 1.5, 1e30, tiny, tiny / 2, tiny * 0.51, -tiny / 3,
                        np.nan, -np.nan, np.inf, -np.inf, 0.0, -0.0], np.float32)
    x = np.concatenate([g.astype(np.float32), mid, np.nextafter(mid, np.float32(np.inf)),
                        np.nextafter(mid, np.float32(-np.inf)), special])
    return x[:, None].repeat(2, 1).ravel() * np.tile(np.float32([1, -1]), x.size)


@pytest.mark.parametrize("to", FLOATS, ids=lambda t: T.DataType.Name(t))
@pytest.mark.parametrize("saturate", [1, 0])
def test_cast_to_narrow_float_matches_reference_bit_for_bit(to, saturate):
    x = _edges(to)
    attrs = {"saturate": saturate} if to in FLOAT8 else {}
    (got,), (ref,) = _run(_cast_model(to, x.size, **attrs), {"x": x})
    _assert_same(got, ref)


def test_cast_to_narrow_float_on_random_bit_patterns():
    bits = np.random.default_rng(3).integers(0, 2**32, 50_000, dtype=np.uint64).astype(np.uint32)
    x = bits.view(np.float32)
    for to in FLOATS:
        (got,), (ref,) = _run(_cast_model(to, x.size), {"x": x})
        _assert_same(got, ref)


@pytest.mark.parametrize("mode", ["up", "down", "nearest"])
@pytest.mark.parametrize("saturate", [1, 0])
def test_cast_to_float8e8m0_round_modes(mode, saturate):
    p = np.float32(2.0) ** np.arange(-130, 128, dtype=np.float32)
    x = np.concatenate([p, p * 1.25, p * 1.5, p * 1.75, np.nextafter(p, np.float32(0)), -p * 1.5,
                        np.float32([0, -0.0, np.nan, np.inf, -np.inf, 3.4e38, 1e-45])]).astype(np.float32)
    m = _cast_model(T.FLOAT8E8M0, x.size, saturate=saturate, round_mode=mode)
    (got,), (ref,) = _run(m, {"x": x})
    _assert_same(got, ref)


@pytest.mark.parametrize("to", INTS, ids=lambda t: T.DataType.Name(t))
def test_cast_float_and_int8_to_sub_byte_ints_wraps_as_the_reference(to):
    x = np.concatenate([np.arange(-40, 40, 0.75), [1e6, -1e6, 2.5e9, np.nan, np.inf, -np.inf, -0.0]]).astype(np.float32)
    (got,), (ref,) = _run(_cast_model(to, x.size), {"x": x})
    np.testing.assert_array_equal(got.astype(np.int8), ref.astype(np.int8))
    i = np.arange(-128, 128).astype(np.int8)
    (got,), (ref,) = _run(_cast_model(to, i.size, src=T.INT8), {"x": i})
    np.testing.assert_array_equal(got.astype(np.int8), ref.astype(np.int8))
    assert got.dtype == ref.dtype


@pytest.mark.parametrize("src", [T.BFLOAT16, T.FLOAT8E4M3FNUZ, T.FLOAT4E2M1, T.INT4, T.UINT2])
def test_narrow_inputs_are_widened_exactly(src):
    dt = helper.tensor_dtype_to_np_dtype(src)
    x = np.arange(256, dtype=np.uint8).view(dt) if np.dtype(dt).itemsize == 1 else \
        np.arange(0, 65536, 5, dtype=np.uint16).view(dt)
    if np.dtype(dt).itemsize == 1 and src in (T.INT4, T.UINT2, T.FLOAT4E2M1):
        x = np.arange(256).astype(np.float32).astype(dt)
    (got,), (ref,) = _run(_cast_model(T.FLOAT, x.size, src=src), {"x": x})
    _assert_same(got, ref)


def test_bfloat16_ops_round_once_per_op():
    # Celu then Mul in bfloat16: the reference rounds each op's result to bfloat16 (ml_dtypes)
    vi = helper.make_tensor_value_info
    m = _model([helper.make_node("Celu", ["x"], ["c"], alpha=0.7), helper.make_node("Mul", ["c", "w"], ["y"])],
               [vi("x", T.BFLOAT16, [64])], [vi("y", T.BFLOAT16, [64])],
               inits=[("w", np.linspace(-3, 3, 64).astype(ml_dtypes.bfloat16))])
    x = np.random.default_rng(1).standard_normal(64).astype(ml_dtypes.bfloat16)
    (got,), (ref,) = _run(m, {"x": x})
    _assert_same(got, ref)


@pytest.mark.parametrize("zp_type", [T.INT4, T.UINT4, T.INT2, T.FLOAT8E4M3FN, T.FLOAT8E5M2, T.FLOAT4E2M1])
def test_quantize_and_dequantize_narrow_types(zp_type):
    vi = helper.make_tensor_value_info
    x = np.concatenate([np.linspace(-700, 700, 61), [0.3, -0.0, 2.25, -3.75]]).astype(np.float32)
    if zp_type not in INTS:  # the reference's int path casts inf to int32 (undefined); floats saturate
        x = np.concatenate([x, np.float32([np.inf, -np.inf, np.nan])])
    zp = np.zeros(1, np.float32).astype(helper.tensor_dtype_to_np_dtype(zp_type))
    q = _model([helper.make_node("QuantizeLinear", ["x", "s", "z"], ["y"], axis=0)],
               [vi("x", T.FLOAT, [x.size])], [vi("y", zp_type, [x.size])],
               inits=[("s", np.float32(0.75)), ("z", zp)])
    (got,), (ref,) = _run(q, {"x": x})
    _assert_same(got, ref)
    d = _model([helper.make_node("DequantizeLinear", ["q", "s", "z"], ["y"], axis=0)],
               [vi("q", zp_type, [x.size])], [vi("y", T.FLOAT, [x.size])],
               inits=[("s", np.float32(0.75)), ("z", zp)])
    (got,), (ref,) = _run(d, {"q": ref})
    _assert_same(got, ref)


def test_legalized_graph_shows_the_rounding_steps():
    vi = helper.make_tensor_value_info
    m = _model([helper.make_node("Cast", ["x"], ["c"], to=T.FLOAT8E4M3FN, saturate=0),
                helper.make_node("Celu", ["c"], ["y"])],
               [vi("x", T.FLOAT, [4])], [vi("y", T.FLOAT8E4M3FN, [4])])
    assert uses_narrow_types(m)
    g = import_model(legalize(m))
    specialize(g, {"x": [4]})
    text = print_graph(g)
    assert 'prism.NarrowCast(%c_wide_0) {saturate = 0, to = "float8e4m3fn"} : f32[4]' in text
    assert 'prism.NarrowCast(%y_wide_0) {saturate = 0, to = "float8e4m3fn"} : f32[4]' in text
    assert "f8" not in text.replace("float8", "")  # every value is float32 inside


def test_float16_keeps_computing_in_float32_without_rounding_steps():
    vi = helper.make_tensor_value_info
    m = _model([helper.make_node("Cast", ["x"], ["c"], to=T.FLOAT16), helper.make_node("Celu", ["c"], ["y"])],
               [vi("x", T.FLOAT, [4])], [vi("y", T.FLOAT16, [4])])
    lm = legalize(m)
    assert not any(n.domain == "prism" for n in lm.graph.node)
    assert lm.graph.output[0].type.tensor_type.elem_type == T.FLOAT


def test_narrow_initializers_and_constants_are_decoded():
    vi = helper.make_tensor_value_info
    c = numpy_helper.from_array(np.array([0.5, -1.5, 3.0, 448.0], ml_dtypes.float8_e4m3fn), "k")
    m = _model([helper.make_node("Constant", [], ["k"], value=c), helper.make_node("Add", ["x", "k"], ["s"]),
                helper.make_node("Add", ["s", "b"], ["y"])],
               [vi("x", T.FLOAT8E4M3FN, [4])], [vi("y", T.FLOAT8E4M3FN, [4])],
               inits=[("b", np.array([1, 2, 3, 4], ml_dtypes.float8_e4m3fn))])
    x = np.array([0.25, 7.0, -3.0, 448.0], ml_dtypes.float8_e4m3fn)
    (got,), (ref,) = _run(m, {"x": x})
    _assert_same(got, ref)


def test_unknown_format_is_a_clear_error():
    vi = helper.make_tensor_value_info
    m = _model([helper.make_node("NarrowCast", ["x"], ["y"], domain="prism", to="float7", name="nc")],
               [vi("x", T.FLOAT, [4])], [vi("y", T.FLOAT, [4])])
    m.opset_import.append(helper.make_opsetid("prism", 1))
    with pytest.raises(CompileError) as e:
        PrismBackend.prepare(m, isolate=False).run([np.zeros(4, np.float32)])
    assert e.value.stage == "shape" and "nc" in str(e.value) and "float7" in str(e.value)
    assert onnx.defs.has("NarrowCast", "prism")


@pytest.mark.parametrize("pipeline", ["O0", "O2"])
def test_legalized_graph_exports_with_the_prism_domain(pipeline):
    from compiler.events import EventStream
    from compiler.export import check_export
    from compiler.passes import PassContext
    from compiler.passes.manager import run_pipeline
    from compiler.passes.pipeline import parse_pipeline

    vi = helper.make_tensor_value_info
    m = _model([helper.make_node("Cast", ["x"], ["c"], to=T.BFLOAT16), helper.make_node("Celu", ["c"], ["y"])],
               [vi("x", T.FLOAT, [4])], [vi("y", T.BFLOAT16, [4])])
    g = import_model(legalize(m))
    specialize(g, {"x": [4]})
    run_pipeline(g, parse_pipeline(pipeline), PassContext(), EventStream(None))
    out = check_export(g)  # onnx.checker accepts prism.NarrowCast (its schema is registered)
    assert {o.domain: o.version for o in out.opset_import}.get("prism") == 1


def test_narrow_casts_of_constants_fold_at_compile_time():
    from compiler.events import EventStream
    from compiler.passes import PassContext
    from compiler.passes.manager import run_pipeline
    from compiler.passes.pipeline import parse_pipeline

    vi = helper.make_tensor_value_info
    w = np.array([0.1, 300.0, -1e9, 2.5e-3], np.float32)
    m = _model([helper.make_node("Cast", ["w"], ["c"], to=T.FLOAT8E5M2, saturate=1),
                helper.make_node("Cast", ["w"], ["i"], to=T.INT4),
                helper.make_node("Cast", ["i"], ["f"], to=T.FLOAT8E5M2),
                helper.make_node("Add", ["x", "f"], ["s"]), helper.make_node("Add", ["s", "c"], ["y"])],
               [vi("x", T.FLOAT8E5M2, [4])], [vi("y", T.FLOAT8E5M2, [4])], inits=[("w", w)])
    g = import_model(legalize(m))
    specialize(g, {"x": [4]})
    run_pipeline(g, parse_pipeline("fold-constants"), PassContext(), EventStream(None))
    text = print_graph(g)
    # the three casts of the initializer were folded; the rounding steps of the two Adds stay
    assert text.count("prism.NarrowCast(") == 2 and "%i = constant i8[4] dense<[0, -4, 0, 0]>" in text
    x = np.array([1.0, -2.0, 0.5, 3.0], ml_dtypes.float8_e5m2)
    (got,), (ref,) = _run(m, {"x": x})
    _assert_same(got, ref)
