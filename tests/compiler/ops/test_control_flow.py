"""If/Loop/Scan: bodies imported as subgraphs and typed; output types checked against the ONNX
node test cases' reference outputs (a data-dependent dim may stay symbolic, never wrong)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from compiler.frontend import import_model
from compiler.ir import Graph
from compiler.ops import infer_graph
from tests.compiler.ops.nodecases import bind_inputs, node_cases

CASES = ["test_if", "test_loop11", "test_scan_sum", "test_scan9_sum", "test_scan9_multi_state"]


def _case(name: str):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return next(c for c in node_cases() if c.name == name)


@pytest.mark.parametrize("name", CASES)
def test_control_flow_types_match_reference(name: str) -> None:
    case = _case(name)
    ins, outs = case.data_sets[0]
    m = bind_inputs(case.model, ins)
    assert m is not None
    for o in m.opset_import:
        o.version = min(o.version, 21)
    g = import_model(m)
    infer_graph(g)
    node = g.nodes[0]
    for sub in node.subgraphs():
        assert isinstance(sub, Graph) and sub.parent is g
        assert all(v.type is not None for n in sub.nodes for v in n.outputs)
    for v, exp in zip(g.outputs, outs, strict=True):
        assert isinstance(exp, np.ndarray)
        assert v.type.dtype == exp.dtype and len(v.type.shape) == exp.ndim
        for d, e in zip(v.type.shape, exp.shape, strict=True):
            assert d == e or isinstance(d, str), f"{v.name}: {v.type} vs {exp.shape}"
    if name != "test_loop11":
        assert [v.type.shape for v in g.outputs] == [tuple(e.shape) for e in outs]
