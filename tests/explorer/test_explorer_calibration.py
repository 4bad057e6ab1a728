"""Calibration data for the quantize pass through the HTTP API: upload, use in a compile request, and
the 400s for a file that is not an .npz, an unknown id, arrays that do not match the model's inputs, and
archives over the limit uncompressed (read from their headers, never expanded)."""

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


def _compressed(**arrays: np.ndarray) -> io.BytesIO:
    buf = io.BytesIO()
    np.savez_compressed(buf, **arrays)
    buf.seek(0)
    buf.name = "cal.npz"
    return buf


@pytest.mark.django_db
def test_a_compressed_archive_is_described_without_expanding_it(client, settings):
    """A compressed archive of zeros (a zip that expands about 1000x) is described from
    its .npy headers; over PRISM_MAX_UPLOAD_BYTES uncompressed it is refused naming the limit."""
    import tracemalloc

    settings.PRISM_MAX_UPLOAD_BYTES = 64 << 20
    zeros = np.zeros((16, 1 << 20), np.float32)  # 64 MiB uncompressed: at the limit
    small = _compressed(data_0=zeros)
    assert len(small.getvalue()) < 1 << 20
    tracemalloc.start()
    r = client.post("/api/calibrations", {"data": small})
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert r.status_code in (200, 201), r.content
    assert r.json()["arrays"] == {"data_0": {"shape": [16, 1 << 20], "dtype": "float32"}}
    assert peak < 16 << 20, peak  # np.load would have held the 64 MiB array
    over = _compressed(data_0=zeros, more=np.zeros(1, np.float32))
    r = client.post("/api/calibrations", {"data": over})
    assert r.status_code == 400
    assert r.json()["error"] == (f"calibration data holds {(64 << 20) + 4} bytes of arrays uncompressed, over the "
                                 f"limit of {64 << 20} bytes (PRISM_MAX_UPLOAD_BYTES)")
    r = client.post("/api/calibrations", {"data": _npz(o=np.array([{"a": 1}], dtype=object))})
    assert r.status_code == 400 and "'o' holds Python objects" in r.json()["error"], r.content
