"""A real Prism stack for integration tests: a daphne web server and Celery worker processes, as
subprocesses, against the real Redis and a SQLite file database that all of them share.

Isolation from a dev server: Redis DB 15 (PRISM_TEST_STACK_REDIS_URL overrides), a stack prefix
(PRISM_STACK: every Redis key) and a Celery queue unique to this run, a temporary var dir. Every process runs in its own process
group, so that killing a worker kills its pool processes too, and `close()` leaves nothing behind.
"""

from __future__ import annotations

import atexit
import json
import os
import re
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import closing, contextmanager
from pathlib import Path

import httpx
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect

from explorer.compilations.messages import CLOSE_EVENT_TOO_LARGE

REPO = Path(__file__).resolve().parents[2]
TERMINAL = ("compile.finished", "compile.failed")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


_TEMPLATE: list[Path] = []  # this process's migrated empty SQLite database, made by the first Stack


def _migrate(env: dict[str, str]) -> None:
    subprocess.run([sys.executable, "manage.py", "migrate", "--noinput", "-v", "0"], cwd=REPO, env=env,
                   check=True, timeout=120)


def _copy_migrated_sqlite(dest: Path) -> None:
    """Makes ``dest`` an empty SQLite database with every migration applied: a copy (sqlite3's backup
    API, which also carries what a WAL file holds) of one ``manage.py migrate`` run once per test
    process into a template. Each migrate is a Django start (5-20 s on a loaded 2-core machine) and
    about a dozen stacks start in a full run. The template holds the schema only: no rows stacks share."""
    if not _TEMPLATE:
        tmp = Path(tempfile.mkdtemp(prefix="prism-stack-template-"))
        atexit.register(shutil.rmtree, tmp, True)
        path = tmp / "migrated.sqlite3"
        _migrate({**os.environ, "DJANGO_SETTINGS_MODULE": "explorer.settings", "DATABASE_URL": f"sqlite:///{path}",
                  "PRISM_VAR_DIR": str(tmp / "var"), "PYTHONPATH": str(REPO)})
        _TEMPLATE.append(path)
    dest.parent.mkdir(parents=True, exist_ok=True)
    with closing(sqlite3.connect(_TEMPLATE[0])) as src, closing(sqlite3.connect(dest)) as dst:
        src.backup(dst)


class Stack:
    """Start with `Stack(tmp_dir)`, then `start_web()` and `start_worker(name)`; `close()` at the end."""

    def __init__(self, tmp: Path, **env: str) -> None:
        self.tmp = tmp
        run = uuid.uuid4().hex[:8]
        self.env = {
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "explorer.settings",
            # PRISM_TEST_STACK_DATABASE_URL: e.g. an empty PostgreSQL database instead of SQLite
            "DATABASE_URL": os.environ.get("PRISM_TEST_STACK_DATABASE_URL", f"sqlite:///{tmp / 'prism.sqlite3'}"),
            "REDIS_URL": os.environ.get("PRISM_TEST_STACK_REDIS_URL", "redis://127.0.0.1:6379/15"),
            "PRISM_STACK": f"prism-stack-{run}",  # every Redis key; "" derives it from the database
            "PRISM_COMPILE_QUEUE": f"prism.stack.{run}",
            "PRISM_VAR_DIR": str(tmp / "var"),
            "PRISM_HEARTBEAT_S": "1",
            "PRISM_STALE_AFTER_S": "8",
            "PRISM_REAP_INTERVAL_S": "2",
            "PYTHONPATH": str(REPO),
            "PYTHONUNBUFFERED": "1",
            **env,
        }
        self.env.pop("PRISM_TEST_REDIS_URL", None)
        self.procs: dict[str, subprocess.Popen] = {}
        self.resumes = 0  # WebSocket connections ws_events resumed after a drop
        self.url = ""
        atexit.register(self.close)  # even if pytest dies before the fixture's finalizer
        db = self.env["DATABASE_URL"]
        if db.startswith("sqlite:///"):
            _copy_migrated_sqlite(Path(db.removeprefix("sqlite:///")))
        else:
            _migrate(self.env)

    @property
    def queue(self) -> str:
        """The compile queue's name (as settings read PRISM_COMPILE_QUEUE)."""
        return self.env["PRISM_COMPILE_QUEUE"].strip() or "prism.compile"

    @property
    def name(self) -> str:
        """PRISM_STACK, or where it is "" (named from the database) the name a worker announced."""
        if self.env["PRISM_STACK"].strip():
            return self.env["PRISM_STACK"].strip()
        for proc in self.procs:
            if found := re.search(r"stack (\S+): broker keys prefixed", self.log(proc)):
                return found.group(1)
        raise AssertionError("no worker of this stack has announced its name yet")

    def broker_key(self, name: str) -> str:
        """The Redis key of a broker object of this stack (`services.queue.broker_key`)."""
        return f"{self.name}:{name}"

    def sender(self):
        """A Celery app that sends task messages into this stack's queues (prefixed keys)."""
        from celery import Celery

        return Celery(broker=self.env["REDIS_URL"], broker_transport_options={
            "global_keyprefix": self.broker_key("")})

    # processes ---------------------------------------------------------------------------------
    def _spawn(self, name: str, argv: list[str], env: dict | None = None) -> subprocess.Popen:
        log = open(self.tmp / f"{name}.log", "ab")  # noqa: SIM115 - closed with the process
        proc = subprocess.Popen(
            argv, cwd=REPO, env={**self.env, **(env or {})}, stdout=log, stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        log.close()
        self.procs[name] = proc
        return proc

    def log(self, name: str) -> str:
        path = self.tmp / f"{name}.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def start_web(self, name: str = "web", **env: str) -> str:
        """A daphne server (`env` overrides its environment); returns its URL once it answers.
        The first one, "web", is the one the client helpers use."""
        port = free_port()
        self._spawn(name, [sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port),
                           "explorer.asgi:application"], env)
        url = f"http://127.0.0.1:{port}"
        if name == "web":
            self.url = url
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"{url}/api/health", timeout=5).status_code == 200:
                    return url
            except httpx.HTTPError:
                pass
            if self.procs[name].poll() is not None:
                break
            time.sleep(0.3)
        raise RuntimeError(f"web server {name} did not start:\n{self.log(name)[-3000:]}")

    def start_worker(self, name: str, concurrency: int = 1, queues: str | None = None, app: str = "explorer",
                     **env: str) -> subprocess.Popen:
        """A Celery prefork worker serving this stack's queue, or `queues` (comma separated, e.g.
        `prism.tune.host` for a tuning measurement worker), `env` overriding its environment;
        returns once it is ready. `app`: the Celery app module (a test's wrapper of explorer's)."""
        start = len(self.log(name))
        proc = self._spawn(name, [
            sys.executable, "-m", "celery", "-A", app, "worker", "-l", "info", "-P", "prefork",
            "-c", str(concurrency), "-n", f"{name}-{uuid.uuid4().hex[:6]}@%h",
            "-Q", queues or self.queue, "--without-gossip", "--without-mingle",
            "--without-heartbeat",
        ], env)
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            if " ready." in self.log(name)[start:]:
                return proc
            if proc.poll() is not None:
                break
            time.sleep(0.3)
        raise RuntimeError(f"worker {name} did not start:\n{self.log(name)[-3000:]}")

    def stop(self, name: str, sig: int = signal.SIGTERM, timeout: float = 60) -> None:
        """Signal a process group and wait for it; SIGKILL if it outlives `timeout`."""
        proc = self.procs.pop(name, None)
        if proc is None:
            return
        try:
            os.killpg(proc.pid, sig)
            proc.wait(timeout=timeout)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.wait(timeout=10)
        try:  # pool processes may outlive a killed parent for a moment
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass

    def close(self) -> None:
        for name in list(self.procs):
            self.stop(name, timeout=20)

    @classmethod
    @contextmanager
    def running(cls, tmp: Path, workers: tuple[str, ...] = ("w1",), concurrency: int = 1,
                **env: str) -> Iterator[Stack]:
        """A stack in ``tmp`` (``env`` as for ``Stack``) with its web server and ``workers`` started
        (``concurrency`` each); closed on exit, also when starting it failed. For module fixtures."""
        s = cls(tmp, **env)
        try:
            s.start_web()
            for name in workers:
                s.start_worker(name, concurrency=concurrency)
            yield s
        finally:
            s.close()

    # client helpers ------------------------------------------------------------------------------
    def http(self) -> httpx.Client:
        return httpx.Client(base_url=self.url, timeout=60)

    def upload(self, path: Path) -> dict:
        with self.http() as c, path.open("rb") as f:
            r = c.post("/api/models", files={"model": (path.name, f, "application/octet-stream")})
        assert r.status_code in (200, 201), r.text
        return r.json()

    def compile(self, model_id: str, **fields) -> dict:
        with self.http() as c:
            r = c.post("/api/compilations", json={"model": model_id, **fields})
        assert r.status_code in (200, 201), r.text
        return r.json()

    def get(self, compilation_id: str) -> dict:
        with self.http() as c:
            r = c.get(f"/api/compilations/{compilation_id}")
        assert r.status_code == 200, r.text
        return r.json()

    def wait_for(self, compilation_id: str, predicate, timeout: float = 300, what: str = "") -> dict:
        deadline = time.monotonic() + timeout
        while True:
            comp = self.get(compilation_id)
            if predicate(comp):
                return comp
            if time.monotonic() > deadline:
                raise AssertionError(f"compilation {compilation_id} never got {what}: {comp}")
            time.sleep(0.25)

    def wait_finished(self, compilation_id: str, timeout: float = 300) -> dict:
        return self.wait_for(compilation_id, lambda c: c["status"] in ("succeeded", "failed"),
                             timeout, "a final status")

    def stored_events(self, compilation_id: str, after: int) -> list[dict]:
        """Every stored event with seq > `after`, from GET /api/compilations/<id>/events (as the
        browser reads the events too large for a WebSocket message)."""
        events: list[dict] = []
        with self.http() as c:
            while True:
                page = c.get(f"/api/compilations/{compilation_id}/events", params={"after": after}).json()
                events += page["events"]
                if not page["events"] or page["complete"]:
                    return events
                after = page["events"][-1]["seq"]

    def ws_events(self, compilation_id: str, after: int = -1, stop_after: int | None = None,
                  timeout: float = 300, read_delay: float = 0.0) -> list[dict]:
        """Events over the WebSocket until the server closes it (after the terminal event) or,
        with `stop_after`, until that seq arrived (then the client disconnects).

        A connection that ends before the terminal event is resumed with `?after=<last seq>`, as
        the browser and scripts/watch.py do: the server's WebSocket layer (autobahn under daphne)
        aborts a closing handshake the client has not answered within 1 s, and what a slow client
        had not read yet is lost with the connection (seen both as a drop without a close frame
        and as a clean close whose last frames never reached the reader); `self.resumes` counts
        them. `read_delay` makes a slow client: it waits that long after connecting, the first time,
        before reading.
        """
        events: list[dict] = []
        deadline = time.monotonic() + timeout
        drops = 0
        while drops < 4:
            since = events[-1]["seq"] if events else after
            ws_url = self.url.replace("http://", "ws://") + f"/ws/compilations/{compilation_id}/?after={since}"
            with connect(ws_url, max_size=None, open_timeout=30) as ws:
                if drops == 0 and since == after:
                    time.sleep(read_delay)
                while True:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        raise AssertionError(f"timed out; got seqs {[e['seq'] for e in events]}")
                    try:
                        msg = ws.recv(timeout=left)
                    except TimeoutError:
                        continue
                    except ConnectionClosed as closed:  # the server closes after the terminal event
                        ended = bool(events) and events[-1]["type"] in TERMINAL
                        clean = closed.rcvd is not None and closed.rcvd.code == 1000
                        if (ended and closed.rcvd is None) or (clean and (ended or not events)):
                            return events  # ended (a log that ended before `after` closes at once)
                        if closed.rcvd is not None and closed.rcvd.code == CLOSE_EVENT_TOO_LARGE:
                            events += self.stored_events(compilation_id, since if not events else events[-1]["seq"])
                            if events and events[-1]["type"] in TERMINAL:
                                return events
                            break  # the large event came over HTTP: reconnect after it
                        if closed.rcvd is None or (clean and events):
                            self.resumes += 1
                            drops += 1
                            break  # dropped, or closed with the tail lost: resume after the last event
                        raise AssertionError(
                            f"socket closed ({closed!r}) after seqs {[e['seq'] for e in events]}"
                        ) from closed
                    events.append(json.loads(msg))
                    if stop_after is not None and events[-1]["seq"] >= stop_after:
                        return events
        raise AssertionError(f"dropped 4 times; got seqs {[e['seq'] for e in events]}")


class Switch:
    """A TCP forwarder to Redis that can be cut (every connection closed, the port refusing) and
    restored on the same port: Redis going down and coming back, without touching the shared one."""

    def __init__(self, upstream: tuple[str, int]) -> None:
        self.upstream, self.port = upstream, free_port()
        self.conns: list[socket.socket] = []
        self.server: socket.socket | None = None
        self.up()

    def up(self) -> None:
        server = socket.socket()
        server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        server.bind(("127.0.0.1", self.port))
        server.listen(64)
        self.server = server
        threading.Thread(target=self._accept, args=(server,), daemon=True).start()

    def down(self) -> None:
        try:
            self.server.shutdown(socket.SHUT_RDWR)  # wakes the thread blocked in accept()
        except OSError:
            pass
        self.server.close()
        for c in self.conns:
            try:
                c.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            c.close()
        self.conns.clear()

    def _accept(self, server: socket.socket) -> None:
        while True:
            try:
                client, _ = server.accept()
            except OSError:
                return  # closed: down
            upstream = socket.create_connection(self.upstream)
            self.conns += [client, upstream]
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    @staticmethod
    def _pump(src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
