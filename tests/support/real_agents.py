"""The real ACP adapters (Claude Code's, Codex's, Gemini CLI, OpenCode), installed from npm and
pointed at a scripted model server on loopback: what the `adapters` tests and the ACP benchmarks
run.

Owns three things:
- `ensure_adapters()`: `npm ci` in tests/support/acp_adapters/ (its package.json and lock file
  pin each adapter) when its node_modules is missing or from another lock file (support/npm.py).
  The registry this lock file was made against served opencode-ai's native packages for
  linux-x64 only: the entries of its other platforms' optional packages (never installed on
  linux-x64) carry their version, os, cpu and libc without an integrity hash; `npm ci` needs an
  entry for each. Make the lock file anew where the registry serves them all.
- `provider(name, models, home, release=...)`: the `{"kind": "acp", ...}` provider a user would
  add for that adapter, today's release or last month's pin (`RELEASES`: Claude Code's and
  Codex's moved to the `@agentclientprotocol` scope and changed under the same commands; Gemini
  CLI's and OpenCode's are one release today), with what it needs to run offline here
  (FIELD.md's quirks): its model server on loopback, its own home in `home` (never the
  machine's settings), `IS_SANDBOX=1` for Claude Code run as root.
- `Script`: a model that asks for one tool call (a shell command, a file write) and, once the
  tool's result is in the request, answers in words; in each adapter's own tool names. A side
  request that wants JSON by a schema (Gemini's router) gets the schema's smallest value.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from .npm import npm_ci
from .scripted_models import Reply, ScriptedModels

ADAPTERS = Path(__file__).resolve().parent / "acp_adapters"
BIN = ADAPTERS / "node_modules" / ".bin"
COMMANDS = {
    "claude": "claude-agent-acp",
    "codex": "codex-acp",
    "gemini": "gemini",
    "opencode": "opencode",
}
# Each adapter's npm package by release: what npm serves today, and last month's pin. Both
# install side by side from the one lock file; their programs share a name, so each release is
# run through a link of that name to its own package's program (what `npm install -g` makes).
RELEASES: dict[str, dict[str, str]] = {
    "claude": {
        "today": "@agentclientprotocol/claude-agent-acp",
        "pinned": "@zed-industries/claude-agent-acp",
    },
    "codex": {"today": "@agentclientprotocol/codex-acp", "pinned": "@zed-industries/codex-acp"},
    "gemini": {"today": "@google/gemini-cli"},
    "opencode": {"today": "opencode-ai"},
}
# The model each release's Codex knows (another name streams a warning as text).
CODEX_MODELS = {"today": "gpt-5.5", "pinned": "gpt-5.4"}
# A shell command (`touch made.txt`) in each adapter's own tool, as its model asks for it.
RUN: dict[str, tuple[str, dict[str, Any]]] = {
    "claude": ("Bash", {"command": "touch made.txt", "description": "Make a file"}),
    "codex": ("exec_command", {"cmd": "touch made.txt"}),
    "opencode": ("bash", {"command": "touch made.txt", "description": "Make a file"}),
    "gemini": ("run_shell_command", {"command": "touch made.txt", "description": "Make a file"}),
}
# Today's Codex (2.6) runs a command in its sandbox, read-only in the mode Conch moves it to: a
# model that means to change something asks to leave it, with its reasons, as the real one does.
RUN_TODAY = {
    "codex": (
        "exec_command",
        {
            "cmd": "touch made.txt",
            "sandbox_permissions": "require_escalated",
            "justification": "Make a file",
        },
    )
}


def run_call(name: str, release: str = "today") -> tuple[str, dict[str, Any]]:
    """The shell command `touch made.txt` as this adapter's model asks for it."""
    return RUN_TODAY.get(name, RUN[name]) if release == "today" else RUN[name]


def ensure_adapters() -> Path:
    """The adapters' bin folder, installed from the lock file when missing (`npm ci`)."""
    problem = npm_ci(ADAPTERS, *COMMANDS.values())
    if problem is not None:
        pytest.fail(f"the real ACP adapters need Node 20+ and npm (CI has them): {problem}")
    return BIN


def package_of(name: str, release: str = "today") -> str:
    """The npm package of this adapter's release."""
    releases = RELEASES[name]
    return releases.get(release, releases["today"])


def version_of(name: str, release: str = "today") -> str:
    """The version of this adapter's release the lock file installed."""
    ensure_adapters()
    found = json.loads(
        (ADAPTERS / "node_modules" / package_of(name, release) / "package.json").read_text()
    )
    return str(found["version"])


def command(name: str, release: str = "today") -> str:
    """The adapter's program of this release, as its own name (a link to its package's)."""
    ensure_adapters()
    program = COMMANDS[name]
    if len(RELEASES[name]) == 1:
        return str(BIN / program)
    package = ADAPTERS / "node_modules" / package_of(name, release)
    bins = json.loads((package / "package.json").read_text())["bin"]
    target = package / (bins[program] if isinstance(bins, dict) else bins)
    link = ADAPTERS / "node_modules" / ".conch-releases" / package.name / program
    link.parent.mkdir(parents=True, exist_ok=True)
    if not link.is_symlink() or link.resolve() != target.resolve():
        link.unlink(missing_ok=True)
        link.symlink_to(target)
    return str(link)


def provider(
    name: str, models: ScriptedModels, home: Path, *, release: str = "today", **extra: Any
) -> dict[str, Any]:
    """The provider a user adds for this adapter's `release`, pointed at `models`, living in
    `home`."""
    home.mkdir(parents=True, exist_ok=True)
    quiet = {
        "HOME": str(home),
        "XDG_CONFIG_HOME": str(home / ".config"),
        "XDG_DATA_HOME": str(home / ".local" / "share"),
        "XDG_CACHE_HOME": str(home / ".cache"),
        "XDG_STATE_HOME": str(home / ".local" / "state"),
        "TMPDIR": str(home / "tmp"),
    }
    (home / "tmp").mkdir(exist_ok=True)
    if name == "claude":
        env = {
            **quiet,
            "ANTHROPIC_BASE_URL": models.anthropic_url,
            "ANTHROPIC_API_KEY": "sk-ant-scripted",
            "CLAUDE_CONFIG_DIR": str(home / ".claude"),
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
            "DISABLE_AUTOUPDATER": "1",
            # This kind of machine exports IS_SANDBOX=yes and runs as root: the adapter then asks
            # for a flag the CLI refuses as root unless IS_SANDBOX=1 (FIELD.md).
            "IS_SANDBOX": "1",
        }
        body = {"command": command("claude", release), "args": [], "env": env}
    elif name == "codex":
        codex_home = home / "codex"
        codex_home.mkdir(exist_ok=True)
        (codex_home / "config.toml").write_text(
            f'model = "{CODEX_MODELS[release]}"\n'
            'model_provider = "scripted"\n'
            "[model_providers.scripted]\n"
            'name = "scripted"\n'
            f'base_url = "{models.openai_url}"\n'
            'env_key = "SCRIPTED_API_KEY"\n'
            'wire_api = "responses"\n'
        )
        env = {**quiet, "CODEX_HOME": str(codex_home), "SCRIPTED_API_KEY": "sk-scripted"}
        # Its own sandbox needs bubblewrap and namespaces this machine may not give; the user's
        # choice of sandbox is theirs (Conch sets only when it asks).
        args = ["-c", 'sandbox_mode="danger-full-access"']
        body = {"command": command("codex", release), "args": args, "env": env}
    elif name == "opencode":
        config = home / "opencode.json"
        config.write_text(
            json.dumps(
                {
                    "$schema": "https://opencode.ai/config.json",
                    "model": "scripted/m1",
                    "provider": {
                        "scripted": {
                            "npm": "@ai-sdk/openai-compatible",
                            "name": "Scripted",
                            "options": {"baseURL": models.openai_url, "apiKey": "sk-scripted"},
                            "models": {"m1": {"name": "m1", "tool_call": True}},
                        }
                    },
                    "autoupdate": False,
                    "share": "disabled",
                }
            )
        )
        env = {
            **quiet,
            "OPENCODE_CONFIG": str(config),
            "OPENCODE_DISABLE_MODELS_FETCH": "1",
            "OPENCODE_DISABLE_AUTOUPDATE": "1",
        }
        body = {"command": command("opencode"), "args": ["acp"], "env": env}
    elif name == "gemini":
        env = {
            **quiet,
            "GEMINI_API_KEY": "scripted-key",
            "GOOGLE_GEMINI_BASE_URL": models.root_url,
            "GEMINI_CLI_TRUST_WORKSPACE": "true",  # MCP servers only in a trusted folder
        }
        body = {"command": command("gemini"), "args": ["--acp"], "env": env}
    else:
        raise ValueError(f"no adapter called {name!r}")
    body["env"] = {**body["env"], **extra.pop("env", {})}
    return {"kind": "acp", **body, **extra}


# --- what the scripted model says ---


def tool_names(body: Any) -> set[str]:
    names: set[str] = set()
    for tool in (body or {}).get("tools") or []:
        if not isinstance(tool, dict):
            continue
        name = tool.get("name") or (tool.get("function") or {}).get("name")
        if isinstance(name, str):
            names.add(name)
        for declared in tool.get("functionDeclarations") or []:  # Gemini's
            names.add(str(declared.get("name")))
        if tool.get("type") == "namespace":  # Codex offers an MCP server's tools in one
            names.update(f"{name}/{inner.get('name')}" for inner in tool.get("tools") or [])
    return names | found_by_search(body)


# --- deferred tools: today's adapters hide MCP tools behind their own tool search ---

# Claude Code 0.101 offers `ToolSearch` (and a `DeferredToolPlaceholder`), naming the deferred
# tools in its reminders; Codex 2.6 offers a `tool_search` tool that it runs itself.
CLAUDE_SEARCH = "ToolSearch"


def searches_tools(body: Any) -> str | None:
    """The tool search a request offers ("claude": `ToolSearch`, "codex": a `tool_search`
    tool), if any."""
    for tool in (body or {}).get("tools") or [] if isinstance(body, dict) else []:
        if isinstance(tool, dict) and tool.get("name") == CLAUDE_SEARCH:
            return "claude"
        if isinstance(tool, dict) and tool.get("type") == "tool_search":
            return "codex"
    return None


def found_by_search(body: Any) -> set[str]:
    """The tools an earlier search brought in: Codex's `tool_search_output` items (their
    tools, namespaces included), Claude's `tool_reference` blocks in a tool's result."""
    names: set[str] = set()
    if not isinstance(body, dict):
        return names
    for item in body.get("input") if isinstance(body.get("input"), list) else []:
        if isinstance(item, dict) and item.get("type") == "tool_search_output":
            names |= tool_names({"tools": item.get("tools") or []})
    for message in body.get("messages") or []:
        content = message.get("content") if isinstance(message, dict) else None
        for block in content if isinstance(content, list) else []:
            inner = block.get("content") if isinstance(block, dict) else None
            for part in inner if isinstance(inner, list) else []:
                if isinstance(part, dict) and part.get("type") == "tool_reference":
                    names.add(str(part.get("tool_name")))
    return names


def _last_is_search(body: Any) -> bool:
    """Whether the request ends with a tool search's result (then the model calls what it
    found, as a real model does)."""
    if not isinstance(body, dict):
        return False
    items = body.get("input")
    if isinstance(items, list) and items:
        return isinstance(items[-1], dict) and items[-1].get("type") == "tool_search_output"
    messages = body.get("messages") or []
    last = messages[-1].get("content") if messages and isinstance(messages[-1], dict) else None
    results = [
        c.get("tool_use_id")
        for c in (last if isinstance(last, list) else [])
        if isinstance(c, dict) and c.get("type") == "tool_result"
    ]
    # Claude Code keeps one assistant message for the turn's calls: the newest result counts.
    answered = results[-1:] if results else []
    return any(
        isinstance(c, dict) and c.get("id") in answered and c.get("name") == CLAUDE_SEARCH
        for m in messages[:-1]
        if isinstance(m, dict) and isinstance(m.get("content"), list)
        for c in m["content"]
    )


def search_for(body: Any, tool: str) -> Reply | None:
    """The call a model makes to find a deferred tool by its name: Claude's `ToolSearch` by
    the whole name its reminder gives (`select:mcp__server__tool`), Codex's `tool_search` by
    words."""
    kind = searches_tools(body)
    if kind == "claude":
        named = re.search(r"mcp__[A-Za-z0-9_-]+?__" + re.escape(tool) + r"\b", json.dumps(body))
        query = f"select:{named.group(0)}" if named else tool
        return Reply(text="", tool_calls=((CLAUDE_SEARCH, {"query": query, "max_results": 5}),))
    if kind == "codex":
        return Reply(text="", tool_search={"query": tool.replace("_", " "), "limit": 8})
    return None


def _last_is_tool_result(body: Any) -> bool:
    """Whether the request ends with a tool's result (the model's turn after a call)."""
    if not isinstance(body, dict):
        return False
    if isinstance(body.get("input"), list) and body["input"]:  # Responses
        return str(body["input"][-1].get("type", "")).endswith("_output")
    if isinstance(body.get("contents"), list) and body["contents"]:  # Gemini
        parts = body["contents"][-1].get("parts") or []
        return any(isinstance(p, dict) and "functionResponse" in p for p in parts)
    messages = body.get("messages") or []
    if not messages:
        return False
    last = messages[-1]
    if last.get("role") == "tool":  # Chat Completions
        return True
    content = last.get("content")
    return isinstance(content, list) and any(
        isinstance(c, dict) and c.get("type") == "tool_result" for c in content
    )


@dataclass
class Script:
    """The model behind a real adapter: when the newest user words hold `marker`, it asks for
    `call` (a tool name among those the request offers, and its arguments); once that tool's
    result is in, it answers `after`. Every other request (titles, summaries…) gets `text`."""

    calls: dict[str, tuple[str, dict[str, Any]]] = field(default_factory=dict)
    after: str = "Done."
    text: str = "Hello from the model."
    seen: list[Any] = field(default_factory=list)
    searched: list[str] = field(default_factory=list)  # the tools it had to search for

    def __call__(self, body: Any) -> Reply:
        self.seen.append(body)
        asked_json = _json_schema(body)
        if asked_json is not None:  # a side question that wants JSON (Gemini's router)
            return Reply(text=json.dumps(_json_for(asked_json)))
        names = tool_names(body)
        searched = _last_is_search(body)
        if _last_is_tool_result(body) and not searched:
            return Reply(text=self.after)
        wording = newest_user_text(body)
        for marker, (tool, arguments) in self.calls.items():
            # An MCP tool goes by each agent's own name for it (Claude's `mcp__server__tool`,
            # Codex's `namespace/tool`): the one offered that ends with the tool's name.
            offered = [
                n for n in sorted(names) if n == tool or n.endswith((f"__{tool}", f"/{tool}"))
            ]
            # After its search, the newest user words are the search's result.
            wanted = marker in wording or (searched and tool in self.searched)
            if wanted and offered:
                ids = (f"toolu_found_{len(self.seen)}",) if searched else ()
                return Reply(text="", tool_calls=((offered[0], arguments),), tool_ids=ids)
            # Not offered: a model whose agent defers tools searches for it, once.
            search = None if searched else search_for(body, tool)
            if marker in wording and search is not None:
                self.searched.append(tool)
                return search
        for marker in self.calls:
            if marker in wording and names:
                return Reply(text=f"({marker}: no tool of that name offered: {sorted(names)})")
        return Reply(text=self.text)


def _json_schema(body: Any) -> dict[str, Any] | None:
    """The JSON schema a request wants its answer in (Gemini's `responseJsonSchema`), if any."""
    if not isinstance(body, dict):
        return None
    config = body.get("generationConfig") or {}
    if config.get("responseMimeType") != "application/json":
        return None
    schema = config.get("responseJsonSchema") or config.get("responseSchema") or {}
    return schema if isinstance(schema, dict) else {}


def _json_for(schema: dict[str, Any]) -> Any:
    """A smallest value of the schema: each required property, strings, 1s and falses."""
    kind = str(schema.get("type", "object")).lower()
    if kind == "object":
        properties = schema.get("properties") or {}
        wanted = schema.get("required") or list(properties)
        return {k: _json_for(properties.get(k) or {}) for k in wanted}
    if kind == "array":
        return []
    if kind in ("integer", "number"):
        return 1
    if kind == "boolean":
        return False
    enum = schema.get("enum")
    return enum[0] if enum else "scripted"


def newest_user_text(body: Any) -> str:
    if not isinstance(body, dict):
        return ""
    items = body.get("input") if isinstance(body.get("input"), list) else body.get("messages")
    if items is None:
        items = body.get("contents")  # Gemini's
    for item in reversed(items or []):
        if not isinstance(item, dict) or item.get("role") != "user":
            continue
        return json.dumps(item.get("content", item.get("parts")))
    return ""
