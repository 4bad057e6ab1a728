"""Deep links to comments in real Chromium (issue 14 item 7): `/c/<id>/comments/<cid>` opens the
comment's anchor with its thread beside it: an IR-line comment the IR after its pass with that line
marked, a node comment the fusion graph with the node selected, a loop-IR line comment the kernel's
code at the line (an assembly line through the assembly filter), a remark comment the pass's remarks
with the remark marked; a thread's "show in context" in the conversation does the same. The anchors'
texts come from the server (it fills `text` from the compilation's own IR), not from the page."""

from __future__ import annotations

import re

import pytest
from browserkit import pipeline_passes, shot
from test_provenance import conv_relu
from test_review import api_user

pytestmark = [pytest.mark.browser, pytest.mark.timeout(900)]

MARKED = ".{pane} .cm-line.cm-marked-line"


def comment(client, cid: str, anchor: dict, body: str) -> dict:
    r = client.post(f"/api/compilations/{cid}/comments", json={"anchor": anchor, "body": body})
    assert r.status_code == 201, r.text
    return r.json()


def beside(page, thread: int) -> None:
    """The thread is shown, alone, in the conversation column beside the anchor's pane."""
    page.wait_for_selector(f'.tab-content.beside-thread .comments.beside-anchor .thread.selected[data-thread="{thread}"]')
    assert page.locator(".comments .thread").count() == 1
    assert page.locator('.tab-panel[data-tab="comments"]').is_visible()


def test_deep_links_open_the_comments_anchor(stack, page, tmp_path):
    client = api_user(stack, "linda")
    try:
        with (conv_relu(tmp_path / "conv-relu.onnx")).open("rb") as f:
            model = client.post("/api/models", files={"model": ("conv-relu.onnx", f)}).json()["id"]
        comp = client.post("/api/compilations", json={"model": model, "pipeline": "O2", "options": {"benchmark": False, "verify": False}}).json()["id"]
        stack.wait_finished(comp)
        fuse = pipeline_passes(stack, "O2").index("fuse-ops")
        events = client.get(f"/api/compilations/{comp}/events?limit=1000").json()["events"]
        node = next(e for e in events if e["type"] == "graph.fused")["nodes"][-1]["name"]
        kernel = next(e["kernel"] for e in events if e["type"] == "kernel.lowered")
        ir = comment(client, comp, {"kind": "ir_line", "pass": fuse, "line": 3}, "this line")
        on_node = comment(client, comp, {"kind": "node", "node": node}, "this node")
        code = comment(client, comp, {"kind": "code_line", "kernel": kernel, "code": "loop", "line": 2}, "this loop")
        assert ir["anchor"]["text"].strip() and code["anchor"]["text"].strip()

        page.goto(f"{stack.url}/c/{comp}/comments/{ir['id']}")
        beside(page, ir["id"])
        assert page.locator('.tab.active[data-tab="pass"]').count() == 1
        marked = page.locator(MARKED.format(pane="ir-pane"))
        marked.wait_for()
        assert marked.count() == 1 and marked.inner_text().strip() == ir["anchor"]["text"].strip()
        assert page.url == f"{stack.url}/c/{comp}/comments/{ir['id']}"  # the deep link stays shareable
        shot(page, "reviewlink-01-ir-line")

        page.goto(f"{stack.url}/c/{comp}/comments/{on_node['id']}")
        beside(page, on_node["id"])
        page.wait_for_selector(".graph-svg .selected")
        assert page.inner_text(".graph-side h3") == node
        shot(page, "reviewlink-02-node")

        page.goto(f"{stack.url}/c/{comp}/comments?status=all")
        page.locator(f'.thread[data-thread="{code["id"]}"] .show-in-context').click()
        page.wait_for_url(f"{stack.url}/c/{comp}/comments/{code['id']}")
        beside(page, code["id"])
        marked = page.locator(MARKED.format(pane="kernel-detail"))
        marked.wait_for()
        assert marked.inner_text().strip() == code["anchor"]["text"].strip()
        assert page.inner_text(".kernel-detail h2").startswith(f"Kernel {kernel}")
        page.go_back()  # back to the conversation, every thread listed again
        page.wait_for_selector(f'.comments:not(.beside-anchor) .thread[data-thread="{ir["id"]}"]')
        assert page.locator(".comments .thread").count() == 3
        far_anchors(client, page, stack.url, comp, events, fuse)
    finally:
        client.close()


def far_anchors(client, page, base: str, comp: str, events: list[dict], fuse: int) -> None:
    """An assembly line's comment (its line number is the unfiltered text's; the view hides
    directives, so the shown line differs) and a remark's comment."""
    compiled = next(e for e in events if e["type"] == "kernel.compiled")
    asm = compiled["asm"].split("\n")
    at = next(i for i, t in enumerate(asm, 1)
              if i > 20 and re.match(r"^\s+v?[a-z]+\s", t) and "#" not in t and "prism" not in t and "." not in t.split()[0])
    on_asm = comment(client, comp, {"kind": "code_line", "kernel": compiled["kernel"], "code": "asm", "line": at}, "this instruction")
    page.goto(f"{base}/c/{comp}/comments/{on_asm['id']}")
    beside(page, on_asm["id"])
    marked = page.locator(MARKED.format(pane="kernel-detail"))
    marked.wait_for()
    assert marked.inner_text().split() == asm[at - 1].split()
    shot(page, "reviewlink-03-asm")

    on_remark = comment(client, comp, {"kind": "remark", "pass": fuse, "remark": 0}, "this remark")
    page.goto(f"{base}/c/{comp}/comments/{on_remark['id']}")
    beside(page, on_remark["id"])
    assert page.locator('.tab.active[data-tab="remarks"]').count() == 1
    sel = page.locator(f'.remarks .remark.selected[data-remark="{fuse}:0"]')
    sel.wait_for()
    assert page.locator(".remarks .remark.selected").count() == 1
    assert page.input_value(".remarks-pass") == "fuse-ops"
