"""``compiler.samples``: the ``light_*`` samples every entry point serves (``fetch``: the CLI, the API,
the explorer's gallery) carry seeded random weights, so that their outputs depend on the input and a
comparison with ONNX Runtime means something. Outputs here come from ONNX Runtime."""

from __future__ import annotations

import hashlib

import numpy as np
import onnx
import onnxruntime as ort
import pytest

from compiler import samples


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("PRISM_MODEL_CACHE", str(tmp_path))
    return tmp_path


def _run(path, x: np.ndarray) -> np.ndarray:
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return sess.run(None, {sess.get_inputs()[0].name: x})[0]


def test_the_wheel_light_model_gives_every_input_the_same_output():
    """Why the samples are randomized: the onnx wheel's file, weights all 0.02."""
    wheel = samples._light_path("light_squeezenet")
    rng = np.random.default_rng(0)
    a, b = (_run(wheel, rng.standard_normal((1, 3, 224, 224)).astype(np.float32)) for _ in range(2))
    np.testing.assert_array_equal(a, b)


def test_the_light_sample_has_random_weights_and_input_dependent_outputs(cache):
    path = samples.fetch("light_squeezenet")
    assert path.parent == cache and path.is_file()
    m = onnx.load(str(path))
    assert not any(n.op_type == "ConstantOfShape" for n in m.graph.node)
    rng = np.random.default_rng(0)
    a, b = (_run(path, rng.standard_normal((1, 3, 224, 224)).astype(np.float32)) for _ in range(2))
    assert a.shape == (1, 1000, 1, 1) and np.abs(a - b).max() > 1e-3
    assert a.std() > 1e-3  # the softmax is not saturated either (randomized() calibrates the logits)


def test_the_light_sample_is_the_same_bytes_every_time(cache):
    first = samples.fetch("light_squeezenet").read_bytes()
    samples.fetch("light_squeezenet").unlink()
    again = samples.fetch("light_squeezenet").read_bytes()
    assert hashlib.sha256(first).digest() == hashlib.sha256(again).digest()
    assert samples.randomized("light_squeezenet", samples.LIGHT_SEED).SerializeToString() == first


def test_the_listing_explains_the_weights_in_words():
    entry = next(s for s in samples.list_samples() if s["name"] == "light_squeezenet")
    assert entry["description"].startswith("SqueezeNet image classifier")
    assert "random weights" in entry["description"] and "randomized()" not in entry["description"]
    assert "seeded random" in entry["source"]


def test_the_listing_gives_each_card_a_short_title_and_the_kind_of_weights():
    listed = {s["name"]: s for s in samples.list_samples()}
    assert listed["light_resnet50"]["title"] == "ResNet-50 image classifier"
    assert listed["light_resnet50"]["weights"] == "seeded random weights"
    assert listed["yolov8n"]["weights"] == "trained weights"
    titles = [s["title"] for s in listed.values()]
    assert len(set(titles)) == len(titles) and all(len(t) < 60 for t in titles)
