"""Code shape (CONVENTIONS 8, issue 10 targets) in compiler/ and explorer/ (migrations aside): no module
over 400 lines, no function over 80 lines, no function-local import without a comment saying why it
is deferred (a heavy optional dependency), on its line or the line above.

tests/lint/shape_allowlist.json lists today's offenders with their size (lines; for imports, the count
per module): one may only shrink. A new offender, or a listed one that grows, fails; when you shrink
one, lower its number (or drop it). `python tests/test_code_shape.py` prints the current offenders.
"""

from __future__ import annotations

import ast
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ALLOWLIST = ROOT / "tests" / "lint" / "shape_allowlist.json"
MAX_MODULE_LINES = 400
MAX_FUNCTION_LINES = 80


def _sources() -> list[tuple[str, str]]:
    out = []
    for pkg in ("compiler", "explorer"):
        for path in sorted((ROOT / pkg).rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            if "/migrations/" not in rel:
                out.append((rel, path.read_text()))
    return out


def _commented(lines: list[str], node: ast.stmt) -> bool:
    above = lines[node.lineno - 2].strip() if node.lineno > 1 else ""
    end = node.end_lineno or node.lineno
    return any("#" in lines[i - 1] for i in range(node.lineno, end + 1)) or above.startswith("#")


def measure() -> dict[str, dict[str, int]]:
    """``{"modules": {path: lines}, "functions": {"path::Qual.name": lines}, "local_imports": {path: n}}``
    for everything over the limits."""
    modules: dict[str, int] = {}
    functions: dict[str, int] = {}
    imports: dict[str, int] = {}
    for rel, text in _sources():
        lines = text.splitlines()
        if len(lines) > MAX_MODULE_LINES:
            modules[rel] = len(lines)

        def visit(node: ast.AST, prefix: str, in_function: bool, rel: str = rel, lines: list[str] = lines) -> None:
            for child in ast.iter_child_nodes(node):
                if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    size = (child.end_lineno or child.lineno) - child.lineno + 1
                    if size > MAX_FUNCTION_LINES:
                        functions[f"{rel}::{prefix}{child.name}"] = size
                    visit(child, f"{prefix}{child.name}.", True)
                elif isinstance(child, ast.ClassDef):
                    visit(child, f"{prefix}{child.name}.", in_function)
                else:
                    if in_function and isinstance(child, (ast.Import, ast.ImportFrom)) and not _commented(lines, child):
                        imports[rel] = imports.get(rel, 0) + 1
                    visit(child, prefix, in_function)

        visit(ast.parse(text, rel), "", False)
    return {"modules": modules, "functions": functions, "local_imports": imports}


def _over(kind: str, found: dict[str, int], allowed: dict[str, int]) -> list[str]:
    return [f"{kind} {name}: {n} (allowed {allowed[name]})" if name in allowed else f"{kind} {name}: {n} (new)"
            for name, n in sorted(found.items()) if n > allowed.get(name, 0)]


def test_no_new_or_grown_offenders():
    allowed = json.loads(ALLOWLIST.read_text())
    found = measure()
    problems = (_over("module over 400 lines", found["modules"], allowed["modules"])
                + _over("function over 80 lines", found["functions"], allowed["functions"])
                + _over("function-local imports without a comment in", found["local_imports"],
                        allowed["local_imports"]))
    assert problems == [], "split it, or say why an import is deferred in a comment:\n" + "\n".join(problems)


def test_the_measure_finds_each_kind_of_offender(tmp_path: Path, monkeypatch):
    """Checks the checker on a planted tree: a 401-line module, an 81-line method, a bare local import."""
    pkg = tmp_path / "compiler"
    pkg.mkdir()
    body = "\n".join(f"        x{i} = {i}" for i in range(80))
    (pkg / "big.py").write_text("\n" * 401)
    (pkg / "fns.py").write_text(f"class A:\n    def long(self):\n{body}\n\n\ndef short():\n    import os\n"
                                "    import sys  # deferred: heavy\n    return os, sys\n")
    (tmp_path / "explorer").mkdir()
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    found = measure()
    assert found == {"modules": {"compiler/big.py": 401}, "functions": {"compiler/fns.py::A.long": 81},
                     "local_imports": {"compiler/fns.py": 1}}


if __name__ == "__main__":
    print(json.dumps(measure(), indent=2, sort_keys=True))
