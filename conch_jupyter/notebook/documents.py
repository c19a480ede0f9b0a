"""A notebook's cells where the user sees them: the live shared document, or the file.

Owns every read and write of a notebook's cells by the cell tools. Theory of operation:
- **Live** (jupyter-collaboration installed: the `jupyter_server_ydoc` extension): a notebook a
  page has open has a room, and its shared `YNotebook` (`get_document(..., copy=False)`; the
  default copy is a fork whose edits reach nobody). Reads give what every page shows now, unsaved
  edits included; writes go into it, each in one transaction, so every open page shows them at
  once and the room saves them to the file as for the user's own typing. An edit changes only
  the cell's own text (`set_cell(source=...)`, a granular change), so what the user types in
  another cell — or the same one a moment before — is merged, not lost.
- **File** (no page has the notebook open): read and written through the server's
  ContentsManager as nbformat JSON, validated before it is saved.
- **Held** (no shared document, and a page holds the notebook open, which we know from its
  kernel's session): reads give the file; writes are refused in words that say what to install,
  since writing the file under an open page would be overwritten by its next save (or
  overwrite it).
Nothing here imports jupyter-collaboration or pycrdt: the live objects are reached through the
server's settings, and their classes taken from the objects themselves, so the package works
(and says what it lacks) without them.
"""

from __future__ import annotations

import asyncio
import copy
import dataclasses
import json
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from jupyter_core.utils import ensure_async

from .cells import Cell, UndoStep, Write, cell_of

Where = Literal["live", "file", "held"]

HELD_WORDS = (
    "Not written: the notebook is open in a page, and this Jupyter has no shared document for"
    " it, so a change written to its file would be lost at the page's next save (or overwrite"
    " the user's unsaved work). Writing cells into an open notebook needs Jupyter's"
    " collaboration: install conch-jupyter[live] (it brings jupyter-collaboration) and restart"
    " Jupyter. Nothing was changed."
)
NO_FILE_WORDS = "This chat belongs to no notebook, so there are no cells to change."


class Held(Exception):
    """The notebook is open in a page without a shared document: no write (HELD_WORDS).

    No ConchError: control flow between the documents and the notebook tools, which answer the
    agent's call in words and never let it out."""


@dataclass
class Book:
    """A notebook's cells as read, and from where."""

    where: Where
    cells: list[Cell]


class NotebookDocuments:
    """The notebooks of one server, for the cell tools."""

    def __init__(
        self,
        *,
        contents: Any,
        is_open: Callable[[str], Any],
        live: Callable[[], Any | None] = lambda: None,
    ) -> None:
        # contents: the server's ContentsManager. is_open(path): awaitable, True when a kernel
        # session holds the notebook (a page has it open). live(): the jupyter_server_ydoc
        # extension, or None where collaboration is not installed.
        self.contents = contents
        self.is_open = is_open
        self.live = live
        self._locks: dict[str, asyncio.Lock] = {}

    def lock(self, path: str) -> asyncio.Lock:
        """One change at a time per notebook (a file's read, change and save are one step)."""
        return self._locks.setdefault(path, asyncio.Lock())

    async def read(self, path: str) -> Book:
        shared = await self._shared(path)
        if shared is not None:
            with shared.ydoc.transaction():  # one snapshot of every cell (and one transaction)
                # The whole array at once: some 13 % less CPU than cell by cell (500 cells).
                raw = shared.ycells.to_py()
            return Book("live", [cell_of(cell) for cell in raw])
        model = await self._model(path)
        cells = [cell_of(raw) for raw in model["content"].get("cells", [])]
        where: Where = "held" if await ensure_async(self.is_open(path)) else "file"
        return Book(where, _with_ids(cells))

    async def apply(self, path: str, write: Write) -> None:
        """Make the write (run: nothing; `set_outputs` puts a run's outputs in). Held: raises."""
        shared = await self._shared(path)
        if shared is not None:
            _live_write(shared, write)
            return
        await self._file_change(path, lambda cells: _file_write(cells, write))

    async def undo(self, path: str, step: UndoStep) -> None:
        shared = await self._shared(path)
        if shared is not None:
            _live_undo(shared, step)
            return
        await self._file_change(path, lambda cells: _file_undo(cells, step))

    async def set_state(self, path: str, cell_id: str, state: str) -> None:
        """A live code cell's `execution_state` ("busy" shows [*] in every page); no file."""
        shared = await self._shared(path)
        index = _live_index(shared, cell_id) if shared is not None else None
        if shared is not None and index is not None:
            shared.ycells[index]["execution_state"] = state

    async def set_outputs(
        self,
        path: str,
        cell_id: str,
        outputs: Sequence[dict[str, Any]],
        count: int | None,
    ) -> bool:
        """Put a run's outputs and execution count in the cell; False if it is gone."""
        shared = await self._shared(path)
        if shared is not None:
            index = _live_index(shared, cell_id)
            if index is None:
                return False
            ycell = shared.ycells[index]
            with shared.ydoc.transaction():
                youtputs = ycell["outputs"]
                youtputs.clear()
                for output in outputs:
                    youtputs.append(_live_output(ycell, output))
                ycell["execution_count"] = count
                ycell["execution_state"] = "idle"
            return True
        found = [False]

        def change(cells: list[Cell]) -> list[Cell]:
            for i, cell in enumerate(cells):
                if cell.id == cell_id:
                    found[0] = True
                    cells[i] = Cell(
                        cell.id,
                        cell.cell_type,
                        cell.source,
                        tuple(outputs),
                        count,
                        cell.metadata,
                    )
            return cells

        await self._file_change(path, change)
        return found[0]

    # --- inside ---

    async def _shared(self, path: str) -> Any | None:
        """The live YNotebook of the notebook's room, when a page made one."""
        extension = self.live()
        if extension is None:
            return None
        return await extension.get_document(
            path=path, content_type="notebook", file_format="json", copy=False
        )

    async def _model(self, path: str) -> dict[str, Any]:
        model = await ensure_async(self.contents.get(path, content=True, type="notebook"))
        content = json.loads(json.dumps(model["content"]))
        return {"content": content}

    async def _file_change(self, path: str, change: Callable[[list[Cell]], list[Cell]]) -> None:
        if await ensure_async(self.is_open(path)):
            raise Held(path)
        import nbformat  # jupyter_server's own dependency: the file is validated before saving

        model = await self._model(path)
        content = model["content"]
        cells = change(_with_ids([cell_of(raw) for raw in content.get("cells", [])]))
        content["cells"] = [c.to_nbformat() for c in cells]
        if (content.get("nbformat"), content.get("nbformat_minor", 0)) < (4, 5):
            content["nbformat"], content["nbformat_minor"] = 4, 5  # cell ids: nbformat 4.5
        nbformat.validate(content)  # a file an agent wrote is valid nbformat, or not written
        saved = {"type": "notebook", "format": "json", "content": content}
        await ensure_async(self.contents.save(saved, path))


def new_cell_id() -> str:
    """An id as JupyterLab makes them (a UUID), for a cell an agent adds."""
    return str(uuid.uuid4())


def _with_ids(cells: list[Cell]) -> list[Cell]:
    """A notebook saved before nbformat 4.5 has no cell ids: each gets one by its place (kept
    in the file at the first write, which upgrades it to 4.5)."""
    return [c if c.id else dataclasses.replace(c, id=f"cell-{n}") for n, c in enumerate(cells, 1)]


def _file_write(cells: list[Cell], write: Write) -> list[Cell]:
    if write.kind == "add":
        cells.insert(write.index, write.cell)
    elif write.kind == "edit":
        old = cells[write.index]
        cells[write.index] = Cell(
            old.id, old.cell_type, write.new, old.outputs, old.execution_count, write.cell.metadata
        )
    elif write.kind == "delete":
        del cells[write.index]
    return cells


def _file_undo(cells: list[Cell], step: UndoStep) -> list[Cell]:
    if step.kind == "remove":
        del cells[step.index]
    elif step.kind == "reinsert":
        cells.insert(step.index, step.cell)
    else:
        old = cells[step.index]
        cells[step.index] = dataclasses.replace(
            old, source=step.source, metadata=step.cell.metadata
        )
    return cells


def _live_index(shared: Any, cell_id: str) -> int | None:
    for index, ycell in enumerate(shared.ycells):
        if ycell.get("id") == cell_id:
            return index
    return None


def _live_write(shared: Any, write: Write) -> None:
    with shared.ydoc.transaction():
        if write.kind == "add":
            shared.ycells.insert(write.index, shared.create_ycell(write.cell.to_nbformat()))
        elif write.kind == "edit":
            shared.set_cell(write.index, source=write.new)  # the text's own change, merged
            shared.ycells[write.index]["metadata"]["conch"] = copy.deepcopy(
                dict(write.cell.metadata["conch"])
            )
        elif write.kind == "delete":
            del shared.ycells[write.index]


def _live_undo(shared: Any, step: UndoStep) -> None:
    with shared.ydoc.transaction():
        if step.kind == "remove":
            del shared.ycells[step.index]
        elif step.kind == "reinsert":
            shared.ycells.insert(step.index, shared.create_ycell(step.cell.to_nbformat()))
        else:
            shared.set_cell(step.index, source=step.source)
            metadata = shared.ycells[step.index]["metadata"]
            if "conch" in step.cell.metadata:
                metadata["conch"] = copy.deepcopy(dict(step.cell.metadata["conch"]))
            elif "conch" in metadata:
                del metadata["conch"]


def _live_output(ycell: Any, output: dict[str, Any]) -> Any:
    """One output as the shared document holds it (a stream's text is shared text), made with
    the document's own classes."""
    shared_map, shared_text = type(ycell), type(ycell["source"])
    value = copy.deepcopy(output)
    if value.get("output_type") == "stream":
        value["text"] = shared_text(str(value.get("text", "")))
    return shared_map(value)
