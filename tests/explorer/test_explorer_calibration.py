"""Calibration data for the quantize pass through the HTTP API: upload, use in a compile request, and
the 400s for a file that is not an .npz, an unknown id, and arrays that do not match the model's inputs."""

from __future__ import annotations

import io

import numpy as np
import pytest


def _npz(**arrays: np.ndarray) -> io.BytesIO:
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    buf.seek(0)
    buf.name = "cal.npz"
    return buf


@pytest.fixture
def model_id(client) -> str:
    r = client.post("/api/samples/light_squeezenet/model")
    assert r.status_code in (200, 201), r.content
    return r.json()["id"]


def _compile(client, model_id: str, cal: str):  # type: ignore[no-untyped-def]
    return client.post("/api/compilations", {"model": model_id, "pipeline": "O2,quantize{dtype=int8}",
                                             "options": {"calibration": cal}}, content_type="application/json")


@pytest.mark.django_db
def test_calibration_upload_and_compile_request(client, model_id):
    good = np.random.default_rng(0).standard_normal((2, 1, 3, 224, 224)).astype(np.float32)
    r = client.post("/api/calibrations", {"data": _npz(data_0=good)})
    assert r.status_code in (200, 201), r.content  # 200 when an earlier run stored the same bytes
    body = r.json()
    assert body["arrays"] == {"data_0": {"shape": [2, 1, 3, 224, 224], "dtype": "float32"}}
    assert client.post("/api/calibrations", {"data": _npz(data_0=good)}).status_code == 200
    r = _compile(client, model_id, body["id"])
    assert r.status_code == 201, r.content
    assert "quantize{dtype=int8}" in r.json()["pipeline"]


@pytest.mark.django_db
def test_calibration_errors_are_400_naming_what_is_wrong(client, model_id):
    r = client.post("/api/calibrations", {"data": io.BytesIO(b"not an npz")})
    assert r.status_code == 400 and "not a readable .npz" in r.json()["error"]
    r = _compile(client, model_id, "0" * 64)
    assert r.status_code == 400 and "unknown calibration data" in r.json()["error"]
    bad = client.post("/api/calibrations", {"data": _npz(data_0=np.zeros((2, 1, 3, 32, 32), np.float32))}).json()
    r = _compile(client, model_id, bad["id"])
    assert r.status_code == 400
    err = r.json()["error"]
    assert "input 'data_0' has shape [2, 1, 3, 32, 32]" in err and "\n" not in err
    wrong = client.post("/api/calibrations", {"data": _npz(images=np.zeros((1, 3, 224, 224), np.float32))}).json()
    r = _compile(client, model_id, wrong["id"])
    assert r.status_code == 400 and "'images' names no graph input" in r.json()["error"]
