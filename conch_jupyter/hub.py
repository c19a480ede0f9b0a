"""Live fan-out of a chat's happenings to whoever follows it (the event stream, the widget).

Stored things (messages, events) are published after they are stored; reply deltas and the live
round state are published as they happen and never stored. A follower that cannot keep up is
dropped rather than letting memory grow: it reconnects and starts again from a snapshot.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from .rows import Event, Message

Item = dict[str, Any]

# A follower this far behind is reading nothing; drop it instead of queueing forever.
FOLLOWER_QUEUE_LIMIT = 2_000


class Hub:
    def __init__(self) -> None:
        self._followers: dict[str, set[asyncio.Queue[Item | None]]] = defaultdict(set)

    def publish(self, conversation_id: str, item: Item) -> None:
        for queue in list(self._followers.get(conversation_id, ())):
            try:
                queue.put_nowait(item)
            except asyncio.QueueFull:
                self._followers[conversation_id].discard(queue)
                # Make room for the end marker so the follower learns it was dropped.
                queue.get_nowait()
                queue.put_nowait(None)

    def message(self, message: Message, name: str | None = None) -> None:
        """A stored message, to its chat's followers (`name`: the speaker's display name)."""
        data = message.to_json()
        if name is not None:
            data["name"] = name
        self.publish(message.conversation_id, {"type": "message", "message": data})

    def event(self, event: Event) -> None:
        """A stored event, to its chat's followers."""
        self.publish(event.conversation_id, {"type": "event", "event": event.to_json()})

    def followers(self, conversation_id: str) -> int:
        return len(self._followers.get(conversation_id, ()))

    @asynccontextmanager
    async def follow(self, conversation_id: str) -> AsyncIterator[asyncio.Queue[Item | None]]:
        """A queue of items for one follower; None in it means the follower was dropped."""
        queue: asyncio.Queue[Item | None] = asyncio.Queue(FOLLOWER_QUEUE_LIMIT)
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
        for followers in self._followers.values():
            for queue in followers:
                if queue.full():
                    queue.get_nowait()
                queue.put_nowait(None)
        self._followers.clear()
