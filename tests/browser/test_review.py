"""Two people review a ResNet-50 compilation in two real Chromium contexts (issue 14): A comments on
a fusion node and on an IR line, B sees both live (the delay is measured and printed), replies and
requests changes; A recompiles with another pipeline, the unresolved comments appear there (one
outdated: its pass is not in the new pipeline), A resolves them, B approves.

The two users are on one team and the compilations are private: every page and socket here is one
that a non-member would get a 404 / 4404 for (tests/explorer/test_explorer_access.py)."""

from __future__ import annotations

import time
from pathlib import Path

import httpx
import onnx
import pytest
from browserkit import pipeline_passes, shot

pytestmark = [pytest.mark.browser, pytest.mark.timeout(900)]

RESNET50 = Path(onnx.__file__).parent / "backend/test/data/light/light_resnet50.onnx"
PASSWORD = "review-pass-2026"
XSS = '<img src=x onerror="window.__xss=1"> <script>window.__xss=2</script>'

# Records when each thread first appears in the page (Date.now(), the machine's clock).
SEEN = """() => {
  window.__seen = {};
  new MutationObserver(() => {
    for (const t of document.querySelectorAll('.thread[data-thread]')) {
      window.__seen[t.dataset.thread] ??= Date.now();
    }
  }).observe(document.body, {subtree: true, childList: true});
}"""


def api_user(stack, name: str) -> httpx.Client:
    with httpx.Client(base_url=stack.url, timeout=60) as c:
        r = c.post("/api/auth/signup", json={"username": name, "password": PASSWORD})
        assert r.status_code in (201, 400), r.text
        token = c.post("/api/auth/token", json={"username": name, "password": PASSWORD}).json()["token"]
    return httpx.Client(base_url=stack.url, timeout=120, headers={"Authorization": f"Token {token}"})


def compile_private(client: httpx.Client, stack, model: str, pipeline: str) -> str:
    r = client.post("/api/compilations", json={"model": model, "pipeline": pipeline, "visibility": "private",
                                                "options": {"benchmark": False, "verify": False}, "cache": False})
    assert r.status_code == 201, r.text
    cid = r.json()["id"]
    deadline = time.monotonic() + 600
    while client.get(f"/api/compilations/{cid}").json()["status"] not in ("succeeded", "failed"):
        assert time.monotonic() < deadline, "compilation did not finish"
        time.sleep(0.5)
    assert client.get(f"/api/compilations/{cid}").json()["status"] == "succeeded"
    return cid


def sign_in(page, base: str, name: str, next_path: str) -> None:
    page.goto(f"{base}/signin?next={next_path}")
    page.fill("input[name=username]", name)
    page.fill("input[name=password]", PASSWORD)
    page.click(".auth-form button[type=submit]")
    page.wait_for_url(f"{base}{next_path}")
    page.wait_for_selector(".user-menu .signed-in")


def post_comment(page, body: str) -> tuple[float, float]:
    """Writes `body` in the open composer and posts it; `(sent, answered)`: the Unix times in ms
    at which the browser sent the POST and got the first byte of the answer (Chromium's timing)."""
    page.wait_for_selector("dialog.composer[open]")
    page.fill("dialog.composer textarea", body)
    with page.expect_response(lambda r: r.url.endswith("/comments") and r.request.method == "POST") as resp:
        page.click("dialog.composer .comment-post")
    assert resp.value.status == 201, resp.value.text()
    page.wait_for_selector("dialog.composer", state="detached")
    timing = resp.value.request.timing
    return timing["startTime"], timing["startTime"] + timing["responseStart"]


def test_two_people_review_a_resnet50_compilation(stack, browser):
    o2, o1 = pipeline_passes(stack, "O2"), pipeline_passes(stack, "O1")
    fuse = o2.index("fuse-ops")
    assert "fuse-ops" not in o1
    a_api, b_api = api_user(stack, "ada"), api_user(stack, "bob")
    a_api.post("/api/teams", json={"name": "Reviewers", "slug": "reviewers"})
    assert a_api.post("/api/teams/reviewers/members", json={"username": "bob"}).status_code == 200
    with RESNET50.open("rb") as f:
        model = a_api.post("/api/models", files={"model": (RESNET50.name, f)}, data={"visibility": "private"}).json()["id"]
    first = compile_private(a_api, stack, model, "O2")
    assert httpx.get(f"{stack.url}/api/compilations/{first}").status_code == 404  # private

    ctx_a = browser.new_context(viewport={"width": 1400, "height": 900})
    ctx_b = browser.new_context(viewport={"width": 1400, "height": 900})
    a, b = ctx_a.new_page(), ctx_b.new_page()
    errors: list[str] = []
    for p in (a, b):
        p.on("pageerror", lambda e: errors.append(str(e)))
    try:
        base = stack.url
        sign_in(b, base, "bob", f"/c/{first}/comments")
        b.wait_for_selector(".comments .threads")
        b.evaluate(SEEN)

        fused = a_api.get(f"/api/compilations/{first}/events?limit=1000").json()["events"]
        node = next(e for e in fused if e["type"] == "graph.fused")["nodes"][0]["name"]
        sign_in(a, base, "ada", f"/c/{first}/graph?node={node}")
        a.click(".graph-side .comment-node")
        t_node = post_comment(a, f"Why is **{node}** fused here? {XSS}")
        a.wait_for_selector(".graph-svg .comment-count")  # the node's badge on the graph
        assert "1 open thread" in a.inner_text(".graph-side")
        a.goto(f"{base}/c/{first}/pass/{fuse}")
        a.wait_for_selector(".ir-pane .cm-comment-gutter")
        a.locator(".ir-pane .cm-comment-gutter .cm-gutterElement").nth(3).click()
        t_line = post_comment(a, "This line: a missed fusion?")
        a.wait_for_selector(f'.timeline-row[data-index="{fuse}"] .pass-comments[aria-label="1 open comment thread"] svg.icon-comment')  # an icon, no emoji
        a.wait_for_selector(".ir-pane .comment-mark.has-comments")

        threads = a_api.get(f"/api/compilations/{first}/comments").json()["comments"]
        node_c = next(c for c in threads if c["kind"] == "node")
        line_c = next(c for c in threads if c["kind"] == "ir_line")
        assert line_c["anchor"]["pass"] == fuse
        b.wait_for_selector(f'.thread[data-thread="{node_c["id"]}"]')
        b.wait_for_selector(f'.thread[data-thread="{line_c["id"]}"]')
        seen = b.evaluate("window.__seen")
        shown = [seen[str(node_c["id"])], seen[str(line_c["id"])]]
        delays = [s - t[0] for s, t in zip(shown, (t_node, t_line), strict=True)]  # A's click -> B shows it
        after = [s - t[1] for s, t in zip(shown, (t_node, t_line), strict=True)]  # A's answer -> B shows it
        print(f"\nlive delay, A sends the comment -> B's page shows it: node {delays[0]:.0f} ms, IR line "
              f"{delays[1]:.0f} ms (after A's own answer: {after[0]:.0f} ms, {after[1]:.0f} ms)")
        # Live, not on a reload or a poll: the figure is printed above; the bound is loose because CI shares
        # two cores with the stack's web server and worker (3.5 s was seen at load 20; ~0.1 s on a quiet machine).
        assert max(delays) < 5000, delays
        node_thread = b.locator(f'.thread[data-thread="{node_c["id"]}"]')
        assert XSS.split(">")[0] in node_thread.inner_text()  # the HTML is shown as text
        assert node_thread.locator("img, script").count() == 0 and b.evaluate("window.__xss") is None
        assert node_thread.locator(".comment-body strong").inner_text() == node
        shot(b, "review-01-b-sees-comments")

        node_thread.locator(".reply-text").fill("Because its Relu has one consumer.")
        node_thread.locator(".reply-send").click()
        node_thread.locator(".comment").nth(1).wait_for()
        b.click(".review-form > summary")
        b.select_option(".review-verdict", "request_changes")
        b.fill(".review-summary", "Please look at the fused group.")
        b.click(".review-submit")
        b.wait_for_selector(".review-state .changes-requested")
        a.wait_for_selector(".review-state .changes-requested")  # live in A's header too
        assert "bob" in a.inner_text(".review-state")

        second = compile_private(a_api, stack, model, "O1")
        a.goto(f"{base}/c/{second}/comments")
        a.wait_for_selector(f'.thread[data-thread="{node_c["id"]}"]')
        carried = a.locator(".thread")
        assert carried.count() == 2
        outdated = a.locator(".thread.outdated")
        assert outdated.count() == 1 and outdated.get_attribute("data-thread") == str(line_c["id"])
        assert a.locator(".thread .carried-link").first.get_attribute("href") == f"/c/{first}/comments/{node_c['id']}"
        assert "Because its Relu" in a.inner_text(f'.thread[data-thread="{node_c["id"]}"]')
        shot(a, "review-02-carried")
        a.select_option(".comments-status", "all")  # resolved threads leave the default "open" list
        a.wait_for_url(f"{base}/c/{second}/comments?status=all")
        for cid in (node_c["id"], line_c["id"]):
            a.locator(f'.thread[data-thread="{cid}"] .thread-resolve').click()
            a.wait_for_selector(f'.thread.resolved[data-thread="{cid}"]', state="attached")
        b.goto(f"{base}/c/{second}")
        b.click(".review-form > summary")
        b.select_option(".review-verdict", "approve")
        b.click(".review-submit")
        b.wait_for_selector(".review-state .approved")
        a.wait_for_selector(".review-state .approved")
        assert "approved by bob" in a.inner_text(".review-state")
        listed = a_api.get(f"/api/compilations/{second}/comments").json()["comments"]
        assert all(c["resolved"] for c in listed)
        shot(a, "review-03-approved")
        b.goto(f"{base}/compare/{first}...{second}")  # both sides' comments
        # each side's comments load on their own: wait for both (was: the first, so B's could be empty)
        for side in range(2):
            b.locator(".compare-comments .compare-side-comments").nth(side).locator("h4").wait_for()
        sides = b.locator(".compare-side-comments")
        assert "2 thread(s)" in sides.nth(0).inner_text() and "2 thread(s)" in sides.nth(1).inner_text()
        assert b.locator(".compare-comments img, .compare-comments script").count() == 0
    finally:
        ctx_a.close()
        ctx_b.close()
        a_api.close()
        b_api.close()
    assert not errors, errors
