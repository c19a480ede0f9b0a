"""The chat widget's state, kernel-side: the event stream folded into what the view draws.

Pure: no kernel, no server. The stream items are the server's own shapes (see the README).
"""

from __future__ import annotations

from typing import Any

import pytest

from conch_jupyter.widget.timeline import ChatState, Names, build_items, initials, live_item


class Stream:
    def __init__(self, **snapshot: Any) -> None:
        self.state = ChatState()
        self.t, self.seq = 100.0, 0
        base = {"title": "t", "messages": [], "events": [], "round": None, "busy": False}
        self.state.take({"type": "snapshot", "conversation": {**base, **snapshot}})
        self.state.names = Names(ours={"r": "Researcher", "w": "Writer"}, outside={"h": "Helper"})

    def msg(self, role: str, text: str, same_time: bool = False, **more: Any) -> Stream:
        self.t += 0 if same_time else 1
        mid = more.pop("id", f"m{self.t}{role}")
        message = {"id": mid, "role": role, "text": text, "created": self.t, **more}
        if role != "note":
            message["html"] = f"<p>{text}</p>"  # the server's sealed drawing
        assert self.state.take({"type": "message", "message": message}) == "items"
        return self

    def event(self, kind: str, same_time: bool = False, **data: Any) -> Stream:
        self.t += 0 if same_time else 1
        self.seq += 1
        event = {"seq": self.seq, "type": kind, "created": self.t, **data}
        assert self.state.take({"type": "event", "event": event}) == "items"
        return self

    def floor(self, speaker: str | None, replies: int = 0) -> Stream:
        rnd = None if speaker is None else {"speaker": speaker, "replies": replies, "limit": 8}
        self.state.take({"type": "round", "round": rnd})
        return self

    def items(self) -> list[dict[str, Any]]:
        return build_items(self.state)

    def card(self) -> dict[str, Any]:
        return next(i for i in reversed(self.items()) if i["kind"] == "round")


def two_turns() -> Stream:
    s = Stream().msg("user", "@Researcher find, @Writer draft. Take turns.")
    s.event("round.started", same_time=True, named=["r", "w"]).floor("r")
    s.msg("note", "Researcher's turn", round={"turn": 1, "handed_by": None})
    s.msg("agent", "Options. @Writer", id="a1", agent="r", round={"turn": 1, "handed_by": None})
    s.floor("w", replies=1)
    s.msg("note", "Researcher handed over to Writer", round={"turn": 2, "handed_by": "r"})
    return s


def test_a_round_reads_in_order_with_its_card_where_it_began() -> None:
    items = two_turns().items()
    assert [i["kind"] for i in items] == ["user", "round", "handover", "agent", "handover"]
    agent = items[3]
    assert (agent["name"], agent["place"], agent["html"]) == (
        "Researcher",
        "turn 1",
        "<p>Options. @Writer</p>",
    )


def test_the_live_card_says_what_its_picture_shows() -> None:
    card = two_turns().card()
    assert card["state"] == "live"
    assert [f["name"] for f in card["faces"]] == ["Researcher", "Writer"]
    assert [f["initials"] for f in card["faces"]] == ["R", "W"]
    assert card["passes"] == [[0, 1]]
    assert card["floor"] == 1
    assert card["line"] == "Writer is answering · 2 of 8 replies"
    assert card["announce"] == "Writer is answering"
    assert card["picture"] == (
        "In the round: Researcher and Writer. The floor passed from Researcher to Writer. "
        "Writer has the floor."
    )


def test_the_reply_streaming_now_is_drawn_apart_and_replaced_by_its_message() -> None:
    s = two_turns()
    assert s.state.take({"type": "delta", "reply": "a2", "agent": "w", "text": "A pl"}) == "live"
    s.state.take({"type": "delta", "reply": "a2", "agent": "w", "text": "an"})
    live = live_item(s.state)
    assert live == {
        "kind": "agent",
        "id": "a2",
        "agent": "w",
        "name": "Writer",
        "place": "turn 2 · handed over by Researcher",
        "text": "A plan",  # plain while it streams; drawn sealed once it settles
        "streaming": True,
    }
    s.msg("agent", "A plan", id="a2", agent="w", round={"turn": 2, "handed_by": "r"})
    assert live_item(s.state) is None
    assert s.items()[-1]["place"] == "turn 2 · handed over by Researcher"


def test_the_card_folds_with_the_servers_words() -> None:
    s = two_turns().msg("agent", "Plan", agent="w", round={"turn": 2, "handed_by": "r"})
    s.msg("note", "The round ended: you stopped it.").floor(None)
    words = "Researcher and Writer took turns · 2 replies · ended: you stopped it"
    s.event("round.ended", turns=2, reason="stopped", words=words)
    card = s.card()
    assert (card["state"], card["line"], card["announce"]) == ("folded", words, words)
    assert card["floor"] == 1  # where the floor last was
    last = s.items()[-1]
    assert (last["kind"], last["text"]) == ("note", "The round ended: you stopped it.")


def test_a_card_without_words_on_its_end_gets_them_from_talk() -> None:
    s = two_turns().msg("agent", "Plan", agent="w", round={"turn": 2, "handed_by": "r"})
    s.floor(None).event("round.ended", turns=2, reason="done")
    assert s.card()["line"] == "Researcher and Writer took turns · 2 replies"


def test_a_round_the_server_forgot_folds_once_the_chat_is_quiet() -> None:
    s = two_turns()
    snapshot = {
        "title": "t",
        "messages": list(s.state.messages.values()),
        "events": list(s.state.events.values()),
        "round": None,
        "busy": False,
    }
    s.state.take({"type": "snapshot", "conversation": snapshot})
    card = s.card()
    assert card["state"] == "folded"
    assert card["line"] == "Researcher answered · 1 reply"


def test_between_turns_the_live_card_says_the_round_goes_on() -> None:
    s = Stream().msg("user", "@Researcher hi").event("round.started", named=["r"])
    s.state.busy = True
    assert s.card()["line"] == "The round is starting"
    s.msg("agent", "Hello", agent="r", round={"turn": 1, "handed_by": None}).floor(None)
    assert s.card()["line"] == "The round is ending"


def test_an_outside_agent_is_marked_and_framed() -> None:
    s = Stream().msg("user", "@Helper thoughts?").event("round.started", named=["h"])
    s.event("round.asking", agent="h").floor("h")
    card = s.card()
    assert card["faces"] == [{"id": "h", "name": "Helper", "initials": "H", "outside": True}]
    assert card["line"] == "Helper (outside agent) is answering · 1 of 8 replies"
    s.msg("outside", "Try **this**", agent="h", round={"turn": 1})
    assert s.items()[-1]["kind"] == "outside"
    assert s.card()["passes"] == []  # asked, then answered: one speaker, no pass


def test_a_loop_of_three_draws_every_pass() -> None:
    s = Stream().msg("user", "go").event("round.started", named=["r"])
    s.state.names.ours["c"] = "Critic"
    for n, agent in enumerate(["r", "w", "c", "r", "w"]):
        s.msg("agent", "x", agent=agent, round={"turn": n + 1, "handed_by": None})
    s.floor(None).event("round.ended", turns=5, reason="replies", words="w")
    card = s.card()
    assert [f["name"] for f in card["faces"]] == ["Researcher", "Writer", "Critic"]
    assert card["passes"] == [[0, 1], [1, 2], [2, 0], [0, 1]]


def test_events_and_snapshots_are_idempotent() -> None:
    s = two_turns()
    before = s.items()
    event = next(iter(s.state.events.values()))
    s.state.take({"type": "event", "event": event})  # the same event again
    assert s.items() == before
    assert s.state.take({"type": "keepalive"}) == ""


def test_notes_are_conchs_and_user_messages_are_labelled() -> None:
    s = Stream().msg("user", "hi").msg("note", "You have no agents yet.")
    note = s.items()[1]
    assert (note["kind"], note["text"]) == ("note", "You have no agents yet.")
    said = build_items(s.state, user_label="The other agent")
    assert said[0]["who"] == "The other agent"


def test_names_fall_back_to_what_messages_carried_then_to_ids() -> None:
    s = Stream().msg("agent", "x", agent="gone", name="Old Name")
    assert s.items()[0]["name"] == "Old Name"
    assert Names().name("ghost") == "ghost"
    mentions = Stream().state.names.mentions()
    assert mentions == [
        {"name": "Researcher", "outside": False},
        {"name": "Writer", "outside": False},
        {"name": "Helper", "outside": True, "clashes_with": None},
    ]


@pytest.mark.parametrize(
    ("name", "letters"),
    [("Writer", "W"), ("Data Bot", "DB"), ("data-bot", "DB"), ("écrivain", "É"), ("", "?")],
)
def test_initials(name: str, letters: str) -> None:
    assert initials(name) == letters


def test_a_tool_call_is_its_own_plain_item_never_markdown() -> None:
    s = Stream().msg("user", "@Researcher run it")
    call = {"tool": "run_code", "call_id": "t_1", "code": "print('**x**')", "state": "ran"}
    s.msg("tool", "**x**\n", agent="r", output="**x**\n", **call)
    tool = s.items()[-1]
    assert tool == {
        "kind": "tool",
        "id": tool["id"],
        "agent": "r",
        "name": "Researcher",
        **call,
        "summary": "Researcher · code · ran",
        "output": "**x**\n",
    }
    assert "html" not in tool  # printed output is never drawn as Markdown
