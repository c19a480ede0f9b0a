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
- `provider(name, models, home)`: the `{"kind": "acp", ...}` provider a user would add for that
  adapter, with what it needs to run offline here (FIELD.md's quirks): its model server on
  loopback, its own home in `home` (never the machine's settings), `IS_SANDBOX=1` for Claude Code
  run as root.
- `Script`: a model that asks for one tool call (a shell command, a file write) and, once the
  tool's result is in the request, answers in words; in each adapter's own tool names. A side
  request that wants JSON by a schema (Gemini's router) gets the schema's smallest value.
"""

from __future__ import annotations

import json
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
# A shell command (`touch made.txt`) in each adapter's own tool, as its model asks for it.
RUN: dict[str, tuple[str, dict[str, Any]]] = {
    "claude": ("Bash", {"command": "touch made.txt", "description": "Make a file"}),
    "codex": ("exec_command", {"cmd": "touch made.txt"}),
    "opencode": ("bash", {"command": "touch made.txt", "description": "Make a file"}),
    "gemini": ("run_shell_command", {"command": "touch made.txt", "description": "Make a file"}),
}


def ensure_adapters() -> Path:
    """The adapters' bin folder, installed from the lock file when missing (`npm ci`)."""
    problem = npm_ci(ADAPTERS, *COMMANDS.values())
    if problem is not None:
        pytest.fail(f"the real ACP adapters need Node 20+ and npm (CI has them): {problem}")
    return BIN


def command(name: str) -> str:
    return str(ensure_adapters() / COMMANDS[name])


def provider(name: str, models: ScriptedModels, home: Path, **extra: Any) -> dict[str, Any]:
    """The provider a user adds for this adapter, pointed at `models`, living in `home`."""
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
        body = {"command": command("claude"), "args": [], "env": env}
    elif name == "codex":
        codex_home = home / "codex"
        codex_home.mkdir(exist_ok=True)
        (codex_home / "config.toml").write_text(
            'model = "gpt-5.4"\n'
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
        body = {"command": command("codex"), "args": args, "env": env}
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
    return names


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

    def __call__(self, body: Any) -> Reply:
        self.seen.append(body)
        asked_json = _json_schema(body)
        if asked_json is not None:  # a side question that wants JSON (Gemini's router)
            return Reply(text=json.dumps(_json_for(asked_json)))
        names = tool_names(body)
        if _last_is_tool_result(body):
            return Reply(text=self.after)
        wording = newest_user_text(body)
        for marker, (tool, arguments) in self.calls.items():
            # An MCP tool goes by each agent's own name for it (Claude's `mcp__server__tool`,
            # Codex's `namespace/tool`): the one offered that ends with the tool's name.
            offered = [
                n for n in sorted(names) if n == tool or n.endswith((f"__{tool}", f"/{tool}"))
            ]
            if marker in wording and offered:
                return Reply(text="", tool_calls=((offered[0], arguments),))
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
