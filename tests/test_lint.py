"""Lint gates (run by `make test`): ruff is clean over the repository, the layer contracts in
pyproject.toml hold (`lint-imports`), and mypy on compiler/ finds no more errors in any module than
tests/lint/mypy_baseline.json allows (the baseline may only shrink: lower a module's number when
you fix its errors, and drop the module at zero)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
BASELINE = ROOT / "tests" / "lint" / "mypy_baseline.json"


def _tool(name: str) -> str:
    path = BIN / name if (BIN / name).exists() else shutil.which(name)
    if path is None:
        pytest.fail(f"{name} is not installed: pip install -r requirements-dev.txt")
    return str(path)


def test_ruff_is_clean():
    proc = subprocess.run([_tool("ruff"), "check", "--no-cache", "."], cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-1000:]


def test_the_layer_contracts_hold():
    proc = subprocess.run([_tool("lint-imports"), "--no-cache"], cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-1000:]
    assert re.search(r"Contracts: (\d+) kept, 0 broken", proc.stdout), proc.stdout[-2000:]


def test_lint_imports_sees_a_broken_contract(tmp_path: Path):
    """The tool really reads the imports: a contract the code breaks (passes import the IR) is reported."""
    cfg = tmp_path / "canary.toml"
    cfg.write_text('[tool.importlinter]\nroot_packages = ["compiler"]\n\n[[tool.importlinter.contracts]]\n'
                   'name = "canary"\ntype = "forbidden"\nsource_modules = ["compiler.passes"]\n'
                   'forbidden_modules = ["compiler.ir"]\n')
    proc = subprocess.run([_tool("lint-imports"), "--no-cache", "--config", str(cfg)], cwd=ROOT,
                          capture_output=True, text=True)
    assert proc.returncode != 0 and "canary BROKEN" in proc.stdout, proc.stdout[-2000:]


def mypy_errors() -> Counter[str]:
    """mypy's error count per file of compiler/ (the [tool.mypy] settings of pyproject.toml)."""
    proc = subprocess.run([sys.executable, "-m", "mypy", "--no-error-summary"], cwd=ROOT, capture_output=True,
                          text=True)
    if proc.returncode not in (0, 1):
        pytest.fail(f"mypy crashed: {proc.stderr[-2000:]}")
    return Counter(m.group(1) for m in re.finditer(r"^(compiler/[\w/]+\.py):\d+: error:", proc.stdout, re.M))


def test_mypy_errors_per_module_only_shrink():
    baseline: dict[str, int] = json.loads(BASELINE.read_text())
    found = mypy_errors()
    grown = {f: f"{n} (baseline {baseline.get(f, 0)})" for f, n in found.items() if n > baseline.get(f, 0)}
    assert grown == {}, ("mypy errors grew in these modules; fix them (`.venv/bin/mypy`), the baseline only "
                         f"shrinks: {grown}")


if __name__ == "__main__":  # `python tests/test_lint.py` rewrites the baseline to today's counts
    BASELINE.write_text(json.dumps(dict(sorted(mypy_errors().items())), indent=2) + "\n")
