"""Defects a new user hit (issue 15 item 9, found after the first round), each in real Chromium:
the kernels table's "ops" column of an O1 compilation (no fusion: every kernel one node) showed the
kernel's status instead of its op; signing in could leave the address bar on /signin (a `next` that
was the sign-in page itself, e.g. a header link followed from it), with no sign of progress while
the password was checked. Screenshots under test-artifacts/browser/ (newuser-*.png)."""

from __future__ import annotations

import re

import onnx
import pytest
from browserkit import conv_relu, shot

pytestmark = [pytest.mark.browser, pytest.mark.timeout(900)]

PASSWORD = "new-user-pass-2026"
STATUSES = {"lowered", "compiled", "timed", "grouped"}


def test_the_ops_column_of_an_o1_compilation_names_each_kernels_op(stack, page, tmp_path):
    path = conv_relu(tmp_path / "conv-relu.onnx")
    comp = stack.compile(stack.upload(path)["id"], pipeline="O1")
    stack.wait_finished(comp["id"])
    with stack.http() as c:
        events = c.get(f"/api/compilations/{comp['id']}/events").json()["events"]
    assert not any(e["type"] == "graph.fused" for e in events)  # O1 fuses nothing: no groups to read ops from
    # the oracle: each kernel's ONNX node's op type, from the uploaded model
    op_of = {n.name: n.op_type for n in onnx.load(path).graph.node}
    want = {e["kernel"]: [op_of[n] for n in e["nodes"]] for e in events if e["type"] == "kernel.lowered"}
    page.goto(f"{stack.url}/c/{comp['id']}/kernels")
    page.wait_for_selector(".kernels-table tbody tr")
    cells = dict(page.evaluate("() => [...document.querySelectorAll('.kernels-table tbody tr')]"
                               ".map(r => [r.dataset.kernel, r.querySelector('td.ops').textContent])"))
    assert cells == {k: f"{len(ops)}: {'+'.join(ops)}" for k, ops in want.items()}, cells
    assert not STATUSES & set(cells.values())
    shot(page, "newuser-01-o1-ops-column")


def _sign_in(page, stack) -> None:
    page.fill("input[name=username]", "newcomer")
    page.fill("input[name=password]", PASSWORD)
    page.click(".auth-form button[type=submit]")


def test_signing_in_leaves_the_sign_in_page(stack, page):
    with stack.http() as c:
        assert c.post("/api/auth/signup", json={"username": "newcomer", "password": PASSWORD}).status_code in (200, 201)
    home = re.compile(rf"^{re.escape(stack.url)}/$")
    # from the start page's header link, and with a `next` that is the sign-in page itself
    for start in ("/", "/signin?next=/signin", "/signin?next=%2Fsignup"):
        page.context.clear_cookies()
        page.goto(f"{stack.url}{start}")
        if start == "/":
            page.click(".user-menu .sign-in")
        page.wait_for_selector(".auth-form")
        _sign_in(page, stack)
        page.wait_for_url(home, timeout=30_000)
        page.wait_for_selector(".user-menu .signed-in")
        assert page.inner_text(".user-menu .signed-in") == "newcomer"
    shot(page, "newuser-02-signed-in")
    # signed in already: /signin moves on instead of asking again
    page.goto(f"{stack.url}/signin?next=/signin")
    page.wait_for_url(home, timeout=30_000)
    page.wait_for_selector(".user-menu .signed-in")
