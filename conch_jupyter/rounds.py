"""The round engine: agents taking turns in a chat, as a pure state machine.

Theory of operation
-------------------
A user's message that mentions agents starts a round. The names it mentioned, in order, fill the
floor queue. The engine hands out the floor one speaker at a time and the driver (service.py) does
the I/O: it asks a model or an outside agent, stores what came back, and feeds the result in as an
event. Every event returns the next decision, or None when the engine is still waiting on the
reply that is running.

    decision = round.start()            # Speak(...) / Ask(...) / End(...)
    decision = round.handle(ReplyEnded(speaker, text))

Rules (spec 0112, "A round"):
- The first agent named answers the user's message. A reply hands the floor on by naming
  agents (@Name): they go next, before anyone still waiting from the user's message. Nobody
  answers themselves. A reply that names an outside agent ends the round: only the user can send
  to one. An outside agent's answer passes the floor to nobody.
- Bounds are ROUND_LIMITS, constants: replies per round, replies per speaker, swaps between the
  same two, metered spend per round. The reply total bounds loops of any length.
- The user is never locked out: UserWrote ends the round once the running reply is in; Stop ends
  it at once. A provider failure ends it with "error"; a turn the chat's own spending limits
  refuse ends it with "spend".

Nothing here imports asyncio, tornado or httpx; there is no clock or id source inside. An event
that does not fit the current phase raises RoundError and changes nothing.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal, overload

from .mentions import read_mentions
from .talk import ROUND_LIMITS, RoundLimits

EndReason = Literal[
    "done", "replies", "speaker", "loop", "spend", "you", "stopped", "outside", "error"
]


class RoundError(Exception):
    """An event that the round cannot take in its current phase."""


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
class TurnRefused:
    """The chat's own spending limit or the monthly budget refused the next turn."""

    speaker: str
    words: str


Event = (
    ReplyEnded | OutsideAnswered | SpendRecorded | UserWrote | Stop | ProviderFailed | TurnRefused
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


Decision = Speak | Ask | End

Phase = Literal["new", "speaking", "asking", "ended"]


@dataclass(frozen=True)
class Roster:
    """Who can be named: your agents and outside agents, by name as the user sees them."""

    ours: tuple[str, ...]
    outside: tuple[str, ...] = ()

    def is_outside(self, name: str) -> bool:
        # Your agent wins a name that both lists hold (a hand-edited file): never ask outside.
        return name in self.outside and name not in self.ours


@dataclass
class _Waiting:
    name: str
    handed_by: str | None


@dataclass
class Round:
    """One round in one chat. `handing_on=False` is a plain message answered alone."""

    named: Sequence[str]
    roster: Roster
    handing_on: bool = True
    limits: RoundLimits = ROUND_LIMITS

    phase: Phase = "new"
    speaker: str | None = None
    replies: int = 0
    spent_usd: float = 0.0
    ending_for_user: bool = False
    ended: End | None = None
    _queue: list[_Waiting] = field(default_factory=list)
    _per_speaker: Counter[str] = field(default_factory=Counter)
    _swaps: Counter[frozenset[str]] = field(default_factory=Counter)
    _order: list[str] = field(default_factory=list)
    _last: str | None = None

    # --- reading the state ---

    @property
    def waiting(self) -> list[str]:
        return [w.name for w in self._queue]

    @property
    def speakers(self) -> tuple[str, ...]:
        """Everyone who has had the floor, in order of first turn."""
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
        for name in self.named:
            if name in known and name not in self.waiting:
                self._queue.append(_Waiting(name, None))
        return self._next()

    @overload
    def handle(self, event: SpendRecorded | UserWrote) -> None: ...
    @overload
    def handle(
        self, event: ReplyEnded | OutsideAnswered | Stop | ProviderFailed | TurnRefused
    ) -> Decision: ...
    def handle(self, event: Event) -> Decision | None:
        """Take one event; the next decision, or None for events that only note something."""
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
            if event.kept and self.phase == "speaking" and self.speaker is not None:
                self._count_reply(self.speaker)
            return self._end("stopped")
        if isinstance(event, ProviderFailed | TurnRefused):
            self._expect_speaker(event.speaker)
            reason: EndReason = "error" if isinstance(event, ProviderFailed) else "spend"
            return self._end(reason, words=event.words)
        if isinstance(event, OutsideAnswered):
            if self.phase != "asking":
                raise RoundError("an outside answer arrived while no outside agent was asked")
            self._expect_speaker(event.agent)
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
            self._queue = [_Waiting(n, event.speaker) for n in handed] + [
                w for w in self._queue if w.name not in handed
            ]
        return self._next()

    # --- the rules ---

    def _expect_speaker(self, name: str) -> None:
        if name != self.speaker:
            raise RoundError(f"{name} does not have the floor ({self.speaker} has)")

    def _count_reply(self, name: str) -> None:
        self.replies += 1
        self._per_speaker[name] += 1
        self._last = name

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
        self.speaker = nxt.name
        if nxt.name not in self._order:
            self._order.append(nxt.name)
        turn = self.replies + 1
        if self.roster.is_outside(nxt.name):
            self.phase = "asking"
            return Ask(nxt.name, turn)
        self.phase = "speaking"
        return Speak(nxt.name, turn, nxt.handed_by)

    def _end(
        self, reason: EndReason, *, named_outside: tuple[str, ...] = (), words: str = ""
    ) -> End:
        self.phase = "ended"
        self.speaker = None
        self._queue.clear()
        self.ended = End(reason, self.replies, self.speakers, named_outside, words)
        return self.ended
