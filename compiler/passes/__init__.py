"""The passes: model passes (level ``onnx``, on the ModelProto before import) and graph passes
(level ``graph``). Importing this package registers every pass module that exists.

A pass module that is missing or fails to import is recorded in :func:`unavailable_passes` with
the reason; a pipeline that names it fails with that reason, other pipelines still work.
"""

from __future__ import annotations

import importlib
import sys
import threading
from typing import Any

from .base import (
    REGISTRY,
    Artifacts,
    ModelPass,
    ModelPassResult,
    Option,
    Pass,
    PassBase,
    PassContext,
    PassResult,
    Remark,
    register,
)

#: pass name -> module (one pass per module, compiler/passes/<module>.py)
PASS_MODULES: dict[str, str] = {
    # level onnx: on the ModelProto, before the graph IR exists
    "resolve-sequences": "resolve_sequences",
    "inline-control-flow": "inline_control_flow",
    "unroll-rnn": "unroll_rnn",
    "expand-functions": "expand_functions",
    "legalize-narrow-types": "legalize_narrow_types",
    "bound-outputs": "bound_outputs",
    # level graph: on the graph IR
    "fold-qdq": "fold_qdq",
    "fold-constants": "fold_constants",
    "simplify": "simplify",
    "eliminate-dead-code": "eliminate_dead_code",
    "eliminate-common-subexpressions": "eliminate_common_subexpressions",
    "fold-batchnorm": "fold_batchnorm",
    "fuse-layer-norm": "fuse_layer_norm",
    "fuse-siblings": "fuse_siblings",
    "convert-layout": "convert_layout",
    "fuse-ops": "fuse_ops",
    "plan-memory": "plan_memory",
    "quantize": "quantize",
}

_UNAVAILABLE: dict[str, str] = {}
_LOADED = False
_LOAD_LOCK = threading.Lock()


def load_passes() -> None:
    """Import every pass module once (idempotent, thread-safe: a caller returns only after every
    module has been imported, so concurrent first calls never see a half-filled registry)."""
    global _LOADED
    if _LOADED:
        return
    with _LOAD_LOCK:
        if not _LOADED:
            _load_all()
            _LOADED = True


def _load_all() -> None:
    for name, module in PASS_MODULES.items():
        try:
            importlib.import_module(f"{__name__}.{module}")
        except ModuleNotFoundError as exc:
            if exc.name == f"{__name__}.{module}":
                _UNAVAILABLE[name] = f"module compiler/passes/{module}.py does not exist yet"
            else:
                _UNAVAILABLE[name] = f"module compiler/passes/{module}.py failed to import: {exc}"
        except Exception as exc:  # a broken pass module must not break the other passes
            _UNAVAILABLE[name] = f"module compiler/passes/{module}.py failed to import: {type(exc).__name__}: {exc}"
        else:
            if name not in REGISTRY:
                _UNAVAILABLE[name] = f"module compiler/passes/{module}.py does not register a pass named {name!r}"


def unavailable_passes() -> dict[str, str]:
    """Known pass names that are not registered, with the reason."""
    load_passes()
    return dict(_UNAVAILABLE)


def list_passes() -> list[dict[str, Any]]:
    """Every registered pass: ``[{"name", "doc", "options": [{"name", "type", "default", "doc", "allowed"}]}]``.

    ``doc`` is the pass module's docstring (what it rewrites, what it leaves alone, and why).
    """
    load_passes()
    out = []
    for name in sorted(REGISTRY):
        cls = REGISTRY[name]
        doc = (sys.modules[cls.__module__].__doc__ or cls.__doc__ or "").strip()
        out.append({
            "name": name,
            "doc": doc,
            "level": cls.level,
            "options": [o.describe() for o in cls.options],
        })
    return out


__all__ = ["PASS_MODULES", "REGISTRY", "Artifacts", "ModelPass", "ModelPassResult", "Option", "Pass", "PassBase",
           "PassContext", "PassResult", "Remark", "list_passes", "load_passes", "register", "unavailable_passes"]
