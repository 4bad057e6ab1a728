"""Registering ONNX models: from an upload or from one of the compiler's samples.

A model is stored once per content (sha256); registering the same bytes again returns the
existing model. Metadata comes from `compiler.inspect_model` (the ONNX protobuf, opset, IO), read in a
child process when the file is large (`reading`: the web server's memory does not grow with the model).
Who registered it, under which file name and visibility, is one `ModelUpload` per owner
(`record_upload`): the bytes are shared, who may see them is not.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from collections.abc import Iterable
from pathlib import Path

from django.conf import settings
from django.db import IntegrityError, transaction

from explorer.compilations.models import ModelUpload, UploadedModel, model_upload_path
from explorer.compilations.services.reading import inspect_model
from explorer.compilations.visibility import DEFAULT, signed_in


class UploadTooLarge(Exception):
    """The upload is over `PRISM_MAX_UPLOAD_BYTES`."""


class InvalidModel(Exception):
    """The bytes are not a valid ONNX model; the message names the problem (one line)."""


def max_upload_bytes() -> int:
    return int(settings.PRISM_MAX_UPLOAD_BYTES)


def too_large_message(size: int | None = None) -> str:
    limit = max_upload_bytes()
    got = f" ({size} bytes)" if size is not None else ""
    return f"model file is too large{got}: the limit is {limit} bytes ({limit / 2**20:.0f} MiB)"


def register_upload(chunks: Iterable[bytes], *, name: str, size: int | None = None, owner=None,
                    visibility: str | None = None) -> tuple[UploadedModel, bool]:
    """Store an uploaded model and return `(model, created)` (`created`: these bytes are new).

    Args:
        chunks: the file's bytes, in order.
        name: the client's file name (only its base name is kept, for display).
        size: the declared size in bytes, checked against the limit before reading.
        owner, visibility: who uploads it and who may see it (`record_upload`).
    Raises:
        UploadTooLarge: over `PRISM_MAX_UPLOAD_BYTES`.
        InvalidModel: not ONNX, truncated or invalid (message from `compiler.inspect_model`).
    """
    limit = max_upload_bytes()
    if size is not None and size > limit:
        raise UploadTooLarge(too_large_message(size))
    tmp_dir = Path(settings.MEDIA_ROOT) / "tmp"
    tmp_dir.mkdir(parents=True, exist_ok=True)
    digest = hashlib.sha256()
    written = 0
    fd, tmp_name = tempfile.mkstemp(dir=tmp_dir, suffix=".onnx")
    try:
        with os.fdopen(fd, "wb") as out:
            for chunk in chunks:
                written += len(chunk)
                if written > limit:
                    raise UploadTooLarge(too_large_message())
                digest.update(chunk)
                out.write(chunk)
        model, created = _register_file(
            Path(tmp_name), digest.hexdigest(), written, name=name, source="upload", move=True
        )
    finally:
        Path(tmp_name).unlink(missing_ok=True)
    record_upload(model, owner, name=name, visibility=visibility)
    return model, created


def record_upload(model: UploadedModel, owner, *, name: str, visibility: str | None = None) -> ModelUpload:
    """Note that `owner` (a user; None or anonymous: nobody) registered these bytes under `name`.

    One upload per signed-in owner: registering again renames it and, when `visibility` is given,
    changes its visibility (None keeps it; a new one gets the default, unlisted). Anonymous
    uploads are one per visibility."""
    name = os.path.basename(name)[:255] or "model.onnx"
    if not signed_in(owner):
        upload, _ = ModelUpload.objects.get_or_create(model=model, owner=None, visibility=visibility or DEFAULT,
                                                      defaults={"name": name})
        return upload
    upload = ModelUpload.objects.filter(model=model, owner=owner).first()
    if upload is None:
        return ModelUpload.objects.create(model=model, owner=owner, name=name, visibility=visibility or DEFAULT)
    upload.name = name
    upload.visibility = visibility or upload.visibility
    upload.save(update_fields=["name", "visibility"])
    return upload


def set_upload_visibility(model: UploadedModel, owner, visibility: str) -> bool:
    """Change the visibility of `owner`'s own upload of `model`; False when it has none."""
    return ModelUpload.objects.filter(model=model, owner=owner).update(visibility=visibility) > 0


def register_sample(sample_name: str, owner=None) -> tuple[UploadedModel, bool]:
    """Register one of `compiler.samples` as an uploaded model, fetching it if needed; `owner`'s
    upload of it is unlisted unless it made it otherwise (`record_upload`).

    Raises:
        KeyError: no such sample.
        InvalidModel: the sample could not be fetched or read (message says why).
    """
    from compiler import samples  # thread-safe: tests/compiler/test_api_threads.py

    entry = next((s for s in samples.list_samples() if s["name"] == sample_name), None)
    if entry is None:
        raise KeyError(sample_name)
    try:
        path = Path(samples.fetch(sample_name))
    except Exception as exc:  # noqa: BLE001 - a download or unpack failure: tell the user which
        raise InvalidModel(f"sample {sample_name!r} could not be fetched: {exc}") from exc
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    model, created = _register_file(
        path, digest.hexdigest(), path.stat().st_size, name=f"{sample_name}.onnx",
        source=f"sample:{sample_name}",
    )
    shapes = entry.get("input_shapes")
    if shapes and model.default_input_shapes != shapes:
        model.default_input_shapes = shapes
        model.save(update_fields=["default_input_shapes"])
    record_upload(model, owner, name=f"{sample_name}.onnx")
    return model, created


def _register_file(
    path: Path, sha256: str, size: int, *, name: str, source: str, move: bool = False
) -> tuple[UploadedModel, bool]:
    existing = UploadedModel.objects.filter(sha256=sha256).first()
    if existing is not None:
        return existing, False
    import compiler  # thread-safe: tests/compiler/test_api_threads.py

    try:
        meta = inspect_model(path)
    except compiler.CompileError as exc:
        # the compiler's import errors name the problem already ("model is empty (0 bytes)",
        # "not a valid ONNX model: the protobuf cannot be parsed ...", "not an ONNX model: ...", or
        # "reading the model needs more memory than the limit of N bytes (PRISM_INSPECT_...)")
        raise InvalidModel(exc.message) from exc
    model = UploadedModel(
        sha256=sha256,
        name=os.path.basename(name)[:255] or "model.onnx",
        graph_name=str(meta.get("name") or "")[:255],
        size=size,
        opset=int(meta.get("opset") or 0),
        ir_version=int(meta.get("ir_version") or 0),
        producer=str(meta.get("producer") or "")[:255],
        node_count=int(meta.get("node_count") or 0),
        inputs=with_value_uses(meta.get("inputs", []), meta.get("value_inputs", [])),
        outputs=meta.get("outputs", []),
        source=source,
    )
    store_file(path, model, move=move)
    try:
        with transaction.atomic():
            model.save()
    except IntegrityError:  # the same bytes registered concurrently: the same file, keep the first
        return UploadedModel.objects.get(sha256=sha256), False
    return model, True


def with_value_uses(inputs: list[dict], value_inputs: list[dict]) -> list[dict]:
    """The model's inputs, those worth binding to a value (`compiler.inspect_model`'s `value_inputs`:
    small integer inputs reaching an If condition, a trip count or a shape slot) with their `value_uses`
    (["the condition of If 'sel'", ...]), which the compile form offers a value field for."""
    uses = {v["name"]: v["uses"] for v in value_inputs}
    return [{**i, "value_uses": uses[i["name"]]} if i["name"] in uses else i for i in inputs]


def store_file(path: Path, model: UploadedModel, *, move: bool) -> None:
    """Put the model's bytes at its content-addressed name under MEDIA_ROOT (moved from a temporary
    upload, copied from a sample). Same name, same bytes: replacing an existing file is harmless."""
    relative = model_upload_path(model, "")
    final = Path(settings.MEDIA_ROOT) / relative
    final.parent.mkdir(parents=True, exist_ok=True)
    if move:
        os.replace(path, final)
    else:
        tmp = final.with_suffix(f".{os.getpid()}.tmp")
        shutil.copyfile(path, tmp)
        os.replace(tmp, final)
    model.file.name = relative
