"""The cache-blocked dense Conv schedule (compiler.schedule.conv_blocked) against ONNX Runtime: kernel
sizes 3x3/5x5/3x1/7x7, strides 1 and 2, symmetric and asymmetric pads, auto_pad, dilation, odd
spatial sizes, batch 2, output channels not a multiple of the register tile (M tail), several input
channel blocks (partial sums between them), several column blocks with a partial last one, output rows
whose im2col fill is vectorized in lanes that divide them (7, 6, 5) or stays scalar (17, 19, 11), and a bias +
residual Add + Relu epilogue fused into the last channel block; outputs bitwise equal at 1 and 2 threads."""

from __future__ import annotations

import functools

import numpy as np
import pytest
from onnx import helper

from compiler.driver import compile_program
from compiler.runtime.program import Bound
from compiler.schedule import conv_blocked, microkernel
from compiler.schedule.gemm import pick_tile
from compiler.targets import get_target
from tests.compiler.schedule.model_check import check_model, model, tensor

R = np.random.default_rng(11)


def w(*s: int) -> np.ndarray:
    return (R.standard_normal(s) * 0.1).astype(np.float32)


CASES = [
    ((1, 96, 13, 17), (40, 96, 3, 3), {"pads": [1, 1, 1, 1]}),  # 3 channel blocks of 32, Co = 5 tiles of 8
    ((2, 64, 15, 15), (42, 64, 3, 3), {"pads": [1, 1, 1, 1], "strides": [2, 2]}),  # batch 2, M tail of 2
    ((1, 48, 20, 20), (24, 48, 5, 5), {"pads": [2, 1, 2, 1]}),  # asymmetric pads, 5x5
    ((1, 40, 16, 18), (16, 40, 3, 3), {"dilations": [2, 2], "pads": [2, 2, 2, 2]}),  # dilation
    ((1, 36, 14, 14), (20, 36, 3, 3), {"auto_pad": "SAME_UPPER", "strides": [2, 2]}),  # auto_pad, odd output
    ((1, 64, 11, 11), (32, 64, 3, 1), {"strides": [2, 1], "pads": [1, 0, 1, 0]}),  # 3x1, strides differ per axis
    ((1, 8, 30, 30), (16, 8, 7, 7), {"pads": [3, 3, 3, 3], "strides": [2, 2]}),  # 7x7 stem-like
    ((1, 32, 14, 14), (24, 32, 3, 3), {"pads": [1, 1, 1, 1]}),  # rows of 14: im2col in 7-lane masked loads
]


@pytest.mark.parametrize("xs,ws,attrs", CASES)
def test_blocked_conv_matches_onnxruntime(xs, ws, attrs) -> None:  # type: ignore[no-untyped-def]
    m = model([helper.make_node("Conv", ["x", "w"], ["y"], **attrs)], [tensor("x", xs)], ["y"], {"w": w(*ws)})
    c = check_model(m)
    assert "input channels x" in c.schedules()  # the blocked schedule ran


def test_small_blocks_partial_sums_and_partial_last_column_block(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """Tiny block sizes: 6 channel blocks (partial sums stored and reloaded 5 times per tile) and
    column blocks of 3 output rows over 11 rows (the last block has 2)."""
    small = functools.partial(conv_blocked.blocked_conv, k_block=18, block_bytes=18 * 4 * 9 * 3)
    monkeypatch.setattr(microkernel, "blocked_conv", small)
    m = model([helper.make_node("Conv", ["x", "w"], ["y"], pads=[1, 1, 1, 1])], [tensor("x", (1, 12, 11, 9))], ["y"],
              {"w": w(13, 12, 3, 3)})
    c = check_model(m)
    text = c.schedules()
    width = get_target("host").vector_width_f32  # AVX-512: the 6x4 tile over 99 pixels; AVX2: 6x2
    mr = 6 if width >= 16 and 99 > 3 * width else pick_tile(13, width).mr
    assert "split(k = 108, 18) -> cb, k" in text and "3 output rows per block" in text
    assert f"cpart[{-(-13 // mr) * mr}, " in text


def _residual_model():  # type: ignore[no-untyped-def]
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("Add", ["c", "r"], ["s"]), helper.make_node("Relu", ["s"], ["y"])]
    return model(nodes, [tensor("x", (1, 64, 28, 28)), tensor("r", (1, 48, 28, 28))], ["y"],
                 {"w": w(48, 64, 3, 3), "b": w(48)})


def test_bias_residual_relu_epilogue_in_the_last_channel_block() -> None:
    c = check_model(_residual_model())
    conv = [k for k in c.kernels if "conv" in k.name]
    assert len(conv) == 1 and "partial sums in cpart" in "\n".join(conv[0].func.attrs["schedule"])


def test_outputs_bitwise_equal_at_1_and_2_threads() -> None:
    comp = compile_program(_residual_model(), None)
    prog = comp.program
    assert prog is not None
    assert any(".task" in ck.llvm_ir for lk, ck in zip(comp.kernels, comp.compiled, strict=True) if "conv" in lk.name)
    rng = np.random.default_rng(0)
    feeds = [rng.standard_normal((1, 64, 28, 28)).astype(np.float32), rng.standard_normal((1, 48, 28, 28)).astype(np.float32)]
    outs = []
    for threads in (1, 2):
        prog.threads = threads
        b = Bound(prog, feeds)
        b.run()
        outs.append(b.outputs()[0].copy())
    assert np.array_equal(outs[0], outs[1])
