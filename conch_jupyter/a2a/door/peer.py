"""The door's operations for a key that was let in (rules.py and calls.py decide that).

Each A2A context is a chat of its own with origin "peer", tainted from the start by the pairing,
out of the chat list and readable from the pairing ("What it said"); peer_turn.py runs each
answer in it. Bounds per key (DoorBounds): one message at a time, the token bucket, the day's
metered spend, and a time limit on each answer. The door's tasks are kept in the store, so GetTask
and ListTasks answer after the reply; a task belongs to one pairing and one agent, and is "not
found" to anyone else.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ...agents import Agent, AgentStore
from ...spend import Budget, month_spent_over
from ...store import Conversation, Store
from ...talk import clean_text
from ...turn import Turns
from ..wire import STATES_V03, ErrorCode, Version, new_id
from .calls import Call, Refusal, list_json, list_query, message_words, task_json
from .card import agent_card_v03, agent_card_v1
from .pairing import Pairing
from .params import ListParams, SendParams, TaskParams
from .peer_turn import PeerTurn, Running
from .rules import DOOR_BOUNDS, DoorBounds, TokenBucket, day_start, is_command, size_refusal

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
    _running: dict[str, Running] = field(default_factory=dict, init=False)
    _buckets: dict[str, TokenBucket] = field(default_factory=dict, init=False)

    def __post_init__(self) -> None:
        self.store.fail_unfinished_door_tasks("The server stopped before the answer was finished.")

    async def answer(self, call: Call, pairing: Pairing, agent: Agent, endpoint: str) -> Any:
        """The result of a call that was let in; raises Refusal for one that is not answered."""
        params, version = call.params, call.version
        if isinstance(params, SendParams):
            done = await self.send(pairing, agent, params, version)
            return {"task": done} if version == "1.0" else done
        if isinstance(params, TaskParams) and call.op == "get":
            return self.get(pairing, agent, params, version)
        if isinstance(params, TaskParams):
            return await self.cancel(pairing, agent, params, version)
        if isinstance(params, ListParams):
            return self.list_tasks(pairing, agent, params)
        card = agent_card_v1 if version == "1.0" else agent_card_v03
        return card(name=agent.name, persona=agent.persona, endpoint=endpoint)

    async def send(
        self, pairing: Pairing, agent: Agent, params: SendParams, version: Version
    ) -> dict[str, Any]:
        text = message_words(params, version)
        self._check_bounds(pairing, agent, text)
        if params.message.task_id is not None:
            # Our tasks end with their answer, so there is never one to go on with.
            if self.store.door_task(params.message.task_id, pairing.id, agent.id) is None:
                raise Refusal(ErrorCode.TASK_NOT_FOUND, NOT_FOUND)
            raise Refusal(
                ErrorCode.UNSUPPORTED_OPERATION,
                "That task has already ended. Send a new message without a taskId (with the same "
                "contextId to go on with the conversation).",
            )
        self._take_token(pairing)
        context_id = params.message.context_id or new_id()
        chat = self._chat(pairing, agent, context_id)
        asked = clean_text(text, self.bounds.message_chars)
        said = self.store.add_message(chat.id, "outside", asked)
        self.turns.hub.publish(chat.id, {"type": "message", "message": said.to_json()})
        new_task = dict(
            pairing_id=pairing.id,
            agent=agent.id,
            context_id=context_id,
            conversation_id=chat.id,
            asked=asked,
            asked_id=params.message.message_id,
        )
        if is_command(text):
            self.store.add_message(chat.id, "note", f"Refused: {COMMAND_REFUSED}")
            refused = self.store.create_door_task(
                **new_task, state="TASK_STATE_REJECTED", words=COMMAND_REFUSED
            )
            return task_json(refused, version)
        door_task = self.store.create_door_task(**new_task)
        running = self._running[pairing.id] = Running(door_task.id)
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
            if self._running.get(pairing.id) is running:
                del self._running[pairing.id]
        if not running.job.cancelled() and running.job.exception() is not None:
            # A bug, not a refusal: the owner's log has it, the caller gets an ended task.
            log.error("Conch door: an answer failed", exc_info=running.job.exception())
            self.store.finish_door_task(
                door_task.id, "TASK_STATE_FAILED", words="Something went wrong while answering."
            )
        ended = self.store.door_task(door_task.id, pairing.id, agent.id)
        if ended is None:
            raise Refusal(ErrorCode.TASK_NOT_FOUND, "The pairing was removed while answering.")
        return task_json(ended, version)

    def get(
        self, pairing: Pairing, agent: Agent, params: TaskParams, version: Version
    ) -> dict[str, Any]:
        found = self.store.door_task(params.id, pairing.id, agent.id)
        if found is None:
            raise Refusal(ErrorCode.TASK_NOT_FOUND, NOT_FOUND)
        return task_json(found, version, history_length=params.history_length)

    def list_tasks(self, pairing: Pairing, agent: Agent, params: ListParams) -> dict[str, Any]:
        query = list_query(params)
        tasks, total = self.store.door_tasks(
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
        found = self.store.door_task(params.id, pairing.id, agent.id)
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
        self._buckets.pop(pairing_id, None)
        self.store.forget_pairing(pairing_id)

    async def close(self) -> None:
        jobs = [r.job for r in self._running.values() if r.job is not None and not r.job.done()]
        for job in jobs:
            job.cancel()
        await asyncio.gather(*jobs, return_exceptions=True)
        self._running.clear()

    # --- inside ---

    def _check_bounds(self, pairing: Pairing, agent: Agent, text: str) -> None:
        """The bounds that refuse before anything is stored or counted."""
        too_long = size_refusal(text, self.bounds)
        if too_long:
            raise Refusal(ErrorCode.INVALID_PARAMS, too_long)
        if pairing.id in self._running:
            raise Refusal(
                ErrorCode.LIMIT_REACHED,
                "One message at a time: the last one sent with this key is still being answered.",
                reason="BUSY",
            )
        now = self.clock()
        if self.store.spent_since(day_start(now), payer=pairing.id) >= self.bounds.day_usd:
            raise Refusal(
                ErrorCode.LIMIT_REACHED,
                f"This key has used its ${self.bounds.day_usd:.2f} of answers for today: try "
                "again tomorrow (days start at midnight UTC).",
                reason="DAILY_LIMIT",
            )
        if month_spent_over(self.store, self.budget, agent, now) is not None:
            raise Refusal(
                ErrorCode.LIMIT_REACHED,
                f"{agent.name} cannot take more messages this month: try again later.",
                reason="BUDGET",
            )

    def _take_token(self, pairing: Pairing) -> None:
        now = self.clock()
        bucket = self._buckets.get(pairing.id)
        if bucket is None:
            per_second = self.bounds.per_minute / 60
            bucket = self._buckets[pairing.id] = TokenBucket(self.bounds.burst, per_second, now)
        wait = bucket.take(now)
        if wait is not None:
            raise Refusal(
                ErrorCode.LIMIT_REACHED,
                f"Too many messages: a key may send {self.bounds.burst} at once, then "
                f"{self.bounds.per_minute:g} a minute. Try again in {wait} s.",
                reason="RATE_LIMITED",
                metadata={"retryAfterSeconds": str(wait)},
            )

    def _chat(self, pairing: Pairing, agent: Agent, context_id: str) -> Conversation:
        # One chat per context and agent: a context reused with another agent is another chat.
        key = f"{agent.id}/{context_id}"
        chat = self.store.find_peer_chat(pairing.id, key)
        if chat is None:
            chat = self.store.create_conversation(
                title=f"{agent.name} with {pairing.label}",
                origin="peer",
                pairing_id=pairing.id,
                context_key=key,
                tainted={"kind": "person", "by": pairing.label},
            )
            self.store.set_agent(chat.id, agent.id)
        return chat
