"""The door's operations for a key that was let in (rules.py and calls.py decide that).

Each A2A context is a chat of its own with origin "peer", tainted from the start by the pairing,
out of the chat list and readable from the pairing ("What it said"); door/turn.py runs each
answer in it. The bounds per key are decided in rules.py (message_refusal, KeyBuckets); this
module gives them what they decide on (whether the key is answering, its spend today) and turns
their refusals into A2A errors. The door's tasks are kept in the store, so GetTask
and ListTasks answer after the reply; a task belongs to one pairing and one agent, and is "not
found" to anyone else.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from ..a2a.door.calls import Call, Refusal, list_json, list_query, message_words, task_json
from ..a2a.door.card import agent_card_v03, agent_card_v1
from ..a2a.door.params import ListParams, SendParams, TaskParams
from ..a2a.door.rules import (
    DOOR_BOUNDS,
    DoorBounds,
    KeyBuckets,
    OverBound,
    day_start,
    is_command,
    message_refusal,
)
from ..a2a.wire import STATES_V03, ErrorCode, Version, new_id
from ..agents.agent_store import Agent, AgentStore
from ..core.text import clean_text
from ..rounds.spend import Budget, month_spent_over
from ..rounds.turn import Turns
from ..store.chats import Conversation, Store
from .address import jwks_url_for
from .pairing import Pairing
from .signer import DoorSigner
from .turn import PeerTurn, Running

log = logging.getLogger(__name__)

NOT_FOUND = "There is no task with that id."
COMMAND_REFUSED = "Commands (messages starting with “/”) are not taken from other agents."


@dataclass
class PeerService:
    store: Store
    agents: AgentStore
    turns: Turns  # the one turn routine; the door's chats are followed live, like any chat
    clock: Callable[[], float]
    budget: Budget = field(default_factory=Budget)
    bounds: DoorBounds = DOOR_BOUNDS
    signer: DoorSigner | None = None  # signs the card a method asks for (None: unsigned)
    _running: dict[str, Running] = field(default_factory=dict, init=False)
    _buckets: KeyBuckets = field(init=False)

    def __post_init__(self) -> None:
        self._buckets = KeyBuckets(self.bounds)
        self.store.door_tasks.fail_unfinished("The server stopped before the answer was finished.")

    @staticmethod
    def waits(call: Call) -> bool:
        """Whether answering `call` waits for something (an agent's answer, a cancelled one's
        end); GetTask, ListTasks and the card are answered at once, from what is stored."""
        return isinstance(call.params, SendParams) or (
            isinstance(call.params, TaskParams) and call.op != "get"
        )

    async def answer(
        self, call: Call, pairing: Pairing, agent: Agent, endpoint: Callable[[], str]
    ) -> Any:
        """The result of a call that was let in; raises Refusal for one that is not answered.
        `endpoint` makes the agent's address, for the card."""
        params, version = call.params, call.version
        if isinstance(params, SendParams):
            done = await self.send(pairing, agent, params, version)
            return {"task": done} if version == "1.0" else done
        if isinstance(params, TaskParams) and call.op != "get":
            return await self.cancel(pairing, agent, params, version)
        return self.answer_at_once(call, pairing, agent, endpoint)

    def answer_at_once(
        self, call: Call, pairing: Pairing, agent: Agent, endpoint: Callable[[], str]
    ) -> Any:
        """The result of a call that does not wait (see waits): the door answers these without
        a task of their own on the event loop."""
        params, version = call.params, call.version
        if isinstance(params, TaskParams):
            return self.get(pairing, agent, params, version)
        if isinstance(params, ListParams):
            return self.list_tasks(pairing, agent, params)
        card = agent_card_v1 if version == "1.0" else agent_card_v03
        where = endpoint()
        made = card(name=agent.name, persona=agent.persona, endpoint=where)
        return made if self.signer is None else self.signer.signed(made, jwks_url_for(where))

    async def send(
        self, pairing: Pairing, agent: Agent, params: SendParams, version: Version
    ) -> dict[str, Any]:
        text = message_words(params, version)
        self._check_bounds(pairing, agent, text)
        if params.message.task_id is not None:
            # Our tasks end with their answer, so there is never one to go on with.
            if self.store.door_tasks.get(params.message.task_id, pairing.id, agent.id) is None:
                raise Refusal(ErrorCode.TASK_NOT_FOUND, NOT_FOUND)
            raise Refusal(
                ErrorCode.UNSUPPORTED_OPERATION,
                "That task has already ended. Send a new message without a taskId (with the same "
                "contextId to go on with the conversation).",
            )
        over = self._buckets.take(pairing.id, self.clock())
        if over is not None:
            raise _refusal(over)
        context_id = params.message.context_id or new_id()
        # Taken before the first await: a second message with this key now finds it busy.
        running = self._running[pairing.id] = Running("")
        try:
            chat, opened = self._chat(pairing, agent, context_id)
            asked = clean_text(text, self.bounds.message_chars)
            command = is_command(text)
            # The new chat (if it is new), the caller's words, Conch's note for a command and the
            # task: queued one after another, so one commit stores them all.
            queued: list[Awaitable[object]] = [] if opened is None else [opened]
            said = self.store.add_message(chat.id, "outside", asked)
            if command:
                queued.append(
                    self.store.add_message(chat.id, "note", f"Refused: {COMMAND_REFUSED}")
                )
            task = self.store.door_tasks.create(
                pairing_id=pairing.id,
                agent=agent.id,
                context_id=context_id,
                conversation_id=chat.id,
                asked=asked,
                asked_id=params.message.message_id,
                state="TASK_STATE_REJECTED" if command else "TASK_STATE_WORKING",
                words=COMMAND_REFUSED if command else None,
            )
            for change in queued:
                await change
            message = await said
            door_task = await task
        except BaseException:
            self._release(pairing.id, running)
            raise
        self.turns.hub.message(message)
        if command:
            self._release(pairing.id, running)
            return task_json(door_task, version)
        running.task_id = door_task.id
        turn = PeerTurn(
            self.turns, pairing, agent, chat, door_task.id, running, self.bounds.answer_seconds
        )
        running.job = asyncio.create_task(turn.run(), name=f"conch-door-{door_task.id}")
        try:
            # wait(), not await: a CancelTask ends the job, not this call, which then answers.
            await asyncio.wait({running.job})
        except asyncio.CancelledError:
            running.job.cancel()
            raise
        finally:
            self._release(pairing.id, running)
        ended = running.ended
        if not running.job.cancelled() and running.job.exception() is not None:
            # A bug, not a refusal: the owner's log has it, the caller gets an ended task.
            log.error("Conch door: an answer failed", exc_info=running.job.exception())
            ended = await self.store.door_tasks.finish(
                door_task.id, "TASK_STATE_FAILED", words="Something went wrong while answering."
            )
        if ended is None:
            raise Refusal(ErrorCode.TASK_NOT_FOUND, "The pairing was removed while answering.")
        return task_json(ended, version)

    def get(
        self, pairing: Pairing, agent: Agent, params: TaskParams, version: Version
    ) -> dict[str, Any]:
        found = self.store.door_tasks.get(params.id, pairing.id, agent.id)
        if found is None:
            raise Refusal(ErrorCode.TASK_NOT_FOUND, NOT_FOUND)
        return task_json(found, version, history_length=params.history_length)

    def list_tasks(self, pairing: Pairing, agent: Agent, params: ListParams) -> dict[str, Any]:
        query = list_query(params)
        tasks, total = self.store.door_tasks.page(
            pairing.id,
            agent.id,
            context_id=query.context_id,
            state=query.state,
            updated_after=query.updated_after,
            limit=query.limit,
            offset=query.offset,
        )
        # A list is for finding tasks: history and artifacts only when asked for.
        shown = [
            task_json(
                t,
                "1.0",
                history_length=params.history_length or 0,
                artifacts=bool(params.include_artifacts),
            )
            for t in tasks
        ]
        return list_json(shown, query, total)

    async def cancel(
        self, pairing: Pairing, agent: Agent, params: TaskParams, version: Version
    ) -> dict[str, Any]:
        found = self.store.door_tasks.get(params.id, pairing.id, agent.id)
        if found is None:
            raise Refusal(ErrorCode.TASK_NOT_FOUND, NOT_FOUND)
        running = self._running.get(pairing.id)
        if running is None or running.task_id != found.id or running.job is None:
            state = STATES_V03.get(found.state, found.state)
            raise Refusal(
                ErrorCode.TASK_NOT_CANCELABLE,
                f"That task has already ended ({state}): there is nothing to cancel.",
            )
        running.ending = "canceled"
        running.job.cancel()
        await asyncio.wait({running.job})
        return self.get(pairing, agent, params, version)

    async def forget(self, pairing_id: str) -> None:
        """After a pairing is revoked: stop its answer, delete its chats and tasks."""
        running = self._running.pop(pairing_id, None)
        if running is not None and running.job is not None and not running.job.done():
            running.ending = "revoked"
            running.job.cancel()
            await asyncio.wait({running.job})
        self._buckets.forget(pairing_id)
        await self.store.door_tasks.forget_pairing(pairing_id)

    async def close(self) -> None:
        jobs = [r.job for r in self._running.values() if r.job is not None and not r.job.done()]
        for job in jobs:
            job.cancel()
        await asyncio.gather(*jobs, return_exceptions=True)
        self._running.clear()

    # --- inside ---

    def _release(self, pairing_id: str, running: Running) -> None:
        """The key may send again (unless a revocation already took its place away)."""
        if self._running.get(pairing_id) is running:
            del self._running[pairing_id]

    def _check_bounds(self, pairing: Pairing, agent: Agent, text: str) -> None:
        """The bounds that refuse before anything is stored or counted (rules.message_refusal)."""
        now = self.clock()
        over = message_refusal(
            text,
            self.bounds,
            busy=pairing.id in self._running,
            spent_today=self.store.spent_since(day_start(now), payer=pairing.id),
            month_full=month_spent_over(self.store, self.budget, agent, now) is not None,
            agent_name=agent.name,
        )
        if over is not None:
            raise _refusal(over)

    def _chat(
        self, pairing: Pairing, agent: Agent, context_id: str
    ) -> tuple[Conversation, Awaitable[Conversation] | None]:
        """The context's chat, and for a new one the change that stores it (queued, to await)."""
        # One chat per context and agent: a context reused with another agent is another chat.
        key = f"{agent.id}/{context_id}"
        chat = self.store.find_peer_chat(pairing.id, key)
        if chat is not None:
            return chat, None
        opened = self.store.create_conversation(
            title=f"{agent.name} with {pairing.label}",
            origin="peer",
            pairing_id=pairing.id,
            context_key=key,
            tainted={"kind": "person", "by": pairing.label},
            agent=agent.id,
        )
        return opened.row, opened


def _refusal(over: OverBound) -> Refusal:
    """A bound's refusal as the A2A error the caller gets."""
    if over.reason == "TOO_LONG":
        return Refusal(ErrorCode.INVALID_PARAMS, over.words)
    metadata = None if over.retry_after is None else {"retryAfterSeconds": str(over.retry_after)}
    return Refusal(ErrorCode.LIMIT_REACHED, over.words, reason=over.reason, metadata=metadata)
