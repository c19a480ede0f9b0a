"""The one rule of every tool (notebook/rules.py), table-tested: the notebook's own tools and
the tools of your MCP servers (by their annotations) go through the same `decide`."""

from __future__ import annotations

from typing import Any

import pytest

from conch_jupyter.notebook.rules import (
    MAX_CALLS_PER_TURN,
    READ_OUT_WORDS,
    Nature,
    decide,
    judge,
    nature_of,
)

READING = {"readOnlyHint": True, "openWorldHint": False}
READING_OUT = {"readOnlyHint": True}  # openWorldHint left out: open world, MCP's default
DESTRUCTIVE = {"destructiveHint": True, "openWorldHint": False}

# (annotations, mode, tainted) → action: every mode, both taints, each kind of tool.
TABLE: list[tuple[dict[str, Any] | None, str, bool, str]] = [
    (READING, "read", False, "run"),
    (READING, "ask", False, "run"),
    (READING, "auto", False, "run"),
    (READING, "read", True, "run"),
    (READING, "ask", True, "run"),
    (READING, "auto", True, "run"),
    (READING_OUT, "read", False, "run"),
    (READING_OUT, "ask", False, "run"),
    (READING_OUT, "auto", False, "run"),
    (READING_OUT, "read", True, "refuse"),
    (READING_OUT, "ask", True, "ask"),
    (READING_OUT, "auto", True, "ask"),
    (DESTRUCTIVE, "read", False, "refuse"),
    (DESTRUCTIVE, "ask", False, "ask"),
    (DESTRUCTIVE, "auto", False, "run"),
    (DESTRUCTIVE, "read", True, "refuse"),
    (DESTRUCTIVE, "ask", True, "ask"),
    (DESTRUCTIVE, "auto", True, "ask"),
    # No annotations at all: a change, open world.
    (None, "read", False, "refuse"),
    (None, "ask", False, "ask"),
    (None, "auto", False, "run"),
    (None, "auto", True, "ask"),
    # readOnlyHint must be true itself; a claim of false or a string is a change.
    ({"readOnlyHint": False}, "read", False, "refuse"),
    ({"readOnlyHint": "true"}, "read", False, "refuse"),
    # Annotations never widen a mode: "not destructive" is still a change.
    ({"destructiveHint": False, "idempotentHint": True}, "read", False, "refuse"),
    ({"destructiveHint": False}, "auto", True, "ask"),
]


@pytest.mark.parametrize(("annotations", "mode", "tainted", "action"), TABLE)
def test_an_mcp_tool_follows_the_one_rule(
    annotations: dict[str, Any] | None, mode: str, tainted: bool, action: str
) -> None:
    verdict = decide(
        mode=mode,  # type: ignore[arg-type]
        tainted=tainted,
        tool="demo__x",
        calls_so_far=0,
        nature=nature_of(annotations),
    )
    assert verdict.action == action
    assert bool(verdict.words) == (action == "refuse")


NOTEBOOK: list[tuple[str, str, bool, str]] = [
    ("read_notebook", "read", True, "run"),
    ("list_variables", "auto", True, "run"),
    ("run_code", "read", False, "refuse"),
    ("run_code", "ask", False, "ask"),
    ("run_code", "auto", False, "run"),
    ("run_code", "auto", True, "ask"),
    ("edit_cell", "read", False, "refuse"),
    ("add_cell", "auto", True, "ask"),
]


@pytest.mark.parametrize(("tool", "mode", "tainted", "action"), NOTEBOOK)
def test_the_notebook_tools_follow_the_same_rule(
    tool: str, mode: str, tainted: bool, action: str
) -> None:
    verdict = decide(mode=mode, tainted=tainted, tool=tool, calls_so_far=0)  # type: ignore[arg-type]
    assert verdict.action == action


def test_the_notebooks_reading_tools_are_closed_world_reads() -> None:
    # They read the chat's own notebook: never asked, even tainted, in every mode.
    for mode in ("read", "ask", "auto"):
        assert decide(mode=mode, tainted=True, tool="read_notebook", calls_so_far=0).action == "run"


def test_the_bound_and_unknown_names_come_first() -> None:
    over = decide(
        mode="auto", tainted=False, tool="demo__x", calls_so_far=MAX_CALLS_PER_TURN,
        nature=nature_of(READING),
    )  # fmt: skip
    assert over.action == "refuse"
    assert f"{MAX_CALLS_PER_TURN} tool calls" in over.words
    assert decide(mode="auto", tainted=False, tool="nope", calls_so_far=0).action == "refuse"


def test_a_refused_read_says_why_in_words() -> None:
    reading_out = nature_of({"readOnlyHint": True})
    verdict = decide(mode="read", tainted=True, tool="web__f", calls_so_far=0, nature=reading_out)
    assert verdict.words == READ_OUT_WORDS


def test_nature_reads_the_servers_claims() -> None:
    assert nature_of(None) == Nature(reading=False, open_world=True)
    assert nature_of({}) == Nature(reading=False, open_world=True)
    assert nature_of(READING) == Nature(reading=True, open_world=False)
    assert nature_of({"readOnlyHint": True, "openWorldHint": None}).open_world
    assert judge(Nature(True, False), "read", True) == "run"
