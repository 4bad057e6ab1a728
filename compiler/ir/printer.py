"""The one text form of the graph IR (MLIR-like, one node a line, deterministic).

Example::

    graph @torch_jit(%data: f32[1, 3, 224, 224]) {
      %w = constant f32[64, 3, 7, 7] <digest 1f0c2a9e>
      %conv1 = Conv(%data, %w, %b) {kernel_shape = [7, 7], pads = [3, 3, 3, 3], strides = [2, 2]} : f32[1, 64, 112, 112]
      return %prob
    }

Attributes are sorted by name. Constants with at most 8 elements print their values; larger ones
print their type and the first 8 hex digits of the SHA-256 of their bytes, never the data. Names
that are not plain identifiers are quoted (``%"a b"``). Fused groups print their body indented.
The CLI, the explorer, the diffs and the golden tests all use this printer.
"""

from __future__ import annotations

import hashlib
import json
import weakref
from typing import Any

import numpy as np

from .graph import FusedGroup, Graph, Node, Value
from .types import TensorType

_SMALL = 8


_DIGESTS: dict[int, tuple[weakref.ref, str]] = {}


def digest(data: np.ndarray) -> str:
    """First 8 hex digits of the SHA-256 of the array's C-order bytes (strings: their repr).

    Constants are immutable in the IR, so the digest of a large array is computed once per array
    object (cached by identity through a weak reference; a read-only view is not assumed).
    """
    key = id(data)
    hit = _DIGESTS.get(key)
    if hit is not None and hit[0]() is data:
        return hit[1]
    if data.dtype == object:
        raw = repr(data.tolist()).encode()
    else:
        raw = np.ascontiguousarray(data).tobytes()
    d = hashlib.sha256(raw).hexdigest()[:8]
    if data.nbytes >= 4096:
        try:
            def forget(_ref: weakref.ref, k: int = key) -> None:
                _DIGESTS.pop(k, None)

            _DIGESTS[key] = (weakref.ref(data, forget), d)
        except TypeError:  # not weak-referenceable
            pass
    return d


def name_ref(name: str) -> str:
    ok = name and all(c.isalnum() or c in "_.:/-" for c in name)
    return f"%{name}" if ok else "%" + json.dumps(name)


def format_scalar(x: Any) -> str:
    if isinstance(x, bool | np.bool_):
        return "true" if x else "false"
    if isinstance(x, float | np.floating):
        f = float(x)
        if np.isnan(f):
            return "nan"
        if np.isinf(f):
            return "inf" if f > 0 else "-inf"
        return repr(f) if f != int(f) or abs(f) >= 1e16 else f"{f:.1f}"
    if isinstance(x, bytes):
        return json.dumps(x.decode("utf-8", "replace"))
    if isinstance(x, str):
        return json.dumps(x)
    return str(int(x)) if isinstance(x, int | np.integer) else json.dumps(str(x))


def format_tensor(data: np.ndarray) -> str:
    t = TensorType.of(data.dtype, data.shape)
    if data.size <= _SMALL:
        vals = ", ".join(format_scalar(x) for x in data.reshape(-1).tolist())
        return f"{t} dense<[{vals}]>"
    return f"{t} <digest {digest(data)}>"


def format_attr(value: Any) -> str:
    if isinstance(value, Graph):
        return f"@{value.name}"
    if isinstance(value, np.ndarray):
        return format_tensor(value)
    if isinstance(value, list | tuple):
        if value and all(isinstance(v, Graph) for v in value):
            return "[" + ", ".join(f"@{v.name}" for v in value) + "]"
        return "[" + ", ".join(format_attr(v) for v in value) + "]"
    return format_scalar(value)


def _type(v: Value) -> str:
    return str(v.type) if v.type is not None else "?"


def _operands(node: Node) -> str:
    return ", ".join("none" if v is None else name_ref(v.name) for v in node.inputs)


def _node_lines(node: Node, indent: str) -> list[str]:
    results = ", ".join(name_ref(v.name) for v in node.outputs)
    types = ", ".join(_type(v) for v in node.outputs)
    if isinstance(node, FusedGroup):
        extra = {k: v for k, v in node.attrs.items() if k not in ("kind", "kernel")}  # e.g. a recognised pattern
        ex = " {" + ", ".join(f"{k} = {format_attr(extra[k])}" for k in sorted(extra)) + "}" if extra else ""
        head = (
            f"{indent}{results} = prism.fused_group @{node.kernel} [{node.kind}]"
            f"({_operands(node)}){ex} : {types} {{"
        )
        lines = [head]
        params = ", ".join(f"{name_ref(v.name)}: {_type(v)}" for v in node.body.inputs)
        lines.append(f"{indent}  ^args({params})")
        for inner in node.body.nodes:
            lines.extend(_node_lines(inner, indent + "  "))
        lines.append(f"{indent}  yield " + ", ".join(name_ref(v.name) for v in node.body.outputs))
        lines.append(f"{indent}}}")
        return lines
    op = node.op_type if not node.domain or node.domain == "ai.onnx" else f"{node.domain}.{node.op_type}"
    plain = {k: v for k, v in node.attrs.items() if not _is_graph_attr(v)}
    attrs = ""
    if plain:
        attrs = " {" + ", ".join(f"{k} = {format_attr(plain[k])}" for k in sorted(plain)) + "}"
    label = f"  // {node.name}" if node.name and node.name != (node.outputs[0].name if node.outputs else "") else ""
    line = f"{indent}{results} = {op}({_operands(node)}){attrs} : {types}{label}"
    lines = [line]
    for key in sorted(k for k, v in node.attrs.items() if _is_graph_attr(v)):
        val = node.attrs[key]
        for sub in val if isinstance(val, list) else [val]:
            lines.append(f"{indent}  {key} = " + print_graph(sub, indent=indent + "  ").lstrip())
    return lines


def _is_graph_attr(v: Any) -> bool:
    return isinstance(v, Graph) or (isinstance(v, list) and bool(v) and all(isinstance(x, Graph) for x in v))


def print_graph(graph: Graph, *, indent: str = "") -> str:
    """The graph's text form (see module docstring). Deterministic for a given graph."""
    params = ", ".join(f"{name_ref(v.name)}: {_type(v)}" for v in graph.inputs)
    lines = [f"{indent}graph @{graph.name}({params}) {{"]
    for name in sorted(graph.constants):
        v = graph.constants[name]
        assert v.const is not None
        lines.append(f"{indent}  {name_ref(v.name)} = constant {format_tensor(v.const)}")
    for node in graph.nodes:
        lines.extend(_node_lines(node, indent + "  "))
    lines.append(f"{indent}  return " + ", ".join(name_ref(v.name) for v in graph.outputs))
    lines.append(f"{indent}}}")
    return "\n".join(lines)
