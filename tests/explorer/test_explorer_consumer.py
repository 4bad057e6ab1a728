"""The WebSocket consumer's exactly-once, in-order delivery over an at-most-once channel layer.

Uses the real channels_redis layer and the test database; the worker side is played by the test,
which stores events and sends (or withholds) the live hints to provoke gaps and duplicates."""

from __future__ import annotations

import json

import pytest
from asgiref.sync import sync_to_async
from channels.layers import get_channel_layer
from channels.routing import URLRouter
from channels.testing import WebsocketCommunicator
from explorer_async import run_async

from explorer.compilations import consumers, messages
from explorer.compilations.models import CompilationEvent
from explorer.compilations.routing import websocket_urlpatterns

APP = URLRouter(websocket_urlpatterns)


def event(seq: int, type: str = "pass.finished", **payload) -> dict:
    return {"seq": seq, "type": type, "ts": 100.0 + seq, **payload}


def store(comp, *events: dict) -> None:
    for e in events:
        CompilationEvent.objects.create(
            compilation=comp, seq=e["seq"], type=e["type"], ts=e["ts"],
            payload={k: v for k, v in e.items() if k not in ("seq", "type", "ts")},
        )


async def recv_seqs(ws: WebsocketCommunicator, n: int) -> list[int]:
    return [json.loads(await ws.receive_from(timeout=5))["seq"] for _ in range(n)]


@pytest.mark.django_db(transaction=True)
def test_replay_then_live_with_gaps_duplicates_hints_and_a_lost_last_event(make_compilation, monkeypatch):
    monkeypatch.setattr(consumers, "POLL_S", 0.3)
    comp = make_compilation(status="running")
    store(comp, *(event(i) for i in range(5)))
    group = messages.group_name(comp.id)

    async def scenario() -> None:
        layer = get_channel_layer()
        send = lambda seq, ev: layer.group_send(group, {"type": messages.EVENT_MESSAGE, "seq": seq, "event": ev})  # noqa: E731
        ws = WebsocketCommunicator(APP, f"/ws/compilations/{comp.id}/?after=1")
        assert (await ws.connect())[0]
        assert await recv_seqs(ws, 3) == [2, 3, 4]  # replay
        await sync_to_async(store)(comp, event(5))
        await send(5, event(5))
        assert await recv_seqs(ws, 1) == [5]  # live, next in order
        await sync_to_async(store)(comp, event(6), event(7), event(8))
        await send(8, event(8))  # the hints for 6 and 7 were "dropped"
        assert await recv_seqs(ws, 3) == [6, 7, 8]  # gap read from the database
        await send(7, event(7))  # late duplicate
        assert await ws.receive_nothing(timeout=0.5)
        big = event(9, ir="x" * 10)
        await sync_to_async(store)(comp, big)
        await send(9, None)  # seq-only hint, as for large events
        assert json.loads(await ws.receive_from(timeout=5)) == big
        await sync_to_async(store)(comp, event(10, "compile.finished", duration_ms=1.0))
        # no hint at all for the last event: the poll finds it
        assert await recv_seqs(ws, 1) == [10]
        closed = await ws.receive_output(timeout=5)
        assert closed == {"type": "websocket.close", "code": 1000}
        await ws.disconnect()

    run_async(scenario())


@pytest.mark.django_db(transaction=True)
def test_connect_edge_cases(make_compilation):
    comp = make_compilation(status="succeeded")
    store(comp, event(0, "compile.started"), event(1, "compile.finished"))

    async def scenario() -> None:
        ws = WebsocketCommunicator(APP, "/ws/compilations/nosuchid/")
        assert (await ws.connect())[0]
        assert await ws.receive_output(timeout=5) == {"type": "websocket.close", "code": 4404}
        ws = WebsocketCommunicator(APP, f"/ws/compilations/{comp.id}/?after=x")
        await ws.connect()
        assert await ws.receive_output(timeout=5) == {"type": "websocket.close", "code": 4400}
        ws = WebsocketCommunicator(APP, f"/ws/compilations/{comp.id}/?after=1")
        await ws.connect()  # nothing after the terminal event: closed at once
        assert await ws.receive_output(timeout=5) == {"type": "websocket.close", "code": 1000}
        ws = WebsocketCommunicator(APP, f"/ws/compilations/{comp.id}/")
        await ws.connect()
        assert await recv_seqs(ws, 2) == [0, 1]
        assert await ws.receive_output(timeout=5) == {"type": "websocket.close", "code": 1000}

    run_async(scenario())


@pytest.mark.django_db(transaction=True)
def test_an_idle_socket_survives_the_redis_read_timeout(make_compilation):
    """redis-py >= 8 times reads out after 5 s by default, as long as channels_redis blocks in
    BZPOPMIN; the settings raise the socket timeout so a quiet compilation keeps its sockets."""
    comp = make_compilation(status="running")

    async def scenario() -> None:
        ws = WebsocketCommunicator(APP, f"/ws/compilations/{comp.id}/")
        assert (await ws.connect())[0]
        assert await ws.receive_nothing(timeout=7.0)
        await sync_to_async(store)(comp, event(0, "compile.started"))
        await get_channel_layer().group_send(
            messages.group_name(comp.id), {"type": messages.EVENT_MESSAGE, "seq": 0, "event": event(0)}
        )
        assert await recv_seqs(ws, 1) == [0]
        await ws.disconnect()

    run_async(scenario())


@pytest.mark.django_db(transaction=True)
def test_browsers_must_come_from_an_allowed_origin(make_compilation):
    from explorer.asgi import application

    comp = make_compilation(status="running")

    async def scenario() -> None:
        path = f"/ws/compilations/{comp.id}/"
        evil = WebsocketCommunicator(application, path, headers=[(b"origin", b"https://evil.example")])
        assert (await evil.connect())[0] is False
        good = WebsocketCommunicator(application, path, headers=[(b"origin", b"http://127.0.0.1:8000")])
        assert (await good.connect())[0] is True
        await good.disconnect()

    run_async(scenario())


@pytest.mark.django_db(transaction=True)
def test_resuming_beyond_the_end_of_a_log_that_then_ends_closes(make_compilation, monkeypatch):
    monkeypatch.setattr(consumers, "POLL_S", 0.3)
    comp = make_compilation(status="running")
    store(comp, event(0, "compile.started"))

    async def scenario() -> None:
        ws = WebsocketCommunicator(APP, f"/ws/compilations/{comp.id}/?after=50")
        assert (await ws.connect())[0]
        await sync_to_async(store)(comp, event(1, "compile.finished"))
        assert await ws.receive_output(timeout=5) == {"type": "websocket.close", "code": 1000}

    run_async(scenario())


@pytest.mark.django_db(transaction=True)
def test_an_event_too_large_for_a_websocket_message_closes_with_4413_and_is_read_over_http(make_compilation, client):
    """autobahn (under daphne) refuses to send a message over its limit and the socket stalls: the
    consumer sends what comes before such an event, closes with 4413, and the event is served by
    the HTTP events API, after which the socket resumes."""
    comp = make_compilation(status="running")
    big = event(2, "kernel.compiled", kernel="k", llvm_ir="x" * messages.WS_MESSAGE_MAX_BYTES)
    store(comp, event(0), event(1), big, event(3))

    async def scenario() -> None:
        ws = WebsocketCommunicator(APP, f"/ws/compilations/{comp.id}/?after=-1")
        assert (await ws.connect())[0]
        assert await recv_seqs(ws, 2) == [0, 1]
        assert await ws.receive_output(timeout=5) == {"type": "websocket.close", "code": messages.CLOSE_EVENT_TOO_LARGE}
        await ws.disconnect()
        ws = WebsocketCommunicator(APP, f"/ws/compilations/{comp.id}/?after=2")  # after the HTTP read
        assert (await ws.connect())[0]
        assert await recv_seqs(ws, 1) == [3]
        await ws.disconnect()

    run_async(scenario())
    page = client.get(f"/api/compilations/{comp.id}/events?after=1").json()
    assert [e["seq"] for e in page["events"]] == [2, 3]
    assert len(page["events"][0]["llvm_ir"]) == messages.WS_MESSAGE_MAX_BYTES
