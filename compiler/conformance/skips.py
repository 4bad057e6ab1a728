"""The skip list: ``compiler/conformance/skips.toml``, one entry per reason.

An entry is ``[[skip]]`` with ``reason`` (required, a sentence a reader can judge) and any of
``ops`` (op types, matched against a case's op), ``domains`` (op domains any node of the model
uses), ``cases`` (regular expressions matched in full against case ids), ``uses_ops`` (op types any
node of the model uses) and ``dtypes`` (numpy
dtype names or ``sequence``/``optional``/``string``: a case is skipped when a graph input or output
has one of them). A case is skipped by the first entry that matches it. A failing op is never
skipped for failing: a skip says why the case is outside Prism's scope.
"""

from __future__ import annotations

import os
import re
import tomllib
from dataclasses import dataclass, field
from typing import Any

import onnx

from .cases import Case

SKIPS_FILE = os.path.join(os.path.dirname(__file__), "skips.toml")

_ELEM_NAMES = {v: k.lower() for k, v in onnx.TensorProto.DataType.items()}


@dataclass
class Skip:
    reason: str
    ops: set[str] = field(default_factory=set)
    domains: set[str] = field(default_factory=set)
    cases: list[re.Pattern[str]] = field(default_factory=list)
    dtypes: set[str] = field(default_factory=set)
    uses_ops: set[str] = field(default_factory=set)


def load_skips(path: str = SKIPS_FILE) -> list[Skip]:
    """Parse the skip file. Raises ValueError for an entry without a reason or with unknown keys."""
    with open(path, "rb") as f:
        data = tomllib.load(f)
    out = []
    for i, e in enumerate(data.get("skip", [])):
        unknown = set(e) - {"reason", "ops", "domains", "cases", "dtypes", "uses_ops"}
        if unknown or not str(e.get("reason", "")).strip():
            raise ValueError(f"{path}: skip entry {i} needs a reason and only known keys (got {sorted(e)})")
        out.append(Skip(e["reason"].strip(), set(e.get("ops", [])), set(e.get("domains", [])),
                        [re.compile(p) for p in e.get("cases", [])], set(e.get("dtypes", [])),
                        set(e.get("uses_ops", []))))
    return out


def _type_names(t: Any, acc: set[str]) -> None:
    kind = t.WhichOneof("value")
    if kind == "tensor_type":
        acc.add(_ELEM_NAMES.get(t.tensor_type.elem_type, "undefined"))
    elif kind == "sequence_type":
        acc.add("sequence")
        _type_names(t.sequence_type.elem_type, acc)
    elif kind == "optional_type":
        acc.add("optional")
        _type_names(t.optional_type.elem_type, acc)
    elif kind is not None:
        acc.add(kind.removesuffix("_type"))


def case_types(model: onnx.ModelProto) -> set[str]:
    """ONNX type names (``float``, ``float16``, ``int64``, ``sequence`` ...) of graph inputs/outputs."""
    acc: set[str] = set()
    for vi in list(model.graph.input) + list(model.graph.output):
        _type_names(vi.type, acc)
    return acc


def skip_reason(case: Case, skips: list[Skip]) -> str | None:
    """The reason ``case`` is skipped, or None. Data cases are loaded to see their types."""
    types: set[str] | None = None
    for s in skips:
        if case.op in s.ops or s.domains & set(case.domains) or any(p.fullmatch(case.id) for p in s.cases):
            return s.reason
        if s.uses_ops:
            case.load()
            assert case.model is not None
            if s.uses_ops & {n.op_type for n in case.model.graph.node}:
                return s.reason
        if s.dtypes:
            if types is None:
                case.load()
                assert case.model is not None
                types = case_types(case.model)
            if types & s.dtypes:
                return s.reason
    return None
