"""The chat as the view draws it: what the server said, folded into items in reading order.

Owns the chat widget's state (ChatState takes the event stream's items one by one) and the pure
step from that state to the items the view draws: your messages, each agent's reply under its
divider, handover lines, outside answers, Conch's notes, a round card where each round began,
and each tool call's block under the reply it belongs to (tools.py).
No I/O here: a settled message carries its Markdown drawn sealed by the server (core/render.py), and
a reply still streaming is plain text. This is the kernel's mirror of the view's js/timeline.js
(for the relay and the Python API); tests/unit/test_view_js.py checks both draw the same items.

A round card's picture comes from the log alone: the faces are everyone named or heard in it, and
each pass of the floor is a change of speaker between one reply and the next (round.asking marks
an outside agent's turn). While the round runs, the live round state adds whoever has the floor.
The card's words say what its picture shows.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import pairwise
from typing import Any, cast

from ..rounds.engine import EndReason, end_words
from .tools import tool_item, under_replies, working_words

Item = dict[str, Any]

# At one instant, a round's start sorts after the message that began it and its end after its
# last note (the server stores them in that order).
_RANK = {"user": 0, "round.started": 1, "message": 2, "event": 3, "round.ended": 4}


@dataclass
class Names:
    """Who is who: your agents' and outside agents' names by id."""

    ours: dict[str, str] = field(default_factory=dict)
    outside: dict[str, str] = field(default_factory=dict)
    heard: dict[str, str] = field(default_factory=dict)  # names messages carried
    # An outside agent's id -> the agent of yours its name clashes with (the roster says so).
    clashing: dict[str, str] = field(default_factory=dict)

    def name(self, agent_id: str) -> str:
        return (
            self.ours.get(agent_id)
            or self.outside.get(agent_id)
            or self.heard.get(agent_id)
            or agent_id
        )

    def mentions(self) -> list[Item]:
        """Whom typing @ may offer: your agents, then outside agents, each outside agent with
        the agent of yours its name clashes with, if any (the picker holds such ones back)."""
        ours = [{"name": n, "outside": False} for n in self.ours.values()]
        return ours + [
            {"name": n, "outside": True, "clashes_with": self.clashing.get(i)}
            for i, n in self.outside.items()
        ]


@dataclass
class ChatState:
    """One chat as followed: stored messages and events, the live round, replies streaming."""

    messages: dict[str, Item] = field(default_factory=dict)
    events: dict[int, Item] = field(default_factory=dict)
    round: Item | None = None
    busy: bool = False
    live: dict[str, Item] = field(default_factory=dict)  # reply id -> {agent, text}
    names: Names = field(default_factory=Names)
    title: str = ""
    working: Item | None = None  # the tool call at work now (the round card says so)

    def take(self, item: Item) -> str:
        """Take one item of the event stream; say what changed: "items", "live" or ""."""
        kind = item.get("type")
        if kind == "snapshot":
            chat = item["conversation"]
            self.messages = {m["id"]: m for m in chat.get("messages", [])}
            self.events = {e["seq"]: e for e in chat.get("events", [])}
            self.round, self.busy = chat.get("round"), bool(chat.get("busy"))
            self.title = str(chat.get("title") or "")
            self.working = chat.get("working")
            roster = chat.get("roster")
            if roster is not None:  # who is who, carried by the snapshot
                self.names.ours = {a["id"]: a["name"] for a in roster.get("agents", [])}
                outside = roster.get("outside", [])
                self.names.outside = {a["id"]: a["name"] for a in outside}
                self.names.clashing = {
                    a["id"]: a["clashes_with"] for a in outside if a.get("clashes_with")
                }
            self.live = {
                str(r["reply"]): {"agent": r.get("agent"), "text": str(r.get("text", ""))}
                for r in chat.get("streaming", [])
            }
            for message in self.messages.values():
                self._heard(message)
            return "items"
        if kind == "message":
            message = item["message"]
            self.messages[message["id"]] = message
            self.live.pop(message["id"], None)
            self._heard(message)
            return "items"
        if kind == "event":
            event = item["event"]
            self.events[event["seq"]] = event
            if event.get("type") == "round.ended":
                self.busy = False
            return "items"
        if kind == "round":
            self.round = item.get("round")
            self.busy = self.busy or self.round is not None
            return "items"
        if kind == "delta":
            reply = self.live.setdefault(item["reply"], {"agent": item.get("agent"), "text": ""})
            reply["text"] += item.get("text", "")
            self.busy = True
            return "live"
        if kind == "working":
            self.working = item.get("working")
            return "items"
        return ""

    def _heard(self, message: Item) -> None:
        if message.get("agent") and message.get("name"):
            self.names.heard[message["agent"]] = message["name"]


def initials(name: str) -> str:
    words = [w for w in name.replace("-", " ").replace("_", " ").split() if w]
    letters = "".join(w[0] for w in words[:2]) if len(words) > 1 else name[:1]
    return letters.upper() or "?"


def _and(items: list[str]) -> str:
    return f"{', '.join(items[:-1])} and {items[-1]}" if len(items) > 1 else "".join(items)


@dataclass
class _Card:
    id: str
    named: list[str]
    speakers: list[str] = field(default_factory=list)
    outside: set[str] = field(default_factory=set)
    end: Item | None = None

    def heard(self, agent_id: str) -> None:
        if not self.speakers or self.speakers[-1] != agent_id:
            self.speakers.append(agent_id)


def build_items(state: ChatState, *, user_label: str = "You") -> list[Item]:
    """Everything but the reply still streaming, in reading order."""
    names = state.names
    entries: list[tuple[float, int, str, Item]] = []
    for message in state.messages.values():
        rank = _RANK["user"] if message.get("role") == "user" else _RANK["message"]
        entries.append((float(message.get("created", 0)), rank, "message", message))
    for event in sorted(state.events.values(), key=lambda e: int(e["seq"])):
        rank = _RANK.get(str(event.get("type")), _RANK["event"])
        entries.append((float(event.get("created", 0)), rank, "event", event))
    entries.sort(key=lambda entry: (entry[0], entry[1]))

    items: list[Item] = []
    cards: list[tuple[_Card, int]] = []  # each card and its place in items
    card: _Card | None = None
    for _, _, kind, entry in entries:
        if kind == "event":
            etype = entry.get("type")
            if etype == "round.started":
                card = _Card(f"round-{entry['seq']}", [str(n) for n in entry.get("named", [])])
                cards.append((card, len(items)))
                items.append({})
            elif etype == "round.asking" and card is not None:
                card.outside.add(str(entry["agent"]))
                card.heard(str(entry["agent"]))
            elif etype == "round.ended" and card is not None:
                card.end, card = entry, None
            continue
        items.append(_message_item(entry, names, user_label))
        role, agent = entry.get("role"), entry.get("agent")
        if card is not None and agent and role in ("agent", "outside"):
            if role == "outside":
                card.outside.add(agent)
            card.heard(agent)
    for index, (each, place) in enumerate(cards):
        latest = index == len(cards) - 1
        items[place] = _card_item(each, state, live=latest and each.end is None)
    return under_replies(items)


def _message_item(message: Item, names: Names, user_label: str) -> Item:
    role, mid = message.get("role"), str(message["id"])
    place = message.get("round") or {}
    if role == "note":
        return {
            "kind": "handover" if place else "note",
            "id": mid,
            "text": str(message.get("text", "")),
        }
    html = str(message.get("html", ""))  # drawn sealed by the server
    if role == "user":
        user: Item = {"kind": "user", "id": mid, "who": user_label, "html": html}
        if message.get("via"):
            user["via"] = str(message["via"])  # sent with the kernel key
        return user
    agent = str(message.get("agent") or "")
    if role == "tool":
        return tool_item(message, names.name(agent))
    item: Item = {"id": mid, "agent": agent, "name": names.name(agent), "html": html}
    if role == "outside":
        return {"kind": "outside", **item}
    return {"kind": "agent", **item, "place": _place_words(place, names)}


def _place_words(place: Item, names: Names) -> str:
    if not place:
        return ""
    words = f"turn {place.get('turn')}"
    if place.get("handed_by"):
        words += f" · handed over by {names.name(str(place['handed_by']))}"
    return words


def _card_item(card: _Card, state: ChatState, *, live: bool) -> Item:
    names = state.names
    rnd = state.round if live else None
    live = live and (rnd is not None or state.busy)
    path = list(card.speakers)
    floor_id = str(rnd["speaker"]) if rnd and rnd.get("speaker") else None
    if floor_id and (not path or path[-1] != floor_id):
        path.append(floor_id)
    order = list(dict.fromkeys([*card.named, *path]))
    outside = card.outside | {a for a in order if a in names.outside}
    faces: list[Item] = [
        {
            "id": a,
            "name": names.name(a),
            "initials": initials(names.name(a)),
            "outside": a in outside,
        }
        for a in order
    ]
    at = {a: i for i, a in enumerate(order)}
    passes = [[at[a], at[b]] for a, b in pairwise(path)]
    who = [f["name"] + (" (outside agent)" if f["outside"] else "") for f in faces]
    picture = f"In the round: {_and(who)}."
    if passes:
        hops = [f"{faces[a]['name']} to {faces[b]['name']}" for a, b in passes]
        picture += " The floor passed from " + ", then ".join(hops) + "."
    item: Item = {"kind": "round", "id": card.id, "faces": faces, "passes": passes}
    if live:
        floor = at.get(floor_id) if floor_id else None
        if floor is not None and rnd is not None:
            face = faces[floor]
            answering = face["name"] + (" (outside agent)" if face["outside"] else "")
            count = f"{int(rnd.get('replies', 0)) + 1} of {rnd.get('limit', 8)} replies"
            announce = f"{answering} is answering"
            working = state.working
            if working and str(working.get("agent")) == floor_id:
                announce = working_words(working, face["name"])
            line = f"{announce} · {count}"
            picture += f" {face['name']} has the floor."
        else:
            line = announce = "The round is ending" if card.speakers else "The round is starting"
        live_words = {"line": line, "announce": announce, "picture": picture}
        return {**item, "state": "live", "floor": floor, **live_words}
    spoken = [names.name(a) for a in card.speakers]
    if card.end is not None:
        words = card.end.get("words") or end_words(
            spoken, int(card.end.get("turns", 0)), cast(EndReason, card.end.get("reason", "done"))
        )
    else:  # a round the server forgot (it restarted): fold it once it is quiet
        words = end_words(spoken, len(spoken), "done")
    last = at.get(path[-1]) if path else None
    folded_words = {"line": words, "announce": words, "picture": picture}
    return {**item, "state": "folded", "floor": last, **folded_words}


def live_item(state: ChatState) -> Item | None:
    """The reply streaming now, as plain text (it is drawn sealed once it settles), or None."""
    if not state.live:
        return None
    reply_id, reply = next(reversed(state.live.items()))
    agent = str(reply.get("agent") or "")
    notes = [m for m in state.messages.values() if m.get("role") == "note" and m.get("round")]
    place = notes[-1]["round"] if notes and state.round is not None else {}
    working = state.working
    doing = (
        {"doing": working_words(working, state.names.name(agent))}
        if working and str(working.get("agent")) == agent
        else {}
    )
    return {
        "kind": "outside" if agent in state.names.outside else "agent",
        "id": reply_id,
        "agent": agent,
        "name": state.names.name(agent),
        "place": _place_words(place, state.names),
        "text": str(reply["text"]),
        "streaming": True,
        **doing,
    }
