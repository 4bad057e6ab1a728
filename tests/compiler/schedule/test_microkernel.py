"""The register-tiled micro-kernel schedule (Conv / Gemm / MatMul with fused epilogue) against
onnx.reference, including padding, strides, dilation, tails (M and N not multiples of the tile),
1x1 direct and im2col paths, and a residual-add + Relu epilogue on a fused group."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import helper
from onnx.reference import ReferenceEvaluator

from compiler.codegen.compile import compile_kernel
from compiler.ir import FusedGroup, Graph, TensorType
from compiler.loops.printer import print_func
from compiler.runtime.jit import JitModule
from compiler.schedule.microkernel import try_microkernel
from compiler.targets import get_target
from tests.compiler.backend_helpers import onnx_node_case

R = np.random.default_rng(3)
SLACK = 4096


def f(*s: int) -> np.ndarray:
    return R.standard_normal(s).astype(np.float32)


def _run(lk, inputs):  # type: ignore[no-untyped-def]
    """Runs the kernel with slack after every buffer, as the runtime does; outputs start as NaN."""
    ck = compile_kernel(lk.func, get_target("host"))
    arrays, outs = [], []
    for a in lk.args:
        n = a.buffer.numel
        buf = np.zeros(n + SLACK, np.float32)
        if a.kind == "const":
            buf[:n] = a.data.reshape(-1)
        elif a.name in inputs:
            buf[:n] = inputs[a.name].reshape(-1)
        elif a.kind == "value":
            buf[:n] = np.nan
            outs.append((buf, a.buffer.shape))
        arrays.append(buf)
    JitModule([ck.obj]).call(ck.symbol, arrays)
    return [b[:int(np.prod(s))].reshape(s) for b, s in outs]


CONVS = [
    ((1, 16, 9, 9), (24, 16, 3, 3), {"pads": [1, 1, 1, 1]}),
    ((1, 32, 8, 8), (64, 32, 1, 1), {}),
    ((1, 32, 7, 7), (20, 32, 1, 1), {"strides": [2, 2]}),
    ((2, 3, 17, 19), (10, 3, 7, 7), {"pads": [3, 3, 3, 3], "strides": [2, 2]}),
    ((1, 8, 12, 12), (16, 8, 3, 3), {"dilations": [2, 2], "pads": [2, 1, 2, 1]}),
    ((1, 16, 20, 100), (8, 16, 3, 3), {"pads": [1, 1, 1, 1]}),  # im2col blocks of 9 rows; 20 % 9 != 0
]


@pytest.mark.parametrize("xs,ws,attrs", CONVS)
def test_conv_microkernel(xs, ws, attrs) -> None:  # type: ignore[no-untyped-def]
    x = f(*xs)
    consts = {"w": f(*ws), "b": f(ws[0])}
    ref, node = onnx_node_case("Conv", {"x": x}, attrs, consts=consts)
    host = get_target("host")
    lk = try_microkernel(node, "conv", 17, host)
    assert lk is not None
    text = print_func(lk.func)  # NV unrolled vectors of the host's width per register-tile row
    assert "T.unrolled(" in text and f"T.vectorized({host.vector_width_f32})" in text and "wpack" in text
    (got,) = _run(lk, {"x": x})
    np.testing.assert_allclose(got, ref[0], rtol=1e-4, atol=1e-4)



@pytest.mark.parametrize("co,hw", [(20, 7), (64, 6), (16, 8)])
def test_conv_over_a_small_map_takes_one_wide_column_tile(co, hw) -> None:  # type: ignore[no-untyped-def]
    """With 32 vector registers (AVX-512), a Conv whose 33-64 output pixels fit one tile of 3 or 4 vectors
    takes that tile (6x4 at 7x7, 8x3 at 6x6; ``microkernel.conv_vectors``), including a leftover row tile
    (20 = 3 x 6 + 2); 8x8 (64 pixels) too; results as onnx.reference's. Other widths keep 2 vectors."""
    host = get_target("host")
    x = f(1, 32, hw, hw)
    consts = {"w": f(co, 32, 1, 1), "b": f(co)}
    ref, node = onnx_node_case("Conv", {"x": x}, {}, consts=consts)
    lk = try_microkernel(node, "conv", 17, host)
    assert lk is not None
    nv = -(-hw * hw // host.vector_width_f32) if host.vector_width_f32 >= 16 else 2
    tile = next(s for s in lk.func.attrs["schedule"] if s.startswith("tile(m="))
    assert f"x{nv * host.vector_width_f32} register tile" in tile, tile
    (got,) = _run(lk, {"x": x})
    np.testing.assert_allclose(got, ref[0], rtol=1e-4, atol=1e-4)

@pytest.mark.parametrize("strides", [[1, 1], [2, 2]])
def test_1x1_conv_with_weights_past_l2_keeps_b_in_one_column_block(strides) -> None:  # type: ignore[no-untyped-def]
    """Weights larger than the target's L2 and a small B (7x7 outputs): one column block, so the
    weights stream once (``gemm.column_block_bytes``), with results as onnx.reference's; weights within
    L2 keep the L2-sized blocks."""
    host = get_target("host")
    k = host.l2_bytes // 400 // 8 * 8  # B (K x 49 floats) over a quarter of L2, B + two A panels within it
    co = 128  # weights 128 x K floats: past L2
    hw = 7 * strides[0]
    x = f(1, k, hw, hw)
    consts = {"w": f(co, k, 1, 1) / np.float32(np.sqrt(k)), "b": f(co)}
    ref, node = onnx_node_case("Conv", {"x": x}, {"strides": strides}, consts=consts)
    lk = try_microkernel(node, "conv", 17, host)
    assert lk is not None
    split = next(s for s in lk.func.attrs["schedule"] if s.startswith("split(n, "))
    assert int(split.split(",")[1].split(")")[0]) >= 49, split
    (got,) = _run(lk, {"x": x})
    np.testing.assert_allclose(got, ref[0], rtol=1e-4, atol=1e-4)
    small = try_microkernel(onnx_node_case("Conv", {"x": f(1, 64, 56, 56)}, {},
                                           consts={"w": f(64, 64, 1, 1), "b": f(64)})[1], "conv", 17, host)
    assert small is not None and not any(s.startswith("split(n, 3136)") for s in small.func.attrs["schedule"])


@pytest.mark.parametrize("m,k,n,trans_b", [(1, 300, 100, 1), (6, 64, 40, 0), (12, 17, 33, 1)])
def test_gemm_microkernel(m, k, n, trans_b) -> None:  # type: ignore[no-untyped-def]
    a = f(m, k)
    b = f(n, k) if trans_b else f(k, n)
    ref, node = onnx_node_case("Gemm", {"a": a}, {"transB": trans_b, "alpha": 0.5, "beta": 2.0},
                               consts={"b": b, "c": f(n)})
    lk = try_microkernel(node, "gemm", 17, get_target("host"))
    assert lk is not None and "bpack" in print_func(lk.func)
    (got,) = _run(lk, {"a": a})
    np.testing.assert_allclose(got, ref[0], rtol=1e-4, atol=1e-4)


def test_fused_conv_add_relu_epilogue_in_accumulators() -> None:
    """A FusedGroup Conv -> Add(residual) -> Relu becomes one micro-kernel with no intermediate."""
    x, res, w, b = f(1, 8, 10, 10), f(1, 16, 10, 10), f(16, 8, 3, 3), f(16)
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("Add", ["c", "r"], ["s"]), helper.make_node("Relu", ["s"], ["y"])]
    model = helper.make_model(helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", 1, x.shape), helper.make_tensor_value_info("r", 1, res.shape)],
        [helper.make_tensor_value_info("y", 1, None)],
        [onnx.numpy_helper.from_array(w, "w"), onnx.numpy_helper.from_array(b, "b")]),
        opset_imports=[helper.make_opsetid("", 17)])
    ref = ReferenceEvaluator(model).run(None, {"x": x, "r": res})[0]
    outer = Graph("main")
    ox, orr = outer.add_input("x", TensorType.of(np.float32, x.shape)), outer.add_input("r", TensorType.of(
        np.float32, res.shape))
    body = Graph("body")
    bx, br = body.add_input("x", ox.type), body.add_input("r", orr.type)
    bw, bb = body.add_constant("w", w), body.add_constant("b", b)
    c = body.add_node("Conv", [bx, bw, bb], ["c"], {"pads": [1, 1, 1, 1]}, name="conv").outputs[0]
    c.type = TensorType.of(np.float32, (1, 16, 10, 10))
    s = body.add_node("Add", [c, br], ["s"], name="add").outputs[0]
    s.type = c.type
    y = body.add_node("Relu", [s], ["y"], name="relu").outputs[0]
    y.type = c.type
    body.outputs = [y]
    oy = outer.new_value("y", c.type)
    grp = FusedGroup(body, [ox, orr], [oy], kind="out-elementwise-fusable", kernel="fused_conv_add_relu")
    outer.insert(grp)
    lk = try_microkernel(grp, "fused_conv_add_relu", 17, get_target("host"))
    assert lk is not None
    text = print_func(lk.func)
    assert "T.max(acc[mi, ni] + c" in text or "T.max((acc[mi, ni]" in text or "T.max(" in text
    assert sum(1 for a in lk.args if a.kind == "scratch") == 1  # only im2col, no buffer for the Conv result
    (got,) = _run(lk, {"x": x, "r": res})
    np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("xs,ws,attrs", [
    ((1, 16, 9, 9), (24, 4, 1, 1), {"group": 4}),
    ((1, 12, 10, 11), (12, 1, 3, 3), {"group": 12, "pads": [1, 1, 1, 1]}),
    ((1, 8, 11, 11), (8, 1, 3, 3), {"group": 8, "pads": [1, 1, 1, 1], "strides": [2, 2]}),
    ((1, 6, 9, 9), (12, 3, 3, 3), {"group": 2, "pads": [0, 1, 1, 0]}),
])
def test_grouped_and_depthwise_conv_microkernel(xs, ws, attrs) -> None:  # type: ignore[no-untyped-def]
    x = f(*xs)
    consts = {"w": f(*ws), "b": f(ws[0])}
    ref, node = onnx_node_case("Conv", {"x": x}, attrs, consts=consts)
    lk = try_microkernel(node, "gconv", 17, get_target("host"))
    assert lk is not None and f"group={attrs['group']}" in print_func(lk.func)
    (got,) = _run(lk, {"x": x})
    np.testing.assert_allclose(got, ref[0], rtol=1e-4, atol=1e-4)
