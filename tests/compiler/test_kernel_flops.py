"""The FLOP count behind the explorer's kernel GFLOP/s (``kernel.timed``: ``flops / median_us``):
``lk.func.attrs["flops"]`` of the lowered Conv / Gemm / MatMul kernels against the independent
formula ``2 * N * Co * (C / group) * R * S * OH * OW`` (output size from the ONNX Conv spec:
``OH = floor((H + pad_begin + pad_end - dilation * (R - 1) - 1) / stride) + 1``), plus one FLOP per
output element for each fused elementwise op (the bias add, Relu's max). Padding positions inside
the window count (the formula's R * S), the micro-kernel's padded register tiles do not."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from compiler.driver.lower import lower_graph
from compiler.events import EventStream
from compiler.frontend import import_model, specialize
from compiler.passes import PassContext
from compiler.passes.manager import run_pipeline
from compiler.passes.pipeline import parse_pipeline
from compiler.targets import get_target


def _lowered(model):  # type: ignore[no-untyped-def]
    graph = import_model(model)
    specialize(graph, None)
    run_pipeline(graph, parse_pipeline("O2"), PassContext(target="host"), EventStream(None))
    return lower_graph(graph, get_target("host"))


def _conv_model(xs, ws, attrs, bias: bool, relu: bool):  # type: ignore[no-untyped-def]
    rng = np.random.default_rng(0)
    inits = [numpy_helper.from_array(rng.standard_normal(ws).astype(np.float32), "w")]
    ins = ["x", "w"]
    if bias:
        inits.append(numpy_helper.from_array(rng.standard_normal(ws[0]).astype(np.float32), "b"))
        ins.append("b")
    nodes = [helper.make_node("Conv", ins, ["c" if relu else "y"], **attrs)]
    if relu:
        nodes.append(helper.make_node("Relu", ["c"], ["y"]))
    g = helper.make_graph(nodes, "conv", [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(xs))],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def conv_flops(xs, ws, attrs) -> tuple[int, int]:  # type: ignore[no-untyped-def]
    """(2 * N * Co * C/g * R * S * OH * OW, number of output elements), from the ONNX Conv spec."""
    n, _, h, w = xs
    co, cg, r, s = ws
    pads = attrs.get("pads", [0, 0, 0, 0])
    st = attrs.get("strides", [1, 1])
    dil = attrs.get("dilations", [1, 1])
    oh = (h + pads[0] + pads[2] - dil[0] * (r - 1) - 1) // st[0] + 1
    ow = (w + pads[1] + pads[3] - dil[1] * (s - 1) - 1) // st[1] + 1
    return 2 * n * co * cg * r * s * oh * ow, n * co * oh * ow


CONVS = [  # (x NCHW, w OIHW, attrs)
    ((1, 16, 55, 55), (64, 16, 1, 1), {}),  # squeezenet fire expand 1x1: the direct path
    ((1, 16, 55, 55), (64, 16, 3, 3), {"pads": [1, 1, 1, 1]}),  # fire expand 3x3: im2col, padded
    ((1, 3, 224, 224), (64, 3, 3, 3), {"strides": [2, 2]}),  # squeezenet conv1: strided
    ((2, 3, 17, 19), (10, 3, 7, 7), {"pads": [3, 2, 3, 1], "strides": [2, 2]}),  # batch 2, uneven pads
    ((1, 8, 12, 12), (16, 8, 3, 3), {"dilations": [2, 2], "pads": [2, 2, 2, 2]}),
    ((1, 32, 14, 14), (64, 8, 3, 3), {"group": 4, "pads": [1, 1, 1, 1]}),  # grouped
    ((1, 32, 28, 28), (32, 1, 3, 3), {"group": 32, "pads": [1, 1, 1, 1], "strides": [2, 2]}),  # depthwise
    ((1, 24, 10, 10), (24, 1, 5, 5), {"group": 24}),  # depthwise, no padding
    ((1, 12, 9, 9), (20, 12, 1, 1), {"strides": [2, 2]}),  # strided 1x1: im2col, no tile-multiple M
]


@pytest.mark.parametrize("xs,ws,attrs", CONVS)
@pytest.mark.parametrize("bias,relu", [(False, False), (True, True)])
def test_conv_kernel_flops_match_the_formula(xs, ws, attrs, bias, relu) -> None:  # type: ignore[no-untyped-def]
    kernels = [lk for lk in _lowered(_conv_model(xs, ws, attrs, bias, relu)) if "Conv" in lk.func.attrs["ops"]]
    # the micro-kernel, or the direct schedule of narrow groups (compiler.schedule.depthwise)
    assert len(kernels) == 1 and any(a.buffer.name in ("wpack", "wdw") for a in kernels[0].args)
    macs2, outs = conv_flops(xs, ws, attrs)
    assert kernels[0].func.attrs["flops"] == macs2 + (int(bias) + int(relu)) * outs


@pytest.mark.parametrize("xs,ws,attrs", CONVS)
def test_generic_conv_lowering_counts_the_same(xs, ws, attrs) -> None:  # type: ignore[no-untyped-def]
    """Weights as a graph input: not the micro-kernel (which packs constant weights) but the generic
    loop nest, whose count is ``count_flops`` over the loop IR."""
    g = helper.make_graph([helper.make_node("Conv", ["x", "w"], ["y"], **attrs)], "conv",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(xs)),
                           helper.make_tensor_value_info("w", TensorProto.FLOAT, list(ws))],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    kernels = _lowered(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]))
    assert len(kernels) == 1 and not any(a.buffer.name == "wpack" for a in kernels[0].args)
    assert kernels[0].func.attrs["flops"] == conv_flops(xs, ws, attrs)[0]


@pytest.mark.parametrize("m,k,n", [(1, 1024, 1000), (8, 300, 100), (7, 17, 33)])
@pytest.mark.parametrize("op", ["Gemm", "MatMul"])
def test_gemm_and_matmul_kernel_flops_are_2mnk(m, k, n, op) -> None:  # type: ignore[no-untyped-def]
    rng = np.random.default_rng(1)
    b = numpy_helper.from_array(rng.standard_normal((k, n)).astype(np.float32), "b")
    node = helper.make_node(op, ["a", "b"], ["y"])
    g = helper.make_graph([node], op, [helper.make_tensor_value_info("a", TensorProto.FLOAT, [m, k])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [b])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    kernels = [lk for lk in _lowered(model) if op in lk.func.attrs["ops"]]
    assert len(kernels) == 1
    assert kernels[0].func.attrs["flops"] == 2 * m * n * k
