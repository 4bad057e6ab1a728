"""Run a coroutine to completion from a sync test, whatever loop the main thread holds.

Playwright's sync API (tests/browser) leaves an event loop running in the main thread, where
`asyncio.run` refuses to start; a fresh thread always has none."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine
from typing import Any


def run_async(coro: Coroutine[Any, Any, Any]) -> Any:
    result: dict[str, Any] = {}

    def target() -> None:
        try:
            result["value"] = asyncio.run(coro)
        except BaseException as exc:  # noqa: BLE001 - re-raised in the caller's thread
            result["error"] = exc

    thread = threading.Thread(target=target, name="test-async")
    thread.start()
    thread.join()
    if "error" in result:
        raise result["error"]
    return result.get("value")
