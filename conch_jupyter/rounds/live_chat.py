"""What is live while Conch answers in a chat (driver.py's RoundService drives it): the chat's
inbox, its round and the reply being made (LiveChat), the engine's step taken as a reply was
stored (NextTurn), who can be named meanwhile (Room), and how the chat's last round ended, for
the user to continue it (LastRound, Continued). Nothing here is stored."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from ..agents.agent_store import Agent
from ..store.chats import Message
from .engine import Continuation, Decision, End, Round
from .turn import Reply


@dataclass
class LiveChat:
    """What is live in one chat: its inbox of user messages and the round running now."""

    id: str
    # The user's messages, and the rounds the user continued, answered in order.
    inbox: asyncio.Queue[Message | Continued] = field(default_factory=asyncio.Queue)
    runner: asyncio.Task[None] | None = None
    round: Round | None = None
    visible: bool = False  # a round the user started by mentioning, not a plain reply
    # The turn or the outside call running now: Stop cancels it.
    running: asyncio.Task[Any] | None = None
    # The reply being made now (kept, and counted as a reply, if stopped once it said something).
    reply: Reply | None = None
    # The engine's step after the reply just made, taken as it was stored (RoundService._ahead).
    next: NextTurn | None = None
    # How the chat's last round ended, to continue it from (None: none since the server started).
    last: LastRound | None = None
    # The kernel key's request to continue, asking the user in the chat: its call id and task.
    asking: tuple[str, asyncio.Task[None]] | None = None


@dataclass
class LastRound:
    """The chat's last round as it ended: its end (with whoever had the floor next), the
    message that began it (a continued round answers the same one), what it spent, and whether
    anyone wrote in the chat since (then it cannot be continued)."""

    end: End
    message: Message
    spent_usd: float
    wrote_since: bool = False


@dataclass(frozen=True)
class Continued:
    """A round the user continued, queued in the chat's inbox like a message."""

    going_on: Continuation
    message: Message


@dataclass(frozen=True)
class NextTurn:
    """The engine's decision after a reply, and the next turn's note if it was queued with the
    reply (one commit for both: the time between two turns holds one commit, not two; ~0.9 ms
    of the gap, see RoundService._ahead)."""

    decision: Decision
    note: asyncio.Task[Message] | None = None


@dataclass(frozen=True)
class Room:
    """Who can be named while one message is answered: your agents and outside agents."""

    agents: list[Agent]
    outside: dict[str, str]  # an outside agent's name → its id

    def agent(self, name: str) -> Agent:
        return next(a for a in self.agents if a.name == name)

    def id_of(self, name: str) -> str:
        found = next((a.id for a in self.agents if a.name == name), None)
        return found or self.outside.get(name, name)

    def names(self) -> dict[str, str]:
        """Every id → the name people see (your agents and outside agents)."""
        return {**{i: n for n, i in self.outside.items()}, **{a.id: a.name for a in self.agents}}
