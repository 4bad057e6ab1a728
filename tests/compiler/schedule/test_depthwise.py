"""The direct depthwise / grouped Conv schedule (compiler.schedule.depthwise) against ONNX Runtime:
group = C (3x3, 5x5, channel multiplier), groups in between, strides, explicit and asymmetric pads,
auto_pad, dilations, output widths that are not a multiple of the vector width, HardSwish /
HardSigmoid / Clip epilogues, a squeeze-excitation block, and the missed line with the default
schedule when the weight is not a constant."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

from tests.compiler.schedule.model_check import check_model, model, tensor


def conv_model(c: int, co: int, hw: tuple[int, int], k: int, group: int, *, stride: int = 1,
               pads: list[int] | None = None, dil: int = 1, act: str | None = None, auto_pad: str | None = None,
               seed: int = 0):  # type: ignore[no-untyped-def]
    rng = np.random.default_rng(seed)
    inits = {"W": rng.standard_normal((co, c // group, k, k)).astype(np.float32),
             "B": rng.standard_normal(co).astype(np.float32)}
    attrs: dict = {"group": group, "strides": [stride, stride], "dilations": [dil, dil], "kernel_shape": [k, k]}
    if auto_pad is not None:
        attrs["auto_pad"] = auto_pad
    else:
        attrs["pads"] = pads if pads is not None else [k // 2 * dil] * 4
    nodes = [helper.make_node("Conv", ["x", "W", "B"], ["c"], **attrs)]
    out = "c"
    if act == "HardSigmoid":
        nodes.append(helper.make_node(act, ["c"], ["y"], alpha=0.2, beta=0.45))
        out = "y"
    elif act == "Clip":
        inits.update(lo=np.array(0.0, np.float32), hi=np.array(6.0, np.float32))
        nodes.append(helper.make_node("Clip", ["c", "lo", "hi"], ["y"]))
        out = "y"
    elif act is not None:
        nodes.append(helper.make_node(act, ["c"], ["y"]))
        out = "y"
    return model(nodes, [tensor("x", [1, c, *hw])], [out], inits)


CASES = {
    "dw3x3": dict(c=16, co=16, hw=(12, 12), k=3, group=16),
    "dw5x5_stride2": dict(c=32, co=32, hw=(14, 14), k=5, group=32, stride=2),
    "dw3x3_no_pad": dict(c=8, co=8, hw=(9, 11), k=3, group=8, pads=[0, 0, 0, 0]),
    "dw3x3_asym_pads": dict(c=8, co=8, hw=(10, 13), k=3, group=8, pads=[0, 2, 1, 0]),
    "dw3x3_dilation2": dict(c=12, co=12, hw=(10, 10), k=3, group=12, dil=2),
    "dw3x3_stride2_dilation2": dict(c=6, co=6, hw=(17, 19), k=3, group=6, stride=2, dil=2),
    "dw_multiplier2": dict(c=8, co=16, hw=(9, 9), k=3, group=8),
    "dw_same_upper_stride2": dict(c=8, co=8, hw=(15, 15), k=3, group=8, stride=2, auto_pad="SAME_UPPER"),
    "dw_wide_rows": dict(c=4, co=4, hw=(6, 70), k=3, group=4),  # several accumulator vectors and a tail
    "grouped_4": dict(c=16, co=16, hw=(8, 8), k=3, group=4),
    "grouped_2_stride2": dict(c=8, co=8, hw=(11, 11), k=3, group=2, stride=2),
    "dw_hardswish": dict(c=24, co=24, hw=(7, 7), k=3, group=24, stride=2, act="HardSwish"),
    "dw_hardsigmoid": dict(c=16, co=16, hw=(9, 9), k=5, group=16, act="HardSigmoid"),
    "dw_relu6": dict(c=16, co=16, hw=(8, 8), k=3, group=16, act="Clip"),
    "stem_3ch_stride2": dict(c=3, co=16, hw=(23, 21), k=3, group=1, stride=2, act="HardSwish"),  # K = 27
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_direct_schedule_matches_onnxruntime(case: str) -> None:
    chk = check_model(conv_model(**CASES[case]))
    conv = [k for k in chk.kernels if "Conv" in k.func.attrs.get("ops", [])]
    assert len(conv) == 1
    sched = "\n".join(conv[0].func.attrs["schedule"])
    kind = {"grouped": "grouped", "stem": "small-K (K = 27)"}.get(case.split("_")[0], "depthwise")
    assert f"# {kind} Conv" in sched and "direct schedule" in sched, sched
    if CASES[case].get("act"):
        assert len(chk.kernels) == 1, chk.kernel_names()  # the activation is the Conv's epilogue


def test_wide_groups_keep_the_gemm_micro_kernel() -> None:
    chk = check_model(conv_model(c=32, co=64, hw=(8, 8), k=3, group=2))
    sched = "\n".join(chk.kernels[0].func.attrs["schedule"])
    assert "direct schedule" not in sched and "one GEMM per group" in sched, sched


def test_group_one_with_a_long_reduction_keeps_the_gemm_micro_kernel() -> None:
    chk = check_model(conv_model(c=4, co=8, hw=(9, 9), k=3, group=1))  # K = 36
    sched = "\n".join(chk.kernels[0].func.attrs["schedule"])
    assert "direct schedule" not in sched and "im2col" in sched, sched


def test_se_block_matches_onnxruntime() -> None:
    """Depthwise + HardSwish, then GlobalAveragePool -> Conv -> Relu -> Conv -> HardSigmoid -> Mul."""
    rng = np.random.default_rng(1)
    c, sq = 24, 8
    inits = {"Wd": rng.standard_normal((c, 1, 3, 3)).astype(np.float32),
             "W1": (rng.standard_normal((sq, c, 1, 1)) / 5).astype(np.float32),
             "B1": rng.standard_normal(sq).astype(np.float32),
             "W2": (rng.standard_normal((c, sq, 1, 1)) / 3).astype(np.float32),
             "B2": rng.standard_normal(c).astype(np.float32)}
    nodes = [helper.make_node("Conv", ["x", "Wd"], ["d"], group=c, pads=[1, 1, 1, 1], kernel_shape=[3, 3]),
             helper.make_node("HardSwish", ["d"], ["h"]),
             helper.make_node("GlobalAveragePool", ["h"], ["g"]),
             helper.make_node("Conv", ["g", "W1", "B1"], ["s1"]),
             helper.make_node("Relu", ["s1"], ["r"]),
             helper.make_node("Conv", ["r", "W2", "B2"], ["s2"]),
             helper.make_node("HardSigmoid", ["s2"], ["e"], alpha=1.0 / 6, beta=0.5),
             helper.make_node("Mul", ["h", "e"], ["y"])]
    chk = check_model(model(nodes, [tensor("x", [1, c, 14, 14])], ["y"], inits))
    assert "depthwise Conv" in chk.schedules()


def test_runtime_weight_falls_back_with_a_missed_line() -> None:
    """A depthwise Conv whose weight is a graph input: the default schedule, and the reason."""
    nodes = [helper.make_node("Conv", ["x", "w"], ["y"], group=8, pads=[1, 1, 1, 1], kernel_shape=[3, 3])]
    m = model(nodes, [tensor("x", [1, 8, 10, 10]), tensor("w", [8, 1, 3, 3])], ["y"])
    chk = check_model(m)
    sched = chk.schedules()
    assert "# missed: grouped-Conv schedules (direct, micro-kernel) not applied to" in sched, sched
    assert "the weight W is not a constant" in sched and "direct schedule" not in sched
