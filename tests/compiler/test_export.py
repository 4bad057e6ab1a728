"""Export of the IR back to ONNX: onnx.checker accepts it and ONNX Runtime's outputs match the
original model's (ONNX Runtime on the original is the oracle)."""

from __future__ import annotations

import numpy as np
import onnx
import pytest

import compiler
from compiler.export import PRISM_DOMAIN, export_model
from compiler.frontend import load
from compiler.passes.check import compare, random_inputs, run_ort
from compiler.samples import randomized
from tests.compiler.conftest import WHEEL_SHAPES, wheel_model


def _roundtrip(proto: onnx.ModelProto, graph) -> onnx.ModelProto:
    model = export_model(graph)
    onnx.checker.check_model(model, full_check=False)
    feeds = random_inputs(graph, seed=1)
    want = run_ort(proto, feeds)
    got = run_ort(model, feeds)
    problem = compare(got, want, [v.name for v in graph.outputs])
    assert problem is None, problem
    return model


def test_imported_squeezenet_exports_and_matches(squeezenet_path) -> None:
    proto = randomized(squeezenet_path, seed=0)
    graph, _ = load(proto)
    _roundtrip(proto, graph)


def test_original_squeezenet_exports_and_matches(squeezenet_path) -> None:
    proto = onnx.load(str(squeezenet_path))
    graph, _ = load(squeezenet_path)
    _roundtrip(proto, graph)


def test_fused_squeezenet_exports_groups_as_functions(squeezenet_path) -> None:
    proto = randomized(squeezenet_path, seed=0)
    r = compiler.compile(proto, pipeline="O2", backend=False)
    assert r.ok, r.error
    model = _roundtrip(proto, r.graph)
    assert model.functions and all(f.domain == PRISM_DOMAIN for f in model.functions)
    assert model.ir_version == 10
    calls = [n for n in model.graph.node if n.domain == PRISM_DOMAIN]
    assert len(calls) == len(r.graph.groups())


@pytest.mark.parametrize("name", ["yolov8n", "silero_vad"])
def test_wheel_models_export_after_o2(name: str) -> None:
    path = wheel_model(name)
    proto = onnx.load(str(path))
    r = compiler.compile(path, pipeline="O2", input_shapes=WHEEL_SHAPES[name], backend=False)
    assert r.ok, r.error
    _roundtrip(proto, r.graph)


def test_randomized_weights_are_seeded_and_finite(light_dir) -> None:
    a = randomized(light_dir / "light_resnet50.onnx", seed=3)
    b = randomized(light_dir / "light_resnet50.onnx", seed=3)
    assert a.SerializeToString() == b.SerializeToString()
    assert not any(n.op_type == "ConstantOfShape" for n in a.graph.node)
    x = np.random.default_rng(0).standard_normal((1, 3, 224, 224)).astype(np.float32)
    out = run_ort(a, {"gpu_0/data_0": x})[0]
    assert np.isfinite(out).all()
    # the original's output is uniform (0.001 per class); the randomized one is not
    assert out.std() > 1e-4
    orig = onnx.load(str(light_dir / "light_resnet50.onnx"))
    assert [n.op_type for n in a.graph.node] == [n.op_type for n in orig.graph.node if n.op_type != "ConstantOfShape"]
