"""CI's conformance run: the whole suite, ``python -m compiler.conformance --jobs 2`` (node cases,
simple, pytorch-converted, pytorch-operator and the light models: about 2,000 cases, 2 to 6
minutes on 2 cores). ``PRISM_CONFORMANCE_SUBSET=ci`` runs the ``--subset ci`` sample instead
(every op, about 470 cases, under a minute).

The run must finish with no crash and no timeout, cover every op of the node suite, pass every
light model, and keep the pass rate of the cases it runs (skips excluded) at or above the floor
below; a regression shows up here as a drop below it, with the failing cases listed. On the whole
run it also checks issue 6's targets for the node suite: at least 90% of all node cases pass
(skipped ones count as not passed) and at least 98% of those not skipped. Measured on 2026-11-29
(20:00 UTC): node 1813/1884 = 96.2% of all, 99.9% of those not skipped.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

from compiler.conformance.cases import node_cases
from compiler.conformance.runner import ROOT

PASS_RATE_FLOOR = 0.99
NODE_ALL_TARGET = 0.90  # issue 6: share of all node cases that pass
NODE_NOT_SKIPPED_TARGET = 0.98  # issue 6: share of the node cases not skipped that pass


def test_conformance_suite(tmp_path):
    report = tmp_path / "conformance.json"
    subset = os.environ.get("PRISM_CONFORMANCE_SUBSET", "all")
    proc = subprocess.run([sys.executable, "-m", "compiler.conformance", "--subset", subset, "--jobs", "2",
                           "--timeout", "600", "--report", str(report)], cwd=ROOT, capture_output=True, text=True,
                          timeout=3600, env=dict(os.environ, PYTHONPATH=ROOT))
    assert proc.returncode in (0, 1), proc.stderr[-3000:]
    rep = json.loads(report.read_text())
    overall = rep["summary"]["overall"]
    print(proc.stdout[-1500:])
    assert overall["crash"] == 0 and overall["timeout"] == 0, [c for c in rep["cases"]
                                                               if c["status"] in ("crash", "timeout")]
    assert {c.op for c in node_cases()} <= set(rep["summary"]["ops"])
    failing = [f"{c['id']}: {c['message'][:120]}" for c in rep["cases"] if c["status"] in ("failed", "error")]
    assert overall["pass_rate_not_skipped"] >= PASS_RATE_FLOOR, "\n".join(failing)
    light = [c for c in rep["cases"] if c["suite"] == "light"]
    assert light and all(c["status"] == "passed" for c in light), light
    if subset == "all":
        node = rep["summary"]["suites"]["node"]
        assert node["pass_rate"] >= NODE_ALL_TARGET, (node, "\n".join(failing))
        assert node["pass_rate_not_skipped"] >= NODE_NOT_SKIPPED_TARGET, (node, "\n".join(failing))
