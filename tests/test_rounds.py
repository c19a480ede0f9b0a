"""The round engine, rule by rule: no server, no network, no sleeps."""

from __future__ import annotations

import pytest

from conch_jupyter.rounds import (
    Ask,
    End,
    OutsideAnswered,
    ProviderFailed,
    ReplyEnded,
    Roster,
    Round,
    RoundError,
    Speak,
    SpendRecorded,
    Stop,
    TurnRefused,
    UserWrote,
)
from conch_jupyter.talk import ROUND_LIMITS

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
    rnd.start()
    end = rnd.handle(Stop())
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
    rnd.handle(Stop())
    with pytest.raises(RoundError):
        rnd.handle(ReplyEnded("Researcher", "late"))
    with pytest.raises(RoundError):
        rnd.start()


def test_nobody_named_that_exists_ends_at_once() -> None:
    rnd = Round(named=["Ghost"], roster=ROSTER)
    end = rnd.start()
    assert isinstance(end, End)
    assert (end.reason, end.turns) == ("done", 0)
