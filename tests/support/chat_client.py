"""A person in a Jupyter Chat document, as JupyterLab's chat panel is one: jupyterlab-chat's own
WebSocket protocol (`{base_url}api/chat/ws/<path>`: a `connection` frame, then `message`,
`users` and `writing` frames; the client sends `{type: "client", action: "send", id, body}`).

The tests of rooms in Jupyter Chat and the chunk → chat benchmark drive Conch through it, as a
browser would, never by calling Conch's functions.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import Callable
from typing import Any

from tornado.websocket import WebSocketClientConnection


class ChatClient:
    def __init__(self, ws: WebSocketClientConnection) -> None:
        self.ws = ws
        self.chat_id = ""
        self.me = ""
        self.messages: dict[str, dict[str, Any]] = {}  # by id, as the chat shows each now
        self.order: list[str] = []  # ids in the order they first came
        self.bodies: dict[str, list[str]] = {}  # every body each message was shown with
        self.seen_at: dict[str, list[float]] = {}  # when each body came (time.perf_counter)
        self.users: dict[str, dict[str, Any]] = {}

    @classmethod
    async def open(cls, ws: WebSocketClientConnection) -> ChatClient:
        client = cls(ws)
        await client.until(lambda c: c.chat_id)
        return client

    async def send(self, body: str) -> str:
        message_id = str(uuid.uuid4())
        frame = {"type": "client", "action": "send", "id": message_id, "body": body}
        await self.ws.write_message(json.dumps(frame))
        return message_id

    async def until(self, check: Callable[[ChatClient], Any], timeout: float = 30.0) -> Any:
        """Read frames until `check` is truthy; its value. Fails with what the chat shows."""
        deadline = time.monotonic() + timeout
        while not (found := check(self)):
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"timed out; the chat shows:\n{self.transcript()}")
            try:
                raw = await asyncio.wait_for(self.ws.read_message(), left)
            except asyncio.TimeoutError:
                continue
            if raw is None:
                raise AssertionError(f"the chat closed; it showed:\n{self.transcript()}")
            self._take(json.loads(raw))
        return found

    def _take(self, frame: dict[str, Any]) -> None:
        action = frame.get("action")
        if action == "connection":
            self.chat_id, self.me = frame["id"], frame["user"]["username"]
            self.users.update(frame.get("users") or {})
            for message in frame.get("messages") or []:
                self._message(message)
        elif action == "message":
            self._message(frame["message"])
        elif action == "users":
            self.users.update(frame["users"])

    def _message(self, message: dict[str, Any]) -> None:
        message_id = message["id"]
        if message_id not in self.messages:
            self.order.append(message_id)
        self.messages[message_id] = message
        self.bodies.setdefault(message_id, []).append(message.get("body", ""))
        self.seen_at.setdefault(message_id, []).append(time.perf_counter())

    def shown(self) -> list[dict[str, Any]]:
        """The messages in the order they came."""
        return [self.messages[i] for i in self.order]

    def by(self, sender: str) -> list[dict[str, Any]]:
        return [m for m in self.shown() if m["sender"] == sender]

    def name_of(self, sender: str) -> str:
        user = self.users.get(sender) or {}
        return str(user.get("display_name") or user.get("name") or sender)

    def transcript(self) -> str:
        return "\n".join(f"{self.name_of(m['sender'])}: {m.get('body', '')}" for m in self.shown())
