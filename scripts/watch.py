"""Follow a compilation's events over the WebSocket, one line each, until the stream ends.

    .venv/bin/python scripts/watch.py k3x9q2ab [--server http://127.0.0.1:PORT] [--after SEQ] [--json]

The server defaults to http://127.0.0.1:$PORT, PORT as for `make run` (8000 when unset).
Exit status 0 when the stream ends with compile.finished, 1 with compile.failed, 2 on a
connection problem or an unknown compilation.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect

# WebSocket close codes of explorer/compilations/messages.py
CLOSE_BAD_REQUEST = 4400
CLOSE_NOT_FOUND = 4404

SUMMARY_KEYS = ("index", "name", "kernel", "duration_ms", "changed", "median_us", "prism_ms",
                "onnxruntime_ms", "ratio", "passed", "max_abs_error", "stage", "message")


def summary(event: dict) -> str:
    parts = [f"{k}={event[k]}" for k in SUMMARY_KEYS if k in event]
    return f"{event['seq']:>5} {event['type']:<17} " + " ".join(parts)


def main() -> int:
    default_server = f"http://127.0.0.1:{os.environ.get('PORT') or 8000}"
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("id", help="the compilation's id (from POST /api/compilations)")
    ap.add_argument("--server", default=default_server,
                    help="the Prism server, http(s)://HOST:PORT (default: %(default)s, from the PORT "
                         "environment variable as for `make run`)")
    ap.add_argument("--after", type=int, default=-1, metavar="SEQ",
                    help="only the events after this seq (default: all)")
    ap.add_argument("--json", action="store_true", help="print each event whole")
    args = ap.parse_args()
    server = args.server.rstrip("/")
    url = server.replace("http", "ws", 1) + f"/ws/compilations/{args.id}/?after={args.after}"
    last = None
    try:
        with connect(url, max_size=None, open_timeout=30) as ws:
            for message in ws:
                last = json.loads(message)
                print(message if args.json else summary(last), flush=True)
    except ConnectionClosed as exc:
        code = exc.rcvd.code if exc.rcvd is not None else None
        if code == CLOSE_NOT_FOUND:
            print(f"no compilation {args.id} on {server}", file=sys.stderr)
        elif code == CLOSE_BAD_REQUEST:
            print(f"--after {args.after} is not a valid seq", file=sys.stderr)
        else:
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
