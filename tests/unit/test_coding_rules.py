"""The rules for coding agents over ACP (coding/rules.py), table-tested with no process."""

from __future__ import annotations

from typing import Any

import pytest
from acp import schema

from conch_jupyter.coding.rules import (
    KNOWN_AGENTS,
    WITHHELD_ENV,
    child_env,
    chosen_option,
    command_refusal,
    detail_of,
    found_agents,
    permission,
    prompt_text,
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
