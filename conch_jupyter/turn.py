"""One turn: asking a model for one reply. The only place that streams a model's reply, for the
rounds (service.py) and for the door's guests (a2a/door/peer_turn.py) alike.

Theory of operation
-------------------
The caller says what the turn is (TurnInput: the agent, its system prompt, the chat so far, a
deadline, who pays) and hands in an empty Reply, which the turn fills as it goes:

    reply = Reply()
    await Turns(...).take(turn, reply)   # Stop may cancel this; `reply` still says what was said

1. The history (history.py) and the request are built from the TurnInput.
2. The reply streams from the agent's provider (one retry policy: `stream_reply`); each piece is
   published live to the chat's followers (Hub) and collected in `reply.parts`.
3. However the turn ends — done, failed, past its deadline, or cancelled (Stop, CancelTask, the
   server stopping) — what was said is stored as the agent's message (a cut-off reply is kept)
   and the turn is billed: the provider's usage when it reported one, else an estimate marked as
   such in the ledger (`estimate_usage`), so stopping early cannot walk around the spend bounds.
   A failure before any text was said bills nothing: the provider refused or never answered.
4. A deadline ends the turn with `reply.timed_out`, a provider's failure with `reply.failure`
   (words for the owner); a cancellation is re-raised after the reply is kept and billed.

Where the notebook tools go (issue #14): `TurnInput.tools` is empty today, and a turn is one
model call. The tool loop belongs inside `Turns._exchange`: when the model asks for a tool,
run it, add the call and its result to the request, and ask again — within the same deadline,
into the same Reply, billed the same way. The door's guests never get tools.

What the turn does not decide: whose turn it is and what a reply means for the round (rounds.py
and the driver), whether a metered turn may start at all (spend.py's `turn_refusal`, asked by
the caller first), and what a door task's state becomes (peer_turn.py).
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import httpx

from .agents import Agent, AgentStore
from .deadlines import within
from .history import Said, history_turns
from .hub import Hub
from .providers import make_provider, stream_reply
from .providers.base import ModelRequest, ProviderError, TextDelta, Usage, estimate_usage
from .spend import record_spend
from .store import Store


def new_reply_id() -> str:
    return f"m_{uuid.uuid4().hex[:16]}"


@dataclass(frozen=True)
class TurnInput:
    """What one turn is: who answers, under which prompt, to which chat, within what bounds."""

    conversation_id: str
    agent: Agent
    system: str
    said: Sequence[Said]  # the chat so far, oldest first, with speakers' names
    user_text: str  # the message this reply answers (the offline model's script reads it)
    room: tuple[str, ...]  # the names in the room (the offline model hands on among them)
    place: dict[str, Any] | None = None  # the reply's place in a round, stored with it
    payer: str | None = None  # who else the spend is charged to (a door pairing)
    seconds: float | None = None  # a deadline for the whole reply; None: the provider's own
    tools: Sequence[object] = ()  # the notebook tools (#14); none today, never for the door


@dataclass
class Reply:
    """One reply as the turn makes it: readable by the caller while it streams and after a cut."""

    id: str = field(default_factory=new_reply_id)
    parts: list[str] = field(default_factory=list)
    usage: Usage | None = None
    cost: float = 0.0
    failure: str | None = None  # the provider's failure, in words for the owner
    timed_out: bool = False

    @property
    def text(self) -> str:
        return "".join(self.parts)

    @property
    def said_something(self) -> bool:
        return bool(self.parts)


@dataclass
class Turns:
    """Runs turns: the store, the agents' providers and the Hub a turn needs. One is shared by
    the round driver and the door."""

    store: Store
    agents: AgentStore
    hub: Hub
    http: httpx.AsyncClient
    offline_delay: float = 0.03
    retry_delay: float = 1.0

    async def take(self, turn: TurnInput, reply: Reply) -> Reply:
        """Ask the agent's model for one reply, into `reply`; see the module's theory."""
        request = ModelRequest(
            model=turn.agent.provider.model,
            system=turn.system,
            turns=history_turns(turn.said, turn.agent.name),
            speaker=turn.agent.name,
            room=turn.room,
            user_text=turn.user_text,
        )
        try:
            await within(turn.seconds, self._exchange(turn, request, reply))
        except asyncio.TimeoutError:
            reply.timed_out = True
        except ProviderError as error:
            reply.failure = error.words
        except asyncio.CancelledError:
            self._settle(turn, request, reply)
            raise
        self._settle(turn, request, reply)
        return reply

    async def _exchange(self, turn: TurnInput, request: ModelRequest, reply: Reply) -> None:
        # The tool loop (#14) goes here: see the module's header.
        provider = make_provider(
            self.agents.provider_for(turn.agent.id),
            http=self.http,
            offline_delay=self.offline_delay,
        )
        async for item in stream_reply(provider, request, retry_delay=self.retry_delay):
            if isinstance(item, TextDelta):
                reply.parts.append(item.text)
                self.hub.publish(
                    turn.conversation_id,
                    {"type": "delta", "reply": reply.id, "agent": turn.agent.id, "text": item.text},
                )
            else:
                reply.usage = item

    def _settle(self, turn: TurnInput, request: ModelRequest, reply: Reply) -> None:
        """Keep what was said and bill it, however the turn ended."""
        if reply.said_something:
            message = self.store.add_message(
                turn.conversation_id,
                "agent",
                reply.text,
                agent=turn.agent.id,
                round=turn.place,
                id=reply.id,
            )
            self.store.set_agent(turn.conversation_id, turn.agent.id)
            data = {**message.to_json(), "name": turn.agent.name}
            self.hub.publish(turn.conversation_id, {"type": "message", "message": data})
        refused = reply.failure is not None and not reply.said_something
        if reply.usage is None and not refused:
            reply.usage = estimate_usage(request, len(reply.text))
        reply.cost = record_spend(
            self.store,
            turn.agent,
            reply.usage,
            conversation_id=turn.conversation_id,
            payer=turn.payer,
        )
