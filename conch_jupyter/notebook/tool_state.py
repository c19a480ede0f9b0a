"""What the notebook's tools hold for each chat, shared by their rooms: who calls (`Caller`),
what waits for the user's yes, the run Stop could not end, the writes that can be undone, what
each agent last read of each cell, and what works now (`ChatTools`); and `ToolRoom`, the ground
each room of NotebookTools (asking.py, stuck.py, writes.py, service.py) stands on: the store,
the hub, the kernels, the documents, the clock, and the two ways a room tells the chat's views
(`_set_working`, `_event`).

One state per chat, not one per room: Stop and writing in the chat act on all of it at once.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..core.policy import NO_POLICY, Policy
from ..store.chats import Store
from ..store.hub import Hub
from ..store.rows import Message
from .cells import Undo
from .documents import NotebookDocuments
from .kernel import NotebookKernels
from .rules import (
    stuck_words,
)
from .runs import StuckRun


@dataclass(frozen=True)
class Caller:
    """Who calls a tool, and where in the round: the agent's id and the name people see."""

    agent: str
    name: str
    place: dict[str, Any] | None = None


@dataclass
class Waiting:
    entry: dict[str, Any]
    answer: asyncio.Future[bool]


@dataclass
class StuckCall:
    """A run of this chat that Stop could not end, as the chat shows it."""

    entry: dict[str, Any]  # call_id, agent, name, tool, code
    run: StuckRun

    def to_json(self) -> dict[str, Any]:
        ids = {k: self.entry[k] for k in ("call_id", "agent", "name")}
        return {**ids, "words": stuck_words(self.entry["name"], self.run.interrupts)}


@dataclass
class Undoable:
    """A write the chat offers to undo: where, what undoes it, and its tool message."""

    path: str
    undo: Undo
    message: Message | None = None


@dataclass
class ChatTools:
    asking: dict[str, Waiting] = field(default_factory=dict)
    working: dict[str, Any] | None = None
    skipping: bool = False  # the user wrote: what would ask is skipped until the next message
    stuck: StuckCall | None = None
    # What each agent last read of each cell (agent → cell id → source), for the check that
    # the user did not change a cell since; and the writes that can be undone, by call id.
    seen: dict[str, dict[str, str]] = field(default_factory=dict)
    undos: dict[str, Undoable] = field(default_factory=dict)


class ToolRoom:
    def __init__(
        self,
        *,
        store: Store,
        hub: Hub,
        kernels: NotebookKernels | None,
        documents: NotebookDocuments | None = None,
        clock: Callable[[], float] = time.monotonic,
        policy: Policy = NO_POLICY,
    ) -> None:
        self.store = store
        self.policy = policy
        self.hub = hub
        self.kernels = kernels
        self.documents = documents
        self.clock = clock
        self._chats: dict[str, ChatTools] = {}
        # Stuck runs, until the kernel is done; tool lines, until they are stored.
        self._following: set[asyncio.Task[None]] = set()

    def _set_working(
        self, conversation_id: str, chat: ChatTools, working: dict[str, Any] | None
    ) -> None:
        if chat.working == working:
            return
        chat.working = working
        self.hub.publish(conversation_id, {"type": "working", "working": working})

    async def _event(self, conversation_id: str, kind: str, data: dict[str, Any]) -> None:
        self.hub.event(await self.store.add_event(conversation_id, kind, data))
