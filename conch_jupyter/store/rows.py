"""The rows the chat store hands out: plain frozen dataclasses with the API's JSON shapes."""

from __future__ import annotations

import json
import os
import time
import uuid
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Literal

from ..core.render import render_markdown

Role = Literal["user", "agent", "outside", "note", "tool"]
Mode = Literal["ask", "auto", "read"]
Origin = Literal["user", "peer"]
# Whose words are drawn as Markdown (a note is Conch's own plain line; a tool call's log is
# plain text).
SEALED_ROLES = ("user", "agent", "outside")


def month_start(ts: float) -> float:
    """The start (UTC) of the calendar month holding `ts`: where the monthly budget restarts."""
    day = datetime.fromtimestamp(ts, tz=timezone.utc)
    return day.replace(day=1, hour=0, minute=0, second=0, microsecond=0).timestamp()


def ordered_uuid() -> uuid.UUID:
    """A UUID of version 7 (RFC 9562): the time in milliseconds, then 74 random bits. The store's
    rows are keyed by these, so each new one goes at the end of its table's index rather than at
    a random place in it: with random keys, a store holding many chats writes a page of every
    index for each row it adds, where a new store writes the same few pages again."""
    value = (time.time_ns() // 1_000_000) << 80 | int.from_bytes(os.urandom(10), "big")
    value = value & ~(0xF << 76) | 0x7 << 76  # the version
    value = value & ~(0x3 << 62) | 0x2 << 62  # the variant (RFC 9562's)
    return uuid.UUID(int=value)


def row_id(prefix: str) -> str:
    """A chat's or message's id: `c_…` or `m_…`, then an ordered UUID's 32 hex digits."""
    return f"{prefix}_{ordered_uuid().hex}"


def encode_json(value: Any) -> str | None:
    return None if value is None else json.dumps(value, ensure_ascii=False, allow_nan=False)


@dataclass(frozen=True)
class Conversation:
    id: str
    title: str
    created: float
    origin: Origin
    agent: str | None
    tainted: dict[str, Any] | None
    pairing_id: str | None = None
    context_key: str | None = None
    path: str | None = None  # the notebook this chat belongs to (its kernel runs the tools)
    mode: Mode = "ask"
    limit_usd: float | None = None  # the chat's own spending limit (None: the server's default)
    # A room in Jupyter Chat: its `.chat` file's path now, and the file's own id, which a rename
    # keeps (the chat is found again by it). Such a chat has no notebook (`path` is None).
    chat_file: str | None = None
    chat_id: str | None = None

    def to_json(self) -> dict[str, Any]:
        fields = (
            "id",
            "title",
            "created",
            "origin",
            "agent",
            "tainted",
            "path",
            "mode",
            "chat_file",
        )
        return {name: getattr(self, name) for name in fields}


@dataclass(frozen=True)
class Message:
    id: str
    conversation_id: str
    role: Role
    text: str
    created: float
    agent: str | None = None
    round: dict[str, Any] | None = None
    # A tool message's call: {tool, call_id, code?, state}; its `text` is what the model was shown.
    tool: dict[str, Any] | None = None
    # Where a user's message came from when not from the user's own page: "kernel" (the kernel
    # key: %conch, the Python API, or code an agent ran). The view marks it as such.
    via: str | None = None
    seq: int = 0

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"id": self.id, "role": self.role}
        if self.agent is not None:
            data["agent"] = self.agent
        data.update(text=self.text, created=self.created)
        if self.role in SEALED_ROLES:
            # Drawn sealed here, whichever way the message goes out (a snapshot, the live
            # stream): a view inserts this HTML and never turns anyone's Markdown into DOM.
            # (A person's message keeps its lines; called alike for the rest, so the cache the
            # hub's draw_ahead filled is the one found here.)
            user = self.role == "user"
            data["html"] = (
                render_markdown(self.text, lines=True) if user else render_markdown(self.text)
            )
        if self.tool is not None:
            data.update(self.tool, output=self.text)
        if self.round is not None:
            data["round"] = self.round
        if self.via is not None:
            data["via"] = self.via
        return data


@dataclass(frozen=True)
class Spend:
    usd: float
    conversation_id: str | None
    agent: str | None
    payer: str | None  # who else it is charged to, e.g. a door pairing's id
    input_tokens: int
    output_tokens: int
    created: float
    estimated: bool = False  # counted by Conch (providers/base.py estimate_usage), not billed
    message_id: str | None = None  # the reply it paid for, when one was kept
    seq: int = 0

    def to_json(self) -> dict[str, Any]:
        fields = (
            "usd",
            "agent",
            "input_tokens",
            "output_tokens",
            "estimated",
            "created",
            "message_id",
        )
        return {name: getattr(self, name) for name in fields}


@dataclass(frozen=True)
class DoorTask:
    """A message a paired agent sent through the door, and how its answer ended."""

    id: str
    pairing_id: str
    agent: str
    context_id: str
    conversation_id: str | None
    state: str  # an A2A 1.0 task state name
    asked: str
    asked_id: str  # the caller's messageId
    reply: str | None
    words: str | None  # why it ended as it did, for the caller (a refusal, a failure)
    created: float
    updated: float


@dataclass(frozen=True)
class Event:
    seq: int
    conversation_id: str
    type: str
    data: dict[str, Any]
    created: float

    def to_json(self) -> dict[str, Any]:
        return {"seq": self.seq, "type": self.type, "created": self.created, **self.data}
