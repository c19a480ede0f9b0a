"""The round engine: agents taking turns in a chat, as a pure state machine.

Theory of operation
-------------------
A user's message that mentions agents starts a round. The names it mentioned, in order, fill the
floor queue. The engine hands out the floor one speaker at a time and the driver (driver.py) does
the I/O: it asks a model or an outside agent, stores what came back, and feeds the result in as an
event. Every event returns the next decision, or None when the engine is still waiting on the
reply that is running.

    decision = round.start()            # Speak(...) / Ask(...) / End(...)
    decision = round.handle(ReplyEnded(speaker, text))

Rules (spec 0112, "A round"):
- The first agent named answers the user's message. A reply hands the floor on by naming
  agents (@Name): they go next, before anyone still waiting from the user's message. Nobody
  answers themselves. A reply that names an outside agent ends the round: only the user can send
  to one. An outside agent's answer passes the floor to nobody. A message that came from the
  kernel asks the user before it goes to an outside agent; when the user says no (NotSent),
  nothing went out, no reply is counted, and the floor moves on.
- Bounds are ROUND_LIMITS, constants: replies per round, replies per speaker, swaps between the
  same two, metered spend per round. The reply total bounds loops of any length.
- The user is never locked out: UserWrote ends the round once the running reply is in; Stop ends
  it at once. A provider failure ends it with "error", and so does a failure inside Conch
  (Broke, in any phase): every round ends with a reason. A turn the chat's own spending limits
  refuse ends it with "spend" too, and End.limit says which limit it reached.
- Ended while you were waiting: after Stop, the outcome of the turn that was running still
  arrives (the reply kept so far, its spend, the outside answer or failure). It changes nothing,
  and the answer is the End that Stop decided, so the driver never checks the phase itself.
- Why a round ended is an EndReason; end_why says it in words, end_words sums it up, naming
  only the agents who answered (one whose turn a limit refused did not).
- Continue (DESIGN.md, "Continue a round stopped at its bound"): a round that ended at one of
  its own bounds (replies, speaker, loop, or its own $1) keeps, in its End, whoever had the
  floor next (`End.floor`: the agents its last reply handed to, then those still waiting from
  the user's message). `continuation` decides whether the user may go on from there: only
  after such an end, only if nobody wrote since, and never past the chat's limit or the
  month's budget ("raise the limit first"). `Round(..., floor=...)` is the new round, every
  bound fresh, the floor queue as it was.

Nothing here imports asyncio, tornado or httpx; there is no clock or id source inside. An event
that does not fit the current phase raises RoundError and changes nothing.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal, overload

from ..core.text import and_join, shown_name
from .mentions import read_mentions

EndReason = Literal[
    "done", "replies", "speaker", "loop", "spend", "you", "stopped", "outside", "error"
]
# Which limit a round that ended with "spend" reached: its own $1, the chat's own limit, or the
# month's budget (the last two refuse a turn before it starts: TurnRefused).
SpendLimit = Literal["round", "chat", "month"]


@dataclass(frozen=True)
class RoundLimits:
    """What one round may use: replies, replies per speaker, swaps between two, metered $."""

    replies: int = 8
    per_speaker: int = 3
    loop_swaps: int = 5
    spend_usd: float = 1.0


# Constants, not settings. The total of replies bounds loops of any length: a per-pair ping-pong
# counter let a three-agent loop run 398 sends over ten hours (OpenClaw issue #37842).
ROUND_LIMITS = RoundLimits()


def _usd(amount: float) -> str:
    return f"${amount:.0f}" if amount == int(amount) else f"${amount:.2f}"


# A "spend" end says which limit it reached: the round's own $1 (ROUND_END_WORDS["spend"]), the
# chat's own limit, or the month's budget.
SPEND_END_WORDS: dict[SpendLimit, str] = {
    "round": f"it reached its {_usd(ROUND_LIMITS.spend_usd)} spending limit",
    "chat": "the chat reached its spending limit",
    "month": "this month's spending reached its budget",
}

# Why a round ended, in words, only when it is worth saying: a round that simply finished
# (done) says nothing more.
ROUND_END_WORDS: dict[EndReason, str | None] = {
    "done": None,
    "replies": f"it reached {ROUND_LIMITS.replies} replies",
    "speaker": f"an agent had already answered {ROUND_LIMITS.per_speaker} times",
    "loop": "two agents kept passing it back and forth",
    "spend": SPEND_END_WORDS["round"],
    "you": "you wrote",
    "stopped": "you stopped it",
    "outside": "only you can send to an outside agent",
    "error": "something went wrong",
}


def end_why(reason: EndReason, limit: SpendLimit = "round") -> str | None:
    """Why a round ended, in words, when it is worth saying (None for a round that finished)."""
    if reason not in ROUND_END_WORDS:
        raise ValueError(f"unknown round end reason: {reason!r}")
    return SPEND_END_WORDS[limit] if reason == "spend" else ROUND_END_WORDS[reason]


def end_words(
    speakers: Sequence[str], replies: int, reason: EndReason, limit: SpendLimit = "round"
) -> str:
    """The folded round card's one line, e.g. "Researcher and Writer took turns · 4 replies"."""
    why = end_why(reason, limit)
    if replies < 0:
        raise ValueError("replies cannot be negative")
    if replies == 0:
        return "The round ended before anyone answered" + (f": {why}" if why else "")
    who = list(dict.fromkeys(shown_name(s) for s in speakers))  # each speaker once, in order
    took_turns = f"{and_join(who) or 'The agents'} took turns"
    head = f"{who[0]} answered" if len(who) == 1 else took_turns
    count = "1 reply" if replies == 1 else f"{replies} replies"
    return f"{head} · {count}" + (f" · ended: {why}" if why else "")


class RoundError(Exception):
    """An event that the round cannot take in its current phase.

    No ConchError: it says the driver has a bug (an event fed at the wrong time), never anything
    a person or a program asked for, so it has no words for anyone; if one escapes, it is a
    crash, logged with its traceback and answered 500 `internal`."""


# --- what comes in -------------------------------------------------------------------------


@dataclass(frozen=True)
class ReplyEnded:
    """One of your agents finished its reply; the names it wrote may hand the floor on."""

    speaker: str
    text: str


@dataclass(frozen=True)
class OutsideAnswered:
    """An outside agent answered (or failed in words); it passes the floor to nobody."""

    agent: str


@dataclass(frozen=True)
class NotSent:
    """The user did not let the message go to the outside agent asked: nothing went out."""

    agent: str


@dataclass(frozen=True)
class SpendRecorded:
    usd: float


@dataclass(frozen=True)
class UserWrote:
    """The user wrote in the chat: the round ends once the running reply is in."""


@dataclass(frozen=True)
class Stop:
    """The user pressed Stop: the round ends at once.

    `kept` says the running reply had already said something, which is kept (cut short) and so
    counts as that speaker's reply.
    """

    kept: bool = False


@dataclass(frozen=True)
class ProviderFailed:
    speaker: str
    words: str


@dataclass(frozen=True)
class Broke:
    """Something inside Conch failed (not the provider: the store, a bug): the round ends at
    once with "error" and these words, whatever phase it was in, so no round just stops."""

    words: str


@dataclass(frozen=True)
class TurnRefused:
    """The chat's own spending limit or the monthly budget refused the next turn."""

    speaker: str
    words: str
    limit: SpendLimit = "chat"


Event = (
    ReplyEnded
    | OutsideAnswered
    | NotSent
    | SpendRecorded
    | UserWrote
    | Stop
    | ProviderFailed
    | TurnRefused
    | Broke
)


# --- what goes out -------------------------------------------------------------------------


@dataclass(frozen=True)
class Speak:
    """Give the floor to one of your agents."""

    agent: str
    turn: int
    handed_by: str | None


@dataclass(frozen=True)
class Ask:
    """Send the user's message, and only it, to an outside agent."""

    agent: str
    turn: int


@dataclass(frozen=True)
class End:
    reason: EndReason
    turns: int
    speakers: tuple[str, ...]
    # Outside agents a reply named when the round ended with "outside"; the words of a failure.
    named_outside: tuple[str, ...] = ()
    words: str = ""
    limit: SpendLimit = "round"  # which limit a "spend" end reached
    # Whoever had the floor next when it ended, in order (a turn a limit refused first): where a
    # continued round begins.
    floor: tuple[Waiting, ...] = ()


def end_event(end: End) -> dict[str, object]:
    """What a round.ended event holds: its turns, its reason, the folded card's words, and for a
    "spend" end which limit it reached (the round's $1, the chat's limit, the month's budget)."""
    ended: dict[str, object] = {
        "turns": end.turns,
        "reason": end.reason,
        "words": end_words(end.speakers, end.turns, end.reason, end.limit),
    }
    if end.reason == "spend":
        ended["limit"] = end.limit
    return ended


Decision = Speak | Ask | End

# --- continuing a round stopped at its bound ------------------------------------------------

# The ends a user may continue from: the round's own bounds, and "spend" (its own $1 at once; the
# chat's limit or the month's budget once raised: `continuation`'s `limit_now` says no till then).
CONTINUABLE: frozenset[EndReason] = frozenset({"replies", "speaker", "loop", "spend"})

# Why a round cannot be continued, in words, by how it ended.
NOT_CONTINUED_WORDS: dict[EndReason, str] = {
    "done": "The last round finished by itself: nobody was waiting for the floor.",
    "you": "The last round ended because you wrote; your message started what came next.",
    "stopped": "You stopped the last round; mention the agents to start a new one.",
    "outside": "The last round ended at a message for an outside agent, which only you can "
    "send: write to it yourself.",
    "error": "The last round ended with an error; mention the agents to start a new one.",
}
# The chat's limit or the month's budget, when it would refuse the first turn of a continued
# round: the user raises it first.
ChatLimit = Literal["chat", "month"]
RAISE_LIMIT_WORDS: dict[ChatLimit, str] = {
    "chat": "This chat is at its spending limit: raise the limit first (in the chat's header),"
    " then continue.",
    "month": "This month's spending is at its budget: raise the limit first (the month's budget"
    " in Settings), then continue.",
}
NO_ROUND_WORDS = "There is no round to continue: none has ended here since the server started."
WROTE_SINCE_WORDS = "There is no round to continue: a message came since the last round ended."
RUNNING_WORDS = "Conch is answering in this chat now: continue once the round has ended."


@dataclass(frozen=True)
class Continuation:
    """Go on from where a round stopped at its bound: its floor queue, and the end it left."""

    floor: tuple[Waiting, ...]
    after: End

    @property
    def named(self) -> tuple[str, ...]:
        return tuple(w.name for w in self.floor)


@dataclass(frozen=True)
class NothingToContinue:
    """Why the user cannot continue now, in words (409 `nothing_to_continue`)."""

    words: str


def continuation(
    last: End | None,
    *,
    wrote_since: bool,
    limit_now: ChatLimit | None = None,
    running: bool = False,
) -> Continuation | NothingToContinue:
    """Whether the user may continue the chat's last round, and from where.

    `last`: how the chat's last round ended (None: no round ended since the server started);
    `wrote_since`: anyone wrote in the chat after it ended (a person, the kernel, another bot);
    `limit_now`: the chat's limit or the month's budget, when it would refuse the first turn now
    (a round that stopped at one of them goes on once it is raised); `running`: the chat is
    answering now (a round, a continued one included). Only a user's request gets here: nothing
    an agent writes continues a round."""
    if running:
        return NothingToContinue(RUNNING_WORDS)
    if last is None:
        return NothingToContinue(NO_ROUND_WORDS)
    if wrote_since:
        return NothingToContinue(WROTE_SINCE_WORDS)
    if last.reason not in CONTINUABLE:
        return NothingToContinue(NOT_CONTINUED_WORDS[last.reason])
    if limit_now is not None:
        return NothingToContinue(RAISE_LIMIT_WORDS[limit_now])
    if not last.floor:  # a bound is only ever reached with someone waiting; kept for safety
        return NothingToContinue(NOT_CONTINUED_WORDS["done"])
    return Continuation(last.floor, last)


Phase = Literal["new", "speaking", "asking", "ended"]


@dataclass(frozen=True)
class Roster:
    """Who can be named: your agents and outside agents, by name as the user sees them."""

    ours: tuple[str, ...]
    outside: tuple[str, ...] = ()

    def is_outside(self, name: str) -> bool:
        # Your agent wins a name that both lists hold (a hand-edited file): never ask outside.
        return name in self.outside and name not in self.ours


@dataclass(frozen=True)
class Waiting:
    """One agent in the floor queue, and whose reply handed the floor to it (None: the user's
    message named it)."""

    name: str
    handed_by: str | None = None


@dataclass
class Round:
    """One round in one chat. `handing_on=False` is a plain message answered alone."""

    named: Sequence[str]
    roster: Roster
    handing_on: bool = True
    limits: RoundLimits = ROUND_LIMITS
    # A round that continues one stopped at its bound: its floor queue as that one left it
    # (`named` then lists the same agents).
    floor: tuple[Waiting, ...] = ()

    phase: Phase = "new"
    speaker: str | None = None
    replies: int = 0
    spent_usd: float = 0.0
    ending_for_user: bool = False
    ended: End | None = None
    _queue: list[Waiting] = field(default_factory=list)
    _per_speaker: Counter[str] = field(default_factory=Counter)
    _swaps: Counter[frozenset[str]] = field(default_factory=Counter)
    _order: list[str] = field(default_factory=list)
    _last: str | None = None
    _stopped_turn: str | None = None  # who had the floor when Stop came
    _turn: Waiting | None = None  # the turn running now, as it was queued

    # --- reading the state ---

    @property
    def waiting(self) -> list[str]:
        return [w.name for w in self._queue]

    @property
    def taking_turns(self) -> bool:
        """Whether a turn is running: the user's writing and Stop act on the round only then."""
        return self.phase in ("speaking", "asking")

    @property
    def speakers(self) -> tuple[str, ...]:
        """Everyone who answered (a reply counted), in order of first reply; an agent whose
        turn a limit refused, or who was stopped before saying anything, is not among them."""
        return tuple(self._order)

    def snapshot(self) -> dict[str, object]:
        return {
            "speaker": self.speaker,
            "replies": self.replies,
            "limit": self.limits.replies,
            "waiting": self.waiting,
        }

    # --- events in, decisions out ---

    def start(self) -> Decision:
        if self.phase != "new":
            raise RoundError("the round has already started")
        known = set(self.roster.ours) | set(self.roster.outside)
        queued = self.floor or tuple(Waiting(name) for name in self.named)
        for waiting in queued:
            if waiting.name in known and waiting.name not in self.waiting:
                self._queue.append(waiting)
        return self._next()

    @overload
    def handle(self, event: SpendRecorded | UserWrote) -> None: ...
    @overload
    def handle(self, event: Broke) -> End: ...
    @overload
    def handle(
        self, event: ReplyEnded | OutsideAnswered | NotSent | Stop | ProviderFailed | TurnRefused
    ) -> Decision: ...
    def handle(self, event: Event) -> Decision | None:
        """Take one event; the next decision, or None for events that only note something."""
        if isinstance(event, Broke):
            # From any phase; a round that had already ended keeps the reason it ended for.
            return self.ended or self._end("error", words=event.words)
        if self.phase == "ended" and self._outcome_after_stop(event):
            return None if isinstance(event, SpendRecorded) else self.ended
        if self.phase in ("new", "ended"):
            raise RoundError(f"{type(event).__name__} arrived while the round is {self.phase}")
        if isinstance(event, SpendRecorded):
            if event.usd < 0:
                raise RoundError("spend cannot be negative")
            self.spent_usd += event.usd
            return None
        if isinstance(event, UserWrote):
            self.ending_for_user = True
            return None
        if isinstance(event, Stop):
            self._stopped_turn = self.speaker
            if event.kept and self.phase == "speaking" and self.speaker is not None:
                self._count_reply(self.speaker)
            return self._end("stopped")
        if isinstance(event, ProviderFailed):
            self._expect_speaker(event.speaker)
            return self._end("error", words=event.words)
        if isinstance(event, TurnRefused):
            self._expect_speaker(event.speaker)
            if self._turn is not None:  # the refused turn is still theirs to take
                self._queue.insert(0, self._turn)
            return self._end("spend", words=event.words, limit=event.limit)
        if isinstance(event, OutsideAnswered | NotSent):
            if self.phase != "asking":
                raise RoundError("an outside answer arrived while no outside agent was asked")
            self._expect_speaker(event.agent)
            if isinstance(event, OutsideAnswered):
                self._count_reply(event.agent)
            return self._next()
        if self.phase != "speaking":
            raise RoundError("a reply arrived while no agent of yours had the floor")
        self._expect_speaker(event.speaker)
        self._count_reply(event.speaker)
        if self.handing_on:
            named = read_mentions(event.text, self.roster.ours, self.roster.outside).named
            outside = tuple(n for n in named if self.roster.is_outside(n))
            if outside:
                return self._end("outside", named_outside=outside)
            handed = [n for n in named if n != event.speaker]
            self._queue = [Waiting(n, event.speaker) for n in handed] + [
                w for w in self._queue if w.name not in handed
            ]
        return self._next()

    # --- the rules ---

    def _outcome_after_stop(self, event: Event) -> bool:
        """Whether `event` is the outcome of the turn Stop cut short ("ended while waiting")."""
        if self._stopped_turn is None:
            return False
        if isinstance(event, SpendRecorded):
            return event.usd >= 0
        if isinstance(event, ReplyEnded | ProviderFailed):
            return event.speaker == self._stopped_turn
        if isinstance(event, OutsideAnswered | NotSent):
            return event.agent == self._stopped_turn
        return False

    def _expect_speaker(self, name: str) -> None:
        if name != self.speaker:
            raise RoundError(f"{name} does not have the floor ({self.speaker} has)")

    def _count_reply(self, name: str) -> None:
        self.replies += 1
        self._per_speaker[name] += 1
        self._last = name
        if name not in self._order:
            self._order.append(name)

    def _next(self) -> Decision:
        if self.ending_for_user:
            return self._end("you")
        if not self._queue:
            return self._end("done")
        if self.replies >= self.limits.replies:
            return self._end("replies")
        if self.spent_usd >= self.limits.spend_usd:
            return self._end("spend")
        nxt = self._queue[0]
        if self._per_speaker[nxt.name] >= self.limits.per_speaker:
            return self._end("speaker")
        pair = frozenset((self._last, nxt.name)) if self._last not in (None, nxt.name) else None
        if pair is not None and self._swaps[pair] + 1 >= self.limits.loop_swaps:
            return self._end("loop")
        if pair is not None:
            self._swaps[pair] += 1
        self._queue.pop(0)
        self.speaker, self._turn = nxt.name, nxt
        turn = self.replies + 1
        if self.roster.is_outside(nxt.name):
            self.phase = "asking"
            return Ask(nxt.name, turn)
        self.phase = "speaking"
        return Speak(nxt.name, turn, nxt.handed_by)

    def _end(
        self,
        reason: EndReason,
        *,
        named_outside: tuple[str, ...] = (),
        words: str = "",
        limit: SpendLimit = "round",
    ) -> End:
        floor = tuple(self._queue)  # whoever had the floor next
        self.phase = "ended"
        self.speaker, self._turn = None, None
        self._queue.clear()
        self.ended = End(reason, self.replies, self.speakers, named_outside, words, limit, floor)
        return self.ended
