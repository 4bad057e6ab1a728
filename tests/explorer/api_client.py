"""Calls of the explorer's HTTP API that many tests make, through Django's test client."""

from __future__ import annotations

from typing import Any

import onnx
from django.core.files.uploadedfile import SimpleUploadedFile


def upload_model(client: Any, filename: str, model: onnx.ModelProto) -> str:
    """POST ``model`` to /api/models as ``filename``; its id (asserts the upload was accepted)."""
    r = client.post("/api/models", {"model": SimpleUploadedFile(filename, model.SerializeToString())})
    assert r.status_code in (200, 201), r.content
    return r.json()["id"]


def post_compilation(client: Any, model_id: str, **body: Any) -> Any:
    """POST a compilation of ``model_id`` (pipeline O1 unless ``body`` names one); the response."""
    return client.post("/api/compilations", {"model": model_id, "pipeline": "O1", **body},
                       content_type="application/json")
