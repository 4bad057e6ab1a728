"""The conformance runner: case collection, skip file, comparison, isolation of crashes and
timeouts, report. The expected outputs are the ONNX package's; nothing here is computed by the
code under test."""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys

import numpy as np
import pytest

from compiler.conformance.cases import data_cases, node_cases
from compiler.conformance.runner import ROOT, Worker, run_cases
from compiler.conformance.skips import SKIPS_FILE, load_skips, skip_reason
from compiler.conformance.worker import compare


@pytest.fixture(scope="module")
def nodes():
    return node_cases()


def test_node_cases_cover_the_installed_onnx(nodes):
    import onnx.backend.test.case.node as n

    assert len(nodes) == len(n.collect_testcases()) > 1500
    by = {c.name: c for c in nodes}
    assert by["test_relu"].op == "Relu"
    assert by["test_relu_expanded_ver18"].op == "Relu"  # an expanded case counts for its op
    assert by["test_gather_0"].op == "Gather"


def test_data_suites_are_found():
    assert len(data_cases("pytorch-converted")) > 50
    light = data_cases("light")
    assert "light_squeezenet" in {c.name for c in light}
    c = next(c for c in light if c.name == "light_squeezenet")
    c.load()
    (ins, outs), = c.data_sets
    assert ins[0].dtype == np.float32 and ins[0].shape == (1, 3, 224, 224) and outs[0].shape[:2] == (1, 1000)


def test_every_skip_has_a_reason_and_training_ops_are_skipped(nodes):
    skips = load_skips()
    assert skips and all(len(s.reason) > 30 for s in skips)
    by = {c.name: c for c in nodes}
    assert "training" in skip_reason(by["test_adagrad"], skips)
    assert skip_reason(by["test_relu"], skips) is None
    assert skip_reason(by["test_gather_0"], skips) is None


def test_skip_file_rejects_an_entry_without_reason(tmp_path):
    p = tmp_path / "s.toml"
    p.write_text('[[skip]]\nops = ["Relu"]\n')
    with pytest.raises(ValueError, match="reason"):
        load_skips(str(p))
    assert os.path.exists(SKIPS_FILE)


def test_compare_follows_the_onnx_runner():
    a = np.array([1.0, 2.0], np.float32)
    assert compare([a], [a.copy()], 1e-3, 1e-7) is None
    assert "values differ" in compare([a], [a + 1], 1e-3, 1e-7)
    assert "shape" in compare([a], [a.reshape(2, 1)], 1e-3, 1e-7)
    assert "dtype" in compare([a], [a.astype(np.float64)], 1e-3, 1e-7)
    assert "outputs" in compare([a], [a, a], 1e-3, 1e-7)
    assert compare([a * (1 + 5e-4)], [a], 1e-3, 1e-7) is None  # inside rtol


def test_run_cases_passes_and_reports_errors(nodes):
    by = {c.name: c for c in nodes}
    picked = [by["test_relu"], by["test_gather_0"], by["test_nonmaxsuppression_single_box"], by["test_adagrad"]]
    res = run_cases(picked, jobs=1, timeout_s=120)
    assert res["test_relu"]["status"] == "passed"
    assert res["test_gather_0"]["status"] == "passed"
    # a data-dependent output length (bounded, then trimmed: compiler.frontend.bounded)
    assert res["test_nonmaxsuppression_single_box"]["status"] == "passed"
    # a training-only op (outside Prism's scope, so skipped in full runs): an error, not a crash
    assert res["test_adagrad"]["status"] == "error"
    assert res["test_adagrad"]["message"]


class _Abort:
    """Unpickling this kills the worker process, as a crash in generated code would."""

    def __reduce__(self):
        return (os.abort, ())


def test_a_worker_crash_is_reported_and_the_next_case_still_runs(tmp_path, nodes):
    bad = tmp_path / "bad.pkl"
    bad.write_bytes(pickle.dumps(_Abort()))
    w = Worker(tmp_path, 0)
    res = w.ask(str(bad), 60)
    assert res["status"] == "crash" and "SIGABRT" in res["message"]
    w.kill()
    by = {c.name: c for c in nodes}
    good = tmp_path / "good.pkl"
    from compiler.conformance.runner import _job

    good.write_bytes(pickle.dumps(_job(by["test_relu"], "O2")))
    w2 = Worker(tmp_path, 1)
    assert w2.ask(str(good), 120)["status"] == "passed"
    w2.close()


def test_a_timeout_kills_the_worker(tmp_path):
    slow = tmp_path / "slow.pkl"

    class _Sleep:
        def __reduce__(self):
            import time

            return (time.sleep, (30,))
    slow.write_bytes(pickle.dumps(_Sleep()))
    w = Worker(tmp_path, 0)
    res = w.ask(str(slow), 1.0)
    assert res["status"] == "timeout"
    assert w.proc.poll() is not None


def test_command_line_prints_totals_and_writes_the_report(tmp_path):
    report = tmp_path / "r.json"
    proc = subprocess.run([sys.executable, "-m", "compiler.conformance", "--suite", "node", "--filter",
                           r"^test_(relu|adagrad)$", "--report", str(report)], cwd=ROOT, capture_output=True,
                          text=True, timeout=600, env=dict(os.environ, PYTHONPATH=ROOT))
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "TOTAL" in proc.stdout and "Relu" in proc.stdout
    rep = json.loads(report.read_text())
    st = {c["id"]: c["status"] for c in rep["cases"]}
    assert st == {"test_relu": "passed", "test_adagrad": "skipped"}
    assert rep["summary"]["overall"]["passed"] == 1 and rep["summary"]["overall"]["skipped"] == 1
