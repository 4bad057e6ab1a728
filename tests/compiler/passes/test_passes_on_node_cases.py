"""The O2 graph passes on every ONNX backend node test case that the importer accepts: no pass
raises, the verifier holds after each pass, and the exported result matches ONNX Runtime on the
original model (the conformance cases' own expected outputs are not used: ONNX Runtime itself
differs from them on a few cases, e.g. Resize with align_corners)."""

import warnings

import numpy as np
import onnxruntime as ort
import pytest
from onnx.backend.test.case.node import collect_testcases

from compiler.export import export_model
from compiler.frontend import load
from compiler.passes import REGISTRY, load_passes
from compiler.passes.base import PassContext
from compiler.passes.verify import verify_graph

O2 = ["fold-qdq", "fold-constants", "simplify", "fold-batchnorm", "eliminate-common-subexpressions",
      "eliminate-dead-code", "fuse-siblings", "fuse-layer-norm", "fuse-ops", "plan-memory"]


def _session(model):
    so = ort.SessionOptions()
    so.log_severity_level = 4
    so.intra_op_num_threads = 1
    return ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])


def _cases() -> list:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return [c for c in collect_testcases(None) if c.model is not None and c.data_sets]


def _every_op_sample(cases: list) -> list:
    """For every op (the op type of the case model's first node) its first and middle case by name,
    the rule of the conformance ``--subset ci`` sample (``compiler.conformance.select_subset``)."""
    by_op: dict[str, list] = {}
    for c in sorted(cases, key=lambda c: c.name):
        by_op.setdefault(c.model.graph.node[0].op_type if c.model.graph.node else "", []).append(c)
    out = []
    for op_cases in by_op.values():
        out += [op_cases[0]] + ([op_cases[len(op_cases) // 2]] if len(op_cases) > 1 else [])
    return out


def test_o2_passes_on_every_ops_sample_of_the_node_cases():
    """CI's part of the sweep below (``make test-all`` runs the whole of it): two cases of every op."""
    sample = _every_op_sample(_cases())
    assert len({c.model.graph.node[0].op_type for c in sample if c.model.graph.node}) > 150
    assert _check_o2(sample) > 250


@pytest.mark.slow
def test_o2_passes_on_onnx_node_cases():
    assert _check_o2(_cases()) > 700


def _check_o2(cases: list) -> int:
    """O2 pass by pass on each case; fails listing every case whose pass raised, broke the verifier or
    changed the outputs (ONNX Runtime on the exported result vs on the original model); returns how
    many cases were compared."""
    load_passes()
    checked, failures = 0, []
    for case in cases:
        try:
            graph, _ = load(case.model)
            verify_graph(graph)
        except Exception:
            continue  # not importable or not valid IR after import: the importer's tests cover that
        ctx = PassContext()
        for name in O2:
            try:
                REGISTRY[name]().run(graph, ctx)
                verify_graph(graph)
            except Exception as exc:  # noqa: BLE001 - collected and reported below
                failures.append(f"{case.name}: {name}: {type(exc).__name__}: {exc}")
                break
        else:
            try:
                want_sess, got_sess = _session(case.model), _session(export_model(graph))
            except Exception:
                continue  # ONNX Runtime cannot run this op/type at all
            inputs = case.data_sets[0][0]
            feeds = {i.name: x for i, x in zip(want_sess.get_inputs(), inputs, strict=False)}
            try:
                want = want_sess.run(None, feeds)
            except Exception:
                continue
            got = got_sess.run(None, feeds)
            for a, b in zip(got, want, strict=True):
                if b.dtype.kind in "fc":
                    if not np.allclose(a, b, rtol=1e-5, atol=1e-6, equal_nan=True):
                        failures.append(f"{case.name}: outputs differ after O2")
                elif b.dtype.kind != "O" and not np.array_equal(a, b):
                    failures.append(f"{case.name}: outputs differ after O2")
            checked += 1
    assert not failures, "\n".join(failures)
    return checked
