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
