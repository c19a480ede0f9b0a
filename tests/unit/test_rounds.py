"""The round engine, rule by rule: no server, no network, no sleeps."""

from __future__ import annotations

import dataclasses

import pytest

from conch_jupyter.rounds.engine import (
    ROUND_END_WORDS,
    ROUND_LIMITS,
    Ask,
    Broke,
    End,
    EndReason,
    OutsideAnswered,
    ProviderFailed,
    ReplyEnded,
    Roster,
    Round,
    RoundError,
    RoundLimits,
    Speak,
    SpendLimit,
    SpendRecorded,
    Stop,
    TurnRefused,
    UserWrote,
    end_event,
    end_words,
)

OURS = ("Researcher", "Writer", "Critic", "Writer Pro")
ROSTER = Roster(ours=OURS, outside=("Helper",))


def play(named: list[str], replies: list[str], *, handing_on: bool = True) -> tuple[Round, list]:
    """Run a round where each speaker answers with the next scripted text; return decisions."""
    rnd = Round(named=named, roster=ROSTER, handing_on=handing_on)
    decisions = [rnd.start()]
    texts = iter(replies)
    while not isinstance(decisions[-1], End):
        d = decisions[-1]
        if isinstance(d, Ask):
            decisions.append(rnd.handle(OutsideAnswered(d.agent)))
            continue
        assert isinstance(d, Speak)
        decisions.append(rnd.handle(ReplyEnded(d.agent, next(texts, "done."))))
    return rnd, decisions


def speakers(decisions: list) -> list[str]:
    return [d.agent for d in decisions if isinstance(d, Speak | Ask)]


@pytest.mark.parametrize(
    ("named", "replies", "expected_speakers", "reason"),
    [
        # The first agent named answers; the rest follow in the user's order.
        (["Researcher", "Writer"], ["options…", "draft…"], ["Researcher", "Writer"], "done"),
        # A hand-on goes before anyone still waiting from the user's message.
        (
            ["Researcher", "Writer"],
            ["@Critic check these", "ok", "draft"],
            ["Researcher", "Critic", "Writer"],
            "done",
        ),
        # Naming someone already waiting moves them up; they answer once.
        (
            ["Researcher", "Critic", "Writer"],
            ["@Writer go", "w", "c"],
            ["Researcher", "Writer", "Critic"],
            "done",
        ),
        # Nobody answers themselves.
        (["Researcher"], ["as @Researcher I say"], ["Researcher"], "done"),
        # Unknown names are plain text.
        (["Researcher"], ["@Nobody @writerx"], ["Researcher"], "done"),
        # Longest name first: "@Writer Pro" is Writer Pro.
        (["Researcher"], ["@Writer Pro please", "ok"], ["Researcher", "Writer Pro"], "done"),
        # A user mention of an unknown name is ignored; known ones still run.
        (["Ghost", "Writer"], ["w"], ["Writer"], "done"),
        # The same name twice in the user's message answers once.
        (["Writer", "Writer"], ["w"], ["Writer"], "done"),
        # Naming an outside agent ends the round: only the user can send to one.
        (["Researcher", "Writer"], ["ask @Helper about it"], ["Researcher"], "outside"),
        # A user-named outside agent is asked, and passes the floor to nobody.
        (["Helper", "Writer"], ["w"], ["Helper", "Writer"], "done"),
    ],
)
def test_floor_order(named, replies, expected_speakers, reason) -> None:
    _rnd, decisions = play(named, replies)
    assert speakers(decisions) == expected_speakers
    assert decisions[-1].reason == reason
    assert decisions[-1].turns == len(expected_speakers)


def test_handed_by_and_turns() -> None:
    _, decisions = play(["Researcher", "Writer"], ["@Critic look", "ok", "draft"])
    speaks = [d for d in decisions if isinstance(d, Speak)]
    assert [(d.agent, d.turn, d.handed_by) for d in speaks] == [
        ("Researcher", 1, None),
        ("Critic", 2, "Researcher"),
        ("Writer", 3, None),
    ]


def test_outside_end_names_what_was_named() -> None:
    _, decisions = play(["Researcher"], ["let @Helper and @Writer see"])
    end = decisions[-1]
    assert (end.reason, end.named_outside, end.turns) == ("outside", ("Helper",), 1)


def test_two_agent_ping_pong_ends_as_loop_at_the_fifth_swap() -> None:
    rnd, decisions = play(["Researcher"], ["@Writer", "@Researcher"] * 10)
    assert speakers(decisions) == ["Researcher", "Writer"] * 2 + ["Researcher"]
    # Swaps: R→W, W→R, R→W, W→R; the fifth (R→W) is the loop.
    assert decisions[-1].reason == "loop"
    assert rnd.replies == 5


def test_three_agent_cycle_is_bounded_by_the_reply_total() -> None:
    cycle = ["@Writer", "@Critic", "@Researcher"]
    rnd, decisions = play(["Researcher"], cycle * 10)
    assert len(speakers(decisions)) == ROUND_LIMITS.replies
    assert decisions[-1].reason == "replies"
    assert decisions[-1].turns == 8
    assert max(rnd._per_speaker.values()) <= ROUND_LIMITS.per_speaker


def test_per_speaker_bound() -> None:
    # Researcher hands to two others each time, so no pair swaps five times but Researcher
    # would get the floor a fourth time.
    texts = ["@Writer", "@Researcher", "@Critic", "@Researcher", "@Writer Pro", "@Researcher"]
    rnd, decisions = play(["Researcher"], texts)
    assert decisions[-1].reason == "speaker"
    assert rnd._per_speaker["Researcher"] == 3


def test_spend_bound_ends_before_the_next_turn() -> None:
    rnd = Round(named=["Researcher", "Writer"], roster=ROSTER)
    assert isinstance(rnd.start(), Speak)
    assert rnd.handle(SpendRecorded(0.6)) is None
    assert rnd.handle(SpendRecorded(0.4)) is None
    end = rnd.handle(ReplyEnded("Researcher", "…"))
    assert isinstance(end, End)
    assert (end.reason, end.turns) == ("spend", 1)


def test_spend_just_under_the_bound_goes_on() -> None:
    rnd = Round(named=["Researcher", "Writer"], roster=ROSTER)
    rnd.start()
    rnd.handle(SpendRecorded(0.99))
    assert rnd.handle(ReplyEnded("Researcher", "…")) == Speak("Writer", 2, None)


def test_user_writing_ends_after_the_running_reply() -> None:
    rnd = Round(named=["Researcher", "Writer"], roster=ROSTER)
    rnd.start()
    assert rnd.handle(UserWrote()) is None
    assert rnd.phase == "speaking"
    end = rnd.handle(ReplyEnded("Researcher", "@Writer"))
    assert isinstance(end, End)
    assert (end.reason, end.turns) == ("you", 1)


def test_stop_ends_at_once() -> None:
    rnd = Round(named=["Researcher", "Writer"], roster=ROSTER)
    assert not rnd.taking_turns
    rnd.start()
    assert rnd.taking_turns
    end = rnd.handle(Stop())
    assert not rnd.taking_turns
    assert isinstance(end, End)
    assert (end.reason, end.turns, rnd.phase, rnd.speaker) == ("stopped", 0, "ended", None)


def test_a_reply_cut_short_by_stop_counts_as_its_speakers() -> None:
    rnd = Round(named=["Researcher", "Writer"], roster=ROSTER)
    rnd.start()
    end = rnd.handle(Stop(kept=True))
    assert isinstance(end, End)
    assert (end.reason, end.turns, end.speakers) == ("stopped", 1, ("Researcher",))


def test_stop_while_asking_an_outside_agent() -> None:
    rnd = Round(named=["Helper"], roster=ROSTER)
    assert rnd.start() == Ask("Helper", 1)
    assert rnd.handle(Stop()).reason == "stopped"


@pytest.mark.parametrize(
    ("event", "reason"),
    [
        (ProviderFailed("Researcher", "The model was not found."), "error"),
        (TurnRefused("Researcher", "This chat reached its limit."), "spend"),
    ],
)
def test_failures_end_the_round_with_words(event, reason) -> None:
    rnd = Round(named=["Researcher", "Writer"], roster=ROSTER)
    rnd.start()
    end = rnd.handle(event)
    assert isinstance(end, End)
    assert (end.reason, end.words) == (reason, event.words)


@pytest.mark.parametrize(
    ("limit", "why"),
    [
        ("chat", "the chat reached its spending limit"),
        ("month", "this month's spending reached its budget"),
    ],
)
def test_a_turn_the_chats_limits_refuse_says_which_limit_not_the_rounds(
    limit: SpendLimit, why: str
) -> None:
    rnd = Round(named=["Researcher", "Writer"], roster=ROSTER)
    rnd.start()
    rnd.handle(ReplyEnded("Researcher", "@Writer over to you"))
    end = rnd.handle(TurnRefused("Writer", "This chat has spent $5.00 of its $5.00 limit.", limit))
    assert isinstance(end, End)
    assert (end.reason, end.limit) == ("spend", limit)
    assert end_event(end) == {
        "turns": 1,
        "reason": "spend",
        "words": f"Researcher answered · 1 reply · ended: {why}",
        "limit": limit,
    }
    assert "$1" not in str(end_event(end)["words"])


def test_the_rounds_own_spend_end_names_its_dollar() -> None:
    rnd = Round(named=["Researcher", "Writer"], roster=ROSTER)
    rnd.start()
    rnd.handle(SpendRecorded(1.0))
    end = rnd.handle(ReplyEnded("Researcher", "@Writer over to you"))
    assert isinstance(end, End)
    assert end_event(end)["words"] == (
        "Researcher answered · 1 reply · ended: it reached its $1 spending limit"
    )
    assert end_event(end)["limit"] == "round"
    assert "limit" not in end_event(End("done", 1, ("Writer",)))  # said only for "spend"


@pytest.mark.parametrize("phase", ["new", "speaking", "asking"])
def test_a_failure_inside_conch_ends_the_round_in_any_phase(phase: str) -> None:
    rnd = Round(named=["Helper" if phase == "asking" else "Researcher", "Writer"], roster=ROSTER)
    if phase != "new":
        rnd.start()
    assert rnd.phase == phase
    end = rnd.handle(Broke("The chat store is full."))
    assert (end.reason, end.words, rnd.phase, rnd.waiting) == (
        "error", "The chat store is full.", "ended", [],
    )  # fmt: skip
    assert rnd.handle(Broke("Again.")) is end  # a second failure changes nothing


def test_a_failure_after_the_end_keeps_the_reason_it_ended_for() -> None:
    rnd = Round(named=["Researcher", "Writer"], roster=ROSTER)
    rnd.start()
    stopped = rnd.handle(Stop())
    assert rnd.handle(Broke("The note could not be stored.")) is stopped
    assert stopped.reason == "stopped"


def test_plain_message_answered_alone_does_not_hand_on() -> None:
    _, decisions = play(["Researcher"], ["@Writer please continue"], handing_on=False)
    assert speakers(decisions) == ["Researcher"]
    assert decisions[-1].reason == "done"


def test_plain_message_naming_an_outside_agent_sends_nothing() -> None:
    _, decisions = play(["Researcher"], ["@Helper?"], handing_on=False)
    assert speakers(decisions) == ["Researcher"]
    assert decisions[-1].reason == "done"


def test_snapshot_shows_the_live_state() -> None:
    rnd = Round(named=["Researcher", "Writer", "Critic"], roster=ROSTER)
    rnd.start()
    assert rnd.snapshot() == {
        "speaker": "Researcher",
        "replies": 0,
        "limit": 8,
        "waiting": ["Writer", "Critic"],
    }


@pytest.mark.parametrize(
    "event",
    [
        ReplyEnded("Writer", "not my turn"),
        OutsideAnswered("Researcher"),
        ProviderFailed("Writer", "x"),
        SpendRecorded(-1.0),
    ],
)
def test_illegal_events_raise_and_change_nothing(event) -> None:
    rnd = Round(named=["Researcher", "Writer"], roster=ROSTER)
    rnd.start()
    before = (rnd.phase, rnd.speaker, rnd.replies, rnd.spent_usd, rnd.waiting)
    with pytest.raises(RoundError):
        rnd.handle(event)
    assert (rnd.phase, rnd.speaker, rnd.replies, rnd.spent_usd, rnd.waiting) == before


def test_events_after_the_end_raise() -> None:
    rnd = Round(named=["Researcher"], roster=ROSTER)
    rnd.start()
    end = rnd.handle(ReplyEnded("Researcher", "Done."))
    assert isinstance(end, End)
    assert end.reason == "done"
    for late in (ReplyEnded("Researcher", "late"), ProviderFailed("Researcher", "x"), Stop()):
        with pytest.raises(RoundError):
            rnd.handle(late)
    with pytest.raises(RoundError):
        rnd.handle(SpendRecorded(0.1))
    with pytest.raises(RoundError):
        rnd.start()


@pytest.mark.parametrize(
    "outcome",
    [
        ReplyEnded("Researcher", "words kept so far, @Writer"),
        ProviderFailed("Researcher", "cut off"),
    ],
)
def test_the_stopped_turns_outcome_gets_the_end_stop_decided(outcome) -> None:
    """Ended while you were waiting: the driver feeds what came back, the engine says it ended."""
    rnd = Round(named=["Researcher", "Writer"], roster=ROSTER)
    rnd.start()
    stopped = rnd.handle(Stop(kept=True))
    assert rnd.handle(SpendRecorded(0.25)) is None
    assert rnd.handle(outcome) is stopped
    assert (stopped.reason, stopped.turns, rnd.spent_usd, rnd.waiting) == ("stopped", 1, 0.0, [])
    with pytest.raises(RoundError):  # only the turn that was running can still report
        rnd.handle(ReplyEnded("Writer", "never had the floor"))


def test_the_stopped_outside_calls_answer_gets_the_end() -> None:
    rnd = Round(named=["Helper", "Researcher"], roster=ROSTER)
    assert rnd.start() == Ask("Helper", 1)
    stopped = rnd.handle(Stop())
    assert rnd.handle(OutsideAnswered("Helper")) is stopped
    assert (stopped.reason, stopped.turns) == ("stopped", 0)


def test_nobody_named_that_exists_ends_at_once() -> None:
    rnd = Round(named=["Ghost"], roster=ROSTER)
    end = rnd.start()
    assert isinstance(end, End)
    assert (end.reason, end.turns) == ("done", 0)


# --- Limits and end words ------------------------------------------------------------------


def test_round_limits_are_fixed() -> None:
    assert RoundLimits(replies=8, per_speaker=3, loop_swaps=5, spend_usd=1.0) == ROUND_LIMITS
    with pytest.raises(dataclasses.FrozenInstanceError):
        ROUND_LIMITS.replies = 100  # type: ignore[misc]


END_CASES = [
    (["Researcher", "Writer"], 4, "done", "Researcher and Writer took turns · 4 replies"),
    (["Researcher"], 1, "done", "Researcher answered · 1 reply"),
    (
        ["Researcher", "Writer", "Critic"],
        6,
        "done",
        "Researcher, Writer and Critic took turns · 6 replies",
    ),
    (
        ["Researcher", "Writer", "Researcher", "Writer"],
        8,
        "replies",
        "Researcher and Writer took turns · 8 replies · ended: it reached 8 replies",
    ),
    (
        ["Writer"],
        3,
        "speaker",
        "Writer answered · 3 replies · ended: an agent had already answered 3 times",
    ),
    (
        ["A", "B"],
        5,
        "loop",
        "A and B took turns · 5 replies · ended: two agents kept passing it back and forth",
    ),
    (["A"], 2, "spend", "A answered · 2 replies · ended: it reached its $1 spending limit"),
    (["A"], 1, "you", "A answered · 1 reply · ended: you wrote"),
    (["A"], 1, "stopped", "A answered · 1 reply · ended: you stopped it"),
    (["A"], 1, "outside", "A answered · 1 reply · ended: only you can send to an outside agent"),
    (["A"], 1, "error", "A answered · 1 reply · ended: something went wrong"),
    ([], 0, "done", "The round ended before anyone answered"),
    ([], 0, "stopped", "The round ended before anyone answered: you stopped it"),
    ([], 2, "done", "The agents took turns · 2 replies"),
]


@pytest.mark.parametrize(("speakers", "replies", "reason", "expected"), END_CASES)
def test_end_words(speakers: list[str], replies: int, reason: EndReason, expected: str) -> None:
    assert end_words(speakers, replies, reason) == expected


def test_end_words_cover_every_reason_with_the_limits_numbers() -> None:
    reasons = {"done", "replies", "speaker", "loop", "spend", "you", "stopped", "outside", "error"}
    assert set(ROUND_END_WORDS) == reasons
    assert ROUND_END_WORDS["done"] is None
    assert all(ROUND_END_WORDS[r] for r in reasons - {"done"})
    assert str(ROUND_LIMITS.replies) in (ROUND_END_WORDS["replies"] or "")
    assert str(ROUND_LIMITS.per_speaker) in (ROUND_END_WORDS["speaker"] or "")
    with pytest.raises(ValueError, match="unknown round end reason"):
        end_words(["A"], 1, "bored")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="negative"):
        end_words(["A"], -1, "done")
