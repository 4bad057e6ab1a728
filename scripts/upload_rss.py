"""Peak resident memory of the web server for one accepted upload (issue 17 item 2).

    .venv/bin/python scripts/upload_rss.py [--mib 150] [--uploads 1]

Starts a real daphne (tests/explorer/prism_stack.py, no workers, a SQLite file and Redis DB 15 in a
temporary folder), writes a valid ONNX model of about `--mib` MiB (one float32 initializer of random
values feeding an Add), uploads it `--uploads` times (distinct bytes each time) with httpx streaming
it from the file, and prints the web server's peak resident memory (VmHWM, /proc) before the first
upload and after the last, and the difference. Not part of the test suite (it takes a minute); the
test suite's bound is tests/explorer/test_stack_uploads.py::test_an_accepted_upload_is_not_held_in_memory.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests" / "explorer"))
os.environ.setdefault("DJANGO_SECRET_KEY", "prism-upload-rss-" + os.urandom(8).hex())
os.environ.setdefault("PRISM_UPLOAD_RATE", "100000/min")

from prism_stack import Stack  # noqa: E402


def status_kib(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise KeyError(field)


def write_model(path: Path, mib: float, seed: int) -> int:
    """A valid ONNX model: y = x + W with W a float32 initializer of `mib` MiB; returns its size."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    n = int(mib * 2**20) // 4
    w = numpy_helper.from_array(np.random.default_rng(seed).standard_normal(n, dtype=np.float32), "W")
    graph = helper.make_graph([helper.make_node("Add", ["x", "W"], ["y"])], "big",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [n])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [n])], [w])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path.stat().st_size


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mib", type=float, default=150)
    ap.add_argument("--uploads", type=int, default=1)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="prism-upload-rss-") as tmp, \
            Stack.running(Path(tmp), workers=()) as stack:
        pid = stack.procs["web"].pid
        before_rss, before_hwm = status_kib(pid, "VmRSS"), status_kib(pid, "VmHWM")
        took = []
        for i in range(args.uploads):
            path = Path(tmp) / f"big{i}.onnx"
            size = write_model(path, args.mib, seed=i)
            t0 = time.monotonic()
            stack.upload(path)
            took.append(time.monotonic() - t0)
            path.unlink()
        after_rss, after_hwm = status_kib(pid, "VmRSS"), status_kib(pid, "VmHWM")
    print(f"upload of {size / 2**20:.1f} MiB x {args.uploads}: {', '.join(f'{t:.1f}' for t in took)} s")
    print(f"web server peak RSS (VmHWM) {before_hwm / 1024:.0f} MiB before -> {after_hwm / 1024:.0f} MiB after "
          f"(+{(after_hwm - before_hwm) / 1024:.0f} MiB); RSS now {before_rss / 1024:.0f} -> {after_rss / 1024:.0f} MiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
