"""NotebookTools: one tool call of one of your agents, from the rules' decision to its end.

Owns what happens between a model asking for a tool and the model getting the result: the
decision (rules.py) from the chat's mode and taint as stored now, the wait for the user's yes
(`tool.asking`, the `asking` list, `answer`), running it (kernel.py), the bound on what goes
back, and the log: a `tool` message per call (what ran, what came back, how it ended) and a
`tool.ended` event. Also what the round card shows while a call works (`working`).

Only the user's requests reach `answer` (the handlers refuse the kernel key), and nothing a model
or a tool returns can change the mode or answer for the user: the mode is read from the store at
each call, and a yes is a Future only `answer` resolves.

The same wait for a yes holds a message that came from the kernel before it goes to an outside
agent (`ask_to_send`: `send.asking`, listed under `asking` as `tool: "send_outside"`): the kernel
key is held by every piece of code an agent runs, so its words never leave on its own say-so.
So does the kernel key's request to continue a round stopped at its bound (`ask_to_continue`:
`continue.asking`, listed as `tool: "continue"`): code an agent runs must not keep a round going.

Stop cancels the turn's task; a call cancelled while asking or running ends `skipped` (a running
one after a kernel interrupt) and the cancellation goes on. Writing in the chat skips what is
asking (and anything that would ask later in that turn).

A run that still runs a moment after Stop's interrupt (code that catches KeyboardInterrupt) says
so: its tool message says the kernel is still busy, and the chat is `stuck` (event
`kernel.stuck`, listed as `stuck: {call_id, agent, name, words}`) until the kernel is done with
it, when a note says how (event `kernel.idle {…, after}`). Meanwhile the user — only the user:
the handlers refuse the kernel key — may interrupt it again or restart the kernel.

A tool of one of your MCP servers goes through the same door (`call_outside`): the one rule of
every tool (rules.py `decide`, with the tool's nature from its annotations), the same asking,
deadline, Stop and log; its result taints the chat when the tool is open-world.

Why it stays whole for now (over 500 lines): what asks, what works, what is stuck and what can be
undone are one state per chat that every kind of call shares and Stop and writing in the chat
act on at once. Splitting it into rooms (the asking, the cell writes, the stuck runs) is left
for later.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from ..core.errors import ConchError
from ..core.files import StoreError
from ..core.policy import NO_POLICY, Policy, check_mode, effective_mode, mode_words
from ..core.text import clean_text
from ..providers.base import ToolCall
from ..store.chats import Conversation, Mode, NotFound, Store
from ..store.hub import Hub
from ..store.rows import Message
from .cells import Refusal, Undo, UndoStep, Write, plan, undo_of, undo_step, written_by
from .documents import HELD_WORDS, NO_FILE_WORDS, Held, NotebookDocuments, new_cell_id
from .kernel import KernelBusy, NoKernel, NotebookKernels, StuckRun
from .reading import notebook_text, variables_text
from .rules import (
    CELL_TOOLS,
    KERNEL_TOOLS,
    LIST_VARIABLES,
    NO_KERNEL_WORDS,
    READ_NOTEBOOK,
    RUN_CELL,
    RUN_CODE,
    RUN_SECONDS,
    SKIPPED_WORDS,
    STILL_BUSY_WORDS,
    STOPPED_WORDS,
    After,
    Ending,
    Nature,
    cut_output,
    decide,
    header_words,
    idle_words,
    stuck_words,
)

log = logging.getLogger(__name__)

SEND_OUTSIDE = "send_outside"  # what a message from the kernel waits on before it goes out
CONTINUE = "continue"  # what the kernel key's request to continue a round waits on
# The most code one run_code call may carry; longer code is refused whole, never cut (a cut
# program runs without its end). 100,000 characters is some 25,000 tokens at four a token:
# beyond what a model sends in one call (its whole output budget is 4k to 64k tokens, and code
# arrives in a reply's share of it), about 2,500 lines, still a program a person can scroll
# through before saying yes.
CODE_LIMIT = 100_000
NAME_LIMIT = 80
BUSY_WORDS = "The kernel is busy running one of the user's cells; ask again once it is idle."


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


class NotUndoable(ConchError):
    """Undo was asked of a call that cannot be undone (now): not a write, already undone, from
    before the server's start, or the cell changed since (409 `not_undoable`, in words)."""

    status = 409

    def __init__(self, words: str) -> None:
        super().__init__("not_undoable", words)


class KernelActionRefused(ConchError):
    """Interrupt again or Restart kernel had nothing to act on (codes `no_kernel`,
    `not_stuck`), or the restart failed (`restart_failed`): 409 for each."""

    status = 409


@dataclass(frozen=True)
class Caller:
    """Who calls a tool, and where in the round: the agent's id and the name people see."""

    agent: str
    name: str
    place: dict[str, Any] | None = None


@dataclass
class _Asking:
    entry: dict[str, Any]
    answer: asyncio.Future[bool]


@dataclass
class _Stuck:
    """A run of this chat that Stop could not end, as the chat shows it."""

    entry: dict[str, Any]  # call_id, agent, name, tool, code
    run: StuckRun

    def to_json(self) -> dict[str, Any]:
        ids = {k: self.entry[k] for k in ("call_id", "agent", "name")}
        return {**ids, "words": stuck_words(self.entry["name"], self.run.interrupts)}


@dataclass
class _Undoable:
    """A write the chat offers to undo: where, what undoes it, and its tool message."""

    path: str
    undo: Undo
    message: Message | None = None


@dataclass
class _ChatTools:
    asking: dict[str, _Asking] = field(default_factory=dict)
    working: dict[str, Any] | None = None
    skipping: bool = False  # the user wrote: what would ask is skipped until the next message
    stuck: _Stuck | None = None
    # What each agent last read of each cell (agent → cell id → source), for the check that
    # the user did not change a cell since; and the writes that can be undone, by call id.
    seen: dict[str, dict[str, str]] = field(default_factory=dict)
    undos: dict[str, _Undoable] = field(default_factory=dict)


class NotebookTools:
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
        self._chats: dict[str, _ChatTools] = {}
        # Stuck runs, until the kernel is done; tool lines, until they are stored.
        self._following: set[asyncio.Task[None]] = set()

    # --- what the user does (through the handlers) ---

    def chat_json(self, conversation: Conversation) -> dict[str, Any]:
        """The chat's tool state for its JSON: what asks, what works, what the header says.

        `mode` is the mode the chat runs in: its own, or, where the administrator's policy
        no longer allows that, the most careful one it does (the chat keeps its own, which
        comes back if the policy lifts); the header's words then say so."""
        mode = self.mode_of(conversation)
        words = header_words(mode, conversation.tainted)
        locked = mode_words(self.policy, conversation.mode)
        return {
            "mode": mode,
            "asking": self.asking(conversation.id),
            "working": self.working(conversation.id),
            "stuck": self.stuck(conversation.id),
            "mode_words": f"{locked} {words}" if locked else words,
        }

    def mode_of(self, conversation: Conversation) -> Mode:
        """The mode the chat's tools run in now, under the administrator's policy."""
        mode: Mode = effective_mode(self.policy, conversation.mode)  # type: ignore[assignment]
        return mode

    async def set_mode(self, conversation_id: str, mode: Mode) -> None:
        """The user changes how the chat runs code (the handlers refuse anyone else)."""
        conversation = self.store.get_conversation(conversation_id)
        if conversation is None or conversation.origin != "user":
            raise NotFound(conversation_id)  # a door chat's mode is not the user's to lift
        check_mode(self.policy, mode)  # 403 `policy` for a mode the administrator turned off
        await self.store.set_mode(conversation_id, mode)
        await self._event(conversation_id, "mode.changed", {"mode": mode})

    def asking(self, conversation_id: str) -> list[dict[str, Any]]:
        chat = self._chats.get(conversation_id)
        return [dict(a.entry) for a in chat.asking.values()] if chat else []

    def working(self, conversation_id: str) -> dict[str, Any] | None:
        chat = self._chats.get(conversation_id)
        return dict(chat.working) if chat and chat.working else None

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

    async def close(self) -> None:
        """Stop following stuck runs (the server stops), then the kernels' clients."""
        following = list(self._following)
        for task in following:
            task.cancel()
        await asyncio.gather(*following, return_exceptions=True)
        if self.kernels is not None:
            await self.kernels.close()

    def answer(self, conversation_id: str, call_id: str, run: bool) -> None:
        chat = self._chats.get(conversation_id)
        waiting = chat.asking.pop(call_id, None) if chat else None
        if waiting is None or waiting.answer.done():
            raise NotAsking(call_id)
        waiting.answer.set_result(run)

    async def cells(self, conversation_id: str, names: dict[str, str]) -> dict[str, Any]:
        """The chat's notebook's cells in order with who wrote each (`written_by`), as the user
        sees them now: the live document where there is one, else the file; for the view's
        marks on the cells agents wrote. A chat of no notebook has none."""
        conversation = self.store.get_conversation(conversation_id)
        if conversation is None or conversation.origin != "user":
            raise NotFound(conversation_id)
        if not conversation.path or self.documents is None:
            return {"path": conversation.path, "where": None, "cells": []}
        book = await self.documents.read(conversation.path)
        return {
            "path": conversation.path,
            "where": book.where,
            "cells": written_by(book.cells, names),
        }

    async def undo(self, conversation_id: str, call_id: str) -> None:
        """The user's Undo of an agent's write: the cell as it was, or the added one removed.
        NotUndoable (409, in words) when it cannot be (now)."""
        chat = self._chats.get(conversation_id)
        undoable = chat.undos.get(call_id) if chat else None
        if chat is None or undoable is None:
            raise NotUndoable(
                "That call cannot be undone: it changed no cell, it was undone already, or the"
                " server restarted since it ran."
            )
        assert self.documents is not None  # a write was made through them
        async with self.documents.lock(undoable.path):
            book = await self.documents.read(undoable.path)
            step: UndoStep | Refusal = undo_step(undoable.undo, book.cells)
            if isinstance(step, Refusal):
                raise NotUndoable(step.words)
            try:
                await self.documents.undo(undoable.path, step)
            except Held:
                raise NotUndoable(HELD_WORDS.replace("Not written", "Not undone")) from None
        chat.undos.pop(call_id, None)
        for seen in chat.seen.values():
            seen.pop(step.cell.id, None)  # an agent must read the cell again before it writes
        message = undoable.message
        if message is not None and message.tool is not None:
            changed = await self.store.set_tool(message, {**message.tool, "undo": False})
            self.hub.message(changed)
        await self._event(conversation_id, "tool.undone", {"call_id": call_id})

    def skip_asking(self, conversation_id: str) -> None:
        """The user wrote: skip what is asking now, and what would ask later in this turn."""
        chat = self._chats.setdefault(conversation_id, _ChatTools())
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
        chat = self._chats.setdefault(conversation_id, _ChatTools())
        if chat.skipping:
            return False
        call_id = f"t_{uuid.uuid4().hex[:16]}"
        entry = {"call_id": call_id, "tool": SEND_OUTSIDE, "outside": outside_id, "name": name}
        entry["text"] = text
        started = self.clock()
        answer: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        chat.asking[call_id] = _Asking(entry, answer)
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
        chat = self._chats.setdefault(conversation_id, _ChatTools())
        call_id = f"t_{uuid.uuid4().hex[:16]}"
        entry = {"call_id": call_id, "tool": CONTINUE, "named": named, "names": names}
        entry |= {"name": "Code in the notebook's kernel", "title": "continue the round"}
        answer: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        chat.asking[call_id] = _Asking(entry, answer)
        return call_id, self._asked_to_continue(conversation_id, chat, entry, answer)

    async def _asked_to_continue(
        self,
        conversation_id: str,
        chat: _ChatTools,
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
        chat = self._chats.setdefault(conversation_id, _ChatTools())
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

    async def log_line(
        self,
        conversation_id: str,
        caller: Caller,
        entry: dict[str, Any],
        text: str,
        ending: Ending,
    ) -> None:
        """A quiet line for work an agent did by itself (a coding agent's tool call, its plan,
        its thoughts): a `tool` message and a `tool.ended` event, as for a notebook tool."""
        await self._end(conversation_id, caller, entry, text, ending, self.clock())

    # --- what the tool loop does ---

    async def call(
        self, conversation_id: str, caller: Caller, call: ToolCall, calls_so_far: int
    ) -> str:
        """Decide, ask, run and log one call; return what the model is shown (data)."""
        chat = self._chats.setdefault(conversation_id, _ChatTools())
        conversation = self.store.get_conversation(conversation_id)
        assert conversation is not None
        code = _code(call)
        has_kernel = True
        if call.name in KERNEL_TOOLS and self.kernels is not None:
            has_kernel = await self.kernels.kernel_id(conversation.path) is not None
        verdict = decide(
            mode=self.mode_of(conversation),
            tainted=conversation.tainted is not None,
            tool=call.name,
            calls_so_far=calls_so_far,
            has_kernel=has_kernel and self.kernels is not None,
        )
        started = self.clock()
        call_id = f"t_{uuid.uuid4().hex[:16]}"
        entry: dict[str, Any] = {
            "call_id": call_id,
            "agent": caller.agent,
            "name": caller.name,
            "tool": call.name[:NAME_LIMIT],  # a model's made-up name is kept short
        }
        too_long = code is not None and len(code) > CODE_LIMIT
        if call.name == RUN_CODE and not too_long:
            entry["code"] = code  # all of it: what a yes is asked for is what runs
        if verdict.action == "refuse":
            return await self._end(
                conversation_id, caller, entry, verdict.words, "refused", started
            )
        if call.name == RUN_CODE and (code is None or too_long):
            words = (
                too_long_words(len(code))
                if code is not None
                else 'Not run: run_code needs {"code": "..."} with the code as a string.'
            )
            return await self._end(conversation_id, caller, entry, words, "refused", started)
        write: Write | None = None
        if call.name in CELL_TOOLS:
            planned = await self._plan(chat, conversation_id, conversation.path, caller, call)
            if isinstance(planned, Refusal):
                return await self._end(
                    conversation_id, caller, entry, planned.words, "refused", started
                )
            write = planned
            entry.update(write.asking())  # what a yes is asked for is what is written
        try:
            if verdict.action == "ask" and (
                chat.skipping or not await self._ask(conversation_id, chat, entry)
            ):
                return await self._end(
                    conversation_id, caller, entry, SKIPPED_WORDS, "skipped", started
                )
            if write is not None:
                assert conversation.path is not None  # _plan refuses a chat without one
                output, ending, undo = await self._write(
                    conversation_id, chat, conversation.path, caller, call, entry
                )
                return await self._end(
                    conversation_id, caller, entry, output, ending, started, undo, chat
                )
            output, ending = await self._run(conversation_id, chat, conversation.path, entry)
        except asyncio.CancelledError:
            # Stop: it ends skipped (a running call was interrupted), and the turn ends too;
            # its message says whether the code stopped or runs on in a kernel still busy.
            chat.asking.pop(call_id, None)
            stuck = chat.stuck if chat.stuck and chat.stuck.entry is entry else None
            words = STOPPED_WORDS if stuck is None else STILL_BUSY_WORDS
            await self._end(conversation_id, caller, entry, words, "skipped", started)
            if stuck is not None:
                await self._mark_stuck(conversation_id, chat, stuck)
            raise
        finally:
            self._set_working(conversation_id, chat, None)
        return await self._end(conversation_id, caller, entry, output, ending, started)

    async def call_outside(
        self,
        conversation_id: str,
        caller: Caller,
        call: ToolCall,
        calls_so_far: int,
        tool: OutsideTool,
    ) -> str:
        """One call of a tool of one of your MCP servers, under the same rule, the same asking,
        bounds and log as the notebook's own tools; return what the model is shown (data).
        An open-world tool's result taints the chat: someone else's words came in with it."""
        chat = self._chats.setdefault(conversation_id, _ChatTools())
        conversation = self.store.get_conversation(conversation_id)
        assert conversation is not None
        arguments = call.arguments
        tainted = conversation.tainted is not None
        verdict = decide(
            mode=self.mode_of(conversation),
            tainted=tainted,
            tool=call.name,
            calls_so_far=calls_so_far,
            nature=tool.nature,
        )
        started = self.clock()
        entry: dict[str, Any] = {
            "call_id": f"t_{uuid.uuid4().hex[:16]}",
            "agent": caller.agent,
            "name": caller.name,
            "tool": call.name[:NAME_LIMIT],
            "server": tool.server,
            # The approval shows the arguments in full: what a yes is asked for is what is sent.
            "code": tool.shown(arguments or {}),
        }
        if verdict.action == "refuse":
            return await self._end(
                conversation_id, caller, entry, verdict.words, "refused", started
            )
        if arguments is None:
            words = "Not run: the tool's arguments must be a JSON object."
            return await self._end(conversation_id, caller, entry, words, "refused", started)
        try:
            if verdict.action == "ask" and (
                chat.skipping or not await self._ask(conversation_id, chat, entry)
            ):
                return await self._end(
                    conversation_id, caller, entry, SKIPPED_WORDS, "skipped", started
                )
            self._set_working(conversation_id, chat, {**entry, "state": "running"})
            try:
                output, ending = await asyncio.wait_for(tool.run(arguments), tool.seconds)
            except asyncio.TimeoutError:
                output, ending = outside_timeout_words(tool.server, tool.seconds), "timeout"
        except asyncio.CancelledError:
            # Stop: the call is cancelled at the server too (the client's task is cancelled).
            chat.asking.pop(entry["call_id"], None)
            await self._end(
                conversation_id, caller, entry, OUTSIDE_STOPPED_WORDS, "skipped", started
            )
            raise
        finally:
            self._set_working(conversation_id, chat, None)
        if ending == "ran" and tool.nature.open_world and not tainted:
            taint = {"kind": "tool", "by": call.name}
            await self.store.set_taint(conversation_id, taint)
            await self._event(conversation_id, "chat.tainted", taint)
        return await self._end(conversation_id, caller, entry, output, ending, started, behind=True)

    # --- inside ---

    async def _ask(self, conversation_id: str, chat: _ChatTools, entry: dict[str, Any]) -> bool:
        answer: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        chat.asking[entry["call_id"]] = _Asking(entry, answer)
        await self._event(conversation_id, "tool.asking", entry)
        self._set_working(conversation_id, chat, {**entry, "state": "asking"})
        return await answer

    async def _run(
        self, conversation_id: str, chat: _ChatTools, path: str | None, entry: dict[str, Any]
    ) -> tuple[str, Ending]:
        def on_state(state: str) -> None:
            self._set_working(conversation_id, chat, {**entry, "state": state})

        def on_stuck(run: StuckRun) -> None:
            chat.stuck = _Stuck(entry, run)

        on_state("running")
        kernels = self.kernels
        tool = entry["tool"]
        try:
            if kernels is None:
                raise NoKernel("")
            if tool == READ_NOTEBOOK:
                if not path:
                    return "This chat belongs to no notebook, so there is nothing to read.", "ran"
                if self.documents is None:
                    raise NoKernel(path)
                book = await self.documents.read(path)
                chat.seen[entry["agent"]] = {c.id: c.source for c in book.cells}
                try:
                    ran: list[str] | str = await kernels.history(path)
                except NoKernel:
                    ran = "The notebook's kernel is not running, so what it ran since is unknown."
                except KernelBusy:
                    ran = BUSY_WORDS
                return notebook_text(path, book.cells, ran, book.where == "live"), "ran"
            if tool == LIST_VARIABLES:
                try:
                    return variables_text(await kernels.variables(path, on_state)), "ran"
                except KernelBusy:
                    return BUSY_WORDS, "ran"
            result = await kernels.run(path, entry["code"], on_state, on_stuck)
            return result.output, result.ending
        except NoKernel:
            return NO_KERNEL_WORDS, "refused" if tool == RUN_CODE else "ran"
        except Exception as error:  # a notebook that cannot be read, a kernel that went away
            return f"The tool failed: {type(error).__name__}: {str(error)[:300]}", "failed"

    async def _end(
        self,
        conversation_id: str,
        caller: Caller,
        entry: dict[str, Any],
        output: str,
        ending: Ending,
        started: float,
        undo: _Undoable | None = None,
        chat: _ChatTools | None = None,
        *,
        behind: bool = False,
    ) -> str:
        # Whatever a tool gives back (a kernel's output, a notebook's text, a variable's repr)
        # enters the chat and the model's next request here: cleaned like all text from elsewhere.
        shown = cut_output(clean_text(output))
        call = {k: v for k, v in entry.items() if k in _LOGGED}
        if undo is not None:
            call["undo"] = True  # while it can be undone (the user's Undo sets it false)
        queued = self.store.add_message(
            conversation_id,
            "tool",
            shown,
            agent=caller.agent,
            round=caller.place,
            tool={**call, "state": ending},
        )
        # Queued together, so one commit keeps the message and its event.
        seconds = round(max(self.clock() - started, 0.0), 3)
        ended = {**{k: entry[k] for k in ("call_id", "agent", "name", "tool")}}
        event = self.store.add_event(
            conversation_id, "tool.ended", {**ended, "state": ending, "seconds": seconds}
        )
        if behind and undo is None:
            # An MCP call's line: the model goes on at once; the one writer keeps the message
            # and its event in order, before anything queued later (the reply), and then they
            # are published (bench_mcp_call: a commit would be most of a call's overhead).
            kept = asyncio.create_task(self._publish(queued, event, caller.name))
            self._following.add(kept)
            kept.add_done_callback(self._following.discard)
            return shown
        message = await queued
        if undo is not None and chat is not None:
            undo.message = message
            chat.undos[entry["call_id"]] = undo
        self.hub.message(message, caller.name)
        self.hub.event(await event)
        return shown

    async def _publish(
        self, queued: Awaitable[Message], event: Awaitable[Any], name: str | None
    ) -> None:
        try:
            self.hub.message(await queued, name)
            self.hub.event(await event)
        except StoreError as error:
            log.warning("Conch: a tool call's line was not stored: %s", error)

    async def _plan(
        self,
        chat: _ChatTools,
        conversation_id: str,
        path: str | None,
        caller: Caller,
        call: ToolCall,
    ) -> Write | Refusal:
        """The cell tool call checked against the cells now and what this agent read."""
        if not path:
            return Refusal(NO_FILE_WORDS)
        if self.documents is None:
            return Refusal("This chat's notebook cannot be reached here, so no cell was changed.")
        try:
            book = await self.documents.read(path)
        except Exception as error:  # a notebook that is gone or cannot be read
            return Refusal(f"The notebook could not be read: {type(error).__name__}: {error}"[:400])
        if book.where == "held":
            held = HELD_WORDS.replace("Not written", "Not run") if call.name == RUN_CELL else None
            return Refusal(held or HELD_WORDS)
        provenance = {"agent": caller.agent, "chat": conversation_id}
        return plan(
            call.name,
            call.arguments,
            book.cells,
            chat.seen.get(caller.agent, {}),
            new_id=new_cell_id(),
            provenance=provenance,
        )

    async def _write(
        self,
        conversation_id: str,
        chat: _ChatTools,
        path: str,
        caller: Caller,
        call: ToolCall,
        entry: dict[str, Any],
    ) -> tuple[str, Ending, _Undoable | None]:
        """Make a cell write the user allowed (or Auto did): checked once more against the cells
        now, since the user may have typed while it asked."""
        assert self.documents is not None
        self._set_working(conversation_id, chat, {**entry, "state": "running"})
        async with self.documents.lock(path):
            book = await self.documents.read(path)
            if book.where == "held":
                return HELD_WORDS, "refused", None
            seen = chat.seen.setdefault(caller.agent, {})
            provenance = {"agent": caller.agent, "chat": conversation_id}
            arguments = dict(call.arguments or {})
            again = plan(
                call.name,
                arguments,
                book.cells,
                seen,
                new_id=new_cell_id(),
                provenance=provenance,
            )
            if isinstance(again, Refusal):
                return again.words, "refused", None
            asked = {k: entry.get(k) for k in again.asking()}
            if asked != again.asking():
                return (
                    "Not done: the cell changed while the user was being asked, so what they"
                    " said yes to is no longer what would happen. Nothing was changed.",
                    "refused",
                    None,
                )
            if again.kind == "run":
                return await self._run_cell(conversation_id, chat, path, entry, again)
            try:
                await self.documents.apply(path, again)
            except Held:
                return HELD_WORDS, "refused", None
            undo = undo_of(again, book.cells)
        if again.kind == "delete":
            seen.pop(again.cell.id, None)
        else:
            seen[again.cell.id] = again.new
        entry["cell_id"] = again.cell.id
        undoable = _Undoable(path, undo) if undo is not None else None
        return _written_words(again), "ran", undoable

    async def _run_cell(
        self, conversation_id: str, chat: _ChatTools, path: str, entry: dict[str, Any], write: Write
    ) -> tuple[str, Ending, _Undoable | None]:
        """Run a code cell's source in the kernel; its outputs and count go into the cell."""
        assert self.documents is not None
        assert self.kernels is not None
        cell_id = write.cell.id

        def on_state(state: str) -> None:
            self._set_working(conversation_id, chat, {**entry, "state": state})

        def on_stuck(run: StuckRun) -> None:
            chat.stuck = _Stuck(entry, run)

        await self.documents.set_state(path, cell_id, "busy")
        try:
            result = await self.kernels.run(
                path, write.cell.source, on_state, on_stuck, for_cell=True
            )
        except NoKernel:
            return NO_KERNEL_WORDS, "refused", None
        finally:
            await asyncio.shield(self.documents.set_state(path, cell_id, "idle"))
        placed = await self.documents.set_outputs(
            path, cell_id, result.outputs, result.execution_count
        )
        count = f" (In [{result.execution_count}])" if result.execution_count else ""
        where = (
            f"Cell {cell_id} ran{count}; its outputs are in the cell.\n"
            if placed
            else f"Cell {cell_id} ran{count}, but was deleted meanwhile: its outputs are shown"
            " only here.\n"
        )
        return where + result.output, result.ending, None

    async def _stuck_run(self, conversation_id: str) -> tuple[_ChatTools, _Stuck]:
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

    async def _mark_stuck(self, conversation_id: str, chat: _ChatTools, stuck: _Stuck) -> None:
        """Say the kernel is still busy with the run, and follow it until the kernel is done."""
        self._publish_stuck(conversation_id, chat)
        ids = {k: stuck.entry[k] for k in ("call_id", "agent", "name")}
        await self._event(conversation_id, "kernel.stuck", ids)
        task = asyncio.create_task(
            self._until_idle(conversation_id, chat, stuck), name=f"conch-stuck-{conversation_id}"
        )
        self._following.add(task)
        task.add_done_callback(self._following.discard)

    async def _until_idle(self, conversation_id: str, chat: _ChatTools, stuck: _Stuck) -> None:
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

    def _unstick(self, conversation_id: str, chat: _ChatTools, stuck: _Stuck) -> None:
        """The kernel is done with the run: the chat no longer offers to interrupt or restart."""
        if chat.stuck is stuck:
            chat.stuck = None
            self._publish_stuck(conversation_id, chat)

    def _publish_stuck(self, conversation_id: str, chat: _ChatTools) -> None:
        stuck = chat.stuck.to_json() if chat.stuck else None
        self.hub.publish(conversation_id, {"type": "stuck", "stuck": stuck})

    def _set_working(
        self, conversation_id: str, chat: _ChatTools, working: dict[str, Any] | None
    ) -> None:
        if chat.working == working:
            return
        chat.working = working
        self.hub.publish(conversation_id, {"type": "working", "working": working})

    async def _event(self, conversation_id: str, kind: str, data: dict[str, Any]) -> None:
        self.hub.event(await self.store.add_event(conversation_id, kind, data))


# What a tool message keeps of its call: a run's code (an MCP tool's arguments), a cell write's
# change, an ACP tool call's title and kind, an MCP tool's server.
_LOGGED = (
    "tool",
    "server",
    "call_id",
    "code",
    "cell_id",
    "old",
    "new",
    "after",
    "cell_type",
    "title",
    "kind",
)


@dataclass(frozen=True)
class OutsideTool:
    """A tool of one of your MCP servers, as the tool loop runs it: what it is for the rule
    (`nature`, from its annotations), how its arguments are shown in the approval, and how it
    runs (`run`: the text the model is shown, already fenced as data, and how the call ended)."""

    server: str
    nature: Nature
    run: Callable[[dict[str, Any]], Awaitable[tuple[str, Ending]]]
    shown: Callable[[dict[str, Any]], str]
    seconds: float = RUN_SECONDS


OUTSIDE_STOPPED_WORDS = "Stopped: the user pressed Stop, and the call was cancelled at the server."


def outside_timeout_words(server: str, seconds: float) -> str:
    return (
        f"Cancelled: the MCP server {server} did not answer within {seconds:g} seconds; the call"
        " was cancelled at the server."
    )


def _written_words(write: Write) -> str:
    """What the model is told of a write that was made."""
    if write.kind == "add":
        where = f"after cell {write.after}" if write.after else "at the end"
        return f"Added a {write.cell.cell_type} cell {where}: its id is {write.cell.id}."
    if write.kind == "edit":
        return f"Cell {write.cell.id} now holds the new source."
    return f"Deleted cell {write.cell.id}."


def too_long_words(length: int) -> str:
    """What the model (and the chat) is told of code over CODE_LIMIT: none of it ran, and why."""
    return (
        f"Not run: the code is {length:,} characters long, and one run_code call may carry at"
        f" most {CODE_LIMIT:,}. None of it ran (code is never cut). Send it in smaller parts,"
        " each one whole."
    )


def _code(call: ToolCall) -> str | None:
    code = (call.arguments or {}).get("code")
    return code if isinstance(code, str) else None
