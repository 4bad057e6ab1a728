"""Access control on every read and write path (issue 14): a private compilation is invisible to a
non-member, signed in or not, exactly as a compilation that does not exist (404, WebSocket 4404);
its owner and the owner's team see it. Pages, API, events, comments, reviews, the model, listings,
compare, both WebSockets, carry-over and the cache."""

from __future__ import annotations

from pathlib import Path

import onnx
import pytest
from asgiref.sync import sync_to_async
from channels.testing import WebsocketCommunicator
from django.contrib.auth import get_user_model
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from explorer_async import run_async
from rest_framework.authtoken.models import Token
from review_fixtures import compilation, model

from explorer.accounts.models import Membership, Team
from explorer.compilations.models import Compilation, CompilationEvent
from explorer.review.models import Comment

SQUEEZENET = Path(onnx.__file__).parent / "backend/test/data/light/light_squeezenet.onnx"
VISIBLE = ("owner", "teammate")
INVISIBLE = ("outsider", "anonymous")


@pytest.fixture
def world(db, settings):
    settings.FRONTEND_DIST = Path("/nonexistent")  # the pages' fallback body; the status is what counts
    users = {n: get_user_model().objects.create_user(n, password=f"{n}-pw-123") for n in ("owner", "teammate", "outsider")}
    team = Team.objects.create(slug="compilers", name="Compilers")
    Membership.objects.create(team=team, user=users["owner"], role="admin")
    Membership.objects.create(team=team, user=users["teammate"])
    clients = {"anonymous": Client()}
    for name, user in users.items():
        clients[name] = Client()
        clients[name].force_login(user)
    m = model(sha="ef" * 32, owner=users["owner"], visibility="private")
    private = compilation(owner=users["owner"], visibility="private", the_model=m)
    public = compilation(owner=users["owner"], visibility="public", the_model=m)
    comment = Comment.objects.create(compilation=private, author=users["owner"], kind="pass",
                                     anchor={"kind": "pass", "pass": 0}, context={"pass_name": "fold-constants"},
                                     body="secret")
    return {"users": users, "clients": clients, "private": private, "public": public, "comment": comment, "model": m}


def status_matrix(world, paths) -> dict[str, dict[str, int]]:
    return {who: {p: world["clients"][who].get(p).status_code for p in paths} for who in (*VISIBLE, *INVISIBLE)}


def test_every_read_path_hides_a_private_compilation_from_non_members(world):
    cid, pid = world["private"].id, world["public"].id
    paths = [f"/c/{cid}", f"/c/{cid}/pass/0", f"/c/{cid}/graph", f"/c/{cid}/comments/{world['comment'].id}",
             f"/compare/{pid}...{cid}", f"/api/compilations/{cid}", f"/api/compilations/{cid}/events",
             f"/api/compilations/{cid}/comments", f"/api/compilations/{cid}/reviews",
             f"/api/models/{world['model'].sha256}"]
    matrix = status_matrix(world, paths)
    print("\n" + "\n".join(f"{who:10s} " + " ".join(str(s) for s in row.values()) for who, row in matrix.items()))
    for who in VISIBLE:
        assert set(matrix[who].values()) == {200}, (who, matrix[who])
    for who in INVISIBLE:
        assert set(matrix[who].values()) == {404}, (who, matrix[who])
    unknown = world["clients"]["outsider"].get("/api/compilations/zzzzzzzz").json()
    hidden = world["clients"]["outsider"].get(f"/api/compilations/{cid}").json()
    assert hidden == {"error": f"no compilation with id {cid}"} and unknown == {"error": "no compilation with id zzzzzzzz"}
    for who in (*VISIBLE, *INVISIBLE):
        listed = {c["id"] for c in world["clients"][who].get("/api/compilations").json()}
        assert pid in listed and (cid in listed) == (who == "owner"), who  # private is never listed to others


def test_every_write_path_is_404_for_non_members(world):
    cid, comment = world["private"].id, world["comment"].id
    writes = [("post", f"/api/compilations/{cid}/comments", {"anchor": {"kind": "pass", "pass": 0}, "body": "x"}),
              ("post", f"/api/compilations/{cid}/comments", {"parent": comment, "body": "x"}),
              ("patch", f"/api/compilations/{cid}/comments/{comment}", {"body": "x"}),
              ("delete", f"/api/compilations/{cid}/comments/{comment}", None),
              ("post", f"/api/compilations/{cid}/reviews", {"verdict": "approve"}),
              ("patch", f"/api/compilations/{cid}", {"visibility": "public"})]
    for who in INVISIBLE:
        c = world["clients"][who]
        for method, path, body in writes:
            r = getattr(c, method)(path, body, content_type="application/json")
            assert r.status_code == 404, (who, method, path, r.content)
    teammate = world["clients"]["teammate"]
    assert teammate.patch(f"/api/compilations/{cid}/comments/{comment}", {"body": "x"},
                          content_type="application/json").status_code == 403  # visible, not theirs
    assert teammate.patch(f"/api/compilations/{cid}", {"visibility": "public"},
                          content_type="application/json").status_code == 403
    assert Comment.objects.get(pk=comment).body == "secret"
    owner = world["clients"]["owner"]
    r = owner.patch(f"/api/compilations/{cid}", {"visibility": "unlisted"}, content_type="application/json")
    assert r.status_code == 200 and r.json()["visibility"] == "unlisted"
    assert world["clients"]["outsider"].get(f"/api/compilations/{cid}").status_code == 200


def test_comments_of_a_private_compilation_do_not_carry_to_an_outsider(world):
    outsider = world["users"]["outsider"]
    later = compilation(owner=outsider, visibility="unlisted", the_model=world["model"])
    for who, sees, resolve in (("outsider", False, 404), ("anonymous", False, 401), ("teammate", True, 403)):
        listed = world["clients"][who].get(f"/api/compilations/{later.id}/comments").json()["comments"]
        assert bool(listed) == sees, who
        r = world["clients"][who].patch(f"/api/compilations/{later.id}/comments/{world['comment'].id}",
                                        {"resolved": True}, content_type="application/json")
        assert r.status_code == resolve, who  # 401: nobody signed in, whatever the comment


def _ws_statuses(world, who: str) -> list[object]:
    from explorer.asgi import application

    headers = []
    if who != "anonymous":
        token, _ = Token.objects.get_or_create(user=world["users"][who])
        headers = [(b"authorization", f"Token {token.key}".encode())]
    cid = world["private"].id

    async def scenario() -> list[object]:
        out = []
        for path in (f"/ws/compilations/{cid}/", f"/ws/compilations/{cid}/comments/"):
            ws = WebsocketCommunicator(application, path, headers=headers)
            assert (await ws.connect())[0]
            if await ws.receive_nothing(timeout=1.5):  # the comments socket stays open, quiet
                out.append("open")
            else:
                first = await ws.receive_output(timeout=5)
                out.append(first.get("code") if first["type"] == "websocket.close" else "open")
            await ws.disconnect()
        return out

    return run_async(scenario())


@pytest.mark.django_db(transaction=True)
def test_both_websockets_close_4404_for_non_members(world):
    matrix = {who: _ws_statuses(world, who) for who in (*VISIBLE, *INVISIBLE)}
    print(f"\nWebSocket (events, comments): {matrix}")
    assert matrix["owner"] == ["open", "open"] and matrix["teammate"] == ["open", "open"]
    assert matrix["outsider"] == [4404, 4404] and matrix["anonymous"] == [4404, 4404]


def test_a_cache_hit_never_hands_out_a_private_compilation(world, settings):
    owner, outsider = world["clients"]["owner"], world["clients"]["outsider"]
    data = SQUEEZENET.read_bytes()
    up = owner.post("/api/models", {"model": SimpleUploadedFile("secret-name.onnx", data), "visibility": "private"})
    assert up.status_code == 201 and up.json()["visibility"] == "private"
    sha = up.json()["id"]
    assert outsider.get(f"/api/models/{sha}").status_code == 404
    assert outsider.patch(f"/api/models/{sha}", {"visibility": "public"}, content_type="application/json").status_code == 404
    request = {"model": sha, "pipeline": "O0", "options": {"benchmark": False}, "visibility": "private"}
    first = owner.post("/api/compilations", request, content_type="application/json").json()
    Compilation.objects.filter(pk=first["id"]).update(status="succeeded")
    CompilationEvent.objects.create(compilation_id=first["id"], seq=0, type="compile.finished", ts=1.0, payload={})
    assert owner.post("/api/compilations", request, content_type="application/json").json()["id"] == first["id"]
    # Unknown to the outsider until it uploads the same bytes itself; then a hit is its own copy.
    assert outsider.post("/api/compilations", request, content_type="application/json").status_code == 400
    up2 = outsider.post("/api/models", {"model": SimpleUploadedFile("mine.onnx", data)})
    assert up2.status_code == 200 and up2.json()["name"] == "mine.onnx"  # not the owner's file name
    copies = []
    for who, visibility in (("outsider", "unlisted"), ("outsider", "private"), ("anonymous", "unlisted")):
        if who == "anonymous":
            world["clients"]["anonymous"].post("/api/models", {"model": SimpleUploadedFile("anon.onnx", data)})
        r = world["clients"][who].post("/api/compilations", {**request, "visibility": visibility},
                                       content_type="application/json")
        hit = r.json()
        assert r.status_code == 200 and hit["cached"] is True, r.content
        assert hit["id"] != first["id"] and hit["visibility"] == visibility
        copies.append(hit["id"])
        events = world["clients"][who].get(f"/api/compilations/{hit['id']}/events").json()["events"]
        assert [e["type"] for e in events] == ["compile.finished"]
    # The outsider's unlisted copy is its own; the anonymous request for an unlisted result shares it.
    assert copies[0] != copies[1] and copies[2] == copies[0]
    assert owner.get(f"/api/compilations/{first['id']}").json()["visibility"] == "private"
    assert world["clients"]["teammate"].patch(f"/api/models/{sha}", {"visibility": "public"},
                                              content_type="application/json").status_code == 403
    r = owner.patch(f"/api/models/{sha}", {"visibility": "unlisted"}, content_type="application/json")
    assert r.status_code == 200 and r.json()["visibility"] == "unlisted" and r.json()["name"] == "secret-name.onnx"


def test_private_needs_a_signed_in_owner_and_sign_in_can_be_required(world, settings):
    anon = world["clients"]["anonymous"]
    r = anon.post("/api/models", {"model": SimpleUploadedFile("m.onnx", b"x"), "visibility": "private"})
    assert r.status_code == 400 and "needs a signed-in user" in r.json()["error"]
    settings.PRISM_REQUIRE_SIGN_IN = True
    r = anon.post("/api/models", {"model": SimpleUploadedFile("m.onnx", b"x")})
    assert r.status_code == 401 and "PRISM_REQUIRE_SIGN_IN" in r.json()["error"]
    r = anon.post("/api/compilations", {"model": "ab" * 32}, content_type="application/json")
    assert r.status_code == 401
    assert world["clients"]["owner"].post("/api/models", {"model": SimpleUploadedFile("m.onnx", b"x")}).status_code == 400


def test_html_in_names_and_anchors_comes_back_as_data(world):
    """Names and anchors are JSON data, never markup; the browser renders them as text (dom.ts)."""
    owner = world["clients"]["owner"]
    r = owner.post(f"/api/compilations/{world['private'].id}/comments",
                   {"anchor": {"kind": "node", "node": "<img src=x onerror=alert(1)>"}, "body": "x"},
                   content_type="application/json")
    assert r.status_code == 400 and "<img src=x onerror=alert(1)>" in r.json()["error"]
    assert r["Content-Type"] == "application/json"
    _ = sync_to_async  # (imported for symmetry with the consumer tests)
