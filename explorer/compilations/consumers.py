"""WebSocket /ws/compilations/<id>/?after=<seq>: a compilation's events, each exactly once, in order.

The requester (session cookie or `Authorization: Token`, `accounts.ws_auth`) must be able to see
the compilation (`selectors.compilation_for`); otherwise the socket closes with 4404, as for an
unknown id.

On connect the consumer joins the compilation's group first and then replays the stored events
with seq > after, so nothing published meanwhile is missed. Live messages from the channel layer
are hints (it drops messages when a channel is full or a message expires, DESIGN.md): an event
whose seq is the next expected is sent as it came; one beyond it makes the consumer read the gap
from the database first; one at or below the last sent is a late duplicate and is dropped. A
periodic poll reads the database while no terminal event has been sent, so that a dropped *last*
event is found too. After the terminal event the server closes the socket with code 1000; before
an event too large for one WebSocket message it closes with 4413 (`messages.CLOSE_EVENT_TOO_LARGE`)
and the client reads that event over HTTP.

Clients resume: daphne's WebSocket layer (autobahn) aborts a closing handshake that the client has
not answered within 1 s, and whatever a slow client had not read yet is lost with the connection
(it ends without the terminal event, with or without a close frame). A client that sees the socket
end before the terminal event reconnects with ``?after=<last seq it holds>`` and gets exactly the
rest; the browser (frontend/src/api.ts), scripts/watch.py and the tests' client all do
(tests/explorer/test_explorer_stack.py::test_a_slow_reader_gets_every_event_once_resuming_after_a_drop).
"""

from __future__ import annotations

import asyncio
import json
from urllib.parse import parse_qs

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncWebsocketConsumer

from compiler.events import TERMINAL_EVENT_TYPES
from explorer.compilations import messages, selectors
from explorer.compilations.models import Compilation
from explorer.web.security import refuse_flood

POLL_S = 2.0
REPLAY_BATCH = 200


class CompilationEventsConsumer(AsyncWebsocketConsumer):
    compilation_id: str
    compilation: Compilation | None
    next_seq: int
    finished: bool

    async def connect(self) -> None:
        self.compilation_id = self.scope["url_route"]["kwargs"]["compilation_id"]
        self.finished = False
        self.lock = asyncio.Lock()
        self.poller: asyncio.Task | None = None
        self.group = messages.group_name(self.compilation_id)
        await self.accept()
        if await refuse_flood(self):
            return
        query = parse_qs(self.scope.get("query_string", b"").decode())
        try:
            after = int(query.get("after", ["-1"])[0])
        except ValueError:
            await self.close(code=messages.CLOSE_BAD_REQUEST)
            return
        self.compilation = await self.visible_compilation()
        if self.compilation is None:  # unknown, or not visible to the requester: the same answer
            await self.close(code=messages.CLOSE_NOT_FOUND)
            return
        self.next_seq = max(after, -1) + 1
        await self.channel_layer.group_add(self.group, self.channel_name)
        async with self.lock:
            await self.catch_up()
            await self.close_if_log_ended()
        if not self.finished:
            self.poller = asyncio.ensure_future(self.poll())

    async def disconnect(self, code: int) -> None:
        if self.poller is not None:
            self.poller.cancel()
        await self.channel_layer.group_discard(self.group, self.channel_name)

    async def receive(self, text_data=None, bytes_data=None) -> None:
        """Clients have nothing to say; incoming frames are ignored."""

    async def compilation_event(self, message: dict) -> None:
        """A live hint from the worker: `{"seq", "event" or None}` (see `messages`)."""
        async with self.lock:
            if self.finished or message["seq"] < self.next_seq:
                return  # late duplicate
            event = message.get("event")
            if message["seq"] == self.next_seq and event is not None:
                await self.deliver(event)
            else:
                await self.catch_up()  # a gap (dropped messages) or a seq-only hint

    async def catch_up(self) -> int:
        """Send every stored event from `next_seq` on; return how many. Call with `self.lock` held."""
        sent = 0
        while not self.finished:
            events = await self.read_events(self.next_seq - 1, REPLAY_BATCH)
            for event in events:
                if self.finished:
                    return sent
                await self.deliver(event)
                sent += 1
            if len(events) < REPLAY_BATCH:
                break
        return sent

    async def close_if_log_ended(self) -> None:
        """Close when the log has ended before `next_seq` (the client asked to resume after the
        terminal event, or after a seq the log never reached before it ended)."""
        if not self.finished and await self.log_ended():
            self.finished = True
            await self.close(code=1000)

    async def deliver(self, event: dict) -> None:
        text = json.dumps(event)
        if len(text.encode()) > messages.WS_MESSAGE_MAX_BYTES:
            # Too large for one WebSocket message: the client reads it (and what follows) over HTTP
            # and reconnects after it (messages.CLOSE_EVENT_TOO_LARGE).
            self.finished = True
            await self.close(code=messages.CLOSE_EVENT_TOO_LARGE)
            return
        await self.send(text_data=text)
        self.next_seq = event["seq"] + 1
        if event["type"] in TERMINAL_EVENT_TYPES:
            self.finished = True
            await self.close(code=1000)

    async def poll(self) -> None:
        while not self.finished:
            await asyncio.sleep(POLL_S)
            async with self.lock:
                if not await self.catch_up():
                    await self.close_if_log_ended()

    @database_sync_to_async
    def visible_compilation(self) -> Compilation | None:
        return selectors.compilation_for(self.scope.get("user"), self.compilation_id)

    @database_sync_to_async
    def log_ended(self) -> bool:
        assert self.compilation is not None
        last = selectors.last_event(self.compilation)
        return last is not None and last["type"] in TERMINAL_EVENT_TYPES

    @database_sync_to_async
    def read_events(self, after: int, limit: int) -> list[dict]:
        assert self.compilation is not None
        return selectors.events_after(self.compilation, after, limit)
