"""The compiler's version: ``0.1.0+<first 12 hex digits of a SHA-256>``.

The digest covers every ``compiler/**/*.py`` file's path (relative to the package) and bytes, so
any change to the compiler's code gives a new version: the explorer's cache key (same model bytes
+ target + pipeline + options + compiler version = same result) never serves a result that other
code produced.
"""

from __future__ import annotations

import hashlib
from pathlib import Path


def _compute_version() -> str:
    h = hashlib.sha256()
    root = Path(__file__).resolve().parent
    for p in sorted(root.rglob("*.py")):
        h.update(str(p.relative_to(root)).encode())
        h.update(p.read_bytes())
    return "0.1.0+" + h.hexdigest()[:12]


__version__ = _compute_version()
