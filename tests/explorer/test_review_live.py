"""Comment and review events over the WebSocket: stored first, then sent; a client that reconnects
with ?after=<last seq> gets exactly the rest, once each (the real channels_redis layer)."""

from __future__ import annotations

import json

import pytest
from asgiref.sync import sync_to_async
from channels.routing import URLRouter
from channels.testing import WebsocketCommunicator
from django.contrib.auth import get_user_model
from explorer_async import run_async
from review_fixtures import compilation

from explorer.compilations.routing import websocket_urlpatterns
from explorer.review import consumers, services
from explorer.review.models import ReviewEvent

APP = URLRouter(websocket_urlpatterns)


async def recv(ws: WebsocketCommunicator, n: int) -> list[dict]:
    return [json.loads(await ws.receive_from(timeout=10)) for _ in range(n)]


@pytest.mark.django_db(transaction=True)
def test_comment_events_arrive_live_and_exactly_once_across_a_reconnect(monkeypatch):
    monkeypatch.setattr(consumers, "POLL_S", 0.3)
    alice = get_user_model().objects.create_user("alice", password="x")
    comp = compilation(owner=alice)
    other = compilation(owner=alice, visibility="private")  # the same model: one review log
    path = f"/ws/compilations/{comp.id}/comments/"

    def write(i: int):
        return services.create_comment(comp, alice, anchor={"kind": "pass", "pass": 0}, body=f"c{i}")

    async def scenario() -> None:
        ws = WebsocketCommunicator(APP, path)
        assert (await ws.connect())[0]
        assert await ws.receive_nothing(timeout=0.5)
        first = await sync_to_async(write)(0)
        got = await recv(ws, 1)
        assert got[0]["type"] == "comment.created" and got[0]["comment"]["id"] == first.pk and got[0]["seq"] == 0
        for i in (1, 2):
            await sync_to_async(write)(i)
        got += await recv(ws, 2)
        await ws.disconnect()
        # While away: a reply, a resolve, a review, and a comment on the other compilation that
        # this socket's requester (anonymous) may not see.
        await sync_to_async(services.create_comment)(comp, alice, body="reply", parent=first)
        await sync_to_async(services.update_comment)(first, comp, alice, resolved=True)
        await sync_to_async(services.create_review)(comp, alice, verdict="approve")
        await sync_to_async(services.create_comment)(other, alice, anchor={"kind": "pass", "pass": 1}, body="hidden")
        ws = WebsocketCommunicator(APP, f"{path}?after={got[-1]['seq']}")
        assert (await ws.connect())[0]
        rest = await recv(ws, 3)
        assert [m["type"] for m in rest] == ["comment.created", "comment.updated", "review.created"]
        assert rest[1]["comment"]["resolved"] is True
        assert rest[2]["review_state"] == {"approved_by": ["alice"], "changes_requested_by": []}
        assert await ws.receive_nothing(timeout=1.0)  # the hidden one is skipped, nothing repeats
        seqs = [m["seq"] for m in got + rest]
        assert seqs == sorted(set(seqs)) == [0, 1, 2, 3, 4, 5]
        await ws.disconnect()
        # A late or repeated hint sends nothing twice.
        again = WebsocketCommunicator(APP, f"{path}?after=5")
        assert (await again.connect())[0]
        await again.send_input({"type": "websocket.receive", "text": "ignored"})
        assert await again.receive_nothing(timeout=1.0)
        await again.disconnect()

    run_async(scenario())
    assert ReviewEvent.objects.count() == 7


@pytest.mark.django_db(transaction=True)
def test_a_dropped_hint_is_found_by_the_poll(monkeypatch):
    monkeypatch.setattr(consumers, "POLL_S", 0.3)
    monkeypatch.setattr(services, "announce", lambda sha, seq: None)  # every hint lost
    alice = get_user_model().objects.create_user("alice", password="x")
    comp = compilation(owner=alice)

    async def scenario() -> None:
        ws = WebsocketCommunicator(APP, f"/ws/compilations/{comp.id}/comments/?after=x")
        await ws.connect()
        assert await ws.receive_output(timeout=5) == {"type": "websocket.close", "code": 4400}
        ws = WebsocketCommunicator(APP, f"/ws/compilations/{comp.id}/comments/")
        assert (await ws.connect())[0]
        await sync_to_async(services.create_comment)(comp, alice, anchor={"kind": "node", "node": "conv_1"}, body="x")
        assert [m["seq"] for m in await recv(ws, 1)] == [0]
        await ws.disconnect()

    run_async(scenario())
