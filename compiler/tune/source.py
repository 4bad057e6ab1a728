"""The kernel source of a measurement request: one schedule step as a standalone graph, JSON-able.

:func:`kernel_source` packs a schedule step (a FusedGroup, whose body is a closed graph, or a lone
node) with the types of its inputs and outputs into ``{"format": "prism-kernel/1", "opset", "kernel",
"data"}``: ``data`` is the base64 of a zlib-compressed pickle. Float constants of more than
:data:`BIG_CONST` elements (weights) are not shipped: they become seeded random data of the same
shape and dtype when the source is loaded (schedules do not depend on weight values, and the tuner
compares every candidate with the default schedule on the same rebuilt kernel), which keeps a
ResNet-50 Conv's request at a few kilobytes instead of megabytes.

:func:`load_source` rebuilds a :class:`~compiler.ir.Graph` holding just that step, with a restricted
unpickler that only constructs ``compiler.ir`` objects, numpy arrays and plain builtins (a request
comes from the service, never from a user; the restriction still refuses anything else by name).
"""

from __future__ import annotations

import base64
import io
import pickle
import zlib
from typing import Any

import numpy as np

from ..ir import FusedGroup, Graph, Node, Value

FORMAT = "prism-kernel/1"
BIG_CONST = 4096

_ALLOWED_MODULES = ("compiler.ir", "numpy", "numpy.core", "numpy._core", "copyreg")
_ALLOWED_BUILTINS = {"set", "frozenset", "slice", "complex", "bytearray", "range", "tuple", "list", "dict", "int",
                     "float", "bool", "str", "bytes", "object", "getattr"}


class SourceError(ValueError):
    """A kernel source that cannot be loaded (wrong format, corrupt data, a forbidden class)."""


def random_const(shape: tuple[int, ...], dtype: str, seed: int) -> np.ndarray:
    """The stand-in for a large float constant: normal(0, 0.1) of ``shape`` and ``dtype``, seeded."""
    return (np.random.default_rng(seed).standard_normal(shape) * 0.1).astype(dtype)


class _Pickler(pickle.Pickler):
    def reducer_override(self, obj: Any) -> Any:
        if isinstance(obj, np.ndarray) and obj.dtype.kind == "f" and obj.size > BIG_CONST:
            seed = zlib.crc32(repr((obj.shape, obj.dtype.str)).encode())
            return random_const, (tuple(obj.shape), obj.dtype.str, seed)
        return NotImplemented


class _Unpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        if module == "compiler.tune.source" and name == "random_const":
            return random_const
        if module == "builtins" and name in _ALLOWED_BUILTINS:
            return super().find_class(module, name)
        if any(module == m or module.startswith(m + ".") for m in _ALLOWED_MODULES):
            return super().find_class(module, name)
        raise SourceError(f"kernel source refers to {module}.{name}, which a kernel source may not contain")


def _standalone(node: Any) -> Graph:
    g = Graph("tune")
    ins: list[Value | None] = []
    for k, v in enumerate(node.inputs):
        if v is None:
            ins.append(None)
        elif v.const is not None:
            ins.append(g.add_constant(v.name, v.const))
        elif v.name in g._names:  # the same outer value read twice
            ins.append(g.lookup(v.name))
        else:
            ins.append(g.add_input(v.name or f"in{k}", v.type))
    outs = [Value(v.name, v.type) for v in node.outputs]
    if isinstance(node, FusedGroup):
        new: Node = FusedGroup(node.body, [v for v in ins if v is not None], outs, kind=node.kind,
                               kernel=node.kernel, name=node.name)
        new.attrs.update(node.attrs)  # a pattern group's own attributes (fuse-layer-norm: pattern, mean, axis ...)
    else:
        new = Node(node.op_type, ins, outs, node.attrs, name=node.name, domain=node.domain)
    g.insert(new)
    g.outputs = list(new.outputs)
    return g


def kernel_source(node: Any, opset: int, kernel: str) -> dict[str, Any]:
    """The JSON-able source of schedule step ``node`` (module docstring)."""
    g = _standalone(node)
    g.opset_imports = {"": opset}
    buf = io.BytesIO()
    _Pickler(buf, protocol=pickle.HIGHEST_PROTOCOL).dump(g)
    data = base64.b64encode(zlib.compress(buf.getvalue(), 6)).decode("ascii")
    return {"format": FORMAT, "opset": opset, "kernel": kernel, "data": data}


def load_source(src: dict[str, Any]) -> Graph:
    """The standalone graph of a kernel source (one schedule step). Raises SourceError."""
    if not isinstance(src, dict) or src.get("format") != FORMAT:
        raise SourceError(f"kernel source format {src.get('format') if isinstance(src, dict) else src!r} "
                          f"is not {FORMAT}")
    try:
        raw = zlib.decompress(base64.b64decode(src["data"]))
        g = _Unpickler(io.BytesIO(raw)).load()
    except SourceError:
        raise
    except Exception as exc:
        raise SourceError(f"kernel source data does not load: {type(exc).__name__}: {exc}") from None
    if not isinstance(g, Graph) or len(g.nodes) != 1:
        raise SourceError("kernel source is not a graph of one schedule step")
    return g


__all__ = ["FORMAT", "SourceError", "kernel_source", "load_source", "random_const"]
