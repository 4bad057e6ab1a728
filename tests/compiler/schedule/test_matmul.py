"""Batched MatMul on the micro-kernel (rank 3 and 4, broadcast batch dims, transposed operands read
in place) against ONNX Runtime, through the real O2 pipeline."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

from compiler.driver import compile_program
from compiler.runtime.program import Bound
from tests.compiler.schedule.model_check import check_model, model, ort_run, tensor

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


@pytest.mark.parametrize("heads,s,d", [(4, 24, 8), (3, 13, 16)])
def test_small_per_head_gemms_run_whole_heads_per_task_at_1_and_2_threads(heads, s, d) -> None:  # type: ignore[no-untyped-def]
    """Attention's per-head ``Q K^T`` (K packed per head) and ``P V`` are small GEMMs: the batch loop is
    the parallel one (one launch per kernel), and the outputs are bitwise the same at 1 and 2 threads
    (each head is computed by the same code at any count) and match ONNX Runtime."""
    nodes = [helper.make_node("Reshape", ["q", "shp"], ["q4"]),
             helper.make_node("Transpose", ["q4"], ["qh"], perm=[0, 2, 1, 3]),
             helper.make_node("Reshape", ["k", "shp"], ["k4"]),
             helper.make_node("Transpose", ["k4"], ["kt"], perm=[0, 2, 3, 1]),
             helper.make_node("Reshape", ["v", "shp"], ["v4"]),
             helper.make_node("Transpose", ["v4"], ["vh"], perm=[0, 2, 1, 3]),
             helper.make_node("MatMul", ["qh", "kt"], ["sc"]), helper.make_node("Softmax", ["sc"], ["p"], axis=-1),
             helper.make_node("MatMul", ["p", "vh"], ["y"])]
    m = model(nodes, [tensor(n, (2, s, heads * d)) for n in "qkv"], ["y"],
              {"shp": np.array([2, s, heads, d], np.int64)})
    c = check_model(m)
    mm = _matmul_kernels(c)
    assert len(mm) == 2
    for k in mm:
        text = "\n".join(k.func.attrs["schedule"])
        assert "parallel(b)" in text and "parallel(mo)" not in text, text
    comp = compile_program(m, None)
    assert comp.program is not None
    feeds = [f(2, s, heads * d) for _ in "qkv"]
    outs = {}
    for threads in (1, 2):
        comp.program.threads = threads
        b = Bound(comp.program, feeds)
        b.run()
        outs[threads] = b.outputs()[0]
    np.testing.assert_array_equal(outs[1], outs[2])
    want = ort_run(m, dict(zip("qkv", feeds, strict=True)))[0]
    np.testing.assert_allclose(outs[2], want, rtol=1e-4, atol=1e-5)


def test_large_per_batch_gemms_keep_parallel_row_tiles() -> None:
    """A batch of GEMMs each above the per-batch threshold keeps its row tiles parallel."""
    c = check_model(model([helper.make_node("MatMul", ["a", "b"], ["y"])], [tensor("a", (2, 96, 128)),
                                                                            tensor("b", (2, 128, 192))], ["y"]))
    (k,) = _matmul_kernels(c)
    text = "\n".join(k.func.attrs["schedule"])
    assert "parallel(mo)" in text and "parallel(b)" not in text


def _same_at_1_and_2_threads_and_as_ort(m, x) -> None:  # type: ignore[no-untyped-def]
    """``m`` (input ``a``) compiled once and run at 1 and 2 threads: bitwise equal, and equal to ONNX Runtime."""
    comp = compile_program(m, None)
    assert comp.program is not None
    outs = {}
    for threads in (1, 2):
        comp.program.threads = threads
        b = Bound(comp.program, [x])
        b.run()
        outs[threads] = b.outputs()[0]
    np.testing.assert_array_equal(outs[1], outs[2])
    np.testing.assert_allclose(outs[2], ort_run(m, {"a": x})[0], rtol=1e-4, atol=1e-4)


def test_leftover_row_tile_is_the_last_parallel_iteration_and_outputs_do_not_depend_on_threads() -> None:
    """M = 61 rows in 6-row tiles: 10 tiles and one of 1 row, all 11 in the one parallel row-tile loop
    (N = 48 columns, fewer than M: rows are the split); bitwise the same at 1 and 2 threads, and equal to
    ONNX Runtime."""
    m = model([helper.make_node("MatMul", ["a", "w"], ["y"])], [tensor("a", (1, 61, 256))], ["y"],
              {"w": f(256, 48)})
    c = check_model(m)
    (k,) = _matmul_kernels(c)
    text = "\n".join(k.func.attrs["schedule"])
    if "6x16 register tile" in text:  # the AVX2 tile; AVX-512's 8-row tile leaves 5 rows
        assert "10 tiles of 6 rows and one of 1 (the last iteration of mo)" in text, text
    assert "(the last iteration of mo)" in text and "split into tasks" in text, text
    _same_at_1_and_2_threads_and_as_ort(m, f(1, 61, 256))


def test_more_columns_than_rows_split_the_weights_by_column_tiles() -> None:
    """M = 61 rows against constant weights of N = 200 columns (a column block wider than M): the column
    tiles are the parallel loop (each thread reads its own columns of the weights), the 1-row leftover
    tile runs in each column tile's task; bitwise the same at 1 and 2 threads, and equal to ONNX Runtime."""
    m = model([helper.make_node("MatMul", ["a", "w"], ["y"])], [tensor("a", (1, 61, 256))], ["y"],
              {"w": f(256, 200)})
    (k,) = _matmul_kernels(check_model(m))
    text = "\n".join(k.func.attrs["schedule"])
    assert "parallel(nt)" in text and "(after the full ones, in each column tile)" in text and "nt: " in text, text
    _same_at_1_and_2_threads_and_as_ort(m, f(1, 61, 256))
