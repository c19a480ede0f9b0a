"""The chat as the kernel follows it: the event stream's raw items, kept for a view that draws
through the kernel (the relay), and the few facts the Python API reads from them.

The timeline is built once, in the view (js/timeline.js): here nothing is drawn. `items` is
what the relayed view takes: the latest snapshot, then every item since, in order, a run of one
reply's chunks joined into one delta (taking "ab" is taking "a" then "b"). A new snapshot
replaces them all, so the list is never longer than what happened since the kernel followed;
a stream that resumed adds what it missed and a `resumed` item (the chat's live parts). The
snapshot is a page of the chat's last messages (`earlier` says whether there are more).
The facts: the chat's messages and which events came (`settled` waits until the stream has
brought all the server has, a round's end too), the replies still streaming, the live round
(who has the floor), and who is who (the notice says whose reply a message waits for).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

Item = dict[str, Any]
Change = Literal["items", "delta", ""]

# The kinds of item the view takes (keepalives and anything unknown are not passed on).
KINDS = {
    *("snapshot", "resumed", "message", "event", "round", "delta"),
    *("working", "stuck", "roster", "budget"),
}


@dataclass
class ChatStream:
    """One chat's stream as followed: its raw items, and what the Python API needs of them."""

    items: list[Item] = field(default_factory=list)
    messages: dict[str, Item] = field(default_factory=dict)
    # Whether the chat holds messages before the snapshot's first (a paged snapshot's `earlier`).
    earlier: bool = False
    events: set[int] = field(default_factory=set)  # the seq of each event that came
    streaming: dict[str, str] = field(default_factory=dict)  # reply id -> agent id
    round: Item | None = None
    names: dict[str, str] = field(default_factory=dict)  # the roster's, by id
    heard: dict[str, str] = field(default_factory=dict)  # names messages carried

    def take(self, item: Item) -> Change:
        """Take one item of the event stream; say what changed: "items", "delta" or ""."""
        kind = item.get("type")
        if kind not in KINDS:
            return ""
        if kind == "snapshot":
            chat = item.get("conversation") or {}
            self.items = [item]
            self.messages = {}
            for message in chat.get("messages", []):
                self._message(message)
            self.events = {int(e["seq"]) for e in chat.get("events", [])}
            self.earlier = bool(chat.get("earlier"))
            self._live(chat)
            return "items"
        if kind == "resumed":
            # A stream that resumed: what it missed came before this, as items; here are the
            # chat's live parts as they are now (no log: the chat was not sent again).
            self.items.append(item)
            self._live(item.get("conversation") or {})
            return "items"
        if kind == "delta":
            reply = str(item.get("reply"))
            self.streaming.setdefault(reply, str(item.get("agent")))
            last = self.items[-1] if self.items else {}
            if last.get("type") == "delta" and last.get("reply") == item.get("reply"):
                # A new item, not the old one changed: the trait's last value keeps its own.
                text = str(last.get("text", "")) + str(item.get("text", ""))
                self.items[-1] = {**last, "text": text}
            else:
                self.items.append(item)
            return "delta"
        self.items.append(item)
        if kind == "message":
            message = item["message"]
            self._message(message)
            self.streaming.pop(str(message["id"]), None)
        elif kind == "event":
            self.events.add(int(item["event"]["seq"]))
        elif kind == "round":
            self.round = item.get("round")
        elif kind == "roster":  # agents added, renamed or removed since the snapshot
            self._roster(item.get("roster"))
        return "items"

    def _live(self, chat: Item) -> None:
        replies = chat.get("streaming", [])
        self.streaming = {str(r["reply"]): str(r.get("agent")) for r in replies}
        self.round = chat.get("round")
        self._roster(chat.get("roster"))

    def _roster(self, roster: Item | None) -> None:
        if roster is not None:
            # Your agent's name wins over an outside agent's with the same id (as the view's).
            everyone = [*roster.get("outside", []), *roster.get("agents", [])]
            self.names = {str(a["id"]): str(a["name"]) for a in everyone}

    def name(self, agent_id: str) -> str:
        return self.names.get(agent_id) or self.heard.get(agent_id) or agent_id

    def _message(self, message: Item) -> None:
        self.messages[str(message["id"])] = message
        if message.get("agent") and message.get("name"):
            self.heard[str(message["agent"])] = str(message["name"])
