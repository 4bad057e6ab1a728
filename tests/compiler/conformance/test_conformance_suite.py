"""The conformance suite through ``python -m compiler.conformance --jobs 2``, twice over:

- ``make test`` (CI) runs the ``--subset ci`` sample: for every op of the node suite its first and
  middle case, every simple and pytorch-operator case, every third pytorch-converted case and
  light_squeezenet (about 470 cases).
- ``make test-all`` adds the whole suite (node cases, simple, pytorch-converted, pytorch-operator
  and every light model: about 2,000 cases, several minutes on 2 cores; marked ``slow``), which also
  checks issue 6's targets for the node suite: at least 90% of all node cases pass (skipped ones
  count as not passed) and at least 98% of those not skipped. Measured on 2026-11-29 (20:00 UTC):
  node 1813/1884 = 96.2% of all, 99.9% of those not skipped. The same run as a command:
  ``.venv/bin/python -m compiler.conformance --jobs 2 --report conformance.json``.

Either run must finish with no crash and no timeout, cover every op of the node suite, pass every
light model it runs, and keep the pass rate of the cases it runs (skips excluded) at or above the
floor below; a regression shows up here as a drop below it, with the failing cases listed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from compiler.conformance.cases import node_cases
from compiler.conformance.runner import ROOT

PASS_RATE_FLOOR = 0.99
NODE_ALL_TARGET = 0.90  # issue 6: share of all node cases that pass
NODE_NOT_SKIPPED_TARGET = 0.98  # issue 6: share of the node cases not skipped that pass


def _run(subset: str, tmp_path: Path) -> tuple[dict, list[str]]:
    """The command's JSON report for ``subset``, after the checks every run must pass; and its failures."""
    report = tmp_path / "conformance.json"
    proc = subprocess.run([sys.executable, "-m", "compiler.conformance", "--subset", subset, "--jobs", "2",
                           "--timeout", "600", "--report", str(report)], cwd=ROOT, capture_output=True, text=True,
                          timeout=3600, env=dict(os.environ, PYTHONPATH=ROOT))
    assert proc.returncode in (0, 1), proc.stderr[-3000:]
    rep = json.loads(report.read_text())
    assert rep["subset"] == subset
    overall = rep["summary"]["overall"]
    print(proc.stdout[-1500:])
    assert overall["crash"] == 0 and overall["timeout"] == 0, [c for c in rep["cases"]
                                                               if c["status"] in ("crash", "timeout")]
    assert {c.op for c in node_cases()} <= set(rep["summary"]["ops"])
    failing = [f"{c['id']}: {c['message'][:120]}" for c in rep["cases"] if c["status"] in ("failed", "error")]
    assert overall["pass_rate_not_skipped"] >= PASS_RATE_FLOOR, "\n".join(failing)
    light = [c for c in rep["cases"] if c["suite"] == "light"]
    assert light and all(c["status"] == "passed" for c in light), light
    return rep, failing


def test_conformance_every_op_sample(tmp_path):
    rep, _ = _run("ci", tmp_path)
    assert [c["id"] for c in rep["cases"] if c["suite"] == "light"] == ["light/light_squeezenet"]


@pytest.mark.slow
def test_conformance_whole_suite(tmp_path):
    rep, failing = _run("all", tmp_path)
    assert len([c for c in rep["cases"] if c["suite"] == "light"]) > 1  # every light model, not the sample's one
    node = rep["summary"]["suites"]["node"]
    assert node["pass_rate"] >= NODE_ALL_TARGET, (node, "\n".join(failing))
    assert node["pass_rate_not_skipped"] >= NODE_NOT_SKIPPED_TARGET, (node, "\n".join(failing))
