"""``python -m compiler.conformance`` as a user runs it (a subprocess): bad arguments are one-line
argparse errors naming the option (exit 2) before any case runs, ``--help`` shows the defaults."""

from __future__ import annotations

import subprocess
import sys

from compiler.conformance.runner import ROOT


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "compiler.conformance", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=300)


def _one_error_line(p: subprocess.CompletedProcess[str]) -> str:
    assert p.returncode == 2, p.stderr
    assert "Traceback" not in p.stderr and p.stdout == ""
    errors = [ln for ln in p.stderr.splitlines() if "error:" in ln]
    assert len(errors) == 1 and p.stderr.startswith("usage: "), p.stderr
    return errors[0]


def test_an_invalid_filter_regex_is_a_usage_error_naming_the_option():
    line = _one_error_line(_cli("--suite", "node", "--filter", "(["))
    assert "argument --filter: invalid regular expression '(['" in line


def test_an_unknown_pass_is_rejected_before_any_case_runs():
    p = _cli("--suite", "node", "--filter", "^test_relu$", "--pipeline", "fold-constants,nope")
    line = _one_error_line(p)
    assert "argument --pipeline: unknown pass 'nope'" in line and "valid passes:" in line
    assert "cases, " not in p.stderr  # nothing was collected or run


def test_a_filter_matching_no_case_is_a_usage_error():
    line = _one_error_line(_cli("--suite", "simple", "--filter", "no_such_case_zzz"))
    assert "argument --filter: no cases match 'no_such_case_zzz' in suite(s) simple" in line


def test_help_shows_the_defaults():
    p = _cli("--help")
    assert p.returncode == 0
    text = " ".join(p.stdout.split())  # argparse wraps lines
    for default in ("(default: O2)", "(default: 1)", "(default: 120.0)", "(default: all)"):
        assert default in text, default
    assert "(default: None)" not in text


def test_a_valid_run_still_passes():
    p = _cli("--suite", "node", "--filter", "^test_relu$", "--pipeline", "O1")
    assert p.returncode == 0, p.stderr
    assert "pass 1/1" in p.stdout
