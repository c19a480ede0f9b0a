"""One SQLite file as the store's parts share it: its path, its one writer, its reading
connection and the clock. `Store` is one (chats.py); its parts (the door's tasks) hold one.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .db import guard
from .writer import StoreClosed, Writer


class StoreFile:
    """What Store and its parts share: the file, the writer, the reading connection, the clock."""

    path: Path
    _writer: Writer
    _db: sqlite3.Connection
    _clock: Callable[[], float]

    def data_version(self) -> int:
        """A number that changes whenever the writer commits (SQLite's data_version, as the
        reading connection sees it): what was read before holds while it is the same."""
        if self._writer.closed:
            raise StoreClosed(self.path)
        with guard(self.path, "read"):
            return int(self._db.execute("PRAGMA data_version").fetchone()[0])

    def select(self, sql: str, args: tuple[Any, ...]) -> list[dict[str, Any]]:
        if self._writer.closed:  # the reader closes with it; say so rather than sqlite3's words
            raise StoreClosed(self.path)
        with guard(self.path, "read"):
            return [dict(row) for row in self._db.execute(sql, args).fetchall()]
