"""The wait for the user's yes, for everything that asks: a tool call the rule sends to the
user (`tool.asking`), a message from the kernel before it goes to an outside agent
(`ask_to_send`: `send.asking`, listed under `asking` as `tool: "send_outside"`), the kernel key's
request to continue a round stopped at its bound (`ask_to_continue`: `continue.asking`, listed
as `tool: "continue"`) and a coding agent's permission question (`ask_permission`).

Only the user's requests reach `answer` (the handlers refuse the kernel key): a yes is a Future
only `answer` resolves, so nothing a model or a tool returns can answer for the user. Writing in
the chat skips what is asking, and anything that would ask later in that turn (`skip_asking`).
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable
from typing import Any

from ..core.errors import ConchError
from .tool_state import ChatTools, ToolRoom, Waiting

SEND_OUTSIDE = "send_outside"  # what a message from the kernel waits on before it goes out
CONTINUE = "continue"  # what the kernel key's request to continue a round waits on


class NotAsking(ConchError, LookupError):
    """The call is not waiting for a yes (any more): answered, skipped, or never asked (409
    `not_asking`)."""

    status = 409

    def __init__(self, call_id: str) -> None:
        super().__init__(
            "not_asking",
            "That run is no longer asking.",
            logged=f"The call {call_id} is no longer asking.",
        )
        self.call_id = call_id


class AskingRoom(ToolRoom):
    def asking(self, conversation_id: str) -> list[dict[str, Any]]:
        chat = self._chats.get(conversation_id)
        return [dict(a.entry) for a in chat.asking.values()] if chat else []

    def answer(self, conversation_id: str, call_id: str, run: bool) -> None:
        chat = self._chats.get(conversation_id)
        waiting = chat.asking.pop(call_id, None) if chat else None
        if waiting is None or waiting.answer.done():
            raise NotAsking(call_id)
        waiting.answer.set_result(run)

    def skip_asking(self, conversation_id: str) -> None:
        """The user wrote: skip what is asking now, and what would ask later in this turn."""
        chat = self._chats.setdefault(conversation_id, ChatTools())
        chat.skipping = True
        for waiting in chat.asking.values():
            if not waiting.answer.done():
                waiting.answer.set_result(False)
        chat.asking.clear()

    def new_message(self, conversation_id: str) -> None:
        """A new message is being answered: what the user wrote before no longer skips."""
        chat = self._chats.get(conversation_id)
        if chat is not None:
            chat.skipping = False

    async def ask_to_send(
        self, conversation_id: str, outside_id: str, name: str, text: str
    ) -> bool:
        """Ask the user before `text`, a message that came from the kernel, goes to an outside
        agent; True once the user said yes. Writing in the chat or Stop says no."""
        chat = self._chats.setdefault(conversation_id, ChatTools())
        if chat.skipping:
            return False
        call_id = f"t_{uuid.uuid4().hex[:16]}"
        entry = {"call_id": call_id, "tool": SEND_OUTSIDE, "outside": outside_id, "name": name}
        entry["text"] = text
        started = self.clock()
        answer: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        chat.asking[call_id] = Waiting(entry, answer)
        sent = False
        try:
            await self._event(conversation_id, "send.asking", entry)
            sent = await answer
        finally:
            chat.asking.pop(call_id, None)
            seconds = round(max(self.clock() - started, 0.0), 3)
            ended = {"call_id": call_id, "tool": SEND_OUTSIDE, "outside": outside_id, "name": name}
            state = "ran" if sent else "skipped"
            await self._event(
                conversation_id, "tool.ended", {**ended, "state": state, "seconds": seconds}
            )
        return sent

    def ask_to_continue(
        self, conversation_id: str, named: list[str], names: list[str]
    ) -> tuple[str, Awaitable[bool]]:
        """Ask the user before a round goes on at the kernel key's request (`named`: the ids
        of the agents on its floor): the call id, listed under `asking` at once, and what
        stores `continue.asking`, waits for the user's answer and ends it (True for yes).
        Writing in the chat says no."""
        chat = self._chats.setdefault(conversation_id, ChatTools())
        call_id = f"t_{uuid.uuid4().hex[:16]}"
        entry = {"call_id": call_id, "tool": CONTINUE, "named": named, "names": names}
        entry |= {"name": "Code in the notebook's kernel", "title": "continue the round"}
        answer: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        chat.asking[call_id] = Waiting(entry, answer)
        return call_id, self._asked_to_continue(conversation_id, chat, entry, answer)

    async def _asked_to_continue(
        self,
        conversation_id: str,
        chat: ChatTools,
        entry: dict[str, Any],
        answer: asyncio.Future[bool],
    ) -> bool:
        call_id = entry["call_id"]
        started = self.clock()
        yes = False
        try:
            await self._event(conversation_id, "continue.asking", entry)
            yes = await answer
        finally:
            chat.asking.pop(call_id, None)
            seconds = round(max(self.clock() - started, 0.0), 3)
            state = "ran" if yes else "skipped"
            ended = {"call_id": call_id, "tool": CONTINUE, "state": state, "seconds": seconds}
            await self._event(conversation_id, "tool.ended", ended)
        return yes

    async def ask_permission(self, conversation_id: str, entry: dict[str, Any]) -> bool:
        """Wait for the user's yes to a coding agent's permission question (`entry`: call_id,
        agent, name, tool "acp", kind, title, detail), listed and answered like a run. Writing
        in the chat or Stop says no."""
        chat = self._chats.setdefault(conversation_id, ChatTools())
        if chat.skipping:
            return False
        started = self.clock()
        allowed = False
        try:
            allowed = await self._ask(conversation_id, chat, entry)
            return allowed
        finally:
            chat.asking.pop(entry["call_id"], None)
            self._set_working(conversation_id, chat, None)
            # The question ends like a call (every view drops its approval block); what the
            # agent then did is its own line.
            ids = {k: entry[k] for k in ("call_id", "agent", "name", "tool")}
            seconds = round(max(self.clock() - started, 0.0), 3)
            state = "ran" if allowed else "skipped"
            await self._event(
                conversation_id, "tool.ended", {**ids, "state": state, "seconds": seconds}
            )

    async def _ask(self, conversation_id: str, chat: ChatTools, entry: dict[str, Any]) -> bool:
        answer: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        chat.asking[entry["call_id"]] = Waiting(entry, answer)
        await self._event(conversation_id, "tool.asking", entry)
        self._set_working(conversation_id, chat, {**entry, "state": "asking"})
        return await answer
