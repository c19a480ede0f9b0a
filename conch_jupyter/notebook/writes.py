"""The cell tools' writes: a call planned against the cells now and what this agent read
(cells.py's pure `plan`), made once allowed and checked once more (the user may have typed while
it asked), a run of a cell's source with its outputs put in the cell, the user's Undo, and the
cells with who wrote each for the view's marks.
"""

from __future__ import annotations

import asyncio
from typing import Any

from ..core.errors import ConchError
from ..providers.base import ToolCall
from ..store.chats import NotFound
from .cells import Refusal, UndoStep, Write, plan, undo_of, undo_step, written_by
from .documents import HELD_WORDS, NO_FILE_WORDS, Held, new_cell_id
from .rules import (
    NO_KERNEL_WORDS,
    RUN_CELL,
    Ending,
)
from .runs import NoKernel, StuckRun
from .tool_state import Caller, ChatTools, StuckCall, ToolRoom, Undoable


class NotUndoable(ConchError):
    """Undo was asked of a call that cannot be undone (now): not a write, already undone, from
    before the server's start, or the cell changed since (409 `not_undoable`, in words)."""

    status = 409

    def __init__(self, words: str) -> None:
        super().__init__("not_undoable", words)


class CellWrites(ToolRoom):
    async def cells(self, conversation_id: str, names: dict[str, str]) -> dict[str, Any]:
        """The chat's notebook's cells in order with who wrote each (`written_by`), as the user
        sees them now: the live document where there is one, else the file; for the view's
        marks on the cells agents wrote. A chat of no notebook has none."""
        conversation = self.store.get_conversation(conversation_id)
        if conversation is None or conversation.origin != "user":
            raise NotFound(conversation_id)
        if not conversation.path or self.documents is None:
            return {"path": conversation.path, "where": None, "cells": []}
        book = await self.documents.read(conversation.path)
        return {
            "path": conversation.path,
            "where": book.where,
            "cells": written_by(book.cells, names),
        }

    async def undo(self, conversation_id: str, call_id: str) -> None:
        """The user's Undo of an agent's write: the cell as it was, or the added one removed.
        NotUndoable (409, in words) when it cannot be (now)."""
        chat = self._chats.get(conversation_id)
        undoable = chat.undos.get(call_id) if chat else None
        if chat is None or undoable is None:
            raise NotUndoable(
                "That call cannot be undone: it changed no cell, it was undone already, or the"
                " server restarted since it ran."
            )
        assert self.documents is not None  # a write was made through them
        async with self.documents.lock(undoable.path):
            book = await self.documents.read(undoable.path)
            step: UndoStep | Refusal = undo_step(undoable.undo, book.cells)
            if isinstance(step, Refusal):
                raise NotUndoable(step.words)
            try:
                await self.documents.undo(undoable.path, step)
            except Held:
                raise NotUndoable(HELD_WORDS.replace("Not written", "Not undone")) from None
        chat.undos.pop(call_id, None)
        for seen in chat.seen.values():
            seen.pop(step.cell.id, None)  # an agent must read the cell again before it writes
        message = undoable.message
        if message is not None and message.tool is not None:
            changed = await self.store.set_tool(message, {**message.tool, "undo": False})
            self.hub.message(changed)
        await self._event(conversation_id, "tool.undone", {"call_id": call_id})

    async def _plan(
        self,
        chat: ChatTools,
        conversation_id: str,
        path: str | None,
        caller: Caller,
        call: ToolCall,
    ) -> Write | Refusal:
        """The cell tool call checked against the cells now and what this agent read."""
        if not path:
            return Refusal(NO_FILE_WORDS)
        if self.documents is None:
            return Refusal("This chat's notebook cannot be reached here, so no cell was changed.")
        try:
            book = await self.documents.read(path)
        except Exception as error:  # a notebook that is gone or cannot be read
            return Refusal(f"The notebook could not be read: {type(error).__name__}: {error}"[:400])
        if book.where == "held":
            held = HELD_WORDS.replace("Not written", "Not run") if call.name == RUN_CELL else None
            return Refusal(held or HELD_WORDS)
        provenance = {"agent": caller.agent, "chat": conversation_id}
        return plan(
            call.name,
            call.arguments,
            book.cells,
            chat.seen.get(caller.agent, {}),
            new_id=new_cell_id(),
            provenance=provenance,
        )

    async def _write(
        self,
        conversation_id: str,
        chat: ChatTools,
        path: str,
        caller: Caller,
        call: ToolCall,
        entry: dict[str, Any],
    ) -> tuple[str, Ending, Undoable | None]:
        """Make a cell write the user allowed (or Auto did): checked once more against the cells
        now, since the user may have typed while it asked."""
        assert self.documents is not None
        self._set_working(conversation_id, chat, {**entry, "state": "running"})
        async with self.documents.lock(path):
            book = await self.documents.read(path)
            if book.where == "held":
                return HELD_WORDS, "refused", None
            seen = chat.seen.setdefault(caller.agent, {})
            provenance = {"agent": caller.agent, "chat": conversation_id}
            arguments = dict(call.arguments or {})
            again = plan(
                call.name,
                arguments,
                book.cells,
                seen,
                new_id=new_cell_id(),
                provenance=provenance,
            )
            if isinstance(again, Refusal):
                return again.words, "refused", None
            asked = {k: entry.get(k) for k in again.asking()}
            if asked != again.asking():
                return (
                    "Not done: the cell changed while the user was being asked, so what they"
                    " said yes to is no longer what would happen. Nothing was changed.",
                    "refused",
                    None,
                )
            if again.kind == "run":
                return await self._run_cell(conversation_id, chat, path, entry, again)
            try:
                await self.documents.apply(path, again)
            except Held:
                return HELD_WORDS, "refused", None
            undo = undo_of(again, book.cells)
        if again.kind == "delete":
            seen.pop(again.cell.id, None)
        else:
            seen[again.cell.id] = again.new
        entry["cell_id"] = again.cell.id
        undoable = Undoable(path, undo) if undo is not None else None
        return _written_words(again), "ran", undoable

    async def _run_cell(
        self, conversation_id: str, chat: ChatTools, path: str, entry: dict[str, Any], write: Write
    ) -> tuple[str, Ending, Undoable | None]:
        """Run a code cell's source in the kernel; its outputs and count go into the cell."""
        assert self.documents is not None
        assert self.kernels is not None
        cell_id = write.cell.id

        def on_state(state: str) -> None:
            self._set_working(conversation_id, chat, {**entry, "state": state})

        def on_stuck(run: StuckRun) -> None:
            chat.stuck = StuckCall(entry, run)

        await self.documents.set_state(path, cell_id, "busy")
        try:
            result = await self.kernels.run(
                path, write.cell.source, on_state, on_stuck, for_cell=True
            )
        except NoKernel:
            return NO_KERNEL_WORDS, "refused", None
        finally:
            await asyncio.shield(self.documents.set_state(path, cell_id, "idle"))
        placed = await self.documents.set_outputs(
            path, cell_id, result.outputs, result.execution_count
        )
        count = f" (In [{result.execution_count}])" if result.execution_count else ""
        where = (
            f"Cell {cell_id} ran{count}; its outputs are in the cell.\n"
            if placed
            else f"Cell {cell_id} ran{count}, but was deleted meanwhile: its outputs are shown"
            " only here.\n"
        )
        return where + result.output, result.ending, None


def _written_words(write: Write) -> str:
    """What the model is told of a write that was made."""
    if write.kind == "add":
        where = f"after cell {write.after}" if write.after else "at the end"
        return f"Added a {write.cell.cell_type} cell {where}: its id is {write.cell.id}."
    if write.kind == "edit":
        return f"Cell {write.cell.id} now holds the new source."
    return f"Deleted cell {write.cell.id}."
