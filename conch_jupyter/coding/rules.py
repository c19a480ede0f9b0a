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
administrator's policy hooks in there).
"""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from ..core.text import clean_text
from ..notebook.rules import NOTEBOOK_TOOLS, Ending
from ..store.rows import Mode

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


# --- known however launched ---


@dataclass(frozen=True)
class Adapter:
    """One coding agent as it is installed: the programs it goes by, the packages that hold it
    (today's name first, older names after), the arguments that make it speak ACP (one of them
    must be given; none needed when empty) and the names it gives in `initialize`'s `agentInfo`
    besides those."""

    agent: str  # in words: "Claude Code"
    programs: tuple[str, ...]
    packages: tuple[str, ...] = ()
    acp_args: tuple[str, ...] = ()
    names: tuple[str, ...] = ()


ADAPTERS: tuple[Adapter, ...] = (
    Adapter(
        "Claude Code",
        ("claude-agent-acp", "claude-code-acp"),
        (
            "@agentclientprotocol/claude-agent-acp",
            "@zed-industries/claude-agent-acp",
            "@zed-industries/claude-code-acp",
        ),
    ),
    Adapter(
        "Codex", ("codex-acp",), ("@agentclientprotocol/codex-acp", "@zed-industries/codex-acp")
    ),
    Adapter("Gemini CLI", ("gemini",), ("@google/gemini-cli",), ("--acp", "--experimental-acp")),
    Adapter("OpenCode", ("opencode",), ("opencode-ai",), ("acp",)),
    Adapter("Goose", ("goose",), (), ("acp",)),
)

# Package runners: each runs a package's program from the registry, the runner's own options
# first (those listed take a value), then the package (`npx --package X cmd`: the command).
_RUNNERS: dict[str, tuple[tuple[str, ...], frozenset[str]]] = {
    # program: (words that must come first, options that take a value)
    "npx": ((), frozenset({"-p", "--package", "--registry", "--cache", "-w", "--workspace"})),
    "bunx": ((), frozenset({"-p", "--package", "--registry", "--cwd"})),
    "pnpx": ((), frozenset({"--package", "-C", "--dir"})),
    "pnpm": (("dlx",), frozenset({"--package", "-C", "--dir"})),
    "yarn": (("dlx",), frozenset({"-p", "--package", "--cwd"})),
    "uvx": ((), frozenset({"--from", "--with", "--python", "-p", "--index", "--index-url"})),
    "uv": (("tool", "run"), frozenset({"--from", "--with", "--python", "-p", "--index"})),
}
_NODES = frozenset({"node", "nodejs", "bun"})
_VERSION = re.compile(r"^(@?[^@=<>~\s]+?)(?:@[^@/]+|[=<>~]=?.+)?$")


@dataclass(frozen=True)
class Launch:
    """What a command starts: the adapter, and the arguments it is given (the runner's own
    taken off)."""

    adapter: Adapter
    args: tuple[str, ...]


def _package_name(spec: str) -> str:
    """A package as a runner is given it, without its version (`pkg@1.2`, `@scope/pkg@latest`,
    `pkg==1.2` for uvx)."""
    found = _VERSION.match(spec.strip())
    return found.group(1) if found else spec.strip()


def _by_program(program: str) -> Adapter | None:
    return next((a for a in ADAPTERS if program in a.programs), None)


def _by_package(package: str) -> Adapter | None:
    return next((a for a in ADAPTERS if package in a.packages), None)


def _by_script(path: str) -> Adapter | None:
    """The adapter whose package folder holds this script (`…/claude-agent-acp/dist/index.js`,
    `…/node_modules/@zed-industries/codex-acp/bin/codex-acp.js`)."""
    parts = [p for p in re.split(r"[\\/]+", path) if p]
    for at in range(len(parts) - 1, 0, -1):
        if parts[at] not in ("dist", "bin", "bundle"):
            continue
        folder = parts[at - 1]
        scoped = f"{parts[at - 2]}/{folder}" if at >= 2 and parts[at - 2].startswith("@") else ""
        for adapter in ADAPTERS:
            if scoped and scoped in adapter.packages:
                return adapter
            if folder in adapter.programs or folder in (p.split("/")[-1] for p in adapter.packages):
                return adapter
    return None


def _after_runner(program: str, args: Sequence[str]) -> Launch | None:
    first, valued = _RUNNERS[program]
    words = list(args)
    if tuple(words[: len(first)]) != first:
        return None
    words = words[len(first) :]
    package = ""  # given by --package / --from: the positional word is then a command
    at = 0
    while at < len(words):
        word = words[at]
        name, _, value = word.partition("=")
        if word == "--":
            at += 1
            break
        if not word.startswith("-"):
            break
        if name in valued:
            if not value:
                at += 1
                value = words[at] if at < len(words) else ""
            if name in ("-p", "--package", "--from") and not (program == "uvx" and name == "-p"):
                package = _package_name(value)
        at += 1
    if at >= len(words):
        return None
    spec, rest = words[at], tuple(words[at + 1 :])
    if package:
        adapter = _by_package(package)
        if adapter is None and program in ("uvx", "uv"):
            adapter = _by_program(spec)  # `uvx --from <its package> <its program>`
        if adapter is None or spec not in adapter.programs:
            return None
        return Launch(adapter, rest)
    adapter = _by_package(_package_name(spec))
    if adapter is None and program in ("uvx", "uv"):
        adapter = _by_program(_package_name(spec))  # uvx runs the program its package is named
    return Launch(adapter, rest) if adapter is not None else None


def launched(command: str, args: Sequence[str] = ()) -> Launch | None:
    """The known adapter a command starts, however it is launched: its program name or a path
    to it; a package runner naming its package (`npx [-y] [--package …]`, `bunx`, `pnpm dlx`,
    `yarn dlx`, `uvx`), old and new names, with or without `@version`; `node …/dist/index.js`.
    None when it is none Conch knows (or not its ACP face: `opencode run`)."""
    program = _program(command)
    words = tuple(args)
    found: Launch | None = None
    if program in _RUNNERS:
        found = _after_runner(program, words)
    elif program in _NODES:
        script = next((w for w in words if not w.startswith("-")), None)
        adapter = _by_script(script) if script else None
        if adapter is not None and script is not None:
            found = Launch(adapter, words[words.index(script) + 1 :])
    else:
        adapter = _by_program(program) or _by_script(command)
        found = Launch(adapter, words) if adapter is not None else None
    if found is None:
        return None
    needed = found.adapter.acp_args
    return found if not needed or any(a in needed for a in found.args) else None


def _plain(name: str) -> str:
    bare = name.strip().lower().rsplit("/", 1)[-1]
    return re.sub(r"[^a-z0-9]", "", bare)


def said_info(hello: Any) -> dict[str, str] | None:
    """What an agent said it is in `initialize`'s answer (`agentInfo {name, title, version}`),
    in plain words; None when it said nothing."""
    info = getattr(hello, "agent_info", None)
    name = getattr(info, "name", None)
    if not isinstance(name, str) or not name.strip():
        return None
    said = {"name": clean_name(name)}
    for key in ("title", "version"):
        value = getattr(info, key, None)
        if isinstance(value, str) and value.strip():
            said[key] = clean_name(value)
    return said


def clean_name(text: str) -> str:
    """A name or version an agent gave, as one short line of printable words."""
    return " ".join(clean_text(text, 100).split())


def agrees(agent: str, said: Mapping[str, str] | None) -> bool:
    """Whether the name an agent gave (`said_info`) is the adapter Conch took its command for
    (`agent`, in words: "Claude Code"). Saying nothing agrees (agentInfo is optional in ACP
    v1); a name is compared without its npm scope, case or punctuation."""
    if said is None:
        return True
    adapter = next((a for a in ADAPTERS if a.agent == agent), None)
    if adapter is None:
        return False
    names = {
        _plain(n) for n in (adapter.agent, *adapter.programs, *adapter.packages, *adapter.names)
    }
    return _plain(said["name"]) in names


def disowned_words(name: str, agent: str, said: Mapping[str, str]) -> str:
    """Why an agent whose `agentInfo` is not the one its command was taken for gets no Read
    turn, naming what it said it is."""
    version = f" {said['version']}" if said.get("version") else ""
    return (
        f"{name} gets no turn in a Read chat: its command looks like {agent}, but it says it is "
        f"“{said['name']}{version}”, so the setting Conch gave it to make it ask may mean nothing "
        "to it. Switch to Ask to let it work with your yes."
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


def _program(command: str) -> str:
    name = re.split(r"[\\/]", command.strip())[-1]  # a Windows path's too
    return name[:-4] if name.lower().endswith(".cmd") else name


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


def read_turn_disowned(name: str, setup: AskingSetup | None, hello: Any) -> str | None:
    """Words when an agent Conch took for a known one says in `initialize` (`agentInfo`) that it
    is another: it is unknown, so it gets no Read turn. None when it agrees, said nothing, or
    Conch knew no setup for it anyway (then `no_read_turn` has spoken)."""
    said = said_info(hello)
    if setup is None or said is None or agrees(setup.agent, said):
        return None
    return disowned_words(name, setup.agent, said)


def said_status(setup: AskingSetup | None, hello: Any) -> dict[str, Any]:
    """What the agent's card shows of what it said it is: `said` ({name, title, version}, as
    it gave them) and `known_as` (the agent Conch took its command for, None when unknown or
    when what it said disagrees)."""
    said = said_info(hello)
    known = setup.agent if setup is not None and agrees(setup.agent, said) else None
    return {"said": said, "known_as": known}


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
