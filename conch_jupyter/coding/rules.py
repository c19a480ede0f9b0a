"""The rules for coding agents over ACP: which permission passes, which asks the user, which is
refused; what the agent is given to run with; what it is sent each turn. Pure (no I/O).

Theory of operation: a coding agent (Claude Code, Codex, Goose… through their ACP adapters)
does its own work, and asks the client before it does anything that matters
(`session/request_permission`, carrying the tool call: its kind, title, and the command, diff or
path). Conch answers each such question from three things:
- the **kind** of the tool call: the reading kinds (`read`, `search`, `think`, `fetch`) change
  nothing here and pass in every mode;
- the chat's **mode**: Read refuses every other kind; Ask asks the user for every other; Auto lets
  every kind pass while the chat is untainted;
- the **taint** (the guard after reading): once someone else's words came in (an outside agent's
  answer, a door guest, or a `fetch` the agent itself ran), Auto asks again for every other kind,
  because the request could now be one those words talked the agent into.
An answer is only ever the user's: nothing the agent (or any agent) says is read as a yes.

But an agent asks only what its own settings say (a user's `allow` rule, OpenCode's default
"run everything"), so the mode must bind what it *does*:
- **they ask before every change**: `asking_setup` is the agent's own setting, checked before its
  other rules, that makes it ask about every tool call that can change something (Claude Code's
  `ask` rules as flag settings, Codex's `untrusted` approval policy, OpenCode's
  `OPENCODE_PERMISSION`, Goose's `approve` mode, Gemini's `default` mode); `mode_to_leave` moves
  an agent out of a mode that skips questions. An agent Conch cannot make ask (None) gets no turn
  in a Read chat (`no_read_turn`).
- **trust, but watch**: `acted_unasked` says when a tool call the agent reports running was a
  change it should have asked about: the turn ends then, in words.
- **Conch's own tools judge themselves**: a question about one of the notebook tools Conch offers
  over MCP (`conch_tool`) passes; the tool's own rule (NotebookTools) asks, once.

`command_refusal` is the one place that says whether a command may be run at all (the
administrator's policy hooks in there). Which adapter a command starts, and whether the agent
agrees when it names itself, is launch.py's.

It stays whole (past 500 lines): every answer Conch gives a coding agent's question, and what
the watch counts as a change, are read together here, one table beside the next.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from ..notebook.rules import NOTEBOOK_TOOLS, Ending
from ..store.rows import Mode
from .launch import launched

Permission = Literal["allow", "ask", "refuse"]

# The name the notebook's tools go by when Conch offers them over MCP (coding/mcp.py).
SERVER_NAME = "conch-notebook"

READING_KINDS = frozenset({"read", "search", "think", "fetch"})
# Stop's grace: a prompt that has not ended this long after `session/cancel` ends with its process.
CANCEL_GRACE_SECONDS = 2.0
# One process per coding agent holds at most this many chats' sessions open at once
# (claude-agent-acp runs a ~200 MB CLI per session): the least recently used is closed, and taken
# up again when its chat speaks (`c.ConchApp.acp_live_sessions`).
LIVE_SESSIONS = 4
# A coding agent's process with no turn running for this long ends; the next turn starts it
# again and resumes the chat's session (`c.ConchApp.acp_idle_seconds`).
IDLE_SECONDS = 600.0
# How long a coding agent may take to start and open its session (an adapter run through npx
# may first fetch itself).
START_SECONDS = 120.0
# A turn with no word from the agent for this long (and no question waiting for the user) is a
# hang: the round ends with `error`. Coding agents think between messages, so it is generous.
QUIET_SECONDS = 300.0
# An ACP turn's tool lines: past this many, one line says how many more there were.
TOOL_LINES = 64
DETAIL_LIMIT = 20_000
# Never given to a coding agent: the kernel key opens Conch's API as the kernel, the token opens
# Jupyter itself.
WITHHELD_ENV = frozenset(
    {"CONCH_KERNEL_KEY", "JUPYTER_TOKEN", "JPY_API_TOKEN", "JUPYTERHUB_API_TOKEN"}
)


@dataclass(frozen=True)
class KnownAgent:
    """A coding agent people run through ACP, as Settings offers it when found on PATH."""

    label: str
    command: str
    args: tuple[str, ...] = ()
    about: str = ""


KNOWN_AGENTS: tuple[KnownAgent, ...] = (
    KnownAgent(
        "Claude Code",
        "claude-agent-acp",
        (),
        "Anthropic's coding agent (npm: @agentclientprotocol/claude-agent-acp; Node 22)",
    ),
    KnownAgent(
        "Claude Code", "claude-code-acp", (), "Anthropic's coding agent (the adapter's older name)"
    ),
    KnownAgent(
        "Codex", "codex-acp", (), "OpenAI's coding agent (npm: @agentclientprotocol/codex-acp)"
    ),
    KnownAgent(
        "Gemini CLI", "gemini", ("--acp",), "Google's coding agent (npm: @google/gemini-cli)"
    ),
    KnownAgent("Goose", "goose", ("acp",), "Block's open-source agent"),
    KnownAgent("OpenCode", "opencode", ("acp",), "the open-source coding agent (npm: opencode-ai)"),
)


# --- they ask before every change ---

# Claude Code's tools that change something: each is an `ask` rule, which its CLI checks before
# the mode and before the user's own `allow` rules.
CLAUDE_ASK = ("Bash", "Edit", "MultiEdit", "Write", "NotebookEdit", "KillShell")
# OpenCode's permissions that change something, each set to "ask" (checked before its defaults).
OPENCODE_ASK = ("edit", "bash", "external_directory")
# Mode names (ACP session modes or a `mode` config option's values) that let tool calls pass
# unasked. A mode name is no lock: Claude's `plan` lets every tool pass wherever bypass is
# available, so it counts too.
SKIPPING_MODES = frozenset(
    {
        "bypassPermissions",
        "acceptEdits",
        "dontAsk",
        "plan",
        # Claude Code 0.101's default: a classifier, not the user, approves what it judges safe.
        "auto",
        "full-access",
        # Codex 2.6: `agent` is "Auto review" (a side call to the model answers its approvals),
        # `agent-full-access` never asks, `workspace-write` (like the older Codex's `auto`)
        # edits the notebook's folder unasked: only `read-only` asks before every change.
        "agent",
        "agent-full-access",
        "workspace-write",
        "yolo",
        "autoEdit",
    }
)
# Where Conch moves an agent that starts in one of them: the first of these it offers (Codex
# 2.6's `read-only` has the user as its approvals reviewer, and its sandbox lets nothing change
# unasked).
ASKING_MODES = ("default", "read-only", "ask", "approve", "build")


@dataclass(frozen=True)
class AskingSetup:
    """What makes one agent ask before every change: extra arguments, environment and
    `session/new` `_meta`, all of its own settings."""

    agent: str  # which known agent it was taken for (words: "Claude Code")
    args: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict)
    meta: dict[str, Any] = field(default_factory=dict)


def asking_setup(command: str, args: Sequence[str] = ()) -> AskingSetup | None:
    """The agent's own setting that makes it ask before every change, however it is launched
    (`launched`); None when Conch knows none for this command (then it gets no turn in a Read
    chat). Its arguments go after the command's own (a package runner passes them on)."""
    launch = launched(command, args)
    agent = launch.adapter.agent if launch is not None else None
    if agent == "Claude Code":
        settings = {"permissions": {"ask": list(CLAUDE_ASK)}}
        options = {"extraArgs": {"settings": json.dumps(settings)}}
        return AskingSetup("Claude Code", meta={"claudeCode": {"options": options}})
    if agent == "Codex":
        return AskingSetup("Codex", args=("-c", 'approval_policy="untrusted"'))
    if agent == "OpenCode":
        permission = {name: "ask" for name in OPENCODE_ASK}
        return AskingSetup("OpenCode", env={"OPENCODE_PERMISSION": json.dumps(permission)})
    if agent == "Goose":
        return AskingSetup("Goose", env={"GOOSE_MODE": "approve"})
    if agent == "Gemini CLI":
        return AskingSetup("Gemini CLI", args=("--approval-mode", "default"))
    return None


def mode_to_leave(current: str | None, offered: Iterable[str]) -> str | None:
    """The mode to move an agent to when `current` skips questions; None when it need not move
    (or offers no mode that asks: then the watch and the questions still hold)."""
    if current is None or current not in SKIPPING_MODES:
        return None
    offered = [o for o in offered if o not in SKIPPING_MODES]
    for wanted in ASKING_MODES:
        if wanted in offered:
            return wanted
    return offered[0] if offered else None


def no_read_turn(name: str) -> str:
    return (
        f"{name} gets no turn in a Read chat: Conch knows no setting of its own that makes it "
        "ask before it changes something, so Read could not hold it. Switch to Ask to let it "
        "work with your yes."
    )


# --- trust, but watch ---

_CONCH_TOOL = re.compile(
    r"(?:Tool:\s*)?(?:mcp__)?" + re.escape(SERVER_NAME) + r"(?:__|[./:])\s*([a-z_]+)"
)
_NOTEBOOK_TOOL_NAMES = frozenset(t.name for t in NOTEBOOK_TOOLS)


def conch_tool(
    title: str, meta_tool: str | None = None, raw_input: Any = None, kind: str | None = None
) -> str | None:
    """The notebook tool Conch offers over MCP that this tool call is, if it is one: Claude
    names it `mcp__conch-notebook__<tool>` in its own field (kind `other`), Codex puts the server
    and tool in its input or shows `conch-notebook.<tool>` (no kind).

    Such a call passes the agent's question (the tool judges it when it reaches Conch), so only
    the agent's own naming counts, never words a model can choose: a call of any other kind (a
    command, an edit) is never one; where the agent names the tool or gives its server and tool,
    that alone decides; a title decides only as a whole (Claude's title for a command is the
    command, which could hold the tool's name). Codex 2.6 reports an MCP call as kind `execute`
    with its server and tool as the input (no command): that, and only that, counts too."""
    if kind not in (None, "other") and not _mcp_input(kind, raw_input):
        return None
    if meta_tool is not None:
        named: str = meta_tool
    elif isinstance(raw_input, Mapping) and ("server" in raw_input or "tool" in raw_input):
        server, tool = raw_input.get("server"), raw_input.get("tool")
        if server != SERVER_NAME or not isinstance(tool, str):
            return None
        named = f"{SERVER_NAME}.{tool}"
    else:
        named = title.strip()
    found = _CONCH_TOOL.fullmatch(named)
    return found.group(1) if found and found.group(1) in _NOTEBOOK_TOOL_NAMES else None


def _mcp_input(kind: str | None, raw_input: Any) -> bool:
    """Codex 2.6's MCP call: kind `execute`, its input the server, tool and arguments the
    adapter put there, and no command in it."""
    return (
        kind == "execute"
        and isinstance(raw_input, Mapping)
        and "server" in raw_input
        and "tool" in raw_input
        and not ({"command", "cmd"} & set(raw_input))
    )


# The agents' own tool searches, by the name the agent gives the call (Claude Code 0.101's
# `ToolSearch`): they only load the schemas of deferred tools, so they read.
TOOL_SEARCHES = frozenset({"ToolSearch"})


def own_kind(kind: str | None, meta_tool: str | None) -> str | None:
    """A tool call's kind, where the agent's own name for the call says more than the kind it
    reported: its tool search (kind `other`) is a `search`."""
    if kind in (None, "other") and meta_tool in TOOL_SEARCHES:
        return "search"
    return kind


# Commands that only read, as an agent's own rules let them run unasked (Codex's "known safe"
# list under `untrusted`: `git status`, `pwd`…, reported as kind `execute`). Only a bare command
# counts: any redirection, pipe, chaining or substitution makes it a possible change.
READING_PROGRAMS = frozenset(
    {
        "ls",
        "pwd",
        "cat",
        "head",
        "tail",
        "wc",
        "echo",
        "grep",
        "rg",
        "nl",
        "stat",
        "which",
        "whoami",
        "true",
        "false",
        "file",
        "du",
        "df",
    }
)
READING_GIT = frozenset({"status", "log", "diff", "show"})
_SHELL_SIGNS = re.compile(r"[;&|<>`$\n\\]")
_FIND_ACTIONS = re.compile(r"(?:^|\s)-(?:exec|execdir|ok|okdir|delete|fprint\w*|fls)\b")


def reads_only(command: str | None) -> bool:
    """Whether a command only reads (for the watch: such a command run unasked is no change)."""
    if not command or _SHELL_SIGNS.search(command):
        return False
    words = command.split()
    program = os.path.basename(words[0])
    if program in READING_PROGRAMS:
        return True
    if program == "find":
        return not _FIND_ACTIONS.search(command)
    if program == "git" and len(words) > 1:
        return words[1] in READING_GIT and "--output" not in command
    return False


def acted_unasked(
    *,
    mode: Mode,
    tainted: bool,
    kind: str | None,
    status: str | None,
    asked: bool,
    command: str | None = None,
) -> bool:
    """Whether a tool call the agent reports is a change made without asking where this chat
    wanted a question: a changing kind (unknown kinds included) done, never asked about, in
    Read, Ask or a tainted Auto. Only `completed` is proof: OpenCode reports a call
    `in_progress` before it asks about it. A command that only reads (`reads_only`) is no
    change, whatever kind it came as."""
    if asked or kind in READING_KINDS or status != "completed" or reads_only(command):
        return False
    return mode != "auto" or tainted


def unasked_words(name: str, what: str) -> str:
    return (
        f"{name} ran {what} without asking you: its own settings allow it. Conch stopped its turn."
    )


def found_agents(which: Callable[[str], str | None] = shutil.which) -> list[dict[str, Any]]:
    """The known coding agents whose command is on PATH (what Settings offers to add)."""
    found = []
    for known in KNOWN_AGENTS:
        where = which(known.command)
        if where:
            found.append(
                {
                    "label": known.label,
                    "command": known.command,
                    "args": list(known.args),
                    "about": known.about,
                    "path": where,
                }
            )
    return found


def command_refusal(command: str, args: Sequence[str] = ()) -> str | None:
    """Words when `command` may not be run as a coding agent; None when it may.

    The one check of "may this command be run": made when an ACP agent is added or changed and
    again before each start. The administrator's policy (`c.ConchApp.policy["acp"]`) hooks in
    here; today only a command that is no program is refused.
    """
    if not command.strip():
        return "An ACP agent needs the command that starts it."
    if "\0" in command or "\n" in command or any("\0" in a for a in args):
        return "The command must be one program's name or path, on one line."
    return None


def permission(*, mode: Mode, tainted: bool, kind: str | None) -> Permission:
    """What Conch answers to one `session/request_permission` of this kind."""
    if kind in READING_KINDS:
        return "allow"
    if mode == "read":
        return "refuse"
    if mode == "auto" and not tainted:
        return "allow"
    return "ask"


REFUSED_WORDS = (
    "Not allowed: this chat is in Read mode (reading only). Only the user can change it."
)


def chosen_option(options: Iterable[Any], allow: bool) -> str | None:
    """The option that says this answer for this one call (never an "always": Conch asks each
    time). None when the agent offered no such option (then the answer is `cancelled`)."""
    wanted = ("allow_once", "allow_always") if allow else ("reject_once", "reject_always")
    by_kind: dict[str, str] = {}
    for option in options:
        # A yes that would move the agent into a mode that skips questions (Claude's way out of
        # `plan` offers "bypassPermissions" and "acceptEdits") is never Conch's to give.
        if allow and str(option.option_id) in SKIPPING_MODES:
            continue
        by_kind.setdefault(str(getattr(option, "kind", "")), str(option.option_id))
    # An "always" is taken only when it is the sole way to say yes/no; Conch still asks anew.
    for kind in wanted:
        if kind in by_kind:
            return by_kind[kind]
    return None


def child_env(
    base: Mapping[str, str],
    provider_env: Mapping[str, str] | None,
    secrets: Iterable[str] = (),
) -> dict[str, str]:
    """The coding agent's environment: the server's (so its PATH, venv and HOME hold), the
    provider's own (its keys), and never the kernel key or a Jupyter token: neither by the
    names they go by nor, under any other name, by value (`secrets`)."""
    hidden = {s for s in secrets if s}
    env = {k: v for k, v in base.items() if k not in WITHHELD_ENV and v not in hidden}
    env.update({k: v for k, v in (provider_env or {}).items() if k not in WITHHELD_ENV})
    return env


def workdir(root_dir: str, notebook_path: str | None) -> str:
    """Where the agent runs: the notebook's folder under the server's root (else the root)."""
    root = os.path.abspath(root_dir or os.getcwd())
    if not notebook_path:
        return root
    folder = os.path.dirname(notebook_path)
    where = os.path.abspath(os.path.join(root, folder))
    # A path that would leave the root is no notebook's: run at the root.
    return where if where == root or where.startswith(root + os.sep) else root


def prompt_text(system: str, turns: Sequence[tuple[str, str]]) -> str:
    """One `session/prompt`'s text: the room prompt every agent gets, then the chat since this
    session last spoke, as labelled and fenced for every agent (rounds/history.py)."""
    parts = [system.strip()]
    for role, text in turns:
        parts.append(f"(your earlier reply)\n{text}" if role == "assistant" else text)
    return "\n\n".join(p for p in parts if p)


_SHELL = re.compile(r"^(?:/(?:usr/)?bin/)?(?:ba|z)?sh$")


# Gemini CLI's shell question: no rawInput, the command only in the title, and this as content.
_GEMINI_SHELL = re.compile(r"^\[current working directory [^\]]*\]\s*(?:\((.*)\))?\s*$", re.S)


def _gemini_shell(content: Any) -> re.Match[str] | None:
    for item in content or ():
        text = getattr(getattr(item, "content", None), "text", None)
        found = _GEMINI_SHELL.match(text) if isinstance(text, str) else None
        if found:
            return found
    return None


def command_of(raw_input: Any, title: str = "", content: Any = None) -> str | None:
    """The command a tool call will run, whichever field the agent put it in: `rawInput`'s
    `command` or `cmd` (a string, or a list such as Codex's `["/bin/bash", "-lc", "…"]`), or
    the title when the content says it is a shell command (Gemini's)."""
    if not isinstance(raw_input, Mapping):
        return title.strip() or None if title and _gemini_shell(content) else None
    command = raw_input.get("command") or raw_input.get("cmd")
    if isinstance(command, list) and command:
        words = [str(c) for c in command]
        # `bash -lc "<script>"`: the script is what will happen.
        if len(words) == 3 and _SHELL.match(words[0]) and words[1] in ("-c", "-lc"):
            return words[2]
        return " ".join(words)
    return command if isinstance(command, str) and command else None


def about_of(raw_input: Any, content: Any = None) -> str:
    """The agent's own words about a call (Claude's `description`, Gemini's in parentheses),
    shown apart, in plain words."""
    if isinstance(raw_input, Mapping):
        about = raw_input.get("description")
        if isinstance(about, str):
            return about.strip()[:2000]
    found = _gemini_shell(content)
    return (found.group(1) or "").strip()[:2000] if found else ""


def detail_of(raw_input: Any, content: Any, locations: Any, title: str = "") -> str:
    """What a permission question shows in full, once: the command, the diff, or the path. The
    agent's own description (about_of) is not part of it; a title that is only a folder or a
    command already shown says nothing more."""
    lines: list[str] = []
    command = command_of(raw_input, title, content)
    if command:
        lines.append(f"$ {command}")
    about = about_of(raw_input, content)
    for item in content or ():
        path = getattr(item, "path", None)
        new = getattr(item, "new_text", None)
        if isinstance(path, str) and isinstance(new, str):
            old = getattr(item, "old_text", None) or ""
            lines.append(f"--- {path}\n+++ {path}")
            lines.extend(f"-{line}" for line in old.splitlines())
            lines.extend(f"+{line}" for line in new.splitlines())
            continue
        inner = getattr(item, "content", None)
        text = getattr(inner, "text", None)
        if isinstance(text, str) and text and text.strip() != about and not command:
            lines.append(text)
    # Where a command runs (OpenCode reports its folder as the call's location) is no news.
    here = raw_input.get("cwd") if isinstance(raw_input, Mapping) else None
    for location in locations or ():
        path = getattr(location, "path", None)
        if isinstance(path, str) and path != here and all(path not in line for line in lines):
            lines.append(path)
    if not lines and isinstance(raw_input, Mapping):
        path = raw_input.get("filePath") or raw_input.get("file_path") or raw_input.get("path")
        if isinstance(path, str) and path:
            lines.append(path)
    if not lines and raw_input:
        lines.append(
            json.dumps(raw_input, default=str) if isinstance(raw_input, Mapping) else str(raw_input)
        )
    detail = "\n".join(lines)
    if len(detail) > DETAIL_LIMIT:
        detail = detail[:DETAIL_LIMIT] + f"\n[cut: {len(detail):,} characters in all]"
    return detail


def tool_state(status: str | None, *, stopped: bool) -> Ending:
    """A tool call's ACP status as a Conch tool line's state."""
    if status == "completed":
        return "ran"
    if status == "failed":
        return "failed"
    return "skipped" if stopped else "ran"
