"""Every ``python -m compiler.<module>`` entry point runs without runpy's warning.

``runpy`` imports a module's parent packages before it runs the module as ``__main__``; when that
import has already imported the module itself (``compiler/__init__`` -> driver -> samples), it warns
"RuntimeWarning: 'compiler.samples' found in sys.modules after import of package 'compiler', but
prior to execution" and the module then exists twice. The check is runpy's own condition: in a fresh
interpreter, import each entry point's parent package and see whether the entry point came with it.
A package's ``__main__.py`` is exempt (its package never imports it).
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def _entry_points() -> dict[str, list[str]]:
    """``{parent package: [module run with -m, ...]}`` for every compiler module with a main guard."""
    by_parent: dict[str, list[str]] = defaultdict(list)
    for path in sorted((REPO / "compiler").rglob("*.py")):
        if path.name in ("__main__.py", "__init__.py") or 'if __name__ == "__main__":' not in path.read_text():
            continue
        module = ".".join(path.relative_to(REPO).with_suffix("").parts)
        by_parent[module.rsplit(".", 1)[0]].append(module)
    return by_parent


def test_no_entry_point_is_imported_by_its_own_package():
    found = _entry_points()
    assert "compiler.samples" not in sum(found.values(), [])  # it became compiler/samples/__main__.py
    assert sum(map(len, found.values())) >= 5, found  # the walk found the entry points (bench, isolated, ...)
    early = {}
    for parent, modules in found.items():
        probe = f"import importlib, json, sys; importlib.import_module({parent!r}); print(json.dumps([m for m in {modules!r} if m in sys.modules]))"
        out = subprocess.run([sys.executable, "-c", probe], cwd=REPO, capture_output=True, text=True, timeout=300, check=True)
        if imported := json.loads(out.stdout.strip().splitlines()[-1]):
            early[parent] = imported
    assert not early, f"imported by their own package before runpy runs them (move main() to a __main__.py): {early}"


def test_the_samples_command_prints_no_warning():
    out = subprocess.run([sys.executable, "-W", "error::RuntimeWarning", "-m", "compiler.samples", "list"], cwd=REPO,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert "RuntimeWarning" not in out.stderr and out.stderr == "", out.stderr
    listed = [line.split()[0] for line in out.stdout.splitlines() if line.strip()]
    from compiler.samples import SAMPLES

    assert listed == list(SAMPLES)
