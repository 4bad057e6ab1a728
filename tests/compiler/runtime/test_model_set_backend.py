"""The model set end to end through the back end (issue 3, "Done when"): every model compiles for
host at O2, runs in the child process and matches ONNX Runtime (rtol 1e-3, atol 1e-4 x max|output|,
floor 1e-6). light_* models use seeded random weights (their own are all 0.02)."""

from __future__ import annotations

import pytest

import compiler
from compiler import samples
from tests.compiler.conftest import LIGHT_MODELS, WHEEL_SHAPES, wheel_model

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("name", LIGHT_MODELS + ["yolov8n", "ppocr_v4_det"])
def test_model_compiles_runs_and_verifies(name: str) -> None:
    if name in WHEEL_SHAPES:
        model, shapes = wheel_model(name), WHEEL_SHAPES[name]
    else:
        model, shapes = samples.randomized(name, seed=0), None
    r = compiler.compile(model, target="host", pipeline="O2", input_shapes=shapes, benchmark=False)
    assert r.ok, r.error
    (ver,) = r.of_type("model.verified")
    assert ver["passed"], ver
    assert len(r.of_type("kernel.compiled")) == len(r.of_type("kernel.lowered")) > 0
