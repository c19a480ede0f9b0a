"""One turn: asking a model for one reply. The only place that streams a model's reply, for the
rounds (rounds/driver.py) and for the door's guests (door/turn.py) alike.

Theory of operation
-------------------
The caller says what the turn is (TurnInput: the agent, its system prompt, the chat so far, a
deadline, who pays) and hands in an empty Reply, which the turn fills as it goes:

    reply = Reply()
    await Turns(...).take(turn, reply)   # Stop may cancel this; `reply` still says what was said

1. The history (rounds/history.py) and the request are built from the TurnInput.
2. The reply streams from the agent's provider (one retry policy: `stream_reply`); each piece is
   published live to the chat's followers (Hub) and collected in `reply.parts`.
3. However the turn ends — done, failed, past its deadline, or cancelled (Stop, CancelTask, the
   server stopping) — what was said is stored as the agent's message (a cut-off reply is kept)
   and the turn is billed: the provider's usage when it reported one, else an estimate marked as
   such in the ledger (`estimate_usage`), so stopping early cannot walk around the spend bounds.
   A failure before any text was said bills nothing: the provider refused or never answered.
4. A deadline ends the turn with `reply.timed_out`, a provider's failure with `reply.failure`
   (words for the owner); a cancellation is re-raised after the reply is kept and billed.

The tool loop (agents that work in the notebook): a turn offered tools (`TurnInput.tools`; only
your agents in your chats, never the door's guests) may get ToolCalls back with its text. Each
call goes through NotebookTools (notebook/service.py: the mode, the taint, the user's yes, the
run, the log), its result is added to the request as a ToolStep, and the model is asked again —
within the same deadline, into the same Reply, so one turn is still one reply. At most
MAX_CALLS_PER_TURN calls are run (the next are refused in words) and one more request answers
with them; a loop whose metered cost so far the driver's `spend_check` refuses asks no more.
Every request is billed: the provider's usage summed over the loop, plus an estimate for a
request cut off mid-stream.

A coding agent (provider kind `acp`) takes its turn through CodingAgents (coding/sessions.py):
one `session/prompt` with the same system prompt and fenced history, its chunks streamed into
the same Reply, kept and billed the same way; its cost counts only when the agent reports it
(nothing is estimated: Conch does not meter what it cannot see). Each cost it reports is the
reply's `reported_usd` at once, so however the turn ends it is billed what it reported, and is
checked by `spend_check` as it comes: at a bound CodingAgents cancels the turn and the Reply
says which (`refusal`), so the round ends `spend` with that limit.

What the turn does not decide: whose turn it is and what a reply means for the round (engine.py
and the driver), whether a metered turn may start at all (spend.py's `turn_refusal`, asked by
the caller first), and what a door task's state becomes (door/turn.py).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import httpx

from ..agents.agent_store import Agent, AgentStore
from ..coding.rules import prompt_text
from ..coding.sessions import CodingAgents
from ..core.deadlines import within
from ..core.policy import NO_POLICY, Policy, PolicyRefused, check_provider
from ..mcp_servers.service import McpServerService, Offer
from ..notebook.rules import MAX_CALLS_PER_TURN, Ending
from ..notebook.service import Caller, NotebookTools, OutsideTool
from ..providers import address_of, make_provider, stream_reply
from ..providers.base import (
    ModelRequest,
    ProviderConfig,
    ProviderError,
    TextDelta,
    ToolCall,
    ToolSpec,
    ToolStep,
    Usage,
    estimate_usage,
)
from ..store.chats import Store
from ..store.hub import Hub
from ..store.rows import row_id
from .history import Said, history_turns
from .spend import Refusal, cost_json, record_spend


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
    tools: tuple[ToolSpec, ...] = ()  # the notebook tools offered; never for the door
    mcp: tuple[str, ...] = ()  # the agent's MCP servers whose tools it is offered; never the door's
    # Given the turn's metered cost so far, words when the tool loop must ask no more (the
    # round's $1, the chat's limit, the monthly budget); None to go on.
    spend_check: Callable[[float], Refusal | None] | None = None
    # What the caller stores once the reply has ended (not when the turn is cancelled): it
    # queues its changes when called, right after the reply's, so one commit holds both (the
    # door's task ends with its answer; a round's next turn its note), and gives what to await
    # for them (None: nothing queued).
    ends_with: Callable[[Reply], Awaitable[object] | None] | None = None


@dataclass
class Reply:
    """One reply as the turn makes it: readable by the caller while it streams and after a cut."""

    id: str = field(default_factory=lambda: row_id("m"))
    parts: list[str] = field(default_factory=list)
    usage: Usage | None = None
    cost: float = 0.0
    failure: str | None = None  # the provider's failure, in words for the owner
    reported_usd: float | None = None  # what a coding agent said the reply cost
    # The spend bound a coding turn reached while it ran (Conch stopped it there).
    refusal: Refusal | None = None
    timed_out: bool = False
    # The request being answered now, until its usage is in, and where its text begins: what a
    # cut-off turn's estimate is made from.
    open_request: ModelRequest | None = None
    open_from: int = 0

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
    notebook: NotebookTools | None = None  # what runs the tools a turn is offered
    # The administrator's: an agent on a provider it no longer allows answers in its words.
    policy: Policy = NO_POLICY
    coding: CodingAgents | None = None  # what runs the coding agents (ACP)
    mcp: McpServerService | None = None  # your MCP servers, whose tools your agents are offered

    async def take(self, turn: TurnInput, reply: Reply) -> Reply:
        """Ask the agent's model for one reply, into `reply`; see the module's theory."""
        request = ModelRequest(
            model=turn.agent.provider.model,
            system=turn.system,
            turns=history_turns(turn.said, turn.agent.name),
            speaker=turn.agent.name,
            room=turn.room,
            user_text=turn.user_text,
            tools=turn.tools if self.notebook is not None else (),
        )
        try:
            await within(turn.seconds, self._exchange(turn, request, reply))
        except asyncio.TimeoutError:
            reply.timed_out = True
        except ProviderError as error:
            reply.failure = error.words
        except asyncio.CancelledError:
            await self._settle(turn, request, reply, cancelled=True)
            raise
        await self._settle(turn, request, reply, cancelled=False)
        return reply

    async def _exchange(self, turn: TurnInput, request: ModelRequest, reply: Reply) -> None:
        config = self.agents.provider_for(turn.agent.id)
        try:
            address = address_of(config.kind, config.base_url)
            command = getattr(config, "command", None)  # an ACP coding agent's program
            check_provider(self.policy, config.kind, address, command)
        except PolicyRefused as refused:
            raise ProviderError(refused.message) from None  # nothing is contacted
        if config.kind == "acp":
            await self._coding_turn(turn, config, reply)
            return
        provider = make_provider(
            config,
            http=self.http,
            offline_delay=self.offline_delay,
        )
        caller = Caller(turn.agent.id, turn.agent.name, turn.place)
        offer = await self._mcp_offer(turn)
        if offer is not None:
            request = replace(request, tools=(*request.tools, *offer.specs))
        calls_made = 0
        for trip in range(MAX_CALLS_PER_TURN + 2):
            reply.open_request, reply.open_from = request, len(reply.parts)
            calls: list[ToolCall] = []
            async for item in stream_reply(provider, request, retry_delay=self.retry_delay):
                if isinstance(item, TextDelta):
                    reply.parts.append(item.text)
                    self.hub.delta(turn.conversation_id, reply.id, turn.agent.id, item.text)
                elif isinstance(item, ToolCall):
                    calls.append(item)
                else:
                    reply.usage = item if reply.usage is None else reply.usage + item
                    reply.open_request = None
            if not calls or self.notebook is None or not request.tools:
                return
            results = []
            for call in calls:  # one at a time: a later call may read what an earlier one did
                if offer is not None and call.name in offer.tools:
                    results.append(
                        await self.notebook.call_outside(
                            turn.conversation_id,
                            caller,
                            call,
                            calls_made,
                            self._outside(offer, call),
                        )
                    )
                else:
                    results.append(
                        await self.notebook.call(turn.conversation_id, caller, call, calls_made)
                    )
                calls_made += 1
            said = "".join(reply.parts[reply.open_from :])
            request = replace(
                request, steps=(*request.steps, ToolStep(said, tuple(calls), tuple(results)))
            )
            if trip == MAX_CALLS_PER_TURN + 1 or self._spent_enough(turn, reply):
                return  # every call has its answer; no more requests

    async def _mcp_offer(self, turn: TurnInput) -> Offer | None:
        """The tools of the agent's MCP servers for this turn; a server that cannot offer them
        says so in a note (its row keeps the problem), and the turn goes on without them."""
        if self.mcp is None or self.notebook is None or not turn.mcp or turn.payer is not None:
            return None
        offer = await self.mcp.offer(turn.mcp)
        for words in offer.words:
            note = await self.store.add_message(turn.conversation_id, "note", words)
            self.hub.message(note, None)
        return offer if offer.specs else None

    def _outside(self, offer: Offer, call: ToolCall) -> OutsideTool:
        """One offered MCP tool as the tool loop runs it."""
        mcp = self.mcp
        assert mcp is not None
        offered = offer.tools[call.name]

        async def run(arguments: dict[str, Any]) -> tuple[str, Ending]:
            return await mcp.run(offer, call.name, arguments)

        return OutsideTool(
            server=offered.server,
            nature=offered.nature,
            run=run,
            shown=mcp.shown,
            seconds=mcp.call_seconds,
        )

    async def _coding_turn(self, turn: TurnInput, config: ProviderConfig, reply: Reply) -> None:
        """One ACP `session/prompt` for a coding agent, streamed into `reply`."""
        if self.coding is None or turn.payer is not None:
            # The door's guests answer in words only: a coding agent is never seated there.
            raise ProviderError(f"{turn.agent.name} is a coding agent and cannot answer here.")
        conversation = self.store.get_conversation(turn.conversation_id)
        name = turn.agent.name

        def fresh_text(heard: str | None) -> tuple[str, str | None]:
            """The prompt: the recent chat for a new session (`heard` None), else what came
            after the last message the session was given; and the newest message's id."""
            said = list(turn.said)
            ids = [s.id for s in said]
            if heard is not None and heard in ids:
                said = said[ids.index(heard) + 1 :]
            turns = history_turns(said, name) if said else ()
            text = prompt_text(turn.system, [(t.role, t.text) for t in turns])
            return text, ids[-1] if ids else heard

        def on_text(text: str) -> None:
            reply.parts.append(text)
            self.hub.delta(turn.conversation_id, reply.id, turn.agent.id, text)

        def on_cost(usd: float) -> bool:
            """What the turn has cost so far, as the agent reported it: billed whatever ends
            the turn; True once a bound is reached (the turn is stopped there)."""
            reply.reported_usd = usd
            if reply.refusal is None and turn.spend_check is not None:
                reply.refusal = turn.spend_check(usd)
            return reply.refusal is not None

        result = await self.coding.take(
            turn.conversation_id,
            turn.agent,
            config,
            fresh_text=fresh_text,
            # Where it works: the notebook's folder, or a room in Jupyter Chat's file's.
            path=(conversation.path or conversation.chat_file)
            if conversation is not None
            else None,
            place=turn.place,
            on_text=on_text,
            on_cost=on_cost,
        )
        reply.usage = result.usage

    def _spent_enough(self, turn: TurnInput, reply: Reply) -> bool:
        if turn.spend_check is None or turn.agent.price is None or reply.usage is None:
            return False
        return turn.spend_check(turn.agent.price.cost(reply.usage)) is not None

    async def _settle(
        self, turn: TurnInput, request: ModelRequest, reply: Reply, *, cancelled: bool
    ) -> None:
        """Keep what was said and bill it, however the turn ended: the reply (with the chat's
        agent), its spend and what the caller ends the turn with (`ends_with`) are queued
        together, so one commit stores them all."""
        kept = None
        if reply.said_something:
            kept = self.store.add_message(
                turn.conversation_id,
                "agent",
                reply.text,
                agent=turn.agent.id,
                round=turn.place,
                id=reply.id,
                chat_agent=True,
            )
        # A request cut off mid-stream (Stop, a deadline, a failure after some text) reported no
        # usage: estimate it. One that failed before saying anything was refused: nothing to bill.
        cut = reply.open_request
        said = len("".join(reply.parts[reply.open_from :]))
        if cut is not None and (reply.failure is None or said):
            estimate = estimate_usage(cut, said)
            reply.usage = estimate if reply.usage is None else reply.usage + estimate
        reply.open_request = None
        spent = record_spend(
            self.store,
            turn.agent,
            reply.usage,
            conversation_id=turn.conversation_id,
            payer=turn.payer,
            message_id=reply.id if kept is not None else None,
            reported_usd=reply.reported_usd,
        )
        reply.cost = spent.cost  # known now: the caller's ending may go by it
        ended = None if cancelled or turn.ends_with is None else turn.ends_with(reply)
        if kept is not None:
            self.hub.draw_ahead(turn.conversation_id, reply.text)
        try:
            if kept is not None:
                cost = cost_json(turn.agent, reply.usage, reply.reported_usd)
                self.hub.message(await kept, turn.agent.name, cost)
            await spent
        finally:
            if ended is not None:
                await ended
