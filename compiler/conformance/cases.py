"""The conformance cases: the ONNX backend node tests and the model data the ``onnx`` wheel ships.

Suites (names as ``onnx.backend.test.loader`` uses them):
    node: ``onnx.backend.test.case.node.collect_testcases()`` (about 1,900 cases, generated from the
        installed ``onnx`` package: model, data sets, per-case ``rtol``/``atol``).
    simple, pytorch-converted, pytorch-operator: ``onnx/backend/test/data/<suite>/<case>/`` with
        ``model.onnx`` and ``test_data_set_*/{input,output}_*.pb`` (tolerances from ``data.json``
        where present, else rtol 1e-3, atol 1e-7).
    light: ``onnx/backend/test/data/light/light_<model>.onnx`` with ``light_<model>_output_0.pb``;
        as the ONNX runner does, the input is ``arange(n).reshape(shape) / n`` (float32, unbound dims
        1) and the expected output is the shipped one.

Each :class:`Case` knows its ``op`` (for per-op totals): for a node case the op type its model
tests (the one node, or for a function-expanded ``*_expanded`` case the op of its unexpanded twin),
for a model case ``model:<suite>``.
"""

from __future__ import annotations

import glob
import json
import os
import re
import warnings
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import onnx
from onnx import numpy_helper

DATA_DIR = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data")
SUITES = ("node", "simple", "pytorch-converted", "pytorch-operator", "light")


@dataclass
class Case:
    """One conformance case. ``data_sets`` is a list of (inputs, expected outputs) lists, loaded lazily
    for data-directory cases (see :meth:`load`)."""

    name: str
    suite: str
    op: str
    rtol: float = 1e-3
    atol: float = 1e-7
    model: onnx.ModelProto | None = None
    data_sets: list[tuple[list[Any], list[Any]]] | None = None
    path: str = ""
    domains: tuple[str, ...] = field(default_factory=tuple)

    @property
    def id(self) -> str:
        return self.name if self.suite == "node" else f"{self.suite}/{self.name}"

    def load(self) -> None:
        """Read the model and data sets of a data-directory case (no-op for node cases)."""
        if self.model is not None and self.data_sets is not None:
            return
        if self.suite == "light":
            self.model = onnx.load(self.path)
            self.data_sets = [_light_data(self.model, self.path)]
            return
        self.model = onnx.load(os.path.join(self.path, "model.onnx"))
        self.data_sets = []
        for ds in sorted(glob.glob(os.path.join(self.path, "test_data_set*"))):
            ins = [_load_pb(p, _vi_type(self.model.graph.input, i)) for i, p in enumerate(_numbered(ds, "input"))]
            outs = [_load_pb(p, _vi_type(self.model.graph.output, i)) for i, p in enumerate(_numbered(ds, "output"))]
            self.data_sets.append((ins, outs))


def _numbered(ds: str, kind: str) -> list[str]:
    n = len(glob.glob(os.path.join(ds, f"{kind}_*.pb")))
    return [os.path.join(ds, f"{kind}_{i}.pb") for i in range(n)]


def _vi_type(vis: Any, i: int) -> Any:
    return vis[i].type if i < len(vis) else None


def _load_pb(path: str, type_proto: Any) -> Any:
    """A tensor, sequence or optional, read with the ONNX helpers as the ONNX runner does."""
    data = open(path, "rb").read()
    kind = type_proto.WhichOneof("value") if type_proto is not None else "tensor_type"
    if kind == "sequence_type":
        seq = onnx.SequenceProto()
        seq.ParseFromString(data)
        return numpy_helper.to_list(seq)
    if kind == "optional_type":
        opt = onnx.OptionalProto()
        opt.ParseFromString(data)
        return numpy_helper.to_optional(opt)
    t = onnx.TensorProto()
    t.ParseFromString(data)
    return numpy_helper.to_array(t)


def _light_data(model: onnx.ModelProto, path: str) -> tuple[list[Any], list[Any]]:
    inits = {i.name for i in model.graph.initializer}
    ins = []
    for x in model.graph.input:
        if x.name in inits:
            continue
        shape = tuple(d.dim_value if d.HasField("dim_value") else 1 for d in x.type.tensor_type.shape.dim)
        n = int(np.prod(shape))
        ins.append((np.arange(n).reshape(shape) / n).astype(np.float32))
    prefix = os.path.splitext(path)[0]
    outs = [_load_pb(f"{prefix}_output_{i}.pb", None) for i in range(len(model.graph.output))]
    return ins, outs


def _normalize(x: Any) -> Any:
    """A TensorProto in a data set becomes its array (as the ONNX runner's ``_normalize_tensor``)."""
    return numpy_helper.to_array(x) if isinstance(x, onnx.TensorProto) else x


def _node_op(name: str, model: onnx.ModelProto, by_name: dict[str, str]) -> str:
    nodes = model.graph.node
    if len(nodes) == 1:
        return nodes[0].op_type
    base = re.sub(r"_expanded(_ver\d+)?$", "", name)
    if base != name and base in by_name:
        return by_name[base]
    key = name.removeprefix("test_").replace("_", "").lower()
    for n in nodes:
        if key.startswith(n.op_type.lower()):
            return n.op_type
    return nodes[0].op_type if nodes else "?"


def node_cases() -> list[Case]:
    """The node test cases of the installed ``onnx`` (sorted by name)."""
    # deferred: onnx.backend.test.case.node imports every node test module (~1,900 cases), which
    # only the node suite needs
    from onnx.backend.test.case.node import collect_testcases

    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        raw = [(c, c.model) for c in sorted(collect_testcases(), key=lambda c: c.name) if c.model is not None]
    single = {c.name: m.graph.node[0].op_type for c, m in raw if len(m.graph.node) == 1}
    out = []
    for c, m in raw:
        doms = tuple(sorted({n.domain for n in m.graph.node}))
        sets = [([_normalize(x) for x in i], [_normalize(x) for x in o]) for i, o in c.data_sets or []]
        out.append(Case(c.name, "node", _node_op(c.name, m, single), float(c.rtol), float(c.atol), m, sets,
                        domains=doms))
    return out


def data_cases(suite: str) -> list[Case]:
    """The cases of one data suite (``simple``, ``pytorch-converted``, ``pytorch-operator``, ``light``)."""
    d = os.path.join(DATA_DIR, suite)
    out = []
    if suite == "light":
        for p in sorted(glob.glob(os.path.join(d, "light_*.onnx"))):
            out.append(Case(os.path.splitext(os.path.basename(p))[0], suite, "model:light", path=p))
        return out
    for name in sorted(os.listdir(d)):
        cd = os.path.join(d, name)
        if not os.path.isfile(os.path.join(cd, "model.onnx")):
            continue
        rtol, atol = 1e-3, 1e-7
        if os.path.exists(os.path.join(cd, "data.json")):
            with open(os.path.join(cd, "data.json")) as f:
                meta = json.load(f)
            rtol, atol = float(meta.get("rtol", rtol)), float(meta.get("atol", atol))
        out.append(Case(name, suite, f"model:{suite}", rtol, atol, path=cd))
    return out


def all_cases(suites: tuple[str, ...] = SUITES) -> list[Case]:
    """Every case of ``suites``, node cases first."""
    out: list[Case] = []
    for s in suites:
        out.extend(node_cases() if s == "node" else data_cases(s))
    return out
