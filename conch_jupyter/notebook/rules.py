"""The rules of the notebook tools: which call runs, which asks the user, which is refused, and
the words the model and the chat's header get. Pure (no I/O), table-tested.

Theory of operation: one decision per tool call, from four things the driver knows —
- the chat's **mode**: `ask` (the default: every `run_code` waits for the user's yes), `auto`
  (runs without asking while the chat is untainted), `read` (no `run_code` at all);
- the **taint** (the guard after reading): once someone else's words came into the chat, Auto
  asks again before every run, because a run could now be one those words talked an agent into;
- the **tool** the model asked for (`read_notebook`, `list_variables`, `run_code`, the cell
  tools `add_cell`, `edit_cell`, `delete_cell`, `run_cell`, or a name we never offered);
- the **calls so far** in this turn: at most `MAX_CALLS_PER_TURN`; the next one is refused.
Reading never asks: it changes nothing. Every other tool is a change (a run, or a write to the
user's cells) and follows the mode alike: Ask asks, Auto runs while untainted, Read refuses.
A refusal is said to the model in words, so the turn goes on and the model can answer without
the tool.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from ..providers.base import ToolSpec
from ..store.rows import Mode  # "ask" (the default), "auto", "read": stored with each chat

Action = Literal["run", "ask", "refuse"]
# How one call ended (`tool.ended`'s state).
Ending = Literal["ran", "failed", "skipped", "refused", "timeout"]

MAX_CALLS_PER_TURN = 8
RUN_SECONDS = 60.0
OUTPUT_LIMIT = 8_000

READ_NOTEBOOK = "read_notebook"
LIST_VARIABLES = "list_variables"
RUN_CODE = "run_code"
ADD_CELL = "add_cell"
EDIT_CELL = "edit_cell"
DELETE_CELL = "delete_cell"
RUN_CELL = "run_cell"
READING_TOOLS = frozenset({READ_NOTEBOOK, LIST_VARIABLES})
# The tools that write the user's cells (run_cell writes its outputs), and those that need the
# notebook's kernel.
CELL_TOOLS = frozenset({ADD_CELL, EDIT_CELL, DELETE_CELL, RUN_CELL})
KERNEL_TOOLS = frozenset({RUN_CODE, RUN_CELL})
TOOL_NAMES = (READ_NOTEBOOK, LIST_VARIABLES, RUN_CODE, ADD_CELL, EDIT_CELL, DELETE_CELL, RUN_CELL)


_NO_ARGUMENTS: dict[str, Any] = {"type": "object", "properties": {}, "additionalProperties": False}

NOTEBOOK_TOOLS: tuple[ToolSpec, ...] = (
    ToolSpec(
        READ_NOTEBOOK,
        "Read the chat's notebook as the user sees it now: each cell's id, type, source and"
        " text outputs, plus the code its kernel ran that no cell holds. Read it before"
        " editing, deleting or running a cell: the cell tools take the ids it names.",
        _NO_ARGUMENTS,
    ),
    ToolSpec(
        LIST_VARIABLES,
        "List the variables the notebook's kernel holds: name, type, shape or length, and a"
        " short repr. Changes nothing.",
        _NO_ARGUMENTS,
    ),
    ToolSpec(
        RUN_CODE,
        "Run Python code in the notebook's own kernel (it sees and changes the user's"
        " variables) and get its output, errors and result back as text. The user may be asked"
        " first, and may say no.",
        {
            "type": "object",
            "properties": {"code": {"type": "string", "description": "the Python code to run"}},
            "required": ["code"],
            "additionalProperties": False,
        },
    ),
    ToolSpec(
        ADD_CELL,
        "Add a cell to the user's notebook (every open view shows it at once). The user may be"
        " asked first, and may say no. The result names the new cell's id.",
        {
            "type": "object",
            "properties": {
                "cell_type": {"type": "string", "enum": ["code", "markdown"]},
                "source": {"type": "string", "description": "the cell's whole text"},
                "after": {
                    "type": "string",
                    "description": "the id of the cell to add it after; none: at the end",
                },
            },
            "required": ["cell_type", "source"],
            "additionalProperties": False,
        },
    ),
    ToolSpec(
        EDIT_CELL,
        "Replace the source of one cell of the user's notebook, by its id (from read_notebook)."
        " Refused if the user changed the cell since you read it: read it again then. The user"
        " may be asked first.",
        {
            "type": "object",
            "properties": {
                "cell_id": {"type": "string"},
                "source": {"type": "string", "description": "the cell's new whole text"},
            },
            "required": ["cell_id", "source"],
            "additionalProperties": False,
        },
    ),
    ToolSpec(
        DELETE_CELL,
        "Delete one cell of the user's notebook, by its id (from read_notebook). Refused if the"
        " user changed the cell since you read it. The user may be asked first.",
        {
            "type": "object",
            "properties": {"cell_id": {"type": "string"}},
            "required": ["cell_id"],
            "additionalProperties": False,
        },
    ),
    ToolSpec(
        RUN_CELL,
        "Run one code cell of the user's notebook in its kernel, by its id, as if the user ran"
        " it: its outputs and execution count appear in the cell, and come back as text. The"
        " user may be asked first.",
        {
            "type": "object",
            "properties": {"cell_id": {"type": "string"}},
            "required": ["cell_id"],
            "additionalProperties": False,
        },
    ),
)


@dataclass(frozen=True)
class Verdict:
    action: Action
    # Said to the model as the tool's result when the call does not run (refused).
    words: str = ""


@dataclass(frozen=True)
class Nature:
    """What a tool is, for the rule: whether it only reads, and whether it reaches the world
    outside the chat (an address, a query to elsewhere: its arguments can carry the chat out)."""

    reading: bool
    open_world: bool


# The notebook's own tools: reading ones read the chat's own notebook and kernel (closed world);
# every other one is a change.
NOTEBOOK_READING = Nature(reading=True, open_world=False)
CHANGE = Nature(reading=False, open_world=True)


def nature_of(annotations: dict[str, Any] | None) -> Nature:
    """An MCP tool's nature from its annotations, the server's own claim. Reading only when it
    says `readOnlyHint: true`; open-world unless it says `openWorldHint: false` (MCP's defaults:
    a tool that says nothing may change anything, anywhere)."""
    given = annotations or {}
    return Nature(
        reading=given.get("readOnlyHint") is True,
        open_world=given.get("openWorldHint") is not False,
    )


# THE rule, for every tool (the notebook's and your MCP servers'): (reading, open world and the
# chat tainted) or (a change, the chat tainted) → what each mode does. A row per case, so the
# whole rule reads at a glance; `judge` only looks it up.
#
#   case                                 read      ask    auto
RULE: dict[tuple[str, bool], dict[str, Action]] = {
    ("reading", False): {"read": "run", "ask": "run", "auto": "run"},
    ("reading", True): {"read": "run", "ask": "run", "auto": "run"},
    ("reading out", False): {"read": "run", "ask": "run", "auto": "run"},
    ("reading out", True): {"read": "refuse", "ask": "ask", "auto": "ask"},
    ("change", False): {"read": "refuse", "ask": "ask", "auto": "run"},
    ("change", True): {"read": "refuse", "ask": "ask", "auto": "ask"},
}


def judge(nature: Nature, mode: Mode, tainted: bool) -> Action:
    """What the chat's mode and taint do to one call of a tool of this nature (RULE)."""
    case = "change" if not nature.reading else "reading out" if nature.open_world else "reading"
    return RULE[(case, tainted)][mode]


def decide(
    *,
    mode: Mode,
    tainted: bool,
    tool: str,
    calls_so_far: int,
    has_kernel: bool = True,
    nature: Nature | None = None,
) -> Verdict:
    """What happens to one tool call. `calls_so_far` counts the calls of this turn before it.
    `nature`: an MCP tool's (from its annotations); None for the notebook's own tools."""
    if calls_so_far >= MAX_CALLS_PER_TURN:
        return Verdict(
            "refuse",
            f"Not run: this turn has used its {MAX_CALLS_PER_TURN} tool calls."
            " Answer with what you have.",
        )
    if nature is None:
        if tool not in TOOL_NAMES:
            return Verdict("refuse", f"There is no tool called {tool[:80]!r} here.")
        nature = NOTEBOOK_READING if tool in READING_TOOLS else CHANGE
    action = judge(nature, mode, tainted)
    if action == "refuse":
        if nature.reading:
            return Verdict("refuse", READ_OUT_WORDS)
        what = "written" if tool in CELL_TOOLS - {RUN_CELL} else "run"
        return Verdict(
            "refuse",
            f"Not {what}: this chat is in Read mode (reading only). Only the user can change it.",
        )
    if not has_kernel and tool in KERNEL_TOOLS:
        return Verdict("refuse", NO_KERNEL_WORDS)
    return Verdict(action)


READ_OUT_WORDS = (
    "Not run: this tool reaches outside the chat, and the chat now holds someone else's words"
    " (which its arguments could carry out). In Read mode it is refused; only the user can"
    " change the mode."
)
NO_KERNEL_WORDS = (
    "This chat has no running kernel: it belongs to no notebook, or its notebook's kernel is not"
    " started. Nothing was run."
)
SKIPPED_WORDS = "Not run: the user did not let this code run."
STOPPED_WORDS = "Stopped: the user pressed Stop, and the kernel was interrupted."
TIMEOUT_WORDS = f"Interrupted: the code ran longer than {RUN_SECONDS:g} seconds."
# Stop interrupted the run, and a moment later it still ran (code that catches
# KeyboardInterrupt): the tool message says so, and the chat offers Interrupt again and Restart.
STILL_BUSY_WORDS = (
    "Not stopped: the user pressed Stop and the kernel was interrupted, but the code went on"
    " running (it caught the interrupt). The kernel is still busy."
)

# How a run that Stop could not end came to an end (`kernel.idle`'s `after`): a second interrupt
# (the user's Interrupt again), a restart (the user's Restart kernel, or Jupyter's own), by
# itself (it finished, or Jupyter's own interrupt ended it), or with its kernel (shut down, dead).
After = Literal["interrupt", "restart", "itself", "gone"]


def stuck_words(name: str, interrupts: int) -> str:
    """What the chat says while a run Stop interrupted goes on; `interrupts`: how many it got."""
    if interrupts <= 1:
        return f"{name}'s code did not stop: the kernel is still busy."
    return (
        f"{name}'s code did not stop, even when interrupted again: the kernel is still busy."
        " Restarting the kernel ends it (and the kernel's variables are lost)."
    )


def idle_words(name: str, after: After) -> str:
    """What the chat says once the kernel is done with a run Stop could not end."""
    if after == "interrupt":
        return f"{name}'s code stopped when interrupted again: the kernel is idle."
    if after == "restart":
        return (
            f"The kernel was restarted: {name}'s code is ended,"
            " and the kernel's variables are gone."
        )
    if after == "gone":
        return f"The kernel was shut down: {name}'s code ended with it."
    return f"{name}'s code has ended: the kernel is idle."


def header_words(mode: Mode, tainted: dict[str, Any] | None) -> str:
    """What the chat's header says about running code, in this mode and with this taint."""
    if mode == "read":
        return "Read: agents can read the notebook but not run code."
    if mode == "ask":
        return "Ask: every run waits for your yes."
    if tainted and tainted.get("kind") == "tool":
        return "Asking again: what one of your tools brought in is in this chat."
    if tainted and tainted.get("kind") == "fetch":
        # A coding agent fetched a page: its words came in with what the agent read.
        return "Asking again: a page a coding agent fetched is in this chat."
    if tainted:
        # A person's words: an outside agent's answer, or a door's guest.
        return "Asking again: an outside agent's words are in this chat."
    return "Auto: agents run code without asking."


def cut_output(text: str, limit: int = OUTPUT_LIMIT, *, total: int | None = None) -> str:
    """At most `limit` characters of output for the model, with a note saying it was cut.
    `total`: how long the output really was, when `text` is only the start of it (a run's output
    is not kept past what can be shown)."""
    total = len(text) if total is None else max(total, len(text))
    if total <= limit:
        return text
    note = f"\n[Output cut: {total:,} characters, only the first {limit:,} are shown.]"
    return text[: max(limit - len(note), 0)] + note
