"""Continue a round stopped at its bound (DESIGN.md): the engine alone, no server, no sleeps.

Each of the round's own bounds is reached by playing a real round through the engine; the
continuation begins with whoever had the floor next, with every bound fresh. Every other end,
a message since, and the chat's or the month's limit refuse, in words."""

from __future__ import annotations

import pytest

from conch_jupyter.rounds.engine import (
    CONTINUABLE,
    NO_ROUND_WORDS,
    NOT_CONTINUED_WORDS,
    RAISE_LIMIT_WORDS,
    ROUND_LIMITS,
    RUNNING_WORDS,
    WROTE_SINCE_WORDS,
    ChatLimit,
    Continuation,
    End,
    NothingToContinue,
    NotSent,
    OutsideAnswered,
    ProviderFailed,
    ReplyEnded,
    Roster,
    Round,
    Speak,
    SpendRecorded,
    Stop,
    TurnRefused,
    UserWrote,
    Waiting,
    continuation,
    end_event,
)

ROSTER = Roster(ours=("Researcher", "Writer", "Critic"), outside=("Helper",))


def played(named: list[str], replies: list[str], spend: float = 0.0) -> End:
    """A round where each turn answers with the next scripted text (each costing `spend`)."""
    rnd = Round(named=named, roster=ROSTER)
    decision = rnd.start()
    texts = iter(replies)
    while not isinstance(decision, End):
        assert isinstance(decision, Speak)
        if spend:
            rnd.handle(SpendRecorded(spend))
        decision = rnd.handle(ReplyEnded(decision.agent, next(texts)))
    return decision


def ended_at_replies() -> End:
    # Researcher → Writer → Critic → Researcher …: 8 replies, nobody past 3, no pair swapping 5x.
    hand = {"Researcher": "@Writer", "Writer": "@Critic", "Critic": "@Researcher"}
    order = ["Researcher", "Writer", "Critic"] * 3
    return played(["Researcher"], [f"{hand[s]} yours" for s in order])


def ended_at_speaker() -> End:
    # Researcher answers turns 1, 3 and 5, and Writer hands it to Researcher a fourth time.
    texts = ["@Writer", "@Researcher", "@Critic", "@Researcher", "@Writer", "@Researcher"]
    return played(["Researcher"], texts)


def ended_at_loop() -> End:
    return played(["Researcher"], ["@Writer", "@Researcher"] * 3)


def ended_at_round_spend() -> End:
    # Named three; Researcher's reply costs the round's $1 and hands to Critic.
    return played(["Researcher", "Writer", "Critic"], ["@Critic over to you"], spend=1.0)


BOUNDS = [
    # (how the round is played, its reason, whoever had the floor next)
    (ended_at_replies, "replies", (Waiting("Critic", "Writer"),)),
    (ended_at_speaker, "speaker", (Waiting("Researcher", "Writer"),)),
    (ended_at_loop, "loop", (Waiting("Writer", "Researcher"),)),
    # The agents the last reply handed to first, then those still waiting from your message.
    (ended_at_round_spend, "spend", (Waiting("Critic", "Researcher"), Waiting("Writer", None))),
]


@pytest.mark.parametrize(("play", "reason", "floor"), BOUNDS)
def test_each_bound_continues_from_whoever_had_the_floor_next(play, reason, floor) -> None:
    end = play()
    assert end.reason == reason
    if reason == "spend":
        assert end.limit == "round"
    assert end.floor == floor
    assert reason in CONTINUABLE
    going_on = continuation(end, wrote_since=False)
    assert going_on == Continuation(floor, end)
    assert going_on.named == tuple(w.name for w in floor)


@pytest.mark.parametrize(("play", "reason", "floor"), BOUNDS)
def test_a_continued_round_has_every_bound_fresh(play, reason, floor) -> None:
    going_on = continuation(play(), wrote_since=False)
    assert isinstance(going_on, Continuation)
    rnd = Round(named=list(going_on.named), roster=ROSTER, floor=going_on.floor)
    first = rnd.start()
    # It begins with the agent next on the floor, handed over by whoever handed it before.
    assert first == Speak(floor[0].name, 1, floor[0].handed_by)
    assert rnd.replies == 0
    assert rnd.spent_usd == 0.0
    # The agent next on the floor answers three more times here: its count starts at nothing.
    speaker = floor[0].name
    other = "Writer" if speaker != "Writer" else "Critic"
    decision: object = first
    answered = 0
    while isinstance(decision, Speak):
        answered += decision.agent == speaker
        text = f"@{other}" if decision.agent == speaker else f"@{speaker}"
        decision = rnd.handle(ReplyEnded(decision.agent, text))
    assert isinstance(decision, End)
    assert answered == ROUND_LIMITS.per_speaker
    assert decision.reason in ("speaker", "loop")


def test_a_continued_round_may_itself_be_continued() -> None:
    end = ended_at_loop()
    for _ in range(3):
        going_on = continuation(end, wrote_since=False)
        assert isinstance(going_on, Continuation)
        rnd = Round(named=list(going_on.named), roster=ROSTER, floor=going_on.floor)
        decision = rnd.start()
        while isinstance(decision, Speak):
            other = "Researcher" if decision.agent == "Writer" else "Writer"
            decision = rnd.handle(ReplyEnded(decision.agent, f"@{other}"))
        assert isinstance(decision, End)
        assert decision.reason == "loop"
        end = decision


def refused_end(event: object) -> End:
    rnd = Round(named=["Researcher", "Writer"], roster=ROSTER)
    rnd.start()
    decision = rnd.handle(event)  # type: ignore[call-overload]
    assert isinstance(decision, End)
    return decision


def ended_done() -> End:
    return played(["Researcher"], ["Here is all of it."])


def ended_by_you() -> End:
    rnd = Round(named=["Researcher", "Writer"], roster=ROSTER)
    rnd.start()
    rnd.handle(UserWrote())
    end = rnd.handle(ReplyEnded("Researcher", "@Writer yours"))
    assert isinstance(end, End)
    return end


def ended_outside() -> End:
    return played(["Researcher", "Writer"], ["ask @Helper about it"])


OTHER_ENDS = [
    (ended_done, "done"),
    (ended_by_you, "you"),
    (lambda: refused_end(Stop(kept=True)), "stopped"),
    (ended_outside, "outside"),
    (lambda: refused_end(ProviderFailed("Researcher", "The model was not found.")), "error"),
]


@pytest.mark.parametrize(("play", "reason"), OTHER_ENDS)
def test_every_other_end_cannot_be_continued(play, reason) -> None:
    end = play()
    assert end.reason == reason
    assert reason not in CONTINUABLE
    assert continuation(end, wrote_since=False) == NothingToContinue(NOT_CONTINUED_WORDS[reason])


def test_nothing_is_continued_while_the_chat_is_answering() -> None:
    # A continued round running (or one a message started): one at a time, whatever came before.
    assert continuation(ended_at_loop(), wrote_since=False, running=True) == NothingToContinue(
        RUNNING_WORDS
    )
    assert continuation(None, wrote_since=False, running=True) == NothingToContinue(RUNNING_WORDS)


def test_no_round_and_a_message_since_refuse_in_words() -> None:
    assert continuation(None, wrote_since=False) == NothingToContinue(NO_ROUND_WORDS)
    assert continuation(ended_at_loop(), wrote_since=True) == NothingToContinue(WROTE_SINCE_WORDS)
    assert "message came since" in WROTE_SINCE_WORDS


def stopped_at_the_chats_limit(limit: ChatLimit) -> End:
    rnd = Round(named=["Researcher", "Writer", "Critic"], roster=ROSTER)
    rnd.start()
    rnd.handle(ReplyEnded("Researcher", "@Writer yours"))
    end = rnd.handle(TurnRefused("Writer", "This chat has spent $5.00 of its $5.00 limit.", limit))
    assert isinstance(end, End)
    return end


@pytest.mark.parametrize("limit", ["chat", "month"])
def test_the_chats_or_months_limit_refuses_until_it_is_raised(limit: ChatLimit) -> None:
    end = stopped_at_the_chats_limit(limit)
    assert (end.reason, end.limit) == ("spend", limit)
    # The turn the limit refused is still Writer's, handed by Researcher; Critic waits after.
    assert end.floor == (Waiting("Writer", "Researcher"), Waiting("Critic", None))
    refused = continuation(end, wrote_since=False, limit_now=limit)
    assert refused == NothingToContinue(RAISE_LIMIT_WORDS[limit])
    assert "raise the limit first" in refused.words
    # Raised: it goes on from the turn that was refused.
    assert continuation(end, wrote_since=False, limit_now=None) == Continuation(end.floor, end)


@pytest.mark.parametrize(("play", "reason", "floor"), BOUNDS)
@pytest.mark.parametrize("limit", ["chat", "month"])
def test_a_bound_cannot_be_continued_past_the_chats_limit(
    play, reason, floor, limit: ChatLimit
) -> None:
    refused = continuation(play(), wrote_since=False, limit_now=limit)
    assert refused == NothingToContinue(RAISE_LIMIT_WORDS[limit])


def test_only_who_answered_took_turns() -> None:
    # Writer's turn was refused by the chat's limit: it never answered, so it is not named.
    end = stopped_at_the_chats_limit("chat")
    assert end.speakers == ("Researcher",)
    assert end_event(end)["words"] == (
        "Researcher answered · 1 reply · ended: the chat reached its spending limit"
    )


def test_an_outside_agent_not_sent_to_did_not_take_a_turn() -> None:
    rnd = Round(named=["Helper", "Researcher"], roster=ROSTER)
    assert rnd.start().agent == "Helper"  # type: ignore[union-attr]
    decision = rnd.handle(NotSent("Helper"))
    assert isinstance(decision, Speak)
    end = rnd.handle(ReplyEnded("Researcher", "done."))
    assert isinstance(end, End)
    assert end.speakers == ("Researcher",)
    rnd2 = Round(named=["Helper"], roster=ROSTER)
    rnd2.start()
    end2 = rnd2.handle(OutsideAnswered("Helper"))
    assert isinstance(end2, End)
    assert end2.speakers == ("Helper",)
