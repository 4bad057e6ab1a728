"""Batched MatMul on the micro-kernel (rank 3 and 4, broadcast batch dims, transposed operands read
in place) against ONNX Runtime, through the real O2 pipeline."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

from tests.compiler.schedule.model_check import check_model, model, tensor

R = np.random.default_rng(7)


def f(*s: int) -> np.ndarray:
    return R.standard_normal(s).astype(np.float32)


def _matmul_kernels(c) -> list:  # type: ignore[no-untyped-def]
    return [k for k in c.kernels if "MatMul" in k.func.attrs.get("ops", [])]


@pytest.mark.parametrize("sa,sb", [
    ((2, 3, 13, 19), (2, 3, 19, 37)),   # rank 4, M/N/K not multiples of the tile
    ((2, 1, 8, 16), (3, 16, 24)),       # broadcast batch dims on both sides
    ((9, 16), (4, 16, 20)),             # 2-D A against a batch of B
    ((3, 5, 7), (7, 1)),                # N = 1
])
def test_batched_matmul_runtime_operands(sa, sb) -> None:  # type: ignore[no-untyped-def]
    c = check_model(model([helper.make_node("MatMul", ["a", "b"], ["y"])], [tensor("a", sa), tensor("b", sb)], ["y"]))
    (k,) = _matmul_kernels(c)
    assert "register tile" in "\n".join(k.func.attrs["schedule"])


@pytest.mark.parametrize("sa,sb", [((2, 33, 40), (40, 70)), ((1, 4, 6, 24), (24, 16)), ((2, 3, 9, 8), (3, 8, 12))])
def test_matmul_constant_b(sa, sb) -> None:  # type: ignore[no-untyped-def]
    c = check_model(model([helper.make_node("MatMul", ["a", "w"], ["y"])], [tensor("a", sa)], ["y"], {"w": f(*sb)}))
    (k,) = _matmul_kernels(c)
    text = "\n".join(k.func.attrs["schedule"])
    assert "pack(B" in text and "register tile" in text
    if len(sb) == 2:
        assert "fuse(batch, m)" in text  # A's leading dims fold into M


@pytest.mark.parametrize("perm_a,perm_b", [(None, [0, 1, 3, 2]), ([0, 1, 3, 2], None), ([0, 1, 3, 2], [0, 1, 3, 2]),
                                           ([0, 2, 1, 3], [0, 2, 3, 1])])
def test_transposed_operands_read_in_place(perm_a, perm_b) -> None:  # type: ignore[no-untyped-def]
    """A Transpose before a MatMul is fused into it as operand access: no kernel of its own."""
    nodes, ins = [], []
    names = []
    for nm, perm, shape in (("a", perm_a, (2, 3, 10, 12)), ("b", perm_b, (2, 3, 12, 10))):
        if perm is None:
            ins.append(tensor(nm, shape))
            names.append(nm)
            continue
        src = tuple(shape[perm.index(i)] for i in range(4))  # shape before the Transpose
        ins.append(tensor(nm, src))
        nodes.append(helper.make_node("Transpose", [nm], [nm + "t"], perm=perm))
        names.append(nm + "t")
    nodes.append(helper.make_node("MatMul", names, ["y"]))
    c = check_model(model(nodes, ins, ["y"]))
    assert len(c.kernels) == 1, c.kernel_names()
    assert any("operand access" in r["message"] for r in c.remarks)


def test_attention_heads_from_projection_in_place() -> None:
    """Q K^T and P V of multi-head attention read the projections where they were written:
    ``Reshape -> Transpose(0,2,1,3)`` / ``(0,2,3,1)`` fold into the MatMuls; K^T is packed per block."""
    s, h, d = 24, 3, 8
    nodes = [helper.make_node("Reshape", ["q", "shp"], ["q4"]), helper.make_node("Transpose", ["q4"], ["qh"],
                                                                                   perm=[0, 2, 1, 3]),
             helper.make_node("Reshape", ["k", "shp"], ["k4"]), helper.make_node("Transpose", ["k4"], ["kt"],
                                                                                   perm=[0, 2, 3, 1]),
             helper.make_node("Reshape", ["v", "shp"], ["v4"]), helper.make_node("Transpose", ["v4"], ["vh"],
                                                                                   perm=[0, 2, 1, 3]),
             helper.make_node("MatMul", ["qh", "kt"], ["s"]), helper.make_node("Softmax", ["s"], ["p"], axis=-1),
             helper.make_node("MatMul", ["p", "vh"], ["y"])]
    c = check_model(model(nodes, [tensor(n, (1, s, h * d)) for n in "qkv"], ["y"],
                          {"shp": np.array([1, s, h, d], np.int64)}))
    mm = _matmul_kernels(c)
    assert len(mm) == 2 and not any(k.func.attrs.get("ops") == ["Reshape", "Transpose"] for k in c.kernels)
    text = "\n".join("\n".join(k.func.attrs["schedule"]) for k in mm)
    assert "pack(B -> bpanel" in text and "contiguous along n" in text
