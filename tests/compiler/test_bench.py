"""``compiler.bench``'s table: passed, differing, not verified (ONNX Runtime cannot run the model)
and failed rows; a real bfloat16 compilation that ONNX Runtime cannot verify goes through it."""

from __future__ import annotations

import onnx
from onnx import TensorProto, helper

import compiler
from compiler.bench import format_table, main, result_row, thread_counts

ROW = {"model": "m", "ok": True, "error": None, "wall_s": 1.0, "compile_s": 0.5, "prism_ms": 2.0, "threads": 1,
       "onnxruntime_ms": 1.0, "ratio": 2.0, "max_abs_error": 1.5e-6, "passed": True, "verified": True, "speedup": None}


def _line(row: dict) -> str:
    return format_table([row]).splitlines()[2]


def test_passed_and_failed_verification() -> None:
    assert _line(ROW).split() == ["m", "1", "2.000", "1.000", "2.00", "-", "1.50e-06", "pass", "0.50"]
    assert _line({**ROW, "passed": False, "max_abs_error": 0.25}).split()[6:8] == ["2.50e-01", "FAIL"]


def test_geometric_means_per_thread_count_with_the_speedup() -> None:
    rows = [ROW, {**ROW, "model": "n", "ratio": 0.5}, {**ROW, "threads": 2, "ratio": 1.0, "speedup": 1.8},
            {**ROW, "model": "n", "threads": 2, "ratio": 4.0, "speedup": 1.25}]
    table = format_table(rows).splitlines()
    assert table[4].split()[:2] == ["m", "2"] and table[4].split()[5] == "1.80"
    assert table[-2] == "geometric-mean ratio Prism/ONNX Runtime at 1 thread over 2 models: 1.00"
    assert table[-1] == ("geometric-mean ratio Prism/ONNX Runtime at 2 threads over 2 models: 2.00; "
                         "Prism 1.50x its 1-thread time")


def test_thread_counts() -> None:
    import pytest

    from compiler.errors import CompileError
    from compiler.runtime.pool import available_threads

    assert thread_counts("1,all") == sorted({1, available_threads()})
    for bad in ("0", "x", str(available_threads() + 1)):
        with pytest.raises(CompileError, match="threads must be"):
            thread_counts(bad)


def test_unverified_row_says_why_and_is_left_out_of_the_mean() -> None:
    un = {**ROW, "model": "bf", "onnxruntime_ms": None, "ratio": None, "max_abs_error": None, "passed": None,
          "verified": False, "message": "not verified: ONNX Runtime has no CPU kernel for Relu(14) in bfloat16 (node '')"}
    table = format_table([ROW, un])
    line = table.splitlines()[3]
    assert line.split()[:9] == ["bf", "1", "2.000", "-", "-", "-", "-", "-", "0.50"]
    assert line.endswith("not verified (ONNX Runtime has no CPU kernel for Relu(14) in bfloat16 (node ''))")
    assert "FAIL" not in line and "pass" not in line
    assert table.splitlines()[-1] == "geometric-mean ratio Prism/ONNX Runtime at 1 thread over 1 models: 2.00"
    assert _line({**un, "message": None}).endswith("not verified (no reason given)")


def test_failed_compile_row() -> None:
    row = {"model": "x", "ok": False, "error": {"stage": "lowering", "message": "no lowering for Foo"},
           "wall_s": 0.1, "compile_s": 0.0}
    assert _line(row) == "x                    FAILED (lowering): no lowering for Foo"


def _relu_bf16() -> onnx.ModelProto:
    """bfloat16 Relu + Add: ONNX Runtime (CPU) has no bfloat16 Relu kernel, so it cannot verify."""
    nodes = [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Add", ["r", "x"], ["y"])]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.BFLOAT16, [2, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.BFLOAT16, [2, 8])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=9)


def test_real_unverified_result_formats(monkeypatch, capsys) -> None:
    r = compiler.compile(_relu_bf16())
    row = result_row("relu_bf16", r, 0.3)
    assert row["ok"] and row["verified"] is False and row["passed"] is None, row
    line = format_table([row]).splitlines()[2]
    assert "not verified (ONNX Runtime has no CPU kernel for Relu(14) in bfloat16" in line, line
    # the command itself prints it and does not count it as a failure
    monkeypatch.setattr("compiler.bench.bench_model", lambda name, **_: {**row, "model": name})
    assert main(["--models", "relu_bf16", "--threads", "1"]) == 0
    assert "not verified (ONNX Runtime has no CPU kernel for Relu(14)" in capsys.readouterr().out
