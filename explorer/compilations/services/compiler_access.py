"""The one way the web process reaches the compiler's public API.

Django runs each request's sync view in its own thread, and the compiler's lazy registries (pass
modules are imported on first use) are not safe to fill from two threads at once: a request could
see a half-filled pass registry and report a valid pass as unknown. So the web process warms the
compiler once and serializes its calls (they are quick: parsing a model and checking a request).
Workers need none of this: a prefork pool process runs one compilation at a time.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import ModuleType

_lock = threading.RLock()
_warm = False


@contextmanager
def compiler_api() -> Iterator[ModuleType]:
    """`with compiler_api() as compiler:` the `compiler` package, warmed, held exclusively."""
    global _warm
    with _lock:
        import compiler

        if not _warm:
            compiler.list_passes()
            compiler.list_pipelines()
            compiler.list_targets()
            _warm = True
        yield compiler
