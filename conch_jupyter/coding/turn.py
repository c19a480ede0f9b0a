"""CodingTurn: one running `session/prompt` of a coding agent, a room of its own.

It holds what the turn has heard from the agent, and the one event that ends it early:
- its words, streamed on at once (`on_text`) and counted against the reply's bound: past it the
  turn ends `flooded`; its thoughts, kept for one folded line; its plan;
- its tool calls as reported so far (`ReportedCall`, merged from each report by `call_of`): a
  flood of calls is counted, not kept, but what was asked is never forgotten while the turn
  lasts (`asked`, kept apart, bounded by ASKED_LIMIT: past it a question is refused), and each
  call keeps the chat's taint from before it (a `fetch` is judged by it);
- the call the watch found changing something unasked (`unasked`; watch.py judges it);
- its share of the meter: what it has cost so far by the agent's own reports (`add_cost`), told
  to the caller's `on_cost`, which ends it `bound` once a spend bound is reached;
- the quiet clock's mark (`last_sent`) and how many of its questions wait for the user.

`ending` is a future set once, with the first reason (TurnEnd). The owner (sessions.py) waits on
it beside the prompt's answer, so whatever ends a turn is acted on as it happens, never polled.
No I/O: the lines it leaves and the taint it brings are stored by the owner.

May import: core, notebook (the rules), coding's rules.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from acp import schema

from ..core.chat_seal import code_span
from ..core.text import clean_text
from ..notebook.rules import Ending
from ..notebook.service import Caller
from .rules import TOOL_LINES, about_of, command_of, conch_tool, detail_of, own_kind, taint_judged

# All one reply may say (as a model's reply: providers' REPLY_CHARS); past it the turn ends.
REPLY_CHARS = 2_000_000
# What ends a running turn before its prompt does: a flood of words, a change made unasked where
# a question was wanted, a spend bound its reported cost reached, or the agent going quiet.
TurnEnd = Literal["flooded", "unasked", "bound", "quiet"]
# The tool calls a turn keeps in full (a flood of calls is counted, not kept).
KEPT_CALLS = TOOL_LINES * 4
# The questions one turn may ask (their ids are kept while it lasts): past it, each is refused.
ASKED_LIMIT = 4096

ToolReport = schema.ToolCallStart | schema.ToolCallProgress | schema.ToolCallUpdate


@dataclass
class ReportedCall:
    """One ACP tool call of the turn, as reported so far."""

    id: str
    title: str = ""
    kind: str | None = None
    status: str | None = None
    detail: str = ""
    output: str = ""
    logged: bool = False  # its line is in the chat (an ended call, refused or skipped)
    ending: Ending | None = None  # decided by Conch: refused / skipped
    asked: bool = False  # it came through a permission question
    about: str = ""  # the agent's own words about it (shown apart from the detail)
    command: str = ""  # the command it runs, if it runs one
    conch: str | None = None  # the notebook tool Conch offers over MCP that it is, if any
    tainted_before: bool | None = None  # the chat's taint when it was first reported

    def tainted(self, now: bool) -> bool:
        """The taint it is judged by (`rules.taint_judged`): a fetch's own, from before it."""
        return taint_judged(self.kind, self.tainted_before, now)


@dataclass
class CodingTurn:
    """One running `session/prompt`: what it streams to, what it has sent so far, and `ending`,
    the event that ends it before its prompt does."""

    conversation_id: str
    caller: Caller
    on_text: Callable[[str], None]
    # What it has cost so far, as reported; True: a spend bound is reached, the turn ends.
    on_cost: Callable[[float], bool]
    last_sent: float  # when the agent last sent anything of this turn (the quiet clock)
    ending: asyncio.Future[TurnEnd]
    reply_chars: int = REPLY_CHARS
    chars_said: int = 0
    thoughts: list[str] = field(default_factory=list)
    calls: dict[str, ReportedCall] = field(default_factory=dict)
    plan: list[str] | None = None
    lines: int = 0  # tool lines stored so far (at most TOOL_LINES)
    lines_left_out: int = 0  # tool lines past TOOL_LINES: one line counts them
    questions_waiting: int = 0  # its questions waiting for the user: the quiet clock stops
    stopping: bool = False  # stopped (or ending): nothing it sends now goes in the chat
    # A change it made without asking, where the chat wanted a question: the turn ends.
    unasked: ReportedCall | None = None
    tainted: bool = False  # a fetch of its brought someone else's words in
    cost_usd: float | None = None  # what it cost so far, by its reports (None: none came)
    writes: list[asyncio.Future[Any]] = field(default_factory=list)  # its lines and taint
    # The ids of the calls that came through a question: kept apart from `calls`, so a call
    # past what the turn keeps never forgets that it was asked.
    asked: set[str] = field(default_factory=set)
    # The name Conch offered its notebook server under to this session (None: none offered).
    server: str | None = None

    def end(self, why: TurnEnd) -> None:
        """End the turn for `why` (the first reason stays)."""
        if not self.ending.done():
            self.ending.set_result(why)

    def hear_words(self, text: str) -> None:
        """A chunk of its reply: streamed on, unless it floods the reply's bound."""
        text = clean_text(text)
        if not text:
            return
        self.chars_said += len(text)
        if self.chars_said > self.reply_chars:
            self.end("flooded")
            return
        self.on_text(text)

    def hear_thought(self, text: str) -> None:
        text = clean_text(text)
        if text and sum(map(len, self.thoughts)) < REPLY_CHARS // 10:
            self.thoughts.append(text)

    def hear_plan(self, entries: Sequence[schema.PlanEntry]) -> None:
        self.plan = [
            f"[{'x' if e.status == 'completed' else ' '}] {clean_text(e.content)}"
            for e in entries[:50]
        ]

    def add_cost(self, usd: float) -> None:
        """The meter's share: `usd` more by its reports; at a spend bound the turn ends."""
        self.cost_usd = (self.cost_usd or 0.0) + usd
        if self.on_cost(self.cost_usd):
            self.end("bound")

    def ask(self, call: ReportedCall) -> bool:
        """The call came through a question: kept as asked while the turn lasts. False when the
        turn has asked ASKED_LIMIT questions already (then the question is refused)."""
        if call.id not in self.asked and len(self.asked) >= ASKED_LIMIT:
            return False
        self.asked.add(call.id)
        call.asked = True
        return True

    def call_of(self, update: ToolReport, *, tainted: bool) -> ReportedCall:
        """The tool call a report is about, with what this report adds to it. `tainted`: the
        chat's stored taint now (kept as the taint from before the call when it is new)."""
        call_id = clean_text(str(update.tool_call_id))[:100]
        call = self.calls.get(call_id)
        if call is None:
            call = ReportedCall(call_id, asked=call_id in self.asked)
            call.tainted_before = tainted or self.tainted
            if len(self.calls) < KEPT_CALLS:  # a flood of calls is counted, not kept
                self.calls[call_id] = call
        if update.title:
            call.title = clean_text(update.title)[:300]
        if update.kind:
            call.kind = str(update.kind)
        if update.status:
            call.status = str(update.status)
        detail = detail_of(update.raw_input, update.content, update.locations, call.title)
        # A later update (the permission question's own copy) may carry less than the start
        # did: the diff stays unless the new one shows content of its own.
        # A command beats a bare path (OpenCode first reports only its folder).
        runs = detail.startswith("$ ") and not call.detail.startswith("$ ")
        if detail and (not call.detail or update.content or runs):
            call.detail = clean_text(detail)
        command = command_of(update.raw_input, call.title, update.content)
        if command:
            call.command = clean_text(command)[:2000]
        about = about_of(update.raw_input, update.content)
        if about:
            call.about = clean_text(about)
        meta = getattr(update, "field_meta", None) or {}
        named = (meta.get("claudeCode") or {}).get("toolName") if isinstance(meta, dict) else None
        call.kind = own_kind(call.kind, named if isinstance(named, str) else None)
        found = conch_tool(
            call.title,
            named if isinstance(named, str) else None,
            update.raw_input,
            call.kind,
            server=self.server,
        )
        if found is not None:
            call.conch = found
        output = getattr(update, "raw_output", None)
        if output is not None:
            call.output = clean_text(str(output))[:8_000]
        return call


def question_title(call: ReportedCall) -> str:
    """The question's heading: the agent's own words about the call when its title only repeats
    the command (Claude's) or says nothing of it (a folder, OpenCode's); else its title."""
    title = call.title.strip()
    command = call.detail[2:].split("\n", 1)[0] if call.detail.startswith("$ ") else ""
    if call.about and (not title or title == command or title in call.detail or "/" in title):
        return call.about[:300]
    return title or "a tool call"


def what_it_ran(call: ReportedCall) -> str:
    """The tool line as words: the command or the call's title, as code that nothing in it
    can close (a backtick in a command included)."""
    return code_span((call.command or call.title or call.kind or "a tool call")[:300])
