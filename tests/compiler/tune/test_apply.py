"""Compiling with a tuning database (compiler.compile(tuning_db=...), compile --tuning-db): kernels take
their workload's best trace, say so in kernel.lowered and tune.applied, and the tuned model's outputs
match ONNX Runtime; records that no longer apply, invalid lines and unreadable databases."""

from __future__ import annotations

import compiler
from compiler import cli
from compiler.targets import get_target
from compiler.tune.database import JsonlDatabase, make_record
from compiler.tune.tasks import compile_graph, extract_tasks
from tests.compiler.tune.models import conv_tail, matmul_relu


def _db_with(tmp_path, model, traces):  # type: ignore[no-untyped-def]
    g, target = compile_graph(model)
    tasks, n = extract_tasks(g, target)
    db = JsonlDatabase(tmp_path / "tuning.jsonl")
    for task, trace in zip(tasks, traces, strict=False):
        db.add(make_record(task.workload, task.desc, target, trace, 50.0, 60.0, trials=4, threads=1))
    return db.path, tasks, n


def _by(events, type):  # type: ignore[no-untyped-def]
    return [e for e in events if e["type"] == type]


def test_a_tuned_compilation_uses_the_records_and_matches_onnx_runtime(tmp_path):  # type: ignore[no-untyped-def]
    model = conv_tail()
    traces = [{"tile": "4x3", "block_rows": 4, "grain_us": "serial"}, {"vector": 4}]
    path, tasks, n = _db_with(tmp_path, model, traces)
    r = compiler.compile(model, tuning_db=str(path), verify=True, benchmark=False, threads=1)
    assert r.ok, r.error
    applied = _by(r.events, "tune.applied")[0]
    assert applied["tuned"] == len(tasks) == 2 and applied["kernels"] == n
    assert applied["message"] == f"2 of {n} kernels on tuned schedules from the database tuning.jsonl"
    assert applied["this_run"] == 0  # a JSON-lines file says nothing of who found its records
    lowered = {e["kernel"]: e for e in _by(r.events, "kernel.lowered")}
    conv = lowered[tasks[0].kernel]
    assert conv["schedule_source"] == "tuned" and conv["tuned"]["trace"] == traces[0]
    assert "tile=4x3*" in conv["schedule"] and "block_rows=4* grain_us=serial*" in conv["schedule"]
    assert f"4x{3 * get_target('host').vector_width_f32} register tile" in conv["schedule"] and "4 output rows per block" in conv["schedule"]
    tail = lowered[tasks[1].kernel]["loop_ir"]
    assert "T.vectorized(4)" in tail and "T.vectorized(8)" not in tail  # the default vectorizes 24 by 8
    verified = _by(r.events, "model.verified")[0]
    assert verified["passed"] is True, verified  # the oracle: ONNX Runtime on the original model


def test_without_records_every_schedule_is_the_default_and_says_so(tmp_path):  # type: ignore[no-untyped-def]
    path = tmp_path / "empty.jsonl"
    r = compiler.compile(matmul_relu(), tuning_db=str(path), verify=False, benchmark=False)
    assert r.ok, r.error
    applied = _by(r.events, "tune.applied")[0]
    assert applied["tuned"] == 0 and applied["kernels"] == 1
    assert applied["message"] == "no tuned schedules in the database empty.jsonl for the one kernel"
    assert all(e["schedule_source"] == "default" for e in _by(r.events, "kernel.lowered"))
    plain = compiler.compile(matmul_relu(), verify=False, benchmark=False)
    assert "schedule_source" not in _by(plain.events, "kernel.lowered")[0]
    assert _by(plain.events, "kernel.lowered")[0]["loop_ir"] == _by(r.events, "kernel.lowered")[0]["loop_ir"]


class _FoundHere(JsonlDatabase):
    """A database serving the compilation whose tuning run found its records (as the explorer's
    DjangoTuningDatabase marks them): ``best`` says ``this_run`` for the workloads in ``here``."""

    def __init__(self, path, here):  # type: ignore[no-untyped-def]
        super().__init__(path)
        self.here = set(here)

    def best(self, workload, target):  # type: ignore[no-untyped-def]
        rec = super().best(workload, target)
        return {**rec, "this_run": workload in self.here} if rec is not None else None


def test_tune_applied_says_which_tuned_schedules_this_run_found(tmp_path):  # type: ignore[no-untyped-def]
    model = conv_tail()
    path, tasks, n = _db_with(tmp_path, model, [{"tile": "4x3", "block_rows": 4, "grain_us": "serial"}, {"vector": 4}])
    for here, words in (({t.workload for t in tasks}, f"2 of {n} kernels on tuned schedules (2 found by this run)"),
                        ({tasks[0].workload}, f"2 of {n} kernels on tuned schedules (1 found by this run, 1 from the "
                                              "database tuning.jsonl)")):
        db = _FoundHere(path, here)
        db.name = "tuning.jsonl"
        r = compiler.compile(model, tuning_db=db, verify=False, benchmark=False, threads=1)
        assert r.ok, r.error
        applied = _by(r.events, "tune.applied")[0]
        assert (applied["tuned"], applied["this_run"], applied["message"]) == (2, len(here), words)


def test_a_record_that_no_longer_applies_falls_back_to_the_default(tmp_path):  # type: ignore[no-untyped-def]
    path, tasks, _ = _db_with(tmp_path, matmul_relu(), [{"tile": "13x1"}])
    r = compiler.compile(matmul_relu(), tuning_db=str(path), verify=False, benchmark=False)
    ev = _by(r.events, "kernel.lowered")[0]
    assert ev["schedule_source"] == "default"
    assert ev["schedule"].startswith("# tuning record not applied (knob tile: value '13x1' is not one of")


def test_the_cli_reports_tuned_kernels_and_warns_on_bad_lines(tmp_path, capsys):  # type: ignore[no-untyped-def]
    model = matmul_relu()
    path, _, _ = _db_with(tmp_path, model, [{"tile": "6x2"}])
    with path.open("a") as f:
        f.write("garbage\n")
    mpath = tmp_path / "m.onnx"
    mpath.write_bytes(model.SerializeToString())
    assert cli.main(["compile", str(mpath), "--tuning-db", str(path)]) == 0
    out = capsys.readouterr()
    assert "1 of 1 kernels on tuned schedules from the database tuning.jsonl" in out.out
    assert f"warning: {path}:2: not valid JSON" in out.err


def test_an_unreadable_database_is_a_request_error(tmp_path):  # type: ignore[no-untyped-def]
    r = compiler.compile(matmul_relu(), tuning_db=str(tmp_path), verify=False, benchmark=False)
    assert not r.ok and r.error["stage"] == "request" and "is a directory" in r.error["message"]
    assert get_target("host").name == "host"


def test_a_record_that_names_its_finder_says_so_in_the_schedule_and_the_event(tmp_path):  # type: ignore[no-untyped-def]
    model = matmul_relu()
    g, target = compile_graph(model)
    (task, *_), _ = extract_tasks(g, target)
    db = JsonlDatabase(tmp_path / "tuning.jsonl")
    db.add(make_record(task.workload, task.desc, target, {"tile": "2x2"}, 50.0, 60.0, trials=4, threads=1,
                       found_by={"model": "matmul_relu", "host": "worker-3"}))
    r = compiler.compile(model, tuning_db=str(db.path), verify=False, benchmark=False, threads=1)
    k = next(e for e in _by(r.events, "kernel.lowered") if e["kernel"] == task.kernel)
    assert k["tuned"]["found_by"] == {"model": "matmul_relu", "host": "worker-3"}
    assert "found tuning matmul_relu on worker-3" in k["schedule"]
