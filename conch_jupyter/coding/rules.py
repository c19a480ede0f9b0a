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

`command_refusal` is the one place that says whether a command may be run at all (the
administrator's policy hooks in there).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from ..notebook.rules import Ending
from ..store.rows import Mode

Permission = Literal["allow", "ask", "refuse"]

READING_KINDS = frozenset({"read", "search", "think", "fetch"})
# Stop's grace: a prompt that has not ended this long after `session/cancel` ends with its process.
CANCEL_GRACE_SECONDS = 2.0
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
        "Claude Code", "claude-code-acp", (), "Anthropic's coding agent (@zed-industries adapter)"
    ),
    KnownAgent("Codex", "codex-acp", (), "OpenAI's coding agent (@zed-industries adapter)"),
    KnownAgent("Gemini CLI", "gemini", ("--experimental-acp",), "Google's coding agent"),
    KnownAgent("Goose", "goose", ("acp",), "Block's open-source agent"),
    KnownAgent("OpenCode", "opencode", ("acp",), "the open-source coding agent"),
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


def detail_of(raw_input: Any, content: Any, locations: Any) -> str:
    """What a permission question shows in full: the command, the diff, or the path."""
    lines: list[str] = []
    if isinstance(raw_input, Mapping):
        command = raw_input.get("command") or raw_input.get("cmd")
        if isinstance(command, list):
            command = " ".join(str(c) for c in command)
        if isinstance(command, str) and command:
            lines.append(f"$ {command}")
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
        if isinstance(text, str) and text:
            lines.append(text)
    for location in locations or ():
        path = getattr(location, "path", None)
        if isinstance(path, str) and all(path not in line for line in lines):
            lines.append(path)
    if not lines and raw_input is not None:
        lines.append(str(raw_input))
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
