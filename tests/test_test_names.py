"""The test tree has no ``__init__.py`` files, so pytest's default ("prepend") import mode imports
each test module by its base name: two ``test_x.py`` in different folders stop the whole collection
("import file mismatch"). This keeps the base names unique, naming the clashing paths."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

TESTS = Path(__file__).resolve().parent


def test_test_module_base_names_are_unique() -> None:
    by_name: dict[str, list[str]] = defaultdict(list)
    for path in TESTS.rglob("*.py"):
        if path.name.startswith("test_") or path.name == "conftest.py":
            by_name[path.name].append(str(path.relative_to(TESTS)))
    # conftest.py files are loaded by path, one per folder: only test modules must be unique
    clashes = {n: sorted(p) for n, p in by_name.items() if n != "conftest.py" and len(p) > 1}
    assert not clashes, f"test modules sharing a base name (rename one): {clashes}"
