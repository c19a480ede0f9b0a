"""Live fan-out of a chat's happenings to whoever follows it (the event stream, the widget).

Stored things (messages, events) are published after they are stored; reply deltas and the live
round state are published as they happen and never stored. A follower that cannot keep up is
dropped rather than letting memory grow: it reconnects and starts again from a snapshot, which
carries what each reply still streaming has said so far (`streaming`), so a view that follows
again loses no words and doubles none.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from ..core.render import render_markdown
from .rows import Event, Message

Item = dict[str, Any]

# A follower this far behind is reading nothing; drop it instead of queueing forever.
FOLLOWER_QUEUE_LIMIT = 2_000


class Hub:
    def __init__(self) -> None:
        self._followers: dict[str, set[asyncio.Queue[Item | None]]] = defaultdict(set)
        # conversation id -> reply id -> (agent id, the chunks so far): replies still streaming.
        self._streaming: dict[str, dict[str, tuple[str, list[str]]]] = defaultdict(dict)
        self._closed = False

    def publish(self, conversation_id: str, item: Item) -> None:
        self._remember(conversation_id, item)
        self._send(conversation_id, item)

    def everyone(self, item: Item) -> None:
        """An item for every chat someone follows (who is who changed: an agent or an outside
        agent added, renamed or removed), so every open view offers the names at once."""
        for conversation_id in [c for c, queues in self._followers.items() if queues]:
            self._send(conversation_id, item)

    def delta(self, conversation_id: str, reply_id: str, agent_id: str, text: str) -> None:
        """A piece of a reply as it streams: kept for the next snapshot, and sent to the chat's
        followers. The hot path of every reply, so the item is only made for a follower."""
        self._keep(conversation_id, reply_id, agent_id, text)
        if conversation_id in self._followers:
            item = {"type": "delta", "reply": reply_id, "agent": agent_id, "text": text}
            self._send(conversation_id, item)

    def _send(self, conversation_id: str, item: Item) -> None:
        for queue in list(self._followers.get(conversation_id, ())):
            try:
                queue.put_nowait(item)
            except asyncio.QueueFull:
                self._followers[conversation_id].discard(queue)
                # Make room for the end marker so the follower learns it was dropped.
                queue.get_nowait()
                queue.put_nowait(None)

    def message(
        self, message: Message, name: str | None = None, cost: dict[str, Any] | None = None
    ) -> None:
        """A stored message, to its chat's followers (`name`: the speaker's display name;
        `cost`: a metered reply's tokens and cost)."""
        if message.conversation_id not in self._followers:
            # Nobody to send it to: only what publishing it would remember (a reply stored
            # under its reply id no longer streams), without making the item.
            self._forget(message.conversation_id, message.id)
            return
        data = message.to_json()
        if name is not None:
            data["name"] = name
        if cost is not None:
            data["cost"] = cost
        # Its seq beside it (not in it): where a stream that resumes stands (store/pages.py).
        item = {"type": "message", "message": data, "seq": message.seq}
        self.publish(message.conversation_id, item)

    def draw_ahead(self, conversation_id: str, text: str) -> None:
        """Draw a message's HTML while it is being stored, for a chat someone follows: the
        writer commits in a thread of its own, so the drawing (~120 µs for a 400-character
        reply) is off the time between two turns, and message() then finds it drawn
        (render_markdown keeps what it drew)."""
        if conversation_id in self._followers:
            render_markdown(text)

    def event(self, event: Event) -> None:
        """A stored event, to its chat's followers."""
        self.publish(event.conversation_id, {"type": "event", "event": event.to_json()})

    def streaming(self, conversation_id: str) -> list[Item]:
        """The replies still streaming in a chat: [{reply, agent, text so far}]."""
        live = self._streaming.get(conversation_id, {})
        return [{"reply": r, "agent": a, "text": "".join(p)} for r, (a, p) in live.items()]

    def _remember(self, conversation_id: str, item: Item) -> None:
        kind = item.get("type")
        if kind == "delta":
            reply, agent = str(item["reply"]), str(item.get("agent"))
            self._keep(conversation_id, reply, agent, str(item.get("text", "")))
        elif kind == "message":  # a reply is stored under its reply id once it settles
            self._forget(conversation_id, str(item["message"]["id"]))
        elif kind == "round" and item.get("round") is None:  # the round (or lone reply) ended
            self._streaming.pop(conversation_id, None)

    def _keep(self, conversation_id: str, reply_id: str, agent_id: str, text: str) -> None:
        live = self._streaming[conversation_id]
        kept = live.get(reply_id)
        if kept is None:
            kept = live[reply_id] = (agent_id, [])
        kept[1].append(text)

    def _forget(self, conversation_id: str, reply_id: str) -> None:
        live = self._streaming.get(conversation_id)
        if live is not None:
            live.pop(reply_id, None)
            if not live:
                del self._streaming[conversation_id]

    def followers(self, conversation_id: str) -> int:
        return len(self._followers.get(conversation_id, ()))

    @asynccontextmanager
    async def follow(self, conversation_id: str) -> AsyncIterator[asyncio.Queue[Item | None]]:
        """A queue of items for one follower; None in it means the follower was dropped."""
        queue: asyncio.Queue[Item | None] = asyncio.Queue(FOLLOWER_QUEUE_LIMIT)
        if self._closed:
            # Followed after the server began to go away (a stream that reconnected on a
            # connection still open): nothing more will come, so it ends at once.
            queue.put_nowait(None)
        self._followers[conversation_id].add(queue)
        try:
            yield queue
        finally:
            followers = self._followers.get(conversation_id)
            if followers is not None:
                followers.discard(queue)
                if not followers:
                    del self._followers[conversation_id]

    def close(self) -> None:
        """Tell every follower the server is going away."""
        self._closed = True
        for followers in self._followers.values():
            for queue in followers:
                if queue.full():
                    queue.get_nowait()
                queue.put_nowait(None)
        self._followers.clear()
