"""The rules for coding agents over ACP (coding/rules.py), table-tested with no process."""

from __future__ import annotations

import json
import sys
from typing import Any

import pytest
from acp import schema

from conch_jupyter.coding.rules import (
    KNOWN_AGENTS,
    SKIPPING_MODES,
    WITHHELD_ENV,
    AskingSetup,
    about_of,
    acted_unasked,
    asking_setup,
    child_env,
    chosen_option,
    command_of,
    command_refusal,
    conch_tool,
    detail_of,
    found_agents,
    mode_to_leave,
    no_read_turn,
    own_kind,
    permission,
    prompt_text,
    reads_only,
    tool_state,
    workdir,
)

KINDS = ("read", "edit", "delete", "move", "search", "execute", "think", "fetch", "other", None)
READING = {"read", "search", "think", "fetch"}


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("mode", ["read", "ask", "auto"])
@pytest.mark.parametrize("tainted", [False, True])
def test_every_mode_kind_and_taint(mode: Any, kind: str | None, tainted: bool) -> None:
    got = permission(mode=mode, tainted=tainted, kind=kind)
    if kind in READING:
        expected = "allow"  # reading passes in every mode
    elif mode == "read":
        expected = "refuse"
    elif mode == "auto" and not tainted:
        expected = "allow"
    else:
        expected = "ask"  # Ask always; Auto once someone else's words came in
    assert got == expected


def _options(*kinds: str) -> list[schema.PermissionOption]:
    return [schema.PermissionOption(option_id=f"id-{k}", name=k, kind=k) for k in kinds]  # type: ignore[arg-type]


def test_the_answer_is_for_this_call_only() -> None:
    every = _options("allow_always", "allow_once", "reject_always", "reject_once")
    assert chosen_option(every, allow=True) == "id-allow_once"
    assert chosen_option(every, allow=False) == "id-reject_once"
    assert chosen_option(_options("allow_always"), allow=True) == "id-allow_always"
    assert chosen_option(_options("allow_once"), allow=False) is None  # → cancelled


def test_the_agent_never_gets_the_kernel_key_or_a_token() -> None:
    base = {
        "PATH": "/bin",
        "CONCH_KERNEL_KEY": "k",
        "JUPYTER_TOKEN": "t",
        "OTHER_NAME": "the-token",
        "HOME": "/h",
    }
    env = child_env(base, {"OPENAI_API_KEY": "sk", "CONCH_KERNEL_KEY": "again"}, {"the-token"})
    assert env == {"PATH": "/bin", "HOME": "/h", "OPENAI_API_KEY": "sk"}
    assert "CONCH_KERNEL_KEY" in WITHHELD_ENV


def test_it_runs_in_the_notebooks_folder_under_the_root(tmp_path: Any) -> None:
    root = str(tmp_path)
    assert workdir(root, "a/b/nb.ipynb") == str(tmp_path / "a" / "b")
    assert workdir(root, "nb.ipynb") == root
    assert workdir(root, None) == root
    assert workdir(root, "../../etc/nb.ipynb") == root  # never above the root


def test_a_command_is_checked_in_one_place() -> None:
    assert command_refusal("claude-code-acp") is None
    assert command_refusal("  ")
    assert command_refusal("a\nb")
    assert command_refusal("goose", ["a\0"])


def test_agents_found_on_path() -> None:
    on_path = {"goose": "/usr/bin/goose", "codex-acp": "/opt/codex-acp"}
    found = found_agents(on_path.get)
    assert [(f["label"], f["command"], f["args"]) for f in found] == [
        ("Codex", "codex-acp", []),
        ("Goose", "goose", ["acp"]),
    ]
    assert len(KNOWN_AGENTS) >= 5


def test_what_a_question_shows_in_full() -> None:
    assert detail_of({"command": ["rm", "-rf", "x"]}, None, None) == "$ rm -rf x"
    diff = schema.FileEditToolCallContent(type="diff", path="a.py", old_text="1\n", new_text="2\n")
    assert detail_of(None, [diff], None) == "--- a.py\n+++ a.py\n-1\n+2"
    where = [schema.ToolCallLocation(path="data.csv")]
    assert detail_of(None, None, where) == "data.csv"
    long = detail_of({"command": "x" * 30_000}, None, None)
    assert len(long) < 21_000
    assert long.endswith("characters in all]")


def test_the_prompt_and_the_states() -> None:
    text = prompt_text("You are Coder.", [("user", "hi"), ("assistant", "done")])
    assert text == "You are Coder.\n\nhi\n\n(your earlier reply)\ndone"
    assert tool_state("completed", stopped=False) == "ran"
    assert tool_state("failed", stopped=True) == "failed"
    assert tool_state("in_progress", stopped=True) == "skipped"


# --- they ask before every change (issue 31) ---


def test_each_known_agent_is_made_to_ask_through_its_own_setting() -> None:
    claude = asking_setup("/home/u/.npm/bin/claude-agent-acp")
    assert claude is not None
    settings = json.loads(claude.meta["claudeCode"]["options"]["extraArgs"]["settings"])
    assert {"Bash", "Edit", "Write", "NotebookEdit"} <= set(settings["permissions"]["ask"])
    assert asking_setup("claude-code-acp") is not None  # the adapter's older name
    codex = asking_setup("codex-acp", ["-c", 'sandbox_mode="workspace-write"'])
    assert codex is not None
    assert codex.args == ("-c", 'approval_policy="untrusted"')
    opencode = asking_setup("opencode", ["acp"])
    assert opencode is not None
    asks = json.loads(opencode.env["OPENCODE_PERMISSION"])
    assert asks["bash"] == asks["edit"] == "ask"
    assert asking_setup("opencode", ["run"]) is None  # not its ACP face
    assert asking_setup("goose", ["acp"]) == AskingSetup("Goose", env={"GOOSE_MODE": "approve"})
    gemini = asking_setup("gemini", ["--acp"])
    assert gemini is not None
    assert gemini.args == ("--approval-mode", "default")
    assert asking_setup(sys.executable, ["my_agent.py"]) is None
    assert "gets no turn in a Read chat" in no_read_turn("Mine")


@pytest.mark.parametrize(
    ("current", "offered", "moved_to"),
    [
        ("default", ["default", "acceptEdits", "plan", "bypassPermissions"], None),
        ("bypassPermissions", ["default", "acceptEdits", "plan", "bypassPermissions"], "default"),
        ("plan", ["default", "plan"], "default"),  # a mode name is no lock
        ("dontAsk", ["default", "dontAsk"], "default"),
        ("full-access", ["read-only", "auto", "full-access"], "read-only"),
        ("yolo", ["default", "autoEdit", "yolo", "plan"], "default"),
        ("autoEdit", ["autoEdit", "yolo"], None),  # nothing that asks is offered
        ("build", ["build", "plan"], None),
        # Today's adapters (FIELD.md): Claude Code 0.101 starts in `auto` (a classifier
        # approves), Codex 2.6 in `agent` (a side call to the model approves) and offers
        # `agent-full-access` (never asks): each goes where the user answers.
        (
            "auto",
            ["auto", "default", "acceptEdits", "plan", "dontAsk", "bypassPermissions"],
            "default",
        ),
        ("agent", ["read-only", "workspace-write", "agent", "agent-full-access"], "read-only"),
        (
            "agent-full-access",
            ["read-only", "workspace-write", "agent", "agent-full-access"],
            "read-only",
        ),
        ("workspace-write", ["read-only", "workspace-write", "agent"], "read-only"),
        ("read-only", ["read-only", "workspace-write", "agent", "agent-full-access"], None),
        (None, [], None),
    ],
)
def test_an_agent_is_moved_out_of_a_mode_that_skips_questions(
    current: str | None, offered: list[str], moved_to: str | None
) -> None:
    assert mode_to_leave(current, offered) == moved_to
    assert moved_to not in SKIPPING_MODES


@pytest.mark.parametrize(
    ("mode", "tainted", "kind", "status", "asked", "stopped"),
    [
        ("read", False, "execute", "completed", False, True),
        ("ask", False, "edit", "completed", False, True),
        ("ask", False, "edit", "in_progress", False, False),  # OpenCode's, before it asks
        ("ask", False, None, "completed", False, True),  # an unknown kind is a change
        ("ask", False, "other", "completed", False, True),
        ("auto", True, "execute", "completed", False, True),
        ("auto", False, "execute", "completed", False, False),
        ("ask", False, "execute", "completed", True, False),  # it asked: the answer held
        ("read", False, "read", "completed", False, False),
        ("read", False, "fetch", "completed", False, False),
        ("ask", False, "execute", "pending", False, False),  # not run yet: it may still ask
        ("ask", False, "execute", "failed", False, False),
    ],
)
def test_a_change_made_without_asking_is_seen(
    mode: Any, tainted: bool, kind: str | None, status: str, asked: bool, stopped: bool
) -> None:
    seen = acted_unasked(mode=mode, tainted=tainted, kind=kind, status=status, asked=asked)
    assert seen is stopped


def test_conchs_own_tools_are_known_by_every_agents_name_for_them() -> None:
    assert conch_tool("Tool", "mcp__conch-notebook__read_notebook") == "read_notebook"
    assert conch_tool("mcp__conch-notebook__run_code") == "run_code"
    assert conch_tool("conch-notebook.list_variables") == "list_variables"
    assert conch_tool("Tool: conch-notebook/run_code") == "run_code"
    assert conch_tool("x", None, {"server": "conch-notebook", "tool": "edit_cell"}) == "edit_cell"
    assert conch_tool("mcp__conch-notebook__no_such_tool") is None
    assert conch_tool("mcp__other-server__read_notebook") is None
    assert conch_tool("read_notebook") is None  # not offered by Conch under that name


def test_a_command_that_names_a_conch_tool_is_no_conch_tool() -> None:
    """A model chooses a command's words, and Claude's title for a command is the command: a
    call is Conch's tool only by the agent's own naming, so no command or edit passes as one."""
    sneaky = "rm -rf data # mcp__conch-notebook__read_notebook"
    assert conch_tool(sneaky, None, {"command": sneaky}) is None
    assert conch_tool("mcp__conch-notebook__read_notebook; rm -rf data") is None
    # Claude names the tool it runs: Bash is Bash, whatever its title says.
    assert conch_tool("mcp__conch-notebook__read_notebook", "Bash", {"command": "x"}) is None
    # A command or an edit is never Conch's tool, however the agent titles it.
    for kind in ("execute", "edit", "delete", "move", "read", "fetch"):
        assert conch_tool("conch-notebook.read_notebook", None, None, kind) is None
    assert conch_tool("conch-notebook.read_notebook", None, None, "other") == "read_notebook"
    # The server and tool given apart decide, not the title beside them.
    assert conch_tool("mcp__conch-notebook__run_code", None, {"server": "x", "tool": "y"}) is None


def test_todays_codex_names_conchs_tool_by_its_server_and_tool() -> None:
    """Codex 2.6 reports an MCP call as kind `execute`, titled `mcp.<server>.<tool>`, its
    input the server, tool and arguments: that is Conch's tool; a command never is."""
    raw = {"server": "conch-notebook", "tool": "read_notebook", "arguments": {}}
    assert conch_tool("mcp.conch-notebook.read_notebook", None, raw, "execute") == "read_notebook"
    assert conch_tool("x", None, {**raw, "command": "rm -rf data"}, "execute") is None
    assert conch_tool("x", None, {**raw, "cmd": "rm -rf data"}, "execute") is None
    assert conch_tool("x", None, raw, "edit") is None
    assert conch_tool("x", None, {**raw, "server": "other"}, "execute") is None


def test_claudes_tool_search_only_reads() -> None:
    """Claude Code 0.101 defers MCP tools behind `ToolSearch` (kind `other`): by the agent's
    own name for the call it is a search, which passes the watch in every mode."""
    assert own_kind("other", "ToolSearch") == "search"
    assert own_kind(None, "ToolSearch") == "search"
    assert own_kind("execute", "ToolSearch") == "execute"  # a command stays a command
    assert own_kind("other", "Bash") == "other"
    assert own_kind("other", None) == "other"
    kind = own_kind("other", "ToolSearch")
    assert not acted_unasked(mode="read", tainted=True, kind=kind, status="completed", asked=False)


def test_a_question_says_what_will_happen_once() -> None:
    # Claude: the command as title and in rawInput, its description in the content.
    said = schema.ContentToolCallContent(
        type="content", content=schema.TextContentBlock(type="text", text="Make a file")
    )
    raw = {"command": "touch made.txt", "description": "Make a file"}
    assert detail_of(raw, [said], None, "touch made.txt") == "$ touch made.txt"
    assert about_of(raw) == "Make a file"
    # Codex: a list, run through a shell.
    codex = {"command": ["/bin/bash", "-lc", "touch made.txt && ls"], "cwd": "/w"}
    assert detail_of(codex, None, None) == "$ touch made.txt && ls"
    assert command_of({"cmd": "make test"}) == "make test"
    # OpenCode: the file it will write, whichever key holds it.
    assert detail_of({"filePath": "/w/a.py", "content": "x"}, None, None) == "/w/a.py"
    assert about_of({"command": "ls"}) == ""
    # Gemini: no rawInput; the command is the title, the content its folder and description.
    gemini = [
        schema.ContentToolCallContent(
            type="content",
            content=schema.TextContentBlock(
                type="text", text="[current working directory /w] (Make a file)"
            ),
        )
    ]
    assert detail_of(None, gemini, None, "touch made.txt") == "$ touch made.txt"
    assert command_of(None, "touch made.txt", gemini) == "touch made.txt"
    assert about_of(None, gemini) == "Make a file"
    assert command_of(None, "Edit a.py", None) is None
    # OpenCode reports the folder it runs in as the call's location: no news beside the command.
    where = [schema.ToolCallLocation(path="/w")]
    assert detail_of({"command": "ls", "cwd": "/w"}, None, where) == "$ ls"


def test_conch_never_says_a_yes_that_skips_questions() -> None:
    # Claude's question on leaving `plan`: its options would move it into a skipping mode.
    leave_plan = [
        schema.PermissionOption(option_id="bypassPermissions", name="bypass", kind="allow_always"),
        schema.PermissionOption(option_id="acceptEdits", name="accept", kind="allow_always"),
        schema.PermissionOption(option_id="default", name="ask me", kind="allow_once"),
        schema.PermissionOption(option_id="plan", name="keep planning", kind="reject_once"),
    ]
    assert chosen_option(leave_plan, allow=True) == "default"
    assert chosen_option(leave_plan, allow=False) == "plan"  # a no keeps it where it is
    only_bypass = leave_plan[:2]
    assert chosen_option(only_bypass, allow=True) is None  # then the answer is `cancelled`


@pytest.mark.parametrize(
    ("command", "reading"),
    [
        ("git status", True),
        ("git log --oneline -5", True),
        ("pwd", True),
        ("ls -la src", True),
        ("/bin/cat notes.txt", True),
        ("find . -name '*.py'", True),
        ("find . -name '*.pyc' -delete", False),
        ("find . -exec rm {} +", False),
        ("echo hi > notes.txt", False),
        ("cat a | tee b", False),
        ("ls; rm -rf build", False),
        ("echo $(rm x)", False),
        ("git push", False),
        ("git diff --output=patch.txt", False),
        ("touch made.txt", False),
        ("rm -rf build", False),
        ("", False),
        (None, False),
    ],
)
def test_a_command_that_only_reads_is_no_change(command: str | None, reading: bool) -> None:
    assert reads_only(command) is reading
    seen = acted_unasked(
        mode="ask", tainted=False, kind="execute", status="completed", asked=False, command=command
    )
    assert seen is not reading


def test_known_agents_name_todays_packages() -> None:
    about = " ".join(k.about for k in KNOWN_AGENTS)
    for package in (
        "@agentclientprotocol/claude-agent-acp",
        "@agentclientprotocol/codex-acp",
        "@google/gemini-cli",
        "opencode-ai",
    ):
        assert package in about
    for known in KNOWN_AGENTS:  # each one offered is one Conch can make ask
        assert asking_setup(known.command, known.args) is not None
