"""Follow a compilation's events over the WebSocket, one line each, until the stream ends.

    .venv/bin/python scripts/watch.py k3x9q2ab [--server http://127.0.0.1:PORT] [--after SEQ] [--json]
    .venv/bin/python scripts/watch.py http://127.0.0.1:8000/c/k3x9q2ab

The compilation is its id or its link as the browser shows it (`http(s)://HOST:PORT/c/<id>`, also
`.../c/<id>/pass/3` and the API's `/api/compilations/<id>`); a link names its own server. Otherwise
the server is --server, by default http://127.0.0.1:$PORT, PORT as for `make run` (8000 when unset).
A connection that ends before the terminal event (dropped without a close frame, or closed after
frames were lost in a slow client's buffers) is resumed with ``?after=<last seq received>``, as the
browser does, so every event is printed exactly once. Exit status 0 when the stream ends with compile.finished, 1 with compile.failed, 2 on a
connection problem, an unknown compilation or a link that names no compilation.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import urllib.request
from urllib.parse import urlsplit

from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect

# WebSocket close codes of explorer/compilations/messages.py
CLOSE_BAD_REQUEST = 4400
CLOSE_NOT_FOUND = 4404
CLOSE_EVENT_TOO_LARGE = 4413  # the next event is over the WebSocket message limit: read it over HTTP
TERMINAL = ("compile.finished", "compile.failed")
MAX_RESUMES = 5  # reconnections after a dropped connection, each with ?after=<last seq received>

SUMMARY_KEYS = ("index", "name", "kernel", "duration_ms", "changed", "median_us", "prism_ms",
                "onnxruntime_ms", "ratio", "passed", "max_abs_error", "stage", "message")


def stored_events(server: str, comp_id: str, after: int, headers: dict | None) -> list[dict]:
    """Every stored event with seq > `after`, page by page from GET /api/compilations/<id>/events
    (no message size limit there)."""
    events: list[dict] = []
    while True:
        req = urllib.request.Request(f"{server}/api/compilations/{comp_id}/events?after={after}",
                                     headers={"Accept": "application/json", **(headers or {})})
        with urllib.request.urlopen(req, timeout=30) as resp:
            page = json.load(resp)
        events += page["events"]
        if not page["events"] or page.get("complete"):
            return events
        after = page["events"][-1]["seq"]


def summary(event: dict) -> str:
    parts = [f"{k}={event[k]}" for k in SUMMARY_KEYS if k in event]
    return f"{event['seq']:>5} {event['type']:<17} " + " ".join(parts)


# /c/<id>[/...] (the page and its sub-pages), /api/compilations/<id>[/events], /ws/compilations/<id>/,
# under an optional path prefix (a server behind a proxy at /prism/).
LINK_PATH = re.compile(r"^(?P<prefix>.*?)/(?:c|api/compilations|ws/compilations)/(?P<id>[A-Za-z0-9_-]+)(?:/.*)?$")


def parse_target(target: str, server: str | None) -> tuple[str | None, str]:
    """`(server, compilation id)` from an id or a link; raises ValueError naming what is wrong.

    A link's server (scheme, host, port and any path prefix) is used; `server` (an explicit
    --server) must then name the same one.
    """
    if "://" not in target and "/" not in target:
        return server, target
    # a link pasted without its scheme (127.0.0.1:8000/c/<id>) is http
    parts = urlsplit(target if "://" in target else "http://" + target)
    match = LINK_PATH.match(parts.path)
    if parts.scheme not in ("http", "https", "ws", "wss") or not parts.netloc or not match:
        raise ValueError(f"{target!r} is not a compilation link: expected "
                         "http(s)://HOST:PORT/c/<id> as the browser shows it")
    linked = f"{parts.scheme.replace('ws', 'http', 1)}://{parts.netloc}{match['prefix']}"
    if server is not None and server.rstrip("/") != linked:
        raise ValueError(f"the link is on {linked} but --server says {server.rstrip('/')}; give one of them")
    return linked, match["id"]


def main() -> int:
    default_server = f"http://127.0.0.1:{os.environ.get('PORT') or 8000}"
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("id", metavar="ID_OR_LINK",
                    help="the compilation's id (from POST /api/compilations) or its link, "
                         "http(s)://HOST:PORT/c/<id> as the browser shows it")
    ap.add_argument("--server",
                    help=f"the Prism server, http(s)://HOST:PORT (default: the link's, else {default_server}, "
                         "from the PORT environment variable as for `make run`)")
    ap.add_argument("--after", type=int, default=-1, metavar="SEQ",
                    help="only the events after this seq (default: all)")
    ap.add_argument("--json", action="store_true", help="print each event whole")
    ap.add_argument("--token", default=os.environ.get("PRISM_TOKEN"),
                    help="an API token (POST /api/auth/token; default $PRISM_TOKEN) for a private "
                         "compilation: without it a private compilation is not found")
    args = ap.parse_args()
    headers = {"Authorization": f"Token {args.token}"} if args.token else None
    try:
        server, comp_id = parse_target(args.id, args.server)
    except ValueError as exc:
        print(exc, file=sys.stderr)
        return 2
    server = (server or default_server).rstrip("/")
    args.id = comp_id
    base = server.replace("http", "ws", 1) + f"/ws/compilations/{comp_id}/?after="
    last = None
    drops = 0
    while True:
        after = last["seq"] if last is not None else args.after
        url = base + str(after)
        try:
            with connect(url, max_size=None, open_timeout=30, additional_headers=headers) as ws:
                for message in ws:
                    last = json.loads(message)
                    print(message if args.json else summary(last), flush=True)
            if last is None or last["type"] in TERMINAL or drops >= MAX_RESUMES:
                break
            # closed cleanly before the terminal event: the server closes only after it, so the
            # tail was lost in transit (a slow client's buffered frames); resume after the last one
            drops += 1
            print(f"connection closed after seq {last['seq']} before the end; resuming", file=sys.stderr)
            continue
        except ConnectionClosed as exc:
            code = exc.rcvd.code if exc.rcvd is not None else None
            if last is not None and last["type"] in TERMINAL:
                break  # every event arrived; only the closing handshake was cut short
            if code == CLOSE_NOT_FOUND:
                print(f"no compilation {args.id} on {server}", file=sys.stderr)
            elif code == CLOSE_EVENT_TOO_LARGE:
                for event in stored_events(server, comp_id, after if last is None else last["seq"], headers):
                    last = event
                    print(json.dumps(event) if args.json else summary(event), flush=True)
                if last is not None and last["type"] in TERMINAL:
                    break
                continue
            elif code == CLOSE_BAD_REQUEST:
                print(f"--after {args.after} is not a valid seq", file=sys.stderr)
            elif code is None and drops < MAX_RESUMES:
                # dropped without a close frame (a network drop, or the server aborting the close
                # handshake of a client that read slowly): resume after the last event received
                drops += 1
                print(f"connection dropped after seq {after if last is None else last['seq']}; resuming",
                      file=sys.stderr)
                continue
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
