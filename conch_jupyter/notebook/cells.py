"""What a cell tool call would change: pure (no I/O), table-tested.

An agent's `add_cell`, `edit_cell`, `delete_cell` or `run_cell` is first checked against the
cells as they are now (the live document's, or the file's) and what this agent last read of
them, and becomes a `Write` (what to change, with the `old` and `new` the user is shown) or a
`Refusal` in words for the model. Nothing here touches a notebook: `documents.py` applies a
Write, and keeps what undoes it (an `Undo`), which is checked here too before it is applied.

The user keeps typing: an edit or a delete is refused when the cell's source is no longer what
the agent read (the user changed it since), and when the agent never read the cell at all (it
would overwrite blindly). Reading the notebook again, or the agent's own write, is a new read.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from .rules import ADD_CELL, DELETE_CELL, EDIT_CELL, RUN_CELL

# The most one cell tool call may write into a cell (as run_code's code: refused whole, never
# cut): 100,000 characters, some 2,500 lines.
SOURCE_LIMIT = 100_000
CELL_TYPES = ("code", "markdown", "raw")
Kind = Literal["add", "edit", "delete", "run"]


@dataclass(frozen=True)
class Cell:
    """One cell as the tools see it: nbformat's fields, source as one string."""

    id: str
    cell_type: str
    source: str
    outputs: tuple[dict[str, Any], ...] = ()
    execution_count: int | None = None
    metadata: Mapping[str, Any] = field(default_factory=dict)

    def to_nbformat(self) -> dict[str, Any]:
        cell: dict[str, Any] = {
            "id": self.id,
            "cell_type": self.cell_type,
            "metadata": dict(self.metadata),
            "source": self.source,
        }
        if self.cell_type == "code":
            cell["outputs"] = [dict(o) for o in self.outputs]
            cell["execution_count"] = self.execution_count
        return cell


def cell_of(raw: Mapping[str, Any]) -> Cell:
    """A cell from nbformat's JSON (or a live cell's `to_py()`), source joined into one string."""
    source = raw.get("source", "")
    count = raw.get("execution_count")
    return Cell(
        id=str(raw.get("id") or ""),
        cell_type=str(raw.get("cell_type") or "code"),
        source="".join(source) if isinstance(source, list) else str(source),
        outputs=tuple(raw.get("outputs") or ()),
        execution_count=int(count) if isinstance(count, (int, float)) else None,
        metadata=dict(raw.get("metadata") or {}),
    )


@dataclass(frozen=True)
class Write:
    """A change to make: `index` is where (add: the new cell's place), `cell` the cell it acts on
    (add: the new one, with its id and `metadata.conch`)."""

    kind: Kind
    index: int
    cell: Cell
    old: str  # what the user is shown as the cell's text before, and after:
    new: str
    after: str | None = None  # add: the cell it goes after (None: at the end)

    def asking(self) -> dict[str, Any]:
        """The change, as `tool.asking` and the tool message carry it (DESIGN.md)."""
        if self.kind == "run":
            return {"cell_id": self.cell.id, "code": self.cell.source}
        shown: dict[str, Any] = {
            "cell_id": None if self.kind == "add" else self.cell.id,
            "old": self.old,
            "new": self.new,
        }
        if self.kind == "add":
            shown.update(after=self.after, cell_type=self.cell.cell_type)
        return shown


@dataclass(frozen=True)
class Refusal:
    words: str


@dataclass(frozen=True)
class Undo:
    """What undoes a write: remove the added cell, put back the old source, or the deleted cell
    at its place. `expect` is the source the cell must still have (the write's own)."""

    kind: Literal["remove", "restore", "reinsert"]
    cell: Cell  # remove/restore: the cell as the write left it; reinsert: the deleted cell
    expect: str
    original: Cell | None = None  # restore: the cell before the write (its metadata too)
    before: str = ""  # restore: the source to put back
    index: int = 0  # reinsert: where it was
    after: str | None = None  # reinsert: the cell it followed, if that cell is still there


def plan(
    tool: str,
    arguments: Mapping[str, Any] | None,
    cells: Sequence[Cell],
    seen: Mapping[str, str],
    *,
    new_id: str,
    provenance: Mapping[str, Any],
) -> Write | Refusal:
    """The write a cell tool call asks for, or why not. `seen`: cell id → the source this agent
    last read; `new_id`: the id an added cell gets; `provenance`: its `metadata.conch`."""
    args = dict(arguments or {})
    by_id = {c.id: i for i, c in enumerate(cells)}
    if tool == ADD_CELL:
        kind = args.get("cell_type", "code")
        source = args.get("source")
        after = args.get("after")
        if kind not in CELL_TYPES:
            return Refusal(f'Not added: cell_type must be "code" or "markdown", not {kind!r:.40}.')
        if not isinstance(source, str):
            return Refusal('Not added: add_cell needs {"source": "..."} with the text as a string.')
        if len(source) > SOURCE_LIMIT:
            return Refusal(_too_long("added", len(source)))
        if after is not None and (not isinstance(after, str) or after not in by_id):
            return _no_cell("added after it", after)
        index = len(cells) if after is None else by_id[after] + 1
        cell = Cell(new_id, kind, source, metadata={"conch": dict(provenance)})
        return Write("add", index, cell, "", source, after)
    cell_id = args.get("cell_id")
    if not isinstance(cell_id, str) or cell_id not in by_id:
        return _no_cell(_VERB[tool], cell_id)
    index = by_id[cell_id]
    cell = cells[index]
    if tool == RUN_CELL:
        if cell.cell_type != "code":
            return Refusal(f"Not run: cell {cell_id} is a {cell.cell_type} cell, not code.")
        if len(cell.source) > SOURCE_LIMIT:
            return Refusal(_too_long("run", len(cell.source)))
        return Write("run", index, cell, cell.source, cell.source)
    changed = _changed_since_read(cell, seen, _VERB[tool])
    if changed is not None:
        return changed
    if tool == DELETE_CELL:
        return Write("delete", index, cell, cell.source, "")
    source = args.get("source")
    if not isinstance(source, str):
        return Refusal('Not written: edit_cell needs {"source": "..."} with the text as a string.')
    if len(source) > SOURCE_LIMIT:
        return Refusal(_too_long("written", len(source)))
    metadata = {**cell.metadata, "conch": dict(provenance)}
    edited = Cell(cell.id, cell.cell_type, source, metadata=metadata)
    return Write("edit", index, edited, cell.source, source)


def undo_of(write: Write, before: Sequence[Cell]) -> Undo | None:
    """What undoes `write`, from the cells just before it; None for a run (it cannot be)."""
    if write.kind == "add":
        return Undo("remove", write.cell, write.new)
    if write.kind == "edit":
        original = before[write.index]
        return Undo("restore", write.cell, write.new, before=write.old, original=original)
    if write.kind == "delete":
        after = before[write.index - 1].id if write.index > 0 else None
        return Undo("reinsert", write.cell, "", index=write.index, after=after)
    return None


@dataclass(frozen=True)
class UndoStep:
    """An undo to apply now: at `index`, remove the cell, insert `cell`, or give the cell back
    `source` and `cell`'s metadata (restore)."""

    kind: Literal["remove", "restore", "reinsert"]
    index: int
    cell: Cell
    source: str = ""


def undo_step(undo: Undo, cells: Sequence[Cell]) -> UndoStep | Refusal:
    """Check an undo against the cells now: a cell the user changed since is left alone."""
    by_id = {c.id: i for i, c in enumerate(cells)}
    if undo.kind == "reinsert":
        if undo.cell.id in by_id:
            return Refusal("Nothing to undo: that cell is in the notebook again.")
        index = by_id[undo.after] + 1 if undo.after in by_id else min(undo.index, len(cells))
        return UndoStep("reinsert", index, undo.cell)
    index = by_id.get(undo.cell.id, -1)
    if index < 0:
        return Refusal("Not undone: the cell is no longer in the notebook.")
    if cells[index].source != undo.expect:
        return Refusal(
            "Not undone: the cell was changed after the agent wrote it; undoing would lose that."
        )
    if undo.kind == "remove":
        return UndoStep("remove", index, cells[index])
    # The cell as it was before the write: its source, and its metadata (no `conch` mark).
    return UndoStep("restore", index, undo.original or cells[index], undo.before)


_VERB = {EDIT_CELL: "written", DELETE_CELL: "deleted", RUN_CELL: "run"}


def _no_cell(done: str, cell_id: Any) -> Refusal:
    shown = repr(cell_id)[:60] if cell_id is not None else "none"
    return Refusal(
        f"Not {done}: there is no cell with the id {shown} in the notebook."
        " read_notebook names each cell's id."
    )


def _too_long(done: str, length: int) -> str:
    return (
        f"Not {done}: the text is {length:,} characters long, and a cell tool call may carry at"
        f" most {SOURCE_LIMIT:,}. Nothing was changed."
    )


def _changed_since_read(cell: Cell, seen: Mapping[str, str], done: str) -> Refusal | None:
    read = seen.get(cell.id)
    if read is None:
        return Refusal(
            f"Not {done}: you have not read cell {cell.id} yet, so this would overwrite it"
            " blindly. Call read_notebook first."
        )
    if read != cell.source:
        return Refusal(
            f"Not {done}: cell {cell.id} was changed since you read it (the user may be typing"
            " in it). Nothing was changed; call read_notebook to see it as it is now."
        )
    return None


def written_by(cells: Sequence[Cell], names: Mapping[str, str]) -> list[dict[str, Any]]:
    """Each cell in order with its type and who wrote it, for the view's marks: `{id, type,
    conch: {agent, name, chat} | null}` (`name` null for an agent since removed). Only a well-formed
    `metadata.conch` counts: anything else in a cell's metadata marks nothing."""
    out: list[dict[str, Any]] = []
    for cell in cells:
        conch = cell.metadata.get("conch")
        mark = None
        if isinstance(conch, Mapping) and isinstance(conch.get("agent"), str):
            agent = conch["agent"]
            chat = conch.get("chat")
            mark = {
                "agent": agent,
                "name": names.get(agent),
                "chat": chat if isinstance(chat, str) else None,
            }
        out.append({"id": cell.id, "type": cell.cell_type, "conch": mark})
    return out
