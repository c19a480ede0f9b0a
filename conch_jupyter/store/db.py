"""The chat store's SQLite file itself: opening it, its errors in words, its schema version, and
rows to and from the dataclasses in rows.py. chats.py reads through these; writer.py writes.

One file, `conch.sqlite3` (0600), in WAL mode. The connection that writes has `synchronous=FULL`
(a committed message or a spent dollar survives a crash or a power cut); the one that reads has
`query_only`, so a write can only go through the writer. A file that is not Conch's database is
never recreated over: that is a StoreError naming it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TypeVar

from ..core.files import StoreError, ensure_private_dir
from .rows import Conversation, DoorTask, Event, Message, Spend, encode_json
from .schema import _MIGRATIONS, SCHEMA_VERSION

_R = TypeVar("_R", Conversation, Message, Event, DoorTask)
_LEAVE_IT = "fix or move it away — Conch will not overwrite it"
_JSON_COLUMNS = frozenset({"tainted", "round", "data", "tool"})


class guard:
    """sqlite3's errors, said in words and naming the file. A class, not a generator: every
    read of the store goes through one, and a generator's context manager costs four times as
    much to enter and leave."""

    __slots__ = ("doing", "path")

    def __init__(self, path: Path, doing: str) -> None:
        self.path, self.doing = path, doing

    def __enter__(self) -> None:
        return None

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: object
    ) -> None:
        path = self.path
        if isinstance(error, UnicodeEncodeError):
            # The last line of defence: text is cleaned where it enters (core.text.clean_text), and
            # text that UTF-8 cannot hold (a lone surrogate) that got past that never reaches
            # the file; the change is refused in words, and the writer goes on.
            raise StoreError(
                f"Could not {self.doing} {path}: the text holds a character that is not Unicode"
                f" text ({error.object[error.start : error.end]!r}), so it was not stored.",
                path,
            ) from error
        if isinstance(
            error, sqlite3.ProgrammingError | sqlite3.InterfaceError | sqlite3.IntegrityError
        ):
            return  # A mistake in the call (a closed store, a duplicate id), not in the file.
        if isinstance(error, sqlite3.OperationalError):
            if "full" in str(error):
                why = "the disk (or the database's size limit) is full"
            else:
                why = f"SQLite said: {error}"
            raise StoreError(f"Could not {self.doing} {path}: {why}.", path) from error
        if isinstance(error, sqlite3.DatabaseError):
            raise StoreError(
                f"{path} is not a Conch database or is damaged (SQLite said: {error}); "
                f"{_LEAVE_IT}.",
                path,
            ) from error


def open_writer(path: Path) -> sqlite3.Connection:
    """The connection that makes every change, with the schema brought up to date.

    Made here, on the caller's thread, then handed to the writer thread, which alone uses it
    (hence check_same_thread=False).
    """
    ensure_private_dir(path.parent)
    try:
        # Made 0600 before SQLite sees it; the -wal and -shm files copy the main file's mode.
        os.close(os.open(path, os.O_RDWR | os.O_CREAT, 0o600))
        os.chmod(path, 0o600)
    except OSError as e:
        raise StoreError(f"Could not open {path}: {e.strerror or e}.", path) from e
    with guard(path, "open"):
        # isolation_level=None: transactions are ours (BEGIN IMMEDIATE … COMMIT), not implicit.
        db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    try:
        with guard(path, "open"):
            # Read before any write, so a file that is not ours is left byte for byte.
            version = _version(db, path)
            mode = db.execute("PRAGMA journal_mode=WAL").fetchone()[0]
            if str(mode).lower() != "wal":
                raise StoreError(f"{path} cannot use write-ahead logging.", path)
            db.execute("PRAGMA synchronous=FULL")
            db.execute("PRAGMA foreign_keys=ON")
            db.execute("PRAGMA busy_timeout=5000")  # another server on the same data
            _migrate(db, path, version)
    except BaseException:
        db.close()
        raise
    return db


def open_reader(path: Path) -> sqlite3.Connection:
    """A connection that only reads, for the thread that opened it (the server's event loop).

    In WAL mode it never waits for the writer, and it sees each change once it is committed.
    """
    with guard(path, "open"):
        db = sqlite3.connect(path, isolation_level=None)
        try:
            db.execute("PRAGMA query_only=ON")
            db.execute("PRAGMA busy_timeout=5000")
        except BaseException:
            db.close()
            raise
    db.row_factory = sqlite3.Row
    return db


@contextlib.contextmanager
def transaction(db: sqlite3.Connection, path: Path) -> Iterator[None]:
    with guard(path, "save to"):
        # IMMEDIATE takes the write lock up front, so a commit never fails on a busy lock.
        db.execute("BEGIN IMMEDIATE")
        try:
            yield
            db.execute("COMMIT")
        except BaseException:
            rollback(db)
            raise


def rollback(db: sqlite3.Connection) -> None:
    # SQLite may have rolled back already (a full disk does that).
    if db.in_transaction:
        with contextlib.suppress(sqlite3.Error):
            db.execute("ROLLBACK")


def insert(
    db: sqlite3.Connection, table: str, item: Conversation | Message | Event | Spend | DoorTask
) -> int:
    """Insert a row from its dataclass (field = column; seq is SQLite's); return its seq."""
    made = _INSERTS.get((table, type(item)))
    if made is None:
        # Made once per table (it runs for every stored row): the columns and the statement.
        columns = tuple(f.name for f in dataclasses.fields(item) if f.name != "seq")
        marks = ", ".join("?" * len(columns))
        # The table and column names come from this module's callers, never from a request.
        sql = f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({marks})"  # noqa: S608
        made = _INSERTS[(table, type(item))] = (sql, columns)
    sql, columns = made
    values = [getattr(item, name) for name in columns]
    for at, name in enumerate(columns):
        if name in _JSON_COLUMNS:
            values[at] = encode_json(values[at])
    return db.execute(sql, values).lastrowid or 0


_INSERTS: dict[tuple[str, type[Any]], tuple[str, tuple[str, ...]]] = {}


def from_row(cls: type[_R], row: dict[str, Any]) -> _R:
    """A row as its dataclass, its JSON columns decoded (in `row`, which is the caller's own
    fresh dict, not copied). A turn reads its whole history window this way (40 messages), so
    what is the same for every row of a class is found once."""
    json_fields = _JSON_FIELDS.get(cls)
    if json_fields is None:
        found = (f.name for f in dataclasses.fields(cls))
        json_fields = _JSON_FIELDS[cls] = tuple(name for name in found if name in _JSON_COLUMNS)
    for name in json_fields:
        text = row.get(name)
        if text is not None:
            row[name] = json.loads(text)
    return cls(**row)


_JSON_FIELDS: dict[type[Any], tuple[str, ...]] = {}


def _version(db: sqlite3.Connection, path: Path) -> int:
    """The schema version, refusing a file that is someone else's or a newer Conch's."""
    # The first read of the file: this is where "not a database" shows.
    version = int(db.execute("PRAGMA user_version").fetchone()[0])
    if version > SCHEMA_VERSION:
        raise StoreError(
            f"{path} was written by a newer Conch (schema {version}); update Conch to open it.",
            path,
        )
    if version == 0 and db.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]:
        raise StoreError(f"{path} is a SQLite database, but not Conch's; {_LEAVE_IT}.", path)
    return version


def _migrate(db: sqlite3.Connection, path: Path, version: int) -> None:
    while version < SCHEMA_VERSION:
        with transaction(db, path):
            # Read again under the write lock: another server may have just migrated it.
            version = int(db.execute("PRAGMA user_version").fetchone()[0])
            if version < SCHEMA_VERSION:
                _MIGRATIONS[version](db)
                version += 1
                db.execute(f"PRAGMA user_version = {version}")
