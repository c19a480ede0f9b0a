"""The chat widget's kernel side keeps the stream's raw items for a relayed view, and the few
facts the Python API reads (widget/stream.py). Pure: no kernel, no server. What the view draws
from these items is tested in tests/test_view_js.py, through the view's own code.
"""

from __future__ import annotations

from typing import Any

from conch_jupyter.widget.stream import ChatStream

ROSTER = {
    "agents": [{"id": "w", "name": "Writer"}],
    "outside": [{"id": "h", "name": "Helper"}, {"id": "w", "name": "Not yours"}],
}


def snapshot(**chat: Any) -> dict[str, Any]:
    base = {"title": "t", "messages": [], "events": [], "round": None, "roster": ROSTER}
    return {"type": "snapshot", "conversation": {**base, **chat}}


def delta(text: str, reply: str = "r1") -> dict[str, Any]:
    return {"type": "delta", "reply": reply, "agent": "w", "text": text}


def message(mid: str, **more: Any) -> dict[str, Any]:
    return {"type": "message", "message": {"id": mid, "role": "agent", "text": "x", **more}}


def test_a_replys_chunks_in_a_row_are_kept_as_one_item_in_their_place() -> None:
    chat = ChatStream()
    assert chat.take(snapshot()) == "items"
    assert chat.take(delta("A pl")) == "delta"
    before = list(chat.items)
    chat.take(delta("an"))
    assert chat.items == [snapshot(), delta("A plan")]
    assert before[-1] == delta("A pl")  # a list handed out before is not changed under it
    working = {"type": "working", "working": {"call_id": "t1", "agent": "w", "state": "running"}}
    chat.take(working)
    chat.take(delta(" for"))  # after another item: an item of its own (taking it is in order)
    assert [i["type"] for i in chat.items] == ["snapshot", "delta", "working", "delta"]
    assert chat.streaming == {"r1": "w"}
    chat.take(message("r1", agent="w"))
    assert chat.streaming == {}
    assert chat.items[-1]["type"] == "message"


def test_a_new_snapshot_replaces_everything_and_unknown_items_are_not_kept() -> None:
    chat = ChatStream()
    chat.take(snapshot())
    chat.take(message("m1"))
    chat.take({"type": "event", "event": {"seq": 1, "type": "round.started"}})
    chat.take({"type": "round", "round": {"speaker": "w", "replies": 0, "limit": 8}})
    assert (len(chat.messages), chat.events, chat.round) == (1, {1}, chat.items[-1]["round"])
    assert chat.take({"type": "keepalive"}) == ""
    again = snapshot(
        messages=[{"id": "m1"}, {"id": "m2", "agent": "gone", "name": "Old Name"}],
        events=[{"seq": 1}, {"seq": 2}],
        streaming=[{"reply": "r3", "agent": "w", "text": "Hel"}],
    )
    chat.take(again)
    assert chat.items == [again]
    assert (list(chat.messages), chat.events, chat.round) == (["m1", "m2"], {1, 2}, None)
    assert chat.streaming == {"r3": "w"}
    # Who is who, for the notice: your agent first, then an outside one, then what was heard.
    assert [chat.name(a) for a in ("w", "h", "gone", "ghost")] == [
        "Writer",
        "Helper",
        "Old Name",
        "ghost",
    ]


def test_a_stream_that_resumed_keeps_what_it_had_and_takes_the_live_parts() -> None:
    chat = ChatStream()
    chat.take(snapshot(messages=[{"id": "m1", "role": "user", "text": "hi"}], earlier=True))
    assert chat.earlier is True
    chat.take(delta("A pl"))
    chat.take(message("m2"))  # missed while the stream was down, sent again on resuming
    live = {
        "round": {"speaker": "w"},
        "roster": ROSTER,
        "streaming": [{"reply": "r2", "agent": "w", "text": "So"}],
    }
    assert chat.take({"type": "resumed", "conversation": live}) == "items"
    assert list(chat.messages) == ["m1", "m2"]
    assert chat.streaming == {"r2": "w"}
    assert chat.round == {"speaker": "w"}
    assert [i["type"] for i in chat.items] == ["snapshot", "delta", "message", "resumed"]
