"""Comments, reviews and carry-over (explorer.review) through the HTTP API, in process."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from review_fixtures import compilation

from explorer.review.models import Comment, ReviewEvent

pytestmark = pytest.mark.django_db


def user_client(name: str) -> tuple[object, Client]:
    user = get_user_model().objects.create_user(name, password="pw-" + name * 3)
    c = Client()
    c.force_login(user)
    return user, c


def post(c: Client, url: str, body: dict):
    return c.post(url, body, content_type="application/json")


def patch(c: Client, url: str, body: dict):
    return c.patch(url, body, content_type="application/json")


@pytest.fixture
def alice():
    return user_client("alice")


@pytest.fixture
def bob():
    return user_client("bob")


def test_each_anchor_kind_is_validated_and_completed(alice):
    _, a = alice
    comp = compilation()
    url = f"/api/compilations/{comp.id}/comments"
    anchors = [
        ({"kind": "pass", "pass": 1}, {"kind": "pass", "pass": 1}),
        ({"kind": "ir_line", "pass": 0, "line": 3},
         {"kind": "ir_line", "pass": 0, "line": 3, "text": "  %r0 = Conv(%x, %w) {kernel_shape = [3, 3]} : f32[1, 4, 6, 6]  // conv_1"}),
        ({"kind": "node", "node": "conv_1"}, {"kind": "node", "node": "conv_1"}),
        ({"kind": "kernel", "kernel": "fused_conv2d_relu_0"}, {"kind": "kernel", "kernel": "fused_conv2d_relu_0"}),
        ({"kind": "remark", "pass": 1, "remark": 0}, {"kind": "remark", "pass": 1, "remark": 0}),
        ({"kind": "code_line", "kernel": "fused_conv2d_relu_0", "code": "asm", "line": 3},
         {"kind": "code_line", "kernel": "fused_conv2d_relu_0", "code": "asm", "line": 3,
          "text": "  vfmadd231ps %zmm1, %zmm2, %zmm0"}),
    ]
    for given, stored in anchors:
        r = post(a, url, {"anchor": given, "body": f"on {given['kind']}"})
        assert r.status_code == 201, r.content
        body = r.json()
        assert body["anchor"] == stored and body["outdated"] is False and body["carried_from"] is None
        for field in ("anchor", "author", "body", "created_at", "resolved", "outdated", "parent"):
            assert field in body
    listed = a.get(url).json()
    assert [c["kind"] for c in listed["comments"]] == [s["kind"] for s, _ in anchors]
    assert listed["review_seq"] == len(anchors) - 1
    remark = next(c for c in listed["comments"] if c["kind"] == "remark")
    assert remark["context"]["message"] == "fused Conv conv_1 with Relu relu_1"


@pytest.mark.parametrize("anchor, named", [
    ({"kind": "pass", "pass": 9}, "pass 9 does not exist"),
    ({"kind": "ir_line", "pass": 0, "line": 99}, "line 99 does not exist in the IR after pass 0 (fold-constants)"),
    ({"kind": "ir_line", "pass": 0, "line": 3, "text": "something else"}, "line 3 of the IR after pass 0"),
    ({"kind": "node", "node": "Conv_404"}, "no node 'Conv_404'"),
    ({"kind": "kernel", "kernel": "fused_nothing"}, "no kernel 'fused_nothing'"),
    ({"kind": "remark", "pass": 1, "remark": 5}, "remark 5 does not exist in pass 1 (fuse-ops)"),
    ({"kind": "code_line", "kernel": "fused_conv2d_relu_0", "code": "ptx", "line": 1}, "code must be one of"),
    ({"kind": "code_line", "kernel": "fused_conv2d_relu_0", "code": "asm", "line": 40}, "line 40 does not exist in the asm code"),
    ({"kind": "pass", "pass": 0, "extra": 1}, "unknown field 'extra'"),
    ({"kind": "ir_line", "pass": 0}, "needs 'line'"),
    ({"kind": "gutter"}, "unknown kind 'gutter'"),
    ("pass 0", "must be an object"),
    ({"kind": "pass", "pass": True}, "'pass' must be an integer"),
])
def test_unknown_anchors_are_400_naming_them_and_store_nothing(alice, anchor, named):
    _, a = alice
    comp = compilation()
    r = post(a, f"/api/compilations/{comp.id}/comments", {"anchor": anchor, "body": "x"})
    assert r.status_code == 400 and named in r.json()["error"], r.content
    assert not Comment.objects.exists() and not ReviewEvent.objects.exists()


def test_body_limit_and_bad_bodies(alice, settings):
    settings.PRISM_COMMENT_MAX_BYTES = 100
    _, a = alice
    comp = compilation()
    url = f"/api/compilations/{comp.id}/comments"
    r = post(a, url, {"anchor": {"kind": "pass", "pass": 0}, "body": "é" * 51})
    assert r.status_code == 400 and "102 bytes is over the limit of 100 bytes" in r.json()["error"]
    assert post(a, url, {"anchor": {"kind": "pass", "pass": 0}, "body": "  "}).status_code == 400
    assert post(a, url, {"anchor": {"kind": "pass", "pass": 0}, "body": 5}).status_code == 400
    assert not Comment.objects.exists()


def test_markdown_is_rendered_safely_and_html_stays_text(alice):
    _, a = alice
    comp = compilation()
    body = "**why** not fuse? <script>alert(1)</script> <img src=x onerror=alert(2)> [x](javascript:alert(3))"
    c = post(a, f"/api/compilations/{comp.id}/comments", {"anchor": {"kind": "pass", "pass": 0}, "body": body}).json()
    assert c["body"] == body
    assert "<strong>why</strong>" in c["body_html"]
    assert "<script" not in c["body_html"] and "<img" not in c["body_html"] and 'href="javascript' not in c["body_html"]
    assert "&lt;script&gt;" in c["body_html"]


def test_threads_edit_delete_resolve_and_permissions(alice, bob):
    (_, a), (_, b) = alice, bob
    comp = compilation()
    url = f"/api/compilations/{comp.id}/comments"
    root = post(a, url, {"anchor": {"kind": "node", "node": "conv_1"}, "body": "why?"}).json()
    reply = post(b, url, {"parent": root["id"], "body": "because"}).json()
    assert reply["parent"] == root["id"] and reply["anchor"] == root["anchor"]
    again = post(b, url, {"parent": reply["id"], "body": "a reply to a reply joins the thread"}).json()
    assert again["parent"] == root["id"]
    assert patch(b, f"{url}/{root['id']}", {"body": "mine now"}).status_code == 403
    assert b.delete(f"{url}/{root['id']}").status_code == 403
    assert patch(a, f"{url}/{root['id']}", {"body": "why not?"}).json()["edited_at"]
    assert patch(b, f"{url}/{root['id']}", {"resolved": True}).status_code == 403  # neither author nor owner
    # the listing says so per requester, so the page offers Resolve only to those the API lets resolve
    can = {who: {c["id"]: c["can_resolve"] for c in cl.get(url).json()["comments"]} for who, cl in (("a", a), ("b", b))}
    assert can["a"][root["id"]] is True and can["b"][root["id"]] is False
    assert can["a"][reply["id"]] is False and can["b"][reply["id"]] is False  # replies: the thread's first comment holds it
    assert patch(a, f"{url}/{reply['id']}", {"resolved": True}).status_code == 400  # a reply
    assert patch(a, f"{url}/{root['id']}", {"resolved": True}).json()["resolved"] is True
    assert patch(a, f"{url}/{root['id']}", {"resolved": False}).json()["resolved"] is False
    assert b.delete(f"{url}/{reply['id']}").status_code == 204
    listed = {c["id"]: c for c in a.get(url).json()["comments"]}
    assert listed[reply["id"]]["deleted"] and listed[reply["id"]]["body"] == ""
    assert patch(b, f"{url}/{reply['id']}", {"body": "back"}).status_code == 400  # deleted
    assert Client().post(url, {"anchor": {"kind": "pass", "pass": 0}, "body": "anon"},
                         content_type="application/json").status_code == 401
    assert patch(a, f"{url}/999999", {"body": "x"}).status_code == 404
    seqs = list(ReviewEvent.objects.order_by("seq").values_list("seq", flat=True))
    assert seqs == list(range(len(seqs)))


def test_reviews_and_their_state(alice, bob):
    (_, a), (_, b) = alice, bob
    comp = compilation()
    url = f"/api/compilations/{comp.id}/reviews"
    r = post(b, url, {"verdict": "request_changes", "summary": "fuse the **Relu** too"})
    assert r.status_code == 201 and r.json()["state"] == {"approved_by": [], "changes_requested_by": ["bob"]}
    assert post(a, url, {"verdict": "comment", "summary": "looking"}).status_code == 201
    assert post(b, url, {"verdict": "maybe"}).status_code == 400
    assert post(b, url, {"verdict": "comment", "summary": ""}).status_code == 400
    r = post(b, url, {"verdict": "approve"})
    state = a.get(url).json()
    assert state["state"] == {"approved_by": ["bob"], "changes_requested_by": []}
    assert [x["verdict"] for x in state["reviews"]] == ["request_changes", "comment", "approve"]
    assert "<strong>Relu</strong>" in state["reviews"][0]["summary_html"]


def test_unresolved_comments_carry_to_a_recompilation_of_the_same_model(alice, bob):
    (alice_user, a), (_, b) = alice, bob
    first = compilation(owner=alice_user, passes=("fold-constants", "fuse-ops"))
    url = f"/api/compilations/{first.id}/comments"
    node = post(a, url, {"anchor": {"kind": "node", "node": "conv_1"}, "body": "node"}).json()
    line = post(a, url, {"anchor": {"kind": "ir_line", "pass": 1, "line": 3}, "body": "fused line"}).json()
    kept = post(a, url, {"anchor": {"kind": "ir_line", "pass": 0, "line": 4}, "body": "relu line"}).json()
    done = post(a, url, {"anchor": {"kind": "pass", "pass": 0}, "body": "resolved already"}).json()
    patch(a, f"{url}/{done['id']}", {"resolved": True})
    post(b, url, {"parent": node["id"], "body": "a reply travels with its thread"})
    # Recompiled without fusion: the node is still in the graph IR, the fuse-ops pass is gone, and
    # the Relu line moved from line 4 to line 4 of a pass at another index.
    second = compilation(owner=alice_user, passes=("simplify", "fold-constants"), fused=False)
    listed = {c["id"]: c for c in b.get(f"/api/compilations/{second.id}/comments").json()["comments"]}
    assert done["id"] not in listed
    assert listed[node["id"]]["outdated"] is False
    assert listed[node["id"]]["carried_from"] == {"compilation": first.id, "url": f"/c/{first.id}/comments/{node['id']}"}
    assert listed[line["id"]]["outdated"] is True and listed[line["id"]]["anchor"] == line["anchor"]
    assert "prism.fused_group" in listed[line["id"]]["context"]["lines"][2]  # the original context is kept
    assert listed[kept["id"]]["outdated"] is False and listed[kept["id"]]["anchor"]["pass"] == 1
    replies = [c for c in listed.values() if c["parent"] == node["id"]]
    assert len(replies) == 1 and replies[0]["carried_from"]["compilation"] == first.id
    # Resolved from the new compilation: it shows there resolved, and is no longer carried further.
    r = patch(a, f"/api/compilations/{second.id}/comments/{node['id']}", {"resolved": True})
    assert r.status_code == 200 and r.json()["resolved"] is True
    assert b.get(f"/api/compilations/{second.id}/comments").json()["comments"][0]["resolved"] is True
    third = compilation(owner=alice_user, passes=("fold-constants",), fused=False)
    ids = {c["id"] for c in a.get(f"/api/compilations/{third.id}/comments").json()["comments"]}
    assert node["id"] not in ids and kept["id"] in ids
    # Not carried backwards, nor to another model.
    assert a.get(url).json()["comments"][0]["carried_from"] is None
