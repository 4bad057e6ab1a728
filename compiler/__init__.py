"""Prism's compiler: ONNX -> graph IR -> passes -> loop IR -> LLVM IR -> native code.

Public API (the explorer service relies on exactly this): :func:`compile`, :class:`CompileResult`,
:func:`inspect_model`, :func:`validate_request`, :func:`expand_pipeline`, :func:`list_passes`, :func:`list_pipelines`,
:func:`list_targets`, :class:`CompileError`, ``__version__``; sample models in
:mod:`compiler.samples`; the read-only calls in a memory- and time-limited child in :mod:`compiler.isolated`.
"""

from .api import (
    CompileResult,
    __version__,
    compile,
    expand_pipeline,
    inspect_model,
    list_passes,
    list_pipelines,
    list_targets,
    validate_request,
)
from .errors import CompileError

__all__ = [
    "CompileError",
    "CompileResult",
    "__version__",
    "compile",
    "expand_pipeline",
    "inspect_model",
    "list_passes",
    "list_pipelines",
    "list_targets",
    "validate_request",
]
