"""Which coding agent a command starts, however it is launched, and whether the agent agrees
when it names itself. Pure (no I/O).

People start an ACP adapter in many ways: its program name or a path to it, a package runner
naming its package (`npx -y @agentclientprotocol/claude-agent-acp`, as JetBrains and marimo do;
`bunx`, `pnpm dlx`, `yarn dlx`, `uvx`), or Node running its script. `launched` knows each one as
the adapter (`ADAPTERS`: today's package names and the older ones), so that its asking setup
(rules.py) reaches it. Since ACP's `initialize` answer may carry `agentInfo {name, version}`,
an agent that names itself another than the one its command was taken for is unknown
(`read_turn_disowned`: no Read turn, said in words), and its card shows what it said
(`said_status`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..core.text import clean_text


def program_of(command: str) -> str:
    """A command's program name: the last part of its path (a Windows path's too), without
    `.cmd`."""
    name = re.split(r"[\\/]", command.strip())[-1]
    return name[:-4] if name.lower().endswith(".cmd") else name


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
    program = program_of(command)
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


def read_turn_disowned(name: str, agent: str | None, hello: Any) -> str | None:
    """Words when an agent Conch took for a known one (`agent`, in words: its asking setup's)
    says in `initialize` (`agentInfo`) that it is another: it is unknown, so it gets no Read
    turn. None when it agrees, said nothing, or Conch knew no setup for it anyway (then
    `no_read_turn` has spoken)."""
    said = said_info(hello)
    if agent is None or said is None or agrees(agent, said):
        return None
    return disowned_words(name, agent, said)


def said_status(agent: str | None, hello: Any) -> dict[str, Any]:
    """What the agent's card shows of what it said it is: `said` ({name, title, version}, as
    it gave them) and `known_as` (the agent Conch took its command for, None when unknown or
    when what it said disagrees)."""
    said = said_info(hello)
    return {"said": said, "known_as": agent if agent is not None and agrees(agent, said) else None}
