"""``python -m compiler tune MODEL --budget S --db FILE`` and ``compile --tune-budget``: progress lines,
the database written, bad budgets as one-line errors."""

from __future__ import annotations

from compiler import cli
from compiler.tune import JsonlDatabase
from tests.compiler.tune.models import matmul_relu


def test_tune_prints_progress_and_writes_the_database(tmp_path, capsys):  # type: ignore[no-untyped-def]
    model = tmp_path / "m.onnx"
    model.write_bytes(matmul_relu().SerializeToString())
    db = tmp_path / "t.jsonl"
    assert cli.main(["tune", str(model), "--budget", "40", "--db", str(db), "--threads", "1", "--batch", "3"]) == 0
    out = capsys.readouterr().out
    assert "tuning matmul_relu for host: 1 workloads of 1 kernels, budget 40 s, 1 thread(s)" in out
    assert "fused_matmul_add_relu_0: 3 trials, best" in out and "tuned in" in out
    assert "(budget spent)" in out or "(every candidate schedule measured)" in out  # why it ended
    stored = len({r["workload"] for r in JsonlDatabase(db).records()})  # a workload may have improved twice
    assert f"{stored} workloads stored in {db}" in out


def test_bad_budgets_are_one_line_errors(tmp_path, capsys):  # type: ignore[no-untyped-def]
    assert cli.main(["tune", "m.onnx", "--budget", "-1", "--db", str(tmp_path / "t.jsonl")]) == 2
    assert "error: tuning budget must be a positive number of seconds, got -1.0" in capsys.readouterr().err
    assert cli.main(["compile", "m.onnx", "--tune-budget", "5"]) == 2
    assert "--tune-budget needs --tuning-db FILE" in capsys.readouterr().err
