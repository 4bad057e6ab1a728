"""Browser tests: Debian's Chromium driven by Playwright (headless) against a real Prism stack
(daphne, a Celery worker, Redis) built by tests/explorer/prism_stack.py.

Chromium comes from apt (`apt-get install chromium`), never from `playwright install`. Without
it these tests are skipped, unless PRISM_REQUIRE_BROWSER=1 (set by .ci/run), where they fail.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests" / "explorer"))

from prism_stack import Stack  # noqa: E402

CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"]


def chromium_path() -> str | None:
    for name in ("chromium", "chromium-browser"):
        found = shutil.which(name)
        if found:
            return found
    return None


def _missing(reason: str) -> None:
    if os.environ.get("PRISM_REQUIRE_BROWSER") == "1":
        pytest.fail(reason)
    pytest.skip(reason)


@pytest.fixture(scope="session")
def stack(tmp_path_factory):
    if not (REPO / "frontend" / "dist" / "index.html").exists():
        _missing("frontend/dist is not built: run `cd frontend && npm ci && npm run build`")
    # one session-wide stack signs up and signs in a user per test from one address: the default
    # 10/min sign-in throttle (PRISM_LOGIN_RATE; likewise the comment and WebSocket-connect limits) would
    # refuse the later ones (their own tests: tests/explorer/test_explorer_accounts.py and
    # test_explorer_rate_limits.py)
    with Stack.running(tmp_path_factory.mktemp("browser-stack"), workers=("worker",),
                       PRISM_LOGIN_RATE="1000/min", PRISM_COMMENT_RATE="1000/min",
                       PRISM_WS_CONNECT_RATE="10000/min") as s:
        yield s


@pytest.fixture(scope="module")
def browser():
    # Module scope: sync_playwright keeps an asyncio loop running in this thread until it exits;
    # a session-wide one would break later tests that call asyncio.run().
    exe = chromium_path()
    if exe is None:
        _missing("Chromium is not installed (apt-get install chromium)")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _missing("playwright is not installed (pip install -r requirements-dev.txt)")
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=exe, args=CHROMIUM_FLAGS)
        yield b
        b.close()


@pytest.fixture
def context(browser):
    ctx = browser.new_context(
        viewport={"width": 1400, "height": 900}, permissions=["clipboard-read", "clipboard-write"]
    )
    yield ctx
    ctx.close()


@pytest.fixture
def page(context):
    pg = context.new_page()
    errors: list[str] = []
    pg.on("pageerror", lambda e: errors.append(str(e)))
    pg.errors = errors  # type: ignore[attr-defined]
    yield pg
    assert not errors, f"uncaught errors in the page: {errors}"
