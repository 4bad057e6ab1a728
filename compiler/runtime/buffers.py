"""Memory and progress markers of the runtime (``compiler.runtime.program`` binds every buffer with
:func:`aligned`; ``compiler.runtime.process`` reads the markers the child writes).

Buffers are 64-byte aligned (the width of an AVX-512 vector) and followed by :data:`SLACK` bytes:
the micro-kernels' vector tails may read, never store, up to a row past a buffer's end.
A child writes ``start <kernel>`` before each kernel and ``done`` at the end to ``DIR/progress``,
so that the parent can name the kernel that was running when the child crashed.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

SLACK = 4096  # bytes after every buffer: micro-kernel tails may read (never store) past a row


def aligned(nbytes: int, align: int = 64) -> np.ndarray:
    """A zeroed ``uint8`` array of ``nbytes`` whose data starts on an ``align``-byte boundary and
    is followed by :data:`SLACK` readable bytes."""
    raw = np.zeros(nbytes + align + SLACK, np.uint8)
    off = (-raw.ctypes.data) % align
    return raw[off:off + nbytes]


def running_kernel(d: Path) -> str | None:
    """The kernel that started last and did not finish, from ``d/progress``; ``None`` when no
    kernel had started or the run had finished."""
    p = d / "progress"
    if not p.exists():
        return None
    lines = p.read_text().splitlines()
    if "done" in lines or not lines:  # after "done": ONNX Runtime and the timing (AFTER_KERNELS markers)
        return None
    return lines[-1].removeprefix("start ")


#: markers a child writes after its kernels ran (after ``done``): the phase a crash then happened in
AFTER_KERNELS = ("onnxruntime", "timing")


def mark(d: Path, phase: str) -> None:
    """Append the marker ``phase`` (one of :data:`AFTER_KERNELS`) to ``d/progress``."""
    with open(d / "progress", "a") as f:
        f.write(phase + "\n")


def last_marker(d: Path) -> str | None:
    """The last line of ``d/progress``, or None."""
    p = d / "progress"
    lines = p.read_text().splitlines() if p.exists() else []
    return lines[-1] if lines else None
