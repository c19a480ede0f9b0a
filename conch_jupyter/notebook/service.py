"""NotebookTools: one tool call of one of your agents, from the rules' decision to its end.

Owns what happens between a model asking for a tool and the model getting the result: the
decision (rules.py) from the chat's mode and taint as stored now, the wait for the user's yes
(`tool.asking`, the `asking` list, `answer`), running it (kernel.py), the bound on what goes
back, and the log: a `tool` message per call (what ran, what came back, how it ended) and a
`tool.ended` event. Also what the round card shows while a call works (`working`).

The rooms it is made of, each holding one job over one state per chat (tool_state.py): the
wait for the user's yes (asking.py: a tool call, a kernel's message to an outside agent, the
kernel key's request to continue a round, a coding agent's permission question), the run Stop
could not end (stuck.py: `stuck`, Interrupt again, Restart kernel), and the cell tools' writes and
Undo (writes.py). This room keeps the call itself: the rule's verdict (rules.py `decide`, the one
table; nothing here judges by itself — what it refuses on its own is a call's shape: run_code
without its code or over CODE_LIMIT, an MCP tool's arguments that are not an object), running it
(kernel.py), the bound on what goes back, and the log.

Stop cancels the turn's task; a call cancelled while asking or running ends `skipped` (a running
one after a kernel interrupt) and the cancellation goes on.

A tool of one of your MCP servers goes through the same door (`call_outside`): the one rule of
every tool (rules.py `decide`, with the tool's nature from its annotations), the same asking,
deadline, Stop and log; its result taints the chat when the tool is open-world.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from ..core.files import StoreError
from ..core.policy import check_mode, effective_mode, mode_words
from ..core.text import clean_text
from ..providers.base import ToolCall
from ..store.chats import Conversation, Mode, NotFound
from ..store.rows import Message
from .asking import AskingRoom
from .cells import Refusal, Write
from .reading import notebook_text, variables_text
from .rules import (
    CELL_TOOLS,
    KERNEL_TOOLS,
    LIST_VARIABLES,
    NO_KERNEL_WORDS,
    READ_NOTEBOOK,
    RUN_CODE,
    RUN_SECONDS,
    SKIPPED_WORDS,
    STILL_BUSY_WORDS,
    STOPPED_WORDS,
    Ending,
    Nature,
    cut_output,
    decide,
    header_words,
)
from .runs import KernelBusy, NoKernel, StuckRun
from .stuck import StuckRuns
from .tool_state import Caller, ChatTools, StuckCall, Undoable
from .writes import CellWrites

log = logging.getLogger(__name__)

# What the rest of Conch imports from here (Caller is tool_state.py's, the rooms' ground).
__all__ = [
    "BUSY_WORDS",
    "CODE_LIMIT",
    "Caller",
    "NotebookTools",
    "OutsideTool",
    "outside_timeout_words",
    "too_long_words",
]

# The most code one run_code call may carry; longer code is refused whole, never cut (a cut
# program runs without its end). 100,000 characters is some 25,000 tokens at four a token:
# beyond what a model sends in one call (its whole output budget is 4k to 64k tokens, and code
# arrives in a reply's share of it), about 2,500 lines, still a program a person can scroll
# through before saying yes.
CODE_LIMIT = 100_000
NAME_LIMIT = 80
BUSY_WORDS = "The kernel is busy running one of the user's cells; ask again once it is idle."


class NotebookTools(AskingRoom, StuckRuns, CellWrites):
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

    def working(self, conversation_id: str) -> dict[str, Any] | None:
        chat = self._chats.get(conversation_id)
        return dict(chat.working) if chat and chat.working else None

    async def close(self) -> None:
        """Stop following stuck runs (the server stops), then the kernels' clients."""
        following = list(self._following)
        for task in following:
            task.cancel()
        await asyncio.gather(*following, return_exceptions=True)
        if self.kernels is not None:
            await self.kernels.close()

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

    async def call(
        self, conversation_id: str, caller: Caller, call: ToolCall, calls_so_far: int
    ) -> str:
        """Decide, ask, run and log one call; return what the model is shown (data)."""
        chat = self._chats.setdefault(conversation_id, ChatTools())
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
        chat = self._chats.setdefault(conversation_id, ChatTools())
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

    async def _run(
        self, conversation_id: str, chat: ChatTools, path: str | None, entry: dict[str, Any]
    ) -> tuple[str, Ending]:
        def on_state(state: str) -> None:
            self._set_working(conversation_id, chat, {**entry, "state": state})

        def on_stuck(run: StuckRun) -> None:
            chat.stuck = StuckCall(entry, run)

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
        undo: Undoable | None = None,
        chat: ChatTools | None = None,
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
