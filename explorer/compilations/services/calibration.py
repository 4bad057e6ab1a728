"""Calibration data for the ``quantize`` pass: an uploaded ``.npz`` (one array per graph input, samples
along a leading axis; ``compiler.quant.calibrate``), stored once per content under
``MEDIA_ROOT/calibration/<sha256>.npz`` and named by its sha256 in a compile request's
``options.calibration``. Whether its arrays fit a model is checked with the compile request
(``compiler.validate_request``), which names the input that does not match.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
import zipfile
from collections.abc import Iterable
from pathlib import Path

import numpy as np
from django.conf import settings

from explorer.compilations.services.uploads import UploadTooLarge, max_upload_bytes


class InvalidCalibration(Exception):
    """The bytes are not a readable ``.npz`` of numeric arrays; the message says why (one line)."""


def _dir() -> Path:
    d = Path(settings.MEDIA_ROOT) / "calibration"
    d.mkdir(parents=True, exist_ok=True)
    return d


def path_for(sha256: str) -> Path | None:
    """The stored file of calibration data ``sha256``, or None when there is none."""
    if len(sha256) != 64 or any(c not in "0123456789abcdef" for c in sha256):
        return None
    p = _dir() / f"{sha256}.npz"
    return p if p.is_file() else None


def describe(path: Path) -> dict[str, dict]:
    """``{array name: {"shape": [...], "dtype": str}}`` from the ``.npy`` headers of the archive's
    members (NumPy's ``.npy`` format: magic, version, header dict; the data is never read, so a
    compressed archive cannot expand in the web server's memory). Raises InvalidCalibration for a file
    that is not an ``.npz``, no arrays, a non-numeric array, or arrays holding more than
    ``PRISM_MAX_UPLOAD_BYTES`` uncompressed (the bound an uncompressed upload has: the quantize pass
    reads them whole on the worker)."""
    out: dict[str, dict] = {}
    total = 0
    try:
        with zipfile.ZipFile(path) as zf:
            for info in zf.infolist():
                if not info.filename.endswith(".npy"):
                    continue
                with zf.open(info) as f:
                    version = np.lib.format.read_magic(f)
                    read = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
                    shape, _, dtype = read(f)
                if dtype.hasobject:
                    raise InvalidCalibration(f"calibration array {info.filename[:-4]!r} holds Python objects, not numbers")
                out[info.filename[:-4]] = {"shape": [int(d) for d in shape], "dtype": str(dtype)}
                total += int(np.prod(shape, dtype=object)) * dtype.itemsize
    except (OSError, ValueError, zipfile.BadZipFile, EOFError) as e:
        raise InvalidCalibration(f"calibration data is not a readable .npz file ({' '.join(str(e).split())[:200]})") from None
    if not out:
        raise InvalidCalibration("calibration data holds no arrays")
    for k, v in out.items():
        if v["dtype"][0] not in "fiub" and not v["dtype"].startswith(("float", "int", "uint", "bool")):
            raise InvalidCalibration(f"calibration array {k!r} is {v['dtype']}, not numeric")
    limit = max_upload_bytes()
    if total > limit:
        raise InvalidCalibration(f"calibration data holds {total} bytes of arrays uncompressed, over the limit of "
                                 f"{limit} bytes (PRISM_MAX_UPLOAD_BYTES)")
    return out


def store(chunks: Iterable[bytes], *, size: int | None = None) -> tuple[str, dict[str, dict], bool]:
    """Store uploaded calibration data: ``(sha256, arrays, created)``. Raises UploadTooLarge over
    ``PRISM_MAX_UPLOAD_BYTES`` and InvalidCalibration for a file that is not an ``.npz``."""
    limit = max_upload_bytes()
    if size is not None and size > limit:
        raise UploadTooLarge(f"calibration data is too large ({size} bytes): the limit is {limit} bytes")
    digest, written = hashlib.sha256(), 0
    fd, tmp = tempfile.mkstemp(dir=_dir(), suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as out:
            for chunk in chunks:
                written += len(chunk)
                if written > limit:
                    raise UploadTooLarge(f"calibration data is too large: the limit is {limit} bytes")
                digest.update(chunk)
                out.write(chunk)
        arrays = describe(Path(tmp))
        sha = digest.hexdigest()
        dest = _dir() / f"{sha}.npz"
        created = not dest.exists()
        if created:
            os.replace(tmp, dest)
        return sha, arrays, created
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
