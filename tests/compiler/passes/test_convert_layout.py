"""convert-layout: NCHWc chains (1x1 expand, depthwise, activations, project, residual) against ONNX
Runtime at blocks 16 and 8, channel counts that are not multiples of the block, strides, auto_pad and
dilations, the reorders that cancel inside a chain (remarks with shapes), the op sequence of one Conv,
and the missed remarks of the Convs it leaves alone."""

import numpy as np
import pytest
from onnx import helper

from compiler.passes.base import PassContext
from compiler.passes.convert_layout import ConvertLayout
from compiler.targets import get_target
from tests.compiler.passes.pass_testing import from_onnx
from tests.compiler.schedule.model_check import check_model, model, tensor

R = np.random.default_rng(0)
PIPE = "fold-constants,convert-layout{block=%d},fuse-ops,plan-memory"


def f(*s: int, scale: float = 1.0) -> np.ndarray:
    return (R.standard_normal(s) * scale).astype(np.float32)


def _block_model(c: int, e: int, hw: tuple[int, int], stride: int = 1, dil: int = 1, auto_pad: str | None = None):  # type: ignore[no-untyped-def]
    """1x1 expand + Relu, depthwise 3x3 + HardSwish, 1x1 project, residual Add when shapes allow."""
    inits = {"W1": f(e, c, 1, 1, scale=0.3), "B1": f(e), "Wd": f(e, 1, 3, 3, scale=0.3), "Bd": f(e),
             "W2": f(c, e, 1, 1, scale=0.2), "B2": f(c)}
    dw: dict = {"group": e, "kernel_shape": [3, 3], "strides": [stride, stride], "dilations": [dil, dil]}
    dw.update({"auto_pad": auto_pad} if auto_pad else {"pads": [dil] * 4})
    nodes = [helper.make_node("Conv", ["x", "W1", "B1"], ["a"], name="expand"), helper.make_node("Relu", ["a"], ["r"]),
             helper.make_node("Conv", ["r", "Wd", "Bd"], ["d"], name="dw", **dw),
             helper.make_node("HardSwish", ["d"], ["h"]),
             helper.make_node("Conv", ["h", "W2", "B2"], ["p"], name="project")]
    out = "p"
    if stride == 1:
        nodes.append(helper.make_node("Add", ["p", "x"], ["y"]))
        out = "y"
    return model(nodes, [tensor("x", [1, c, *hw])], [out], inits)


CHAINS = {
    "divisible_16": (dict(c=16, e=32, hw=(8, 8)), 16),
    "non_divisible_16": (dict(c=20, e=40, hw=(9, 11)), 16),
    "block_8": (dict(c=12, e=24, hw=(7, 7)), 8),
    "wide_rows": (dict(c=16, e=32, hw=(5, 29)), 16),  # pixel tiles with a tail
    "stride2_same_upper": (dict(c=16, e=24, hw=(10, 9), stride=2, auto_pad="SAME_UPPER"), 16),
    "dilation2": (dict(c=8, e=16, hw=(9, 9), dil=2), 8),
}


@pytest.mark.parametrize("case", sorted(CHAINS))
def test_nchwc_chain_matches_onnxruntime(case: str) -> None:
    kw, block = CHAINS[case]
    chk = check_model(_block_model(**kw), pipeline=PIPE % block)
    msgs = [r["message"] for r in chk.remarks if r["pass"] == "convert-layout"]
    assert sum(m.startswith("inserted ReorderInput") for m in msgs) == 3, msgs
    # inside the chain the activations stay blocked: expand -> dw and dw -> project reorders cancel
    cancels = [m for m in msgs if m.startswith("removed ReorderOutput -> ReorderInput")]
    assert len(cancels) == 2, msgs
    e = kw["e"]
    assert f"-> [1, {e}, " in cancels[0] and f"[1, {-(-e // block)}, " in cancels[0]  # the shapes it names
    ops = [k.func.attrs["ops"] for k in chk.kernels]
    assert ["NchwcConv", "Relu"] in ops and ["NchwcConv", "HardSwish"] in ops, ops
    reorders = [o for o in ops if "ReorderInput" in o or "ReorderOutput" in o]
    assert len(reorders) == 2, ops  # one at each boundary of the chain
    tiled = chk.schedules().count(f"NCHW{block}c Conv")  # the register-tiled schedule: block = f32 width
    assert tiled == (3 if block == get_target("host").vector_width_f32 else 0), chk.schedules()


def test_one_conv_becomes_reorder_conv_reorder() -> None:
    m = model([helper.make_node("Conv", ["x", "W"], ["y"], kernel_shape=[3, 3], pads=[1, 1, 1, 1], name="c")],
              [tensor("x", [1, 6, 5, 5])], ["y"], {"W": f(5, 6, 3, 3)})
    g = from_onnx(_typed(m))
    res = ConvertLayout(block=4).run(g, PassContext())
    assert res.changed
    assert [(n.domain, n.op_type) for n in g.nodes] == [("prism", "ReorderInput"), ("prism", "NchwcConv"),
                                                      ("prism", "ReorderOutput")]
    wb = g.nodes[1].inputs[1].const
    assert wb.shape == (2, 2, 3, 3, 4, 4)  # [Co/c, C/c, kH, kW, c_in, c_out], zero-padded
    w = m.graph.initializer[0]
    from onnx import numpy_helper
    wn = numpy_helper.to_array(w)
    assert wb[1, 1, 2, 1, 1, 0] == wn[4, 5, 2, 1] and not wb[:, 1, ..., 2:, :].any() and not wb[1, ..., 1:].any()
    assert g.nodes[0].outputs[0].type.shape == (1, 2, 5, 5, 4)


def _typed(m):  # type: ignore[no-untyped-def]
    from onnx import TensorProto
    m.graph.output[0].CopyFrom(helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 5, 5, 5]))
    return m


def test_convs_it_leaves_alone_get_a_missed_remark() -> None:
    nodes = [helper.make_node("Conv", ["x", "Wg"], ["a"], kernel_shape=[1, 1], group=2, name="grouped"),
             helper.make_node("Conv", ["a", "w"], ["b"], kernel_shape=[1, 1], name="runtime_w"),
             helper.make_node("Conv", ["b", "W3"], ["y"], kernel_shape=[1, 1], name="narrow")]
    m = model(nodes, [tensor("x", [1, 8, 4, 4]), tensor("w", [3, 8, 1, 1])], ["y"],
              {"Wg": f(8, 4, 1, 1), "W3": f(4, 3, 1, 1)})
    chk = check_model(m, pipeline=PIPE % 16)
    msgs = {r["nodes"][0]: r["message"] for r in chk.remarks if r["pass"] == "convert-layout"}
    assert "group 2 is neither 1 nor depthwise" in msgs["grouped"]
    assert "C = 3, block 16: padded to whole blocks, its input and work would grow 5.3x" in msgs["narrow"]
    assert "weight is computed at run time" in msgs["runtime_w"]
    assert not any("NchwcConv" in k.func.attrs["ops"] for k in chk.kernels)


@pytest.mark.parametrize("opset", [14, 18])  # ReduceMean takes axes as an attribute before 18, an input from 18
def test_squeeze_excitation_stays_blocked(opset: int) -> None:
    """Expand -> depthwise -> SE (GlobalAveragePool, Conv, Relu, Conv, HardSigmoid, Mul) -> project: the
    pool, the SE Convs and the scale run on blocked tensors, so only the chain's two ends reorder."""
    c, e, sq = 16, 32, 16
    inits = {"W1": f(e, c, 1, 1, scale=0.3), "Wd": f(e, 1, 3, 3, scale=0.3), "Ws1": f(sq, e, 1, 1, scale=0.3),
             "Bs1": f(sq), "Ws2": f(e, sq, 1, 1, scale=0.3), "Bs2": f(e), "W2": f(c, e, 1, 1, scale=0.2)}
    nodes = [helper.make_node("Conv", ["x", "W1"], ["a"]), helper.make_node("HardSwish", ["a"], ["h1"]),
             helper.make_node("Conv", ["h1", "Wd"], ["d"], group=e, kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
             helper.make_node("HardSwish", ["d"], ["h"]), helper.make_node("GlobalAveragePool", ["h"], ["g"]),
             helper.make_node("Conv", ["g", "Ws1", "Bs1"], ["s1"]), helper.make_node("Relu", ["s1"], ["r"]),
             helper.make_node("Conv", ["r", "Ws2", "Bs2"], ["s2"]),
             helper.make_node("HardSigmoid", ["s2"], ["es"], alpha=1.0 / 6, beta=0.5),
             helper.make_node("Mul", ["h", "es"], ["m"]), helper.make_node("Conv", ["m", "W2"], ["y"])]
    chk = check_model(model(nodes, [tensor("x", [1, c, 10, 10])], ["y"], inits, opset=opset), pipeline=PIPE % 16)
    msgs = [r["message"] for r in chk.remarks if r["pass"] == "convert-layout"]
    assert any("as ReduceMean over axes [2, 3]" in m for m in msgs), msgs
    reorders = [k.func.attrs["ops"] for k in chk.kernels if {"ReorderInput", "ReorderOutput"} & set(k.func.attrs["ops"])]
    assert len(reorders) == 2, reorders
