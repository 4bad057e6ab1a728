"""Rate limits on comment and review writes (429 with Retry-After) and on WebSocket connections
(close 4429 with the limit as the reason), issue 17 item 5, against the real Redis (DB 14)."""

from __future__ import annotations

import pytest
import redis
from channels.routing import URLRouter
from channels.testing import WebsocketCommunicator
from django.contrib.auth import get_user_model
from django.test import Client
from explorer_async import run_async
from review_fixtures import compilation

from explorer.compilations import messages
from explorer.compilations.routing import websocket_urlpatterns
from explorer.review.models import Comment

APP = URLRouter(websocket_urlpatterns)
PASS0 = {"kind": "pass", "pass": 0}


@pytest.fixture(autouse=True)
def fresh_counters(settings):
    """Rate counters outlive a test (Redis); this process's (its own PRISM_STACK prefix) start at 0."""
    client = redis.Redis.from_url(settings.REDIS_URL)
    for key in client.scan_iter(f"{settings.PRISM_STACK}:rate:*"):
        client.delete(key)


def _signed_in(name: str) -> Client:
    c = Client()
    c.force_login(get_user_model().objects.create_user(name, password=f"{name}-pw-12345"))
    return c


def test_comment_and_review_writes_over_the_rate_get_429_with_retry_after(db, settings):
    settings.PRISM_COMMENT_RATE = "3/min"
    comp = compilation()
    ada, bob = _signed_in("ada"), _signed_in("bob")
    url = f"/api/compilations/{comp.id}/comments"
    codes = [ada.post(url, {"anchor": PASS0, "body": f"c{i}"}, content_type="application/json").status_code
             for i in range(3)]
    assert codes == [201, 201, 201], codes
    r = ada.post(f"/api/compilations/{comp.id}/reviews", {"verdict": "approve", "summary": "ok"},
                 content_type="application/json")  # reviews count in the same scope
    assert r.status_code == 429 and 1 <= int(r["Retry-After"]) <= 60
    assert r.json()["error"].startswith("too many comment requests: the limit is 3/min per client "
                                        "(PRISM_COMMENT_RATE); retry in ")
    first = Comment.objects.order_by("pk").first()
    assert ada.patch(f"{url}/{first.pk}", {"body": "edited"}, content_type="application/json").status_code == 429
    assert ada.get(url).status_code == 200  # reads are not counted
    assert bob.post(url, {"anchor": PASS0, "body": "b"}, content_type="application/json").status_code == 201
    assert Comment.objects.count() == 4


def _connect(path: str, address: str) -> WebsocketCommunicator:
    ws = WebsocketCommunicator(APP, path)
    ws.scope["client"] = (address, 40000)
    return ws


@pytest.mark.django_db(transaction=True)
def test_websocket_connections_over_the_rate_close_with_4429_naming_the_limit(settings):
    settings.PRISM_WS_CONNECT_RATE = "2/min"
    comp = compilation()  # finished: its event socket replays and closes with 1000

    async def scenario() -> None:
        events = f"/ws/compilations/{comp.id}/"
        for _ in range(2):
            ws = _connect(events, "10.7.7.7")
            assert (await ws.connect())[0]
            await ws.disconnect()
        for path in (events, f"/ws/compilations/{comp.id}/comments/"):  # both sockets count in one scope
            ws = _connect(path, "10.7.7.7")
            assert (await ws.connect())[0]
            closed = await ws.receive_output(timeout=5)
            assert closed["type"] == "websocket.close" and closed["code"] == messages.CLOSE_TOO_MANY_REQUESTS
            assert closed["reason"].startswith("too many WebSocket connections: the limit is 2/min per client "
                                               "(PRISM_WS_CONNECT_RATE); retry in ")
            wait = int(closed["reason"].rsplit("retry in ", 1)[1].split()[0])
            assert 1 <= wait <= 60
        other = _connect(f"/ws/compilations/{comp.id}/comments/", "10.7.7.8")  # another client
        assert (await other.connect())[0]
        assert await other.receive_nothing(timeout=0.5)
        await other.disconnect()

    run_async(scenario())
