"""The rules for coding agents over ACP: which permission passes, which asks the user, which is
refused; what the agent is given to run with; what it is sent each turn. Pure (no I/O).

Theory of operation: a coding agent (Claude Code, Codex, Goose… through their ACP adapters)
does its own work, and asks the client before it does anything that matters
(`session/request_permission`, carrying the tool call: its kind, title, and the command, diff or
path). Conch answers each such question from three things:
- the **kind** of the tool call: the reading kinds (`read`, `search`, `think`) change nothing
  here and pass in every mode; a `fetch` reads too, but an address can carry the chat out, so
  it passes only while the chat was untainted before it (it taints the chat as it is announced);
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
  over MCP (`conch_tool`) passes; the tool's own rule (NotebookTools) asks, once. Only the
  server Conch offered to that very session counts, by the name unique to it
  (`offered_server`): a user's or a project's server that calls itself `conch-notebook` gets no
  pass.

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
import shlex
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

# The kinds that only read: they pass in every mode.
READING_KINDS = frozenset({"read", "search", "think"})
# A reading kind that can carry what the chat holds out (an address is a way out): it passes
# unasked only while the chat was untainted before it; once tainted, it asks (Ask, Auto) or is
# refused (Read), like a change.
OUTWARD_KINDS = frozenset({"fetch"})
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

# Claude Code's tools that change something, and its fetch (an address is a way out once the
# chat is tainted): each is an `ask` rule, which its CLI checks before the mode and before the
# user's own `allow` rules. Conch answers a fetch's question itself while the chat is untainted.
CLAUDE_ASK = ("Bash", "Edit", "MultiEdit", "Write", "NotebookEdit", "KillShell", "WebFetch")
# OpenCode's permissions that change something, and its fetch, each set to "ask" (checked
# before its defaults).
OPENCODE_ASK = ("edit", "bash", "external_directory", "webfetch")
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

_NOTEBOOK_TOOL_NAMES = frozenset(t.name for t in NOTEBOOK_TOOLS)
# The name Conch offers its server under in one session: `conch-notebook-` and a random part.
_OFFERED = re.compile(re.escape(SERVER_NAME) + r"-[0-9a-f]{12}")


def offered_server(random_part: str) -> str:
    """The name Conch offers its notebook server under to one session (`random_part`: 12 hex
    digits, new for each opening): a server of the user's or a project's cannot take it
    beforehand, so only the server Conch offered that session is known as Conch's."""
    name = f"{SERVER_NAME}-{random_part}"
    if not _OFFERED.fullmatch(name):
        raise ValueError("the random part is 12 hex digits")
    return name


def conch_tool(
    title: str,
    meta_tool: str | None = None,
    raw_input: Any = None,
    kind: str | None = None,
    *,
    server: str | None,
) -> str | None:
    """The notebook tool Conch offers over MCP that this tool call is, if it is one: Claude
    names it `mcp__<server>__<tool>` in its own field (kind `other`), Codex puts the server
    and tool in its input or shows `<server>.<tool>` (no kind). `server` is the name Conch
    offered its server under to this very session (`offered_server`; None: none was offered,
    so no call is Conch's): a server of the user's or a project's that calls itself
    `conch-notebook` is not Conch's.

    Such a call passes the agent's question (the tool judges it when it reaches Conch), so only
    the agent's own naming counts, never words a model can choose: a call of any other kind (a
    command, an edit) is never one; where the agent names the tool or gives its server and tool,
    that alone decides; a title decides only as a whole (Claude's title for a command is the
    command, which could hold the tool's name). Codex 2.6 reports an MCP call as kind `execute`
    with its server and tool as the input (no command): that, and only that, counts too."""
    if server is None or not _OFFERED.fullmatch(server):
        return None
    if kind not in (None, "other") and not _mcp_input(kind, raw_input):
        return None
    if meta_tool is not None:
        named: str = meta_tool
    elif isinstance(raw_input, Mapping) and ("server" in raw_input or "tool" in raw_input):
        given, tool = raw_input.get("server"), raw_input.get("tool")
        if given != server or not isinstance(tool, str):
            return None
        named = f"{server}.{tool}"
    else:
        named = title.strip()
    pattern = r"(?:Tool:\s*)?(?:mcp__)?" + re.escape(server) + r"(?:__|[./:])\s*([a-z_]+)"
    found = re.fullmatch(pattern, named)
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
# list under `untrusted`: `git status`, `pwd`…, reported as kind `execute`). The watch's "only
# reads" is an allowlist of forms, program and arguments both: a form Conch does not know to be
# reading is a change. Any redirection, pipe, chaining or substitution makes any command a
# possible change; so does a program named by a path outside the system's folders (`./rg`).
#
# Programs none of whose options writes a file or runs a program: every form of them reads.
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
        "nl",
        "stat",
        "which",
        "whoami",
        "true",
        "false",
        "du",
        "df",
    }
)
READING_GIT = frozenset({"status", "log", "diff", "show"})
_SHELL_SIGNS = re.compile(r"[;&|<>`$\n\\]")
# Unquoted, these make the shell write words of its own (file names, brace lists), which can be
# options: `rg foo *` in a folder holding a file named `--pre=x.sh`.
_EXPANDING = frozenset("*?[]{}")
_SYSTEM_FOLDERS = frozenset({"/bin", "/usr/bin", "/usr/local/bin", "/opt/homebrew/bin"})


@dataclass(frozen=True)
class ReadingForm:
    """The options a reading program may be given and still only read: single letters (`-abc`
    clusters them), letters whose value follows (the rest of the word, or the next word), and
    long options (`--name` or `--name=value`). Any other option makes the form a change."""

    letters: frozenset[str] = frozenset()
    valued: frozenset[str] = frozenset()
    long: frozenset[str] = frozenset()


def _names(words: str) -> frozenset[str]:
    return frozenset(words.split())


def _form(letters: str, valued: str, long: str) -> ReadingForm:
    return ReadingForm(frozenset(letters), frozenset(valued), _names(long))


READING_FORMS: dict[str, ReadingForm] = {
    # Not `--pre`/`--pre-glob` (a program run for each file), `-z`/`--search-zip` (decompressors
    # it runs), `--hostname-bin` (a program it runs).
    "rg": _form(
        "cFHhiIlLnNopPqsSuUvVwx0ab.",
        "ABCeEfgjMmrtTd",
        "after-context before-context context count count-matches regexp encoding file"
        " fixed-strings glob iglob glob-case-insensitive with-filename no-filename ignore-case"
        " smart-case case-sensitive threads files-with-matches files-without-match follow"
        " no-follow max-columns max-columns-preview max-count line-number no-line-number"
        " only-matching pretty pcre2 no-pcre2-unicode engine quiet replace type type-not"
        " type-list type-add type-clear unrestricted multiline multiline-dotall invert-match"
        " version word-regexp line-regexp null null-data text no-text byte-offset max-depth"
        " hidden no-hidden no-ignore no-ignore-vcs no-ignore-dot no-ignore-global"
        " no-ignore-parent no-ignore-files no-ignore-exclude no-require-git ignore-file"
        " ignore-file-case-insensitive files json vimgrep heading no-heading color colors column"
        " no-column trim stats sort sortr sort-files max-filesize no-messages debug trace"
        " passthru binary no-binary crlf one-file-system include-zero context-separator"
        " field-context-separator field-match-separator path-separator line-buffered"
        " block-buffered mmap no-mmap no-config help unicode no-unicode",
    ),
    # Not `-o`/`--output` (a file it writes), `--compress-program` (a program it runs),
    # `-T`/`--temporary-directory`.
    "sort": _form(
        "bdfghiMnRrsuVcCzm",
        "ktS",
        "reverse numeric-sort unique key field-separator ignore-case human-numeric-sort"
        " version-sort general-numeric-sort month-sort random-sort stable check"
        " ignore-leading-blanks dictionary-order ignore-nonprinting zero-terminated merge"
        " buffer-size parallel sort debug",
    ),
    # Not `-C`/`--compile` (a file it writes), `-z`/`-Z` (decompressors it runs), `-p`.
    "file": _form(
        "biLhkNnrE0",
        "F",
        "brief mime mime-type mime-encoding dereference no-dereference keep-going no-pad"
        " no-buffer raw extension print0 separator",
    ),
}
# `find`'s tests and reading actions (each a word of its own); those followed by a value.
# Not `-delete`, `-exec`, `-execdir`, `-ok`, `-okdir`, `-fprint`, `-fprint0`, `-fprintf`, `-fls`.
FIND_WORDS = _names(
    "-name -iname -path -ipath -wholename -iwholename -regex -iregex -regextype -type -xtype"
    " -maxdepth -mindepth -newer -anewer -cnewer -mtime -mmin -atime -amin -ctime -cmin -size"
    " -perm -user -group -uid -gid -links -inum -samefile -lname -ilname -printf -fstype -used"
    " -depth -mount -xdev -empty -nouser -nogroup -readable -writable -executable -true -false"
    " -not -a -and -o -or -print -print0 -ls -prune -quit -follow -daystart -noleaf -L -H -P"
    " ! ( ) ,"
)
_FIND_VALUED = _names(
    "-name -iname -path -ipath -wholename -iwholename -regex -iregex -regextype -type -xtype"
    " -maxdepth -mindepth -newer -anewer -cnewer -mtime -mmin -atime -amin -ctime -cmin -size"
    " -perm -user -group -uid -gid -links -inum -samefile -lname -ilname -printf -fstype"
    " -used"
)
# `git status|log|diff|show` options that only read: no `-c`, `-C`, `--output`, `--ext-diff`,
# `--textconv` (programs the repository's settings name), `--show-signature` (runs gpg), no
# option before the subcommand.
GIT_LONG = _names(
    "oneline stat shortstat numstat name-only name-status patch no-patch graph decorate"
    " no-decorate all format pretty since until after before author committer grep cached"
    " staged short branch porcelain long no-color color unified word-diff color-words"
    " no-ext-diff no-textconv max-count skip reverse follow abbrev-commit no-abbrev-commit abbrev"
    " first-parent merges no-merges summary untracked-files ignored check quiet exit-code"
    " ignore-all-space ignore-space-change ignore-blank-lines ignore-cr-at-eol histogram"
    " patience minimal relative raw date full-history topo-order date-order author-date-order"
    " left-right cherry-pick boundary ahead-behind no-ahead-behind find-renames diff-filter"
    " ignore-submodules dirstat compact-summary full-index binary no-renames text null"
    " function-context no-prefix no-index merge-base show-stash no-column"
)
_GIT_SHORT = re.compile(r"-(?:[pusbzwRam]|\d+|n\d*|U\d*|M\d*%?|[SG].+)")
_SED_SCRIPT = re.compile(r"(?:\d+|/[^/]*/)(?:,(?:\d+|/[^/]*/))?p|\d+q")
# The flags the forms above leave out, each known to write a file or run a program: the
# property tests check that no form Conch counts as reading holds one.
WRITING_FLAGS: dict[str, frozenset[str]] = {
    "rg": frozenset({"--pre", "--pre-glob", "-z", "--search-zip", "--hostname-bin"}),
    "find": frozenset(
        {"-delete", "-exec", "-execdir", "-ok", "-okdir", "-fprint", "-fprint0", "-fprintf"}
        | {"-fls"}
    ),
    "sed": frozenset({"-i", "--in-place", "-f", "--file"}),
    "sort": frozenset({"-o", "--output", "--compress-program", "-T", "--temporary-directory"}),
    "git": frozenset({"-c", "-C", "--output", "--ext-diff", "--textconv", "--show-signature"}),
    "file": frozenset({"-C", "--compile", "-z", "-Z", "--uncompress", "-p"}),
}


def _shell_words(command: str) -> tuple[list[str], bool] | None:
    """The words the shell would give the program, and whether any unquoted character makes
    the shell expand them; None when the quoting does not close."""
    quote, expanding = "", False
    for char in command:
        if quote:
            quote = "" if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char in _EXPANDING:
            expanding = True
    try:
        return shlex.split(command), expanding
    except ValueError:
        return None


def reads_only(command: str | None) -> bool:
    """Whether a command only reads (for the watch: such a command run unasked is no change):
    one of the forms above, with no redirection, pipe, chaining or substitution."""
    if not command or _SHELL_SIGNS.search(command):
        return False
    split = _shell_words(command)
    if split is None or not split[0]:
        return False
    words, expanding = split
    folder, program = os.path.split(words[0])
    if folder and folder not in _SYSTEM_FOLDERS:
        return False  # `./rg` is whatever that file is
    if program in READING_PROGRAMS:
        return True
    if expanding:
        return False  # the shell could write an option into the words
    args = words[1:]
    if program in READING_FORMS:
        return _options_read(READING_FORMS[program], args)
    if program == "find":
        return _find_reads(args)
    if program == "sed":
        return _sed_reads(args)
    if program == "git":
        return _git_reads(args)
    return False


def _options_read(form: ReadingForm, args: Sequence[str]) -> bool:
    """Whether every option in `args` is one of the form's (a value that looks like an option
    counts as one: Conch does not guess which word a program takes as a value)."""
    for word in args:
        if word == "--":
            return True  # what follows is no option
        if word.startswith("--"):
            if word[2:].split("=", 1)[0] not in form.long:
                return False
        elif word.startswith("-") and word != "-":
            for letter in word[1:]:
                if letter in form.valued:
                    break  # the rest of the word is its value
                if letter not in form.letters:
                    return False
    return True


def _find_reads(args: Sequence[str]) -> bool:
    """`find`: each test or action a reading one (a value of a test is skipped, as find skips
    it, but never one that is itself a writing action)."""
    skip = False
    for word in args:
        if word in WRITING_FLAGS["find"] or word.startswith("-fprint"):
            return False
        if skip:
            skip = False
            continue
        if word.startswith("-") and word not in FIND_WORDS:
            return False
        skip = word in _FIND_VALUED
    return True


def _sed_reads(args: Sequence[str]) -> bool:
    """`sed` only printing lines: `-n`, `-E`/`-r` or `-z`, one script of the forms `N,Mp`,
    `/re/p` or `Nq` (given as the first word or after `-e`), then files."""
    scripts: list[str] = []
    files: list[str] = []
    wanted = False
    for word in args:
        if wanted:
            scripts.append(word)
            wanted = False
        elif word in ("-n", "--quiet", "--silent", "-E", "-r", "--regexp-extended", "-z"):
            continue
        elif word in ("-e", "--expression"):
            wanted = True
        elif word.startswith("-") and word != "-":
            return False
        elif not scripts:
            scripts.append(word)
        else:
            files.append(word)
    return not wanted and len(scripts) == 1 and bool(_SED_SCRIPT.fullmatch(scripts[0]))


def _git_reads(args: Sequence[str]) -> bool:
    """`git status|log|diff|show`, no option before the subcommand, each option one that only
    reads."""
    if not args or args[0] not in READING_GIT:
        return False
    for word in args[1:]:
        if word == "--":
            return True
        if word.startswith("--"):
            if word[2:].split("=", 1)[0] not in GIT_LONG:
                return False
        elif word.startswith("-") and not _GIT_SHORT.fullmatch(word):
            return False
    return True


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
    change, whatever kind it came as. A `fetch` (`tainted`: the taint from before it) is one
    only in a tainted chat."""
    if asked or kind in READING_KINDS or status != "completed" or reads_only(command):
        return False
    if kind in OUTWARD_KINDS:
        return tainted
    return mode != "auto" or tainted


def taint_judged(kind: str | None, before: bool | None, now: bool) -> bool:
    """The taint a call is judged by: for a `fetch`, the chat's taint from before that call (a
    fetch taints the chat as it is announced: judged by the taint after, every fetch would
    ask); unknown (None) counts as tainted. Every other kind: the taint now."""
    if kind in OUTWARD_KINDS:
        return before is not False
    return now


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
    """What Conch answers to one `session/request_permission` of this kind. For a `fetch`,
    `tainted` is the chat's taint from before that call (`taint_judged`)."""
    if kind in READING_KINDS or (kind in OUTWARD_KINDS and not tainted):
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
