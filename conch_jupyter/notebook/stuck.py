"""A run that still runs a moment after Stop's interrupt (code that catches KeyboardInterrupt):
its tool message says the kernel is still busy, and the chat is `stuck` (event `kernel.stuck`,
listed as `stuck: {call_id, agent, name, words}`) until the kernel is done with it, when a note
says how (event `kernel.idle {…, after}`). Meanwhile the user — only the user: the handlers refuse
the kernel key — may interrupt it again or restart the kernel.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from ..core.errors import ConchError
from ..core.files import StoreError
from ..store.chats import NotFound
from .rules import (
    After,
    idle_words,
)
from .tool_state import ChatTools, StuckCall, ToolRoom

log = logging.getLogger(__name__)


class KernelActionRefused(ConchError):
    """Interrupt again or Restart kernel had nothing to act on (codes `no_kernel`,
    `not_stuck`), or the restart failed (`restart_failed`): 409 for each."""

    status = 409


class StuckRuns(ToolRoom):
    def stuck(self, conversation_id: str) -> dict[str, Any] | None:
        """The run Stop could not end, while the kernel is still busy with it."""
        chat = self._chats.get(conversation_id)
        return chat.stuck.to_json() if chat and chat.stuck else None

    async def interrupt_again(self, conversation_id: str) -> dict[str, Any] | None:
        """The user's Interrupt again, for the run Stop could not end: the chat's `stuck` after
        it (None once the run ended)."""
        chat, stuck = await self._stuck_run(conversation_id)
        assert self.kernels is not None
        if await self.kernels.interrupt_again(stuck.run):
            self._unstick(conversation_id, chat, stuck)
        else:
            self._publish_stuck(conversation_id, chat)  # the words say it was tried again
        return self.stuck(conversation_id)

    async def restart_kernel(self, conversation_id: str) -> None:
        """The user's Restart kernel, for the run Stop could not end."""
        chat, stuck = await self._stuck_run(conversation_id)
        assert self.kernels is not None
        try:
            await self.kernels.restart(stuck.run)
        except Exception as error:
            words = f"The kernel could not be restarted: {type(error).__name__}: {error}"[:400]
            raise KernelActionRefused("restart_failed", words) from None
        if stuck.run.ended.done():
            self._unstick(conversation_id, chat, stuck)

    async def _stuck_run(self, conversation_id: str) -> tuple[ChatTools, StuckCall]:
        conversation = self.store.get_conversation(conversation_id)
        if conversation is None or conversation.origin != "user":
            raise NotFound(conversation_id)
        if self.kernels is None or await self.kernels.kernel_id(conversation.path) is None:
            raise KernelActionRefused("no_kernel", "This chat has no running kernel.")
        chat = self._chats.get(conversation_id)
        if chat is None or chat.stuck is None or chat.stuck.run.ended.done():
            raise KernelActionRefused(
                "not_stuck", "Nothing is stuck: no agent's code is running on after Stop."
            )
        return chat, chat.stuck

    async def _mark_stuck(self, conversation_id: str, chat: ChatTools, stuck: StuckCall) -> None:
        """Say the kernel is still busy with the run, and follow it until the kernel is done."""
        self._publish_stuck(conversation_id, chat)
        ids = {k: stuck.entry[k] for k in ("call_id", "agent", "name")}
        await self._event(conversation_id, "kernel.stuck", ids)
        task = asyncio.create_task(
            self._until_idle(conversation_id, chat, stuck), name=f"conch-stuck-{conversation_id}"
        )
        self._following.add(task)
        task.add_done_callback(self._following.discard)

    async def _until_idle(self, conversation_id: str, chat: ChatTools, stuck: StuckCall) -> None:
        after: After = await stuck.run.ended
        self._unstick(conversation_id, chat, stuck)
        ids = {k: stuck.entry[k] for k in ("call_id", "agent", "name")}
        try:
            await self._event(conversation_id, "kernel.idle", {**ids, "after": after})
            note = await self.store.add_message(
                conversation_id, "note", idle_words(stuck.entry["name"], after)
            )
        except StoreError as error:
            log.warning(
                "Conch: chat %s: the kernel is idle again (not stored: %s)", conversation_id, error
            )
            return
        self.hub.message(note, None)

    def _unstick(self, conversation_id: str, chat: ChatTools, stuck: StuckCall) -> None:
        """The kernel is done with the run: the chat no longer offers to interrupt or restart."""
        if chat.stuck is stuck:
            chat.stuck = None
            self._publish_stuck(conversation_id, chat)

    def _publish_stuck(self, conversation_id: str, chat: ChatTools) -> None:
        stuck = chat.stuck.to_json() if chat.stuck else None
        self.hub.publish(conversation_id, {"type": "stuck", "stuck": stuck})
