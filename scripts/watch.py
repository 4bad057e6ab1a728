"""Follow a compilation's events over the WebSocket, one line each, until the stream ends.

    .venv/bin/python scripts/watch.py k3x9q2ab [--server http://127.0.0.1:8000] [--after SEQ] [--json]

Exit status 0 when the stream ends with compile.finished, 1 with compile.failed, 2 on a
connection problem.
"""

from __future__ import annotations

import argparse
import json
import sys

from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect

SUMMARY_KEYS = ("index", "name", "kernel", "duration_ms", "changed", "median_us", "prism_ms",
                "onnxruntime_ms", "ratio", "passed", "max_abs_error", "stage", "message")


def summary(event: dict) -> str:
    parts = [f"{k}={event[k]}" for k in SUMMARY_KEYS if k in event]
    return f"{event['seq']:>5} {event['type']:<17} " + " ".join(parts)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("id")
    ap.add_argument("--server", default="http://127.0.0.1:8000")
    ap.add_argument("--after", type=int, default=-1)
    ap.add_argument("--json", action="store_true", help="print each event whole")
    args = ap.parse_args()
    url = args.server.replace("http", "ws", 1).rstrip("/") + f"/ws/compilations/{args.id}/?after={args.after}"
    last = None
    try:
        with connect(url, max_size=None, open_timeout=30) as ws:
            for message in ws:
                last = json.loads(message)
                print(message if args.json else summary(last), flush=True)
    except ConnectionClosed as exc:
        print(f"connection closed: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"cannot connect to {url}: {exc}", file=sys.stderr)
        return 2
    if last is None:
        print("no events after seq", args.after, file=sys.stderr)
    return 0 if last is None or last["type"] == "compile.finished" else 1


if __name__ == "__main__":
    sys.exit(main())
