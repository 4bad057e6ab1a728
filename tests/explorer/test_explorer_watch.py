"""scripts/watch.py: its default server and its messages (the WebSocket is faked)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
from websockets.exceptions import ConnectionClosed
from websockets.frames import Close

WATCH = Path(__file__).resolve().parents[2] / "scripts/watch.py"


@pytest.fixture
def watch():
    spec = importlib.util.spec_from_file_location("prism_watch", WATCH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def fake_connect(urls: list[str], close_code: int | None):
    def connect(url, **_):
        urls.append(url)
        raise ConnectionClosed(Close(close_code, ""), None)

    return connect


@pytest.mark.parametrize(("port", "expected"), [(None, "ws://127.0.0.1:8000/"), ("8791", "ws://127.0.0.1:8791/")])
def test_default_server_follows_port(watch, monkeypatch, port, expected):
    if port is None:
        monkeypatch.delenv("PORT", raising=False)
    else:
        monkeypatch.setenv("PORT", port)
    urls: list[str] = []
    monkeypatch.setattr(watch, "connect", fake_connect(urls, 1011))
    monkeypatch.setattr("sys.argv", ["watch.py", "k3x9q2ab"])
    assert watch.main() == 2
    assert urls == [expected + "ws/compilations/k3x9q2ab/?after=-1"]


def test_unknown_compilation_is_one_friendly_line(watch, monkeypatch, capsys):
    urls: list[str] = []
    monkeypatch.setattr(watch, "connect", fake_connect(urls, 4404))
    monkeypatch.setattr("sys.argv", ["watch.py", "nosuch", "--server", "http://127.0.0.1:8791/"])
    assert watch.main() == 2
    assert capsys.readouterr().err == "no compilation nosuch on http://127.0.0.1:8791\n"
    assert urls == ["ws://127.0.0.1:8791/ws/compilations/nosuch/?after=-1"]


def test_help_describes_server(watch, monkeypatch, capsys):
    monkeypatch.setenv("PORT", "8791")
    monkeypatch.setattr("sys.argv", ["watch.py", "--help"])
    with pytest.raises(SystemExit):
        watch.main()
    out = capsys.readouterr().out
    assert "--server" in out and "http://127.0.0.1:8791" in out and "PORT" in out


@pytest.mark.parametrize(("link", "expected"), [
    ("http://127.0.0.1:8791/c/k3x9q2ab", "ws://127.0.0.1:8791/ws/compilations/k3x9q2ab/"),
    ("http://127.0.0.1:8791/c/k3x9q2ab/pass/3?x=1#top", "ws://127.0.0.1:8791/ws/compilations/k3x9q2ab/"),
    ("https://prism.example.org/c/k3x9q2ab/kernel/k_conv0", "wss://prism.example.org/ws/compilations/k3x9q2ab/"),
    ("https://example.org/prism/c/k3x9q2ab", "wss://example.org/prism/ws/compilations/k3x9q2ab/"),
    ("http://localhost:9000/api/compilations/k3x9q2ab/events", "ws://localhost:9000/ws/compilations/k3x9q2ab/"),
    ("ws://127.0.0.1:8791/ws/compilations/k3x9q2ab/?after=4", "ws://127.0.0.1:8791/ws/compilations/k3x9q2ab/"),
    ("127.0.0.1:8791/c/k3x9q2ab", "ws://127.0.0.1:8791/ws/compilations/k3x9q2ab/"),
])
def test_a_pasted_link_names_server_and_id(watch, monkeypatch, capsys, link, expected):
    monkeypatch.setenv("PORT", "8000")  # the link's server wins over the default
    urls: list[str] = []
    monkeypatch.setattr(watch, "connect", fake_connect(urls, 4404))
    monkeypatch.setattr("sys.argv", ["watch.py", link, "--after", "2"])
    assert watch.main() == 2
    assert urls == [expected + "?after=2"]
    server = expected.replace("ws", "http", 1).split("/ws/compilations/")[0]
    assert capsys.readouterr().err == f"no compilation k3x9q2ab on {server}\n"


def test_a_link_and_the_same_server_agree(watch, monkeypatch):
    urls: list[str] = []
    monkeypatch.setattr(watch, "connect", fake_connect(urls, 1011))
    monkeypatch.setattr("sys.argv", ["watch.py", "http://h:1/c/abc", "--server", "http://h:1/"])
    assert watch.main() == 2 and urls == ["ws://h:1/ws/compilations/abc/?after=-1"]


@pytest.mark.parametrize(("argv", "message"), [
    (["http://127.0.0.1:8791/compare/a...b"],
     "'http://127.0.0.1:8791/compare/a...b' is not a compilation link: expected "
     "http(s)://HOST:PORT/c/<id> as the browser shows it\n"),
    (["ftp://h/c/abc"], "'ftp://h/c/abc' is not a compilation link: expected "
                        "http(s)://HOST:PORT/c/<id> as the browser shows it\n"),
    (["http://h:1/c/abc", "--server", "http://other:2"],
     "the link is on http://h:1 but --server says http://other:2; give one of them\n"),
])
def test_a_bad_link_is_one_line_and_no_connection(watch, monkeypatch, capsys, argv, message):
    urls: list[str] = []
    monkeypatch.setattr(watch, "connect", fake_connect(urls, 1011))
    monkeypatch.setattr("sys.argv", ["watch.py", *argv])
    assert watch.main() == 2 and urls == []
    assert capsys.readouterr().err == message


class FakeSocket:
    """A connection that yields `events` as JSON, then closes with `close_code` (None: dropped
    without a close frame, as when the server aborts the closing handshake)."""

    def __init__(self, events: list[dict], close_code: int | None):
        self.events, self.close_code = events, close_code

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def __iter__(self):
        import json

        for e in self.events:
            yield json.dumps(e)
        if self.close_code == 1000:
            return  # websockets ends the iteration on a normal closure
        raise ConnectionClosed(None if self.close_code is None else Close(self.close_code, ""), None)


def ev(seq: int, typ: str = "pass.finished") -> dict:
    return {"seq": seq, "type": typ}


def test_a_dropped_connection_resumes_after_the_last_event(watch, monkeypatch, capsys):
    sockets = [FakeSocket([ev(0), ev(1), ev(2)], None),
               FakeSocket([ev(3), ev(4, "compile.finished")], 1000)]
    urls: list[str] = []

    def connect(url, **_):
        urls.append(url)
        return sockets.pop(0)

    monkeypatch.setattr(watch, "connect", connect)
    monkeypatch.setattr("sys.argv", ["watch.py", "k3x9q2ab", "--server", "http://127.0.0.1:8791", "--json"])
    assert watch.main() == 0
    out = capsys.readouterr()
    assert [__import__("json").loads(line)["seq"] for line in out.out.splitlines()] == [0, 1, 2, 3, 4]
    assert urls == ["ws://127.0.0.1:8791/ws/compilations/k3x9q2ab/?after=-1",
                    "ws://127.0.0.1:8791/ws/compilations/k3x9q2ab/?after=2"]
    assert "resuming" in out.err


def test_a_drop_after_the_terminal_event_is_the_end(watch, monkeypatch):
    sockets = [FakeSocket([ev(0), ev(1, "compile.failed")], None)]
    monkeypatch.setattr(watch, "connect", lambda url, **_: sockets.pop(0))
    monkeypatch.setattr("sys.argv", ["watch.py", "k3x9q2ab"])
    assert watch.main() == 1 and not sockets


def test_resuming_gives_up_after_repeated_drops(watch, monkeypatch, capsys):
    urls: list[str] = []

    def connect(url, **_):
        urls.append(url)
        return FakeSocket([], None)

    monkeypatch.setattr(watch, "connect", connect)
    monkeypatch.setattr("sys.argv", ["watch.py", "k3x9q2ab"])
    assert watch.main() == 2
    assert len(urls) == watch.MAX_RESUMES + 1


def test_a_clean_close_before_the_terminal_event_resumes(watch, monkeypatch, capsys):
    sockets = [FakeSocket([ev(0), ev(1)], 1000), FakeSocket([ev(2, "compile.finished")], 1000)]
    urls: list[str] = []

    def connect(url, **_):
        urls.append(url)
        return sockets.pop(0)

    monkeypatch.setattr(watch, "connect", connect)
    monkeypatch.setattr("sys.argv", ["watch.py", "k3x9q2ab", "--server", "http://127.0.0.1:8791"])
    assert watch.main() == 0
    assert urls[-1].endswith("?after=1") and not sockets
