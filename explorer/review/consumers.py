"""WebSocket /ws/compilations/<id>/comments/?after=<seq>: a compilation's comment and review log,
live, each entry at most once and in seq order, also across reconnects (the event log's
discipline: DESIGN.md, `compilations.consumers`).

The log is the model's (`ReviewEvent`, one seq for every compilation of the same bytes, since
comments carry over). On connect the consumer joins the model's group first, then sends the stored
entries after `after` that concern this compilation and that the requester may see (each shaped by
`selectors.log_after`, as the requester sees it now); later entries arrive as seq-only hints from
the channel layer (at-most-once: a dropped one is found by the next hint or by the poll every
`POLL_S`). The socket stays open until the client leaves. Close codes: 4404 unknown or invisible
compilation, 4400 bad `after`. Message names: `compilations.messages`.
"""

from __future__ import annotations

import asyncio
import json
from urllib.parse import parse_qs

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncWebsocketConsumer

from explorer.compilations import messages
from explorer.compilations import selectors as compilation_selectors
from explorer.compilations.models import Compilation
from explorer.review import selectors
from explorer.web.security import refuse_flood

POLL_S = 2.0


class CommentsConsumer(AsyncWebsocketConsumer):
    compilation: Compilation | None = None
    group: str | None = None
    after: int = -1

    async def connect(self) -> None:
        self.lock = asyncio.Lock()
        self.poller: asyncio.Task | None = None
        await self.accept()
        if await refuse_flood(self):
            return
        query = parse_qs(self.scope.get("query_string", b"").decode())
        try:
            self.after = max(-1, int(query.get("after", ["-1"])[0]))
        except ValueError:
            await self.close(code=messages.CLOSE_BAD_REQUEST)
            return
        self.compilation = await self.visible_compilation()
        if self.compilation is None:
            await self.close(code=messages.CLOSE_NOT_FOUND)
            return
        self.group = messages.review_group_name(self.compilation.model.sha256)
        await self.channel_layer.group_add(self.group, self.channel_name)
        async with self.lock:
            await self.catch_up()
        self.poller = asyncio.ensure_future(self.poll())

    async def disconnect(self, code: int) -> None:
        if self.poller is not None:
            self.poller.cancel()
        if self.group is not None:
            await self.channel_layer.group_discard(self.group, self.channel_name)

    async def receive(self, text_data=None, bytes_data=None) -> None:
        """Clients have nothing to say; incoming frames are ignored."""

    async def review_hint(self, message: dict) -> None:
        """A hint that the log has `seq`: read what is new (a late or duplicate hint reads nothing)."""
        if message.get("seq", -1) <= self.after:
            return
        async with self.lock:
            await self.catch_up()

    async def catch_up(self) -> None:
        """Send every relevant stored entry after `self.after`. Call with `self.lock` held."""
        while True:
            out, last = await self.read_after(self.after)
            for msg in out:
                await self.send(text_data=json.dumps(msg))
            if last == self.after:
                return
            self.after = last

    async def poll(self) -> None:
        while True:
            await asyncio.sleep(POLL_S)
            async with self.lock:
                await self.catch_up()

    @database_sync_to_async
    def visible_compilation(self) -> Compilation | None:
        return compilation_selectors.compilation_for(self.scope.get("user"), self.scope["url_route"]["kwargs"]["compilation_id"])

    @database_sync_to_async
    def read_after(self, after: int) -> tuple[list[dict], int]:
        assert self.compilation is not None
        return selectors.log_after(self.scope.get("user"), self.compilation, after)
