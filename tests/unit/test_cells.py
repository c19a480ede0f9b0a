"""What a cell tool call would change, as a table: the write or the refusal in words, and the
undo checked against the cells as they are when the user asks for it (notebook/cells.py)."""

from __future__ import annotations

from typing import Any

import pytest

from conch_jupyter.notebook.cells import (
    SOURCE_LIMIT,
    Cell,
    Refusal,
    Write,
    cell_of,
    plan,
    undo_of,
    undo_step,
)

CELLS = (
    Cell("a", "code", "x = 1"),
    Cell("b", "markdown", "# Notes"),
    Cell("c", "code", "print(x)"),
)
SEEN = {"a": "x = 1", "b": "# Notes", "c": "print(x)"}
BY = {"agent": "analyst", "chat": "c_1"}


def planned(tool: str, arguments: dict[str, Any] | None, seen: dict[str, str] = SEEN) -> Any:
    return plan(tool, arguments, CELLS, seen, new_id="new", provenance=BY)


def test_add_at_the_end_and_after_a_cell() -> None:
    end = planned("add_cell", {"cell_type": "code", "source": "y = 2"})
    assert isinstance(end, Write)
    assert (end.kind, end.index, end.cell.id, end.old, end.new) == ("add", 3, "new", "", "y = 2")
    assert end.cell.metadata == {"conch": BY}
    assert end.asking() == {
        "cell_id": None,
        "old": "",
        "new": "y = 2",
        "after": None,
        "cell_type": "code",
    }
    after = planned("add_cell", {"cell_type": "markdown", "source": "hi", "after": "a"})
    assert isinstance(after, Write)
    assert (after.index, after.after, after.asking()["after"]) == (1, "a", "a")


def test_edit_shows_old_and_new_and_marks_the_cell() -> None:
    edit = planned("edit_cell", {"cell_id": "c", "source": "print(x + 1)"})
    assert isinstance(edit, Write)
    assert edit.asking() == {"cell_id": "c", "old": "print(x)", "new": "print(x + 1)"}
    assert edit.cell.metadata["conch"] == BY


def test_delete_shows_the_cell_and_run_shows_the_code() -> None:
    delete = planned("delete_cell", {"cell_id": "a"})
    assert isinstance(delete, Write)
    assert delete.asking() == {"cell_id": "a", "old": "x = 1", "new": ""}
    run = planned("run_cell", {"cell_id": "c"})
    assert isinstance(run, Write)
    assert run.asking() == {"cell_id": "c", "code": "print(x)"}


@pytest.mark.parametrize(
    ("tool", "arguments", "words"),
    [
        ("add_cell", {"cell_type": "sql", "source": "x"}, 'cell_type must be "code"'),
        ("add_cell", {"cell_type": "code"}, "needs"),
        ("add_cell", {"cell_type": "code", "source": 5}, "needs"),
        ("add_cell", {"cell_type": "code", "source": "x", "after": "zz"}, "no cell with the id"),
        ("add_cell", None, "needs"),
        ("edit_cell", {"cell_id": "zz", "source": "x"}, "no cell with the id 'zz'"),
        ("edit_cell", {"cell_id": "a"}, "needs"),
        ("edit_cell", {"source": "x"}, "no cell with the id none"),
        ("delete_cell", {"cell_id": ["a"]}, "no cell with the id"),
        ("run_cell", {"cell_id": "b"}, "is a markdown cell, not code"),
        ("add_cell", {"cell_type": "code", "source": "x" * (SOURCE_LIMIT + 1)}, "at most"),
        ("edit_cell", {"cell_id": "a", "source": "x" * (SOURCE_LIMIT + 1)}, "at most"),
    ],
)
def test_bad_calls_are_refused_in_words(
    tool: str, arguments: dict[str, Any] | None, words: str
) -> None:
    refused = planned(tool, arguments)
    assert isinstance(refused, Refusal)
    assert words in refused.words
    assert len(refused.words) < 400


@pytest.mark.parametrize("tool", ["edit_cell", "delete_cell"])
def test_a_cell_the_user_changed_since_the_agent_read_it_is_not_overwritten(tool: str) -> None:
    changed = planned(tool, {"cell_id": "a", "source": "x = 3"}, {**SEEN, "a": "x = 0"})
    assert isinstance(changed, Refusal)
    assert "changed since you read it" in changed.words
    blind = planned(tool, {"cell_id": "a", "source": "x = 3"}, {})
    assert isinstance(blind, Refusal)
    assert "read_notebook first" in blind.words


def test_run_cell_needs_no_read() -> None:
    assert isinstance(planned("run_cell", {"cell_id": "a"}, {}), Write)


def test_undo_of_an_add_removes_it_unless_the_user_changed_it() -> None:
    add = planned("add_cell", {"cell_type": "code", "source": "y = 2", "after": "a"})
    undo = undo_of(add, CELLS)
    assert undo is not None
    after = [CELLS[0], add.cell, *CELLS[1:]]
    step = undo_step(undo, after)
    assert not isinstance(step, Refusal)
    assert (step.kind, step.index) == ("remove", 1)
    typed = [CELLS[0], Cell("new", "code", "y = 2  # mine"), *CELLS[1:]]
    refused = undo_step(undo, typed)
    assert isinstance(refused, Refusal)
    assert "changed after the agent wrote it" in refused.words
    assert isinstance(undo_step(undo, list(CELLS)), Refusal)  # gone already


def test_undo_of_an_edit_puts_the_old_source_back() -> None:
    edit = planned("edit_cell", {"cell_id": "c", "source": "print(2 * x)"})
    undo = undo_of(edit, CELLS)
    assert undo is not None
    now = [*CELLS[:2], Cell("c", "code", "print(2 * x)")]
    step = undo_step(undo, now)
    assert not isinstance(step, Refusal)
    assert (step.kind, step.index, step.source) == ("restore", 2, "print(x)")


def test_undo_of_a_delete_puts_the_cell_back_after_its_neighbour() -> None:
    delete = planned("delete_cell", {"cell_id": "c"})
    undo = undo_of(delete, CELLS)
    assert undo is not None
    # Meanwhile the user added a cell at the top: it goes back after "b" all the same.
    now = [Cell("top", "code", ""), *CELLS[:2]]
    step = undo_step(undo, now)
    assert not isinstance(step, Refusal)
    assert (step.kind, step.index, step.cell.source) == ("reinsert", 3, "print(x)")
    refused = undo_step(undo, [*now, CELLS[2]])
    assert isinstance(refused, Refusal)


def test_a_run_cannot_be_undone() -> None:
    run = planned("run_cell", {"cell_id": "a"})
    assert undo_of(run, CELLS) is None


def test_cell_of_joins_nbformat_source_lists() -> None:
    cell = cell_of(
        {
            "id": "q",
            "cell_type": "code",
            "source": ["a = 1\n", "b = 2"],
            "execution_count": 3.0,  # a live document's numbers arrive as floats
            "outputs": [{"output_type": "stream", "name": "stdout", "text": "x"}],
            "metadata": {},
        }
    )
    assert (cell.source, cell.execution_count, len(cell.outputs)) == ("a = 1\nb = 2", 3, 1)
    assert cell.to_nbformat()["source"] == "a = 1\nb = 2"


def test_undo_of_an_edit_gives_back_the_cells_own_metadata() -> None:
    edit = planned("edit_cell", {"cell_id": "a", "source": "x = 5"})
    undo = undo_of(edit, CELLS)
    assert undo is not None
    step = undo_step(undo, [Cell("a", "code", "x = 5", metadata=edit.cell.metadata), *CELLS[1:]])
    assert not isinstance(step, Refusal)
    assert "conch" not in step.cell.metadata  # the agent's mark goes with its write


def test_a_runs_outputs_for_its_cell_join_streams_and_are_bounded() -> None:
    from conch_jupyter.notebook.runs import CELL_OUTPUTS, CELL_TEXT, RunOutput

    output = RunOutput(cells=[])
    output.add_output({"output_type": "stream", "name": "stdout", "text": "a"})
    output.add_output({"output_type": "stream", "name": "stdout", "text": "b"})
    output.add_output({"output_type": "stream", "name": "stderr", "text": "!"})
    output.add_output({"output_type": "execute_result", "data": {"text/plain": "1"}})
    assert output.cells == [
        {"output_type": "stream", "name": "stdout", "text": "ab"},
        {"output_type": "stream", "name": "stderr", "text": "!"},
        {"output_type": "execute_result", "data": {"text/plain": "1"}},
    ]
    flood = RunOutput(cells=[])
    for _ in range(CELL_OUTPUTS + 50):
        flood.add_output({"output_type": "display_data", "data": {}})
    flood.add_output({"output_type": "stream", "name": "stdout", "text": "x" * (CELL_TEXT + 10)})
    assert flood.cells is not None
    assert len(flood.cells) == CELL_OUTPUTS
    assert flood.cell_text == CELL_TEXT
    plain = RunOutput()  # run_code keeps no outputs for a cell
    plain.add_output({"output_type": "stream", "name": "stdout", "text": "a"})
    assert plain.cells is None
