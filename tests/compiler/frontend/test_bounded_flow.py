"""Bounded results read by further ops (issue 13 item 5; compiler.frontend.bounded_flow).

NonZero, Compress, Unique and NonMaxSuppression whose data-dependent results feed other nodes, through
the ONNX backend and ``compiler.compile`` alike. Expected values come from ``onnx.reference`` (and ONNX
Runtime for NonMaxSuppression, as the conformance suite does), never from Prism.
"""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper
from onnx.reference import ReferenceEvaluator

import compiler
from compiler import CompileError
from compiler.backend import PrismBackend


def _model(nodes, inputs, outputs, inits=()) -> onnx.ModelProto:
    m = h.make_model(h.make_graph(nodes, "g", inputs, outputs, list(inits)), opset_imports=[h.make_opsetid("", 17)])
    m.ir_version = 8
    return m


def _c(name: str, arr) -> onnx.TensorProto:
    return numpy_helper.from_array(np.asarray(arr), name)


def _vi(name, elem=T.FLOAT, shape=None):
    return h.make_tensor_value_info(name, elem, shape)


def gather_positive() -> onnx.ModelProto:
    """The positive entries of x (NonZero -> Transpose -> GatherND), doubled; how many; their max;
    the mean of each column's positives is not needed: the row index of each one's max (ArgMax)."""
    return _model([
        h.make_node("Greater", ["x", "zero"], ["pos"]),
        h.make_node("NonZero", ["pos"], ["nz"], name="where_pos"),
        h.make_node("Transpose", ["nz"], ["idx"], perm=[1, 0]),
        h.make_node("GatherND", ["x", "idx"], ["vals"]),
        h.make_node("Mul", ["vals", "two"], ["doubled"]),
        h.make_node("Shape", ["nz"], ["nz_shape"]),
        h.make_node("Gather", ["nz_shape", "one"], ["count"], axis=0),
        h.make_node("ReduceMax", ["vals"], ["vmax"], keepdims=0),
        h.make_node("ReduceSum", ["vals"], ["vsum"], keepdims=0),
        h.make_node("ArgMin", ["vals"], ["amin"], keepdims=0),
        h.make_node("Softmax", ["vals"], ["soft"], axis=0),
    ], [_vi("x", shape=[3, 4])],
        [_vi("doubled", shape=["n"]), _vi("count", T.INT64, []), _vi("vmax", shape=[]), _vi("vsum", shape=[]),
         _vi("amin", T.INT64, []), _vi("soft", shape=["n"])],
        [_c("zero", np.float32(0)), _c("two", np.float32(2)), _c("one", np.int64(1))])


def compress_rows() -> onnx.ModelProto:
    """Rows of x whose flag is set (Compress axis 0) times W (MatMul on the row axis), their mean row
    (ReduceMean over the padded axis) and the per-row sum (ReduceSum over the other axis)."""
    return _model([
        h.make_node("Compress", ["x", "keep"], ["rows"], axis=0, name="pick_rows"),
        h.make_node("MatMul", ["rows", "w"], ["proj"]),
        h.make_node("ReduceMean", ["rows"], ["mean_row"], axes=[0], keepdims=0),
        h.make_node("ReduceSum", ["rows", "axis1"], ["row_sums"], keepdims=1),
        h.make_node("Relu", ["row_sums"], ["relu_sums"]),
    ], [_vi("x", shape=[5, 3]), _vi("keep", T.BOOL, [5])],
        [_vi("proj", shape=["n", 2]), _vi("mean_row", shape=[3]), _vi("relu_sums", shape=["n", 1])],
        [_c("w", np.arange(6, dtype=np.float32).reshape(3, 2) - 2.5), _c("axis0", np.array([0], np.int64)),
         _c("axis1", np.array([1], np.int64))])


def unique_then() -> onnx.ModelProto:
    return _model([
        h.make_node("Unique", ["x"], ["y", "", "inv", "counts"], sorted=1, name="uniq"),
        h.make_node("Add", ["y", "ten"], ["y10"]),
        h.make_node("ReduceSum", ["counts"], ["total"], keepdims=0),
        h.make_node("Size", ["y"], ["n_unique"]),
        h.make_node("Unsqueeze", ["y10", "axis0"], ["row"]),
    ], [_vi("x", shape=[8])],
        [_vi("row", shape=[1, "n"]), _vi("total", T.INT64, []), _vi("n_unique", T.INT64, []), _vi("inv", T.INT64, [8])],
        [_c("ten", np.float32(10)), _c("axis0", np.array([0], np.int64))])


def nms_boxes() -> onnx.ModelProto:
    """The selected boxes themselves: selected_indices[:, 2] gathered from boxes[0]."""
    return _model([
        h.make_node("NonMaxSuppression", ["boxes", "scores", "max_out", "iou", "score_th"], ["sel"], name="nms"),
        h.make_node("Gather", ["sel", "two"], ["box_idx"], axis=1),
        h.make_node("Squeeze", ["boxes", "axis0"], ["boxes2"]),
        h.make_node("Gather", ["boxes2", "box_idx"], ["picked"], axis=0),
        h.make_node("ReduceSum", ["picked", "axis1"], ["box_sums"], keepdims=0),
    ], [_vi("boxes", shape=[1, 6, 4]), _vi("scores", shape=[1, 1, 6])],
        [_vi("picked", shape=["n", 4]), _vi("box_sums", shape=["n"])],
        [_c("max_out", np.array([3], np.int64)), _c("iou", np.array([0.5], np.float32)),
         _c("score_th", np.array([0.1], np.float32)), _c("two", np.int64(2)), _c("axis0", np.array([0], np.int64)),
         _c("axis1", np.array([1], np.int64))])


def _feeds(m: onnx.ModelProto, seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    out = {}
    for vi in m.graph.input:
        shape = [d.dim_value for d in vi.type.tensor_type.shape.dim]
        if vi.type.tensor_type.elem_type == T.BOOL:
            out[vi.name] = rng.random(shape) < 0.5
        elif vi.name == "boxes":
            xy = rng.random((*shape[:2], 2)).astype(np.float32) * 4
            out[vi.name] = np.concatenate([xy, xy + 1 + rng.random((*shape[:2], 2)).astype(np.float32)], axis=2)
        elif vi.name == "x" and shape == [8]:
            out[vi.name] = rng.integers(-2, 3, shape).astype(np.float32)  # repeats for Unique
        else:
            out[vi.name] = rng.standard_normal(shape).astype(np.float32)
    return out


def _reference(m: onnx.ModelProto, feeds: dict) -> list[np.ndarray]:
    if any(n.op_type == "NonMaxSuppression" for n in m.graph.node):
        sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
        return sess.run(None, feeds)
    return ReferenceEvaluator(m).run(None, feeds)


@pytest.mark.parametrize("make", [gather_positive, compress_rows, unique_then, nms_boxes])
def test_bounded_results_feeding_ops_match_the_oracle(make) -> None:
    m = make()
    rep = PrismBackend.prepare(m, isolate=False)
    for seed in range(4):
        feeds = _feeds(m, seed)
        got = rep.run([feeds[i.name] for i in m.graph.input])
        for name, g, r in zip([o.name for o in m.graph.output], got, _reference(m, feeds), strict=True):
            assert g.shape == r.shape, name
            np.testing.assert_allclose(g, r, rtol=1e-5, atol=1e-6, err_msg=name)
    assert len(rep.programs) == 1  # one program serves every count


@pytest.mark.parametrize("make", [gather_positive, compress_rows, lambda: nested()])
def test_compile_verifies_against_onnxruntime(make) -> None:
    res = compiler.compile(make(), benchmark=False)
    assert res.ok, res.error
    verified = next(e for e in res.events if e["type"] == "model.verified")
    assert verified["passed"] is True


def test_all_masked_and_none_masked() -> None:
    m = compress_rows()
    rep = PrismBackend.prepare(m, isolate=False)
    x = np.arange(15, dtype=np.float32).reshape(5, 3)
    for keep in (np.ones(5, bool), np.array([False, False, True, False, False])):
        got = rep.run([x, keep])
        for g, r in zip(got, ReferenceEvaluator(m).run(None, {"x": x, "keep": keep}), strict=True):
            assert g.shape == r.shape
            np.testing.assert_allclose(g, r, rtol=1e-6)


@pytest.mark.parametrize(("node", "needle"), [
    (h.make_node("Reshape", ["nz", "shape"], ["r"], name="flat"), "Reshape 'flat' reads 'nz'"),
    (h.make_node("Concat", ["nz", "nz"], ["r"], axis=1, name="cat"), "it works along the padded axis 1"),
    (h.make_node("CumSum", ["nz", "axis1"], ["r"], name="cs"), "CumSum is not among the ops"),
])
def test_an_op_that_cannot_keep_padding_apart_is_named(node, needle) -> None:
    m = _model([h.make_node("NonZero", ["x"], ["nz"], name="nzero"), node], [_vi("x", shape=[4])],
               [_vi("r", T.INT64, None)], [_c("shape", np.array([-1], np.int64)), _c("axis1", np.int64(1))])
    with pytest.raises(CompileError) as info:
        PrismBackend.prepare(m, isolate=False).run([np.array([1, 0, 2, 0], np.float32)])
    err = info.value
    assert err.stage == "shape" and err.node == node.name and needle in err.message
    assert "NonZero 'nzero'" in err.message


def nested() -> onnx.ModelProto:
    """Bounded ops of bounded results: the positive entries of x (Compress), the positions among them
    above 0.5 (NonZero of a padded value), and the entries of d at the positions where the positives
    exceed 1 (Compress with a padded condition), their sum."""
    return _model([
        h.make_node("Greater", ["x", "zero"], ["pos"]),
        h.make_node("Compress", ["x", "pos"], ["p"], axis=0, name="positives"),
        h.make_node("Greater", ["p", "half"], ["big"]),
        h.make_node("NonZero", ["big"], ["where_big"], name="where_big"),
        h.make_node("Greater", ["p", "one"], ["huge"]),
        h.make_node("Compress", ["d", "huge"], ["picked"], axis=0, name="pick"),
        h.make_node("ReduceSum", ["picked"], ["total"], keepdims=0),
    ], [_vi("x", shape=[8]), _vi("d", shape=[8])],
        [_vi("where_big", T.INT64, [1, "k"]), _vi("picked", shape=["j"]), _vi("total", shape=[])],
        [_c("zero", np.float32(0)), _c("half", np.float32(0.5)), _c("one", np.float32(1))])


def test_nested_bounded_ops_match_the_oracle() -> None:
    m = nested()
    rep = PrismBackend.prepare(m, isolate=False)
    sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(7)
    xs = [rng.standard_normal(8).astype(np.float32) * 2 for _ in range(4)]
    xs += [np.full(8, -1, np.float32), np.full(8, 3, np.float32)]  # nothing positive, everything huge
    for x in xs:
        feeds = {"x": x, "d": rng.standard_normal(8).astype(np.float32)}
        got = rep.run([feeds["x"], feeds["d"]])
        for ref in (ReferenceEvaluator(m).run(None, feeds), sess.run(None, feeds)):
            for g, r in zip(got, ref, strict=True):
                assert g.shape == r.shape
                np.testing.assert_allclose(g, r, rtol=1e-5, atol=1e-6)
    assert len(rep.programs) == 1


def test_a_nested_bounded_op_that_could_select_padding_is_named() -> None:
    m = _model([h.make_node("NonZero", ["x"], ["nz"], name="nzero"), h.make_node("Unique", ["nz"], ["u"], name="uniq")],
               [_vi("x", shape=[4])], [_vi("u", T.INT64, None)])
    with pytest.raises(CompileError) as info:
        PrismBackend.prepare(m, isolate=False).run([np.array([1, 0, 2, 0], np.float32)])
    assert info.value.node == "uniq" and "supported only as NonZero of it or Compress with a padded condition" \
        in info.value.message
