"""Which coding agent a command starts, however it is launched, and whether what it says it is
agrees (coding/launch.py), table-tested with no process."""

from __future__ import annotations

import pytest
from acp import schema

from conch_jupyter.coding.launch import (
    agrees,
    disowned_words,
    launched,
    read_turn_disowned,
    said_info,
    said_status,
)
from conch_jupyter.coding.rules import asking_setup

CLAUDE_TODAY = "@agentclientprotocol/claude-agent-acp"


@pytest.mark.parametrize(
    ("command", "args", "agent", "own_args"),
    [
        ("claude-agent-acp", [], "Claude Code", []),
        ("/usr/local/bin/claude-agent-acp", [], "Claude Code", []),
        ("C:\\Users\\u\\AppData\\npm\\claude-code-acp.cmd", [], "Claude Code", []),
        ("npx", ["-y", CLAUDE_TODAY], "Claude Code", []),  # as JetBrains and marimo start it
        ("npx", ["--yes", f"{CLAUDE_TODAY}@0.101.0"], "Claude Code", []),
        ("/usr/bin/npx", ["@zed-industries/claude-agent-acp@latest"], "Claude Code", []),
        ("npx", ["@zed-industries/claude-code-acp"], "Claude Code", []),
        (
            "npx",
            ["-y", "--package", "@agentclientprotocol/codex-acp@2.6.0", "codex-acp"],
            "Codex",
            [],
        ),
        (
            "npx",
            ["--package=@zed-industries/codex-acp", "codex-acp", "-c", "x=1"],
            "Codex",
            ["-c", "x=1"],
        ),
        ("npx", ["-y", "--", "@agentclientprotocol/codex-acp"], "Codex", []),
        ("bunx", [CLAUDE_TODAY], "Claude Code", []),
        ("pnpm", ["dlx", "@google/gemini-cli@0.61.0", "--acp"], "Gemini CLI", ["--acp"]),
        ("pnpx", ["opencode-ai", "acp"], "OpenCode", ["acp"]),
        ("yarn", ["dlx", "-q", "opencode-ai@latest", "acp"], "OpenCode", ["acp"]),
        ("uvx", ["--from", "some-goose", "goose", "acp"], "Goose", ["acp"]),
        ("node", [f"/opt/node_modules/{CLAUDE_TODAY}/dist/index.js"], "Claude Code", []),
        (
            "/usr/bin/node",
            ["--no-warnings", "/srv/claude-agent-acp/dist/index.js"],
            "Claude Code",
            [],
        ),
        ("node", ["/x/node_modules/@zed-industries/codex-acp/bin/codex-acp.js"], "Codex", []),
        (f"/opt/node_modules/{CLAUDE_TODAY}/dist/index.js", [], "Claude Code", []),
        ("gemini", ["--experimental-acp"], "Gemini CLI", ["--experimental-acp"]),
    ],
)
def test_an_adapter_is_known_however_it_is_launched(
    command: str, args: list[str], agent: str, own_args: list[str]
) -> None:
    launch = launched(command, args)
    assert launch is not None
    assert (launch.adapter.agent, list(launch.args)) == (agent, own_args)
    setup = asking_setup(command, args)
    assert setup is not None
    assert setup.agent == agent


@pytest.mark.parametrize(
    ("command", "args"),
    [
        ("npx", ["claude-agent-acp"]),  # a bare name npx would fetch: not the adapter's package
        ("npx", ["-y", "@someone/claude-agent-acp"]),
        ("npx", ["--package", CLAUDE_TODAY, "something-else"]),
        ("npx", ["-y"]),
        ("pnpm", ["install", CLAUDE_TODAY]),  # not `dlx`
        ("yarn", [CLAUDE_TODAY]),
        ("pnpm", ["dlx", "@google/gemini-cli"]),  # not its ACP face
        ("npx", ["opencode-ai", "run"]),
        ("node", ["/srv/my-agent/dist/index.js"]),
        ("node", []),
        ("python", ["-m", "claude_agent_acp"]),
        ("my-agent", ["--acp"]),
    ],
)
def test_a_launch_conch_does_not_know_is_unknown(command: str, args: list[str]) -> None:
    assert launched(command, args) is None
    assert asking_setup(command, args) is None


def _hello(name: str | None, version: str | None = None) -> schema.InitializeResponse:
    info = None if name is None else schema.Implementation(name=name, version=version or "1")
    return schema.InitializeResponse(protocol_version=1, agent_info=info)


@pytest.mark.parametrize(
    ("agent", "name", "agreed"),
    [
        ("Claude Code", "@agentclientprotocol/claude-agent-acp", True),  # today's (0.101)
        ("Claude Code", "@zed-industries/claude-agent-acp", True),  # last month's (0.23)
        ("Codex", "@agentclientprotocol/codex-acp", True),
        ("Codex", "codex-acp", True),
        ("Gemini CLI", "gemini-cli", True),  # what `gemini --acp` 0.61 says
        ("OpenCode", "OpenCode", True),
        ("Goose", "goose", True),
        ("Claude Code", "@agentclientprotocol/codex-acp", False),
        ("Codex", "my-agent", False),
        ("Gemini CLI", "gemini-cli-but-not", False),
        ("Mine", "mine", False),  # no adapter Conch knows
    ],
)
def test_what_an_agent_says_it_is_must_agree(agent: str, name: str, agreed: bool) -> None:
    said = said_info(_hello(name, "2.6.0"))
    assert said == {"name": name, "version": "2.6.0"}
    assert agrees(agent, said) is agreed


def test_saying_nothing_agrees_and_what_it_said_is_plain_words() -> None:
    assert said_info(_hello(None)) is None
    assert said_info(None) is None
    assert agrees("Claude Code", None)
    said = said_info(_hello("evil\n\x1b[31mname" + "x" * 300, "1.0\u202e"))
    assert said is not None
    assert "\n" not in said["name"]
    assert "\x1b" not in said["name"]
    assert len(said["name"]) <= 100
    words = disowned_words("Claude", "Claude Code", {"name": "my-agent", "version": "9"})
    assert words.startswith("Claude gets no turn in a Read chat")
    assert "“my-agent 9”" in words
    assert "Claude Code" in words


def test_the_hooks_say_what_the_card_and_the_read_chat_need() -> None:
    today = _hello("@agentclientprotocol/claude-agent-acp", "0.101.0")
    assert read_turn_disowned("Claude", "Claude Code", today) is None
    assert read_turn_disowned("Claude", None, today) is None  # no setup: no_read_turn speaks
    words = read_turn_disowned("Claude", "Codex", today)
    assert words is not None
    assert "“@agentclientprotocol/claude-agent-acp 0.101.0”" in words
    said = {"name": "@agentclientprotocol/claude-agent-acp", "version": "0.101.0"}
    assert said_status("Claude Code", today) == {"said": said, "known_as": "Claude Code"}
    assert said_status("Codex", today) == {"said": said, "known_as": None}
    assert said_status("Codex", _hello(None)) == {"said": None, "known_as": "Codex"}
