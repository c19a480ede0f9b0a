"""The A2A door's tasks in the chat store: what a paired agent asked and how its answer ended,
so GetTask and ListTasks answer after the reply. A part the store holds (`store.door_tasks`),
sharing its file: its writer, its reading connection and its clock.
"""

from __future__ import annotations

import sqlite3
from typing import Any

from .db import from_row, insert
from .file import StoreFile
from .rows import DoorTask, ordered_uuid
from .writer import Pending, then


class DoorTasks:
    """The door's tasks, a part the store holds (`store.door_tasks`)."""

    def __init__(self, file: StoreFile) -> None:
        self._file = file

    def create(
        self,
        *,
        pairing_id: str,
        agent: str,
        context_id: str,
        conversation_id: str | None,
        asked: str,
        asked_id: str,
        state: str = "TASK_STATE_WORKING",
        words: str | None = None,
    ) -> Pending[DoorTask]:
        """A task for what a paired agent asked (`asked`, also stored in its chat, by the door)."""
        now = self._file._clock()
        task = DoorTask(
            str(ordered_uuid()),
            pairing_id,
            agent,
            context_id,
            conversation_id,
            state,
            asked,
            asked_id,
            None,
            words,
            now,
            now,
        )
        return then(
            self._file._writer.change(lambda db: insert(db, "door_tasks", task)), lambda _: task
        )

    def finish(
        self, task_id: str, state: str, *, reply: str | None = None, words: str | None = None
    ) -> Pending[DoorTask | None]:
        """How a task ended; awaited, the task as stored (None: it is gone, with its pairing)."""
        now = self._file._clock()
        update = "UPDATE door_tasks SET state = ?, reply = ?, words = ?, updated = ? WHERE id = ?"
        # Read back in the same transaction; not with RETURNING, which SQLite has only since 3.35
        # (RHEL 8's Python links 3.26).
        select = "SELECT * FROM door_tasks WHERE id = ?"

        def change(db: sqlite3.Connection) -> DoorTask | None:
            db.execute(update, (state, reply, words, now, task_id))
            cursor = db.execute(select, (task_id,))
            row = cursor.fetchone()
            names = [column[0] for column in cursor.description]
            return None if row is None else from_row(DoorTask, dict(zip(names, row, strict=True)))

        return self._file._writer.change(change)

    def get(self, task_id: str, pairing_id: str, agent: str) -> DoorTask | None:
        """The task, only when it belongs to this pairing and agent: anyone else's is not found."""
        rows = self._file.select(
            "SELECT * FROM door_tasks WHERE id = ? AND pairing_id = ? AND agent = ?",
            (task_id, pairing_id, agent),
        )
        return from_row(DoorTask, rows[0]) if rows else None

    def page(
        self,
        pairing_id: str,
        agent: str,
        *,
        context_id: str | None = None,
        state: str | None = None,
        updated_after: float | None = None,
        limit: int = 50,
        offset: int = 0,
    ) -> tuple[list[DoorTask], int]:
        """One page of a pairing's tasks with one agent, newest first, and how many there are."""
        where, args = "pairing_id = ? AND agent = ?", list[Any]([pairing_id, agent])
        for column, value in (("context_id", context_id), ("state", state)):
            if value is not None:
                where, args = f"{where} AND {column} = ?", [*args, value]
        if updated_after is not None:
            where, args = f"{where} AND updated >= ?", [*args, updated_after]
        # The clauses are this module's own text; only the values come from the caller.
        count = f"SELECT count(*) AS n FROM door_tasks WHERE {where}"  # noqa: S608
        total = self._file.select(count, tuple(args))
        rows = self._file.select(
            f"SELECT * FROM door_tasks WHERE {where}"  # noqa: S608
            " ORDER BY created DESC, rowid DESC LIMIT ? OFFSET ?",
            (*args, max(limit, 0), max(offset, 0)),
        )
        return [from_row(DoorTask, row) for row in rows], int(total[0]["n"])

    def fail_unfinished(self, words: str) -> int:
        """End tasks a stopped server left working: their answers are not coming. Called once at
        start-up, before the door opens, so it waits for the writer."""
        now = self._file._clock()
        return self._file._writer.change_now(
            lambda db: (
                db.execute(
                    "UPDATE door_tasks SET state = 'TASK_STATE_FAILED', words = ?, updated = ?"
                    " WHERE state IN ('TASK_STATE_SUBMITTED', 'TASK_STATE_WORKING')",
                    (words, now),
                ).rowcount
            )
        )

    def forget_pairing(self, pairing_id: str) -> Pending[None]:
        """Delete a revoked pairing's tasks and chats; what it spent stays counted."""

        def change(db: sqlite3.Connection) -> None:
            db.execute("DELETE FROM door_tasks WHERE pairing_id = ?", (pairing_id,))
            db.execute(
                "DELETE FROM conversations WHERE origin = 'peer' AND pairing_id = ?", (pairing_id,)
            )

        return self._file._writer.change(change)
