"""The chat store in SQLite: conversations, messages, events, the spend ledger, outside contexts,
and the A2A door's tasks.

One file, `conch.sqlite3` (0600), in WAL mode with `synchronous=FULL`: a committed message or a
spent dollar survives a crash or a power cut. Every write is one transaction, so a failure (a full
disk, a damaged page) rolls back and leaves what was stored before; it surfaces as a StoreError in
words. A file that is not Conch's database is never recreated over: that too is a StoreError
naming it.

Not thread-safe, by design: one connection, used by one thread (the Jupyter server's event loop).
sqlite3's same-thread check is left on so that a call from another thread fails loudly.

Spend rows outlive their chat (`ON DELETE SET NULL`): deleting a chat must not give back what it
spent against the monthly budget.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import os
import sqlite3
import uuid
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any, TypeVar

from .files import StoreError, ensure_private_dir
from .rows import (
    Conversation,
    DoorTask,
    Event,
    Message,
    Mode,
    Origin,
    Role,
    Spend,
    decode_json,
    encode_json,
    month_start,
)
from .store_schema import _MIGRATIONS, SCHEMA_VERSION

__all__ = [
    "SCHEMA_VERSION",
    "Conversation",
    "DoorTask",
    "Event",
    "Message",
    "Mode",
    "NotFound",
    "Origin",
    "Role",
    "Spend",
    "Store",
    "month_start",
]

_R = TypeVar("_R", "Conversation", "Message", "Event", "DoorTask")
_LEAVE_IT = "fix or move it away — Conch will not overwrite it"
_JSON_COLUMNS = frozenset({"tainted", "round", "data", "tool"})


class NotFound(LookupError):
    """No chat with that id (it may have been deleted). `message` is words for a person."""

    def __init__(self, conversation_id: str) -> None:
        self.message = f"There is no chat with the id “{conversation_id}”."
        super().__init__(self.message)


class Store:
    """The chat store over one SQLite file. One thread only; see the module docstring."""

    def __init__(self, path: Path | str, clock: Callable[[], float]) -> None:
        self.path = Path(path)
        self._clock = clock
        ensure_private_dir(self.path.parent)
        try:
            # Made 0600 before SQLite sees it; the -wal and -shm files copy the main file's mode.
            os.close(os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600))
            os.chmod(self.path, 0o600)
        except OSError as e:
            raise StoreError(f"Could not open {self.path}: {e.strerror or e}.", self.path) from e
        with self._guard("open"):
            # isolation_level=None: transactions are ours (BEGIN IMMEDIATE … COMMIT), not implicit.
            self._db = sqlite3.connect(self.path, isolation_level=None)
        self._db.row_factory = sqlite3.Row
        try:
            with self._guard("open"):
                # Read before any write, so a file that is not ours is left byte for byte.
                version = self._version()
                mode = self._db.execute("PRAGMA journal_mode=WAL").fetchone()[0]
                if str(mode).lower() != "wal":
                    raise StoreError(f"{self.path} cannot use write-ahead logging.", self.path)
                self._db.execute("PRAGMA synchronous=FULL")
                self._db.execute("PRAGMA foreign_keys=ON")
                self._db.execute("PRAGMA busy_timeout=5000")  # another server on the same data
                self._migrate(version)
        except BaseException:
            self._db.close()
            raise

    def __repr__(self) -> str:
        return f"Store({str(self.path)!r})"

    def close(self) -> None:
        self._db.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- conversations ------------------------------------------------------------------------

    def create_conversation(
        self,
        title: str = "",
        origin: Origin = "user",
        pairing_id: str | None = None,
        context_key: str | None = None,
        tainted: dict[str, Any] | None = None,
        path: str | None = None,
    ) -> Conversation:
        if origin not in ("user", "peer"):
            raise ValueError(f"origin must be 'user' or 'peer', not {origin!r}")
        conversation = Conversation(
            f"c_{uuid.uuid4().hex[:16]}",
            title,
            self._clock(),
            origin,
            None,
            tainted,
            pairing_id,
            context_key,
            path,
        )
        with self._transaction():
            self._insert("conversations", conversation)
        return conversation

    def get_conversation(self, conversation_id: str) -> Conversation | None:
        rows = self._select("SELECT * FROM conversations WHERE id = ?", (conversation_id,))
        return _from_row(Conversation, rows[0]) if rows else None

    def list_conversations(self, origin: Origin = "user") -> list[Conversation]:
        """Newest first."""
        rows = self._select(
            "SELECT * FROM conversations WHERE origin = ? ORDER BY created DESC, rowid DESC",
            (origin,),
        )
        return [_from_row(Conversation, row) for row in rows]

    def peer_chats(self, pairing_id: str) -> list[Conversation]:
        """The chats a pairing's door opened, newest first."""
        rows = self._select(
            "SELECT * FROM conversations WHERE pairing_id = ? ORDER BY created DESC, rowid DESC",
            (pairing_id,),
        )
        return [_from_row(Conversation, row) for row in rows]

    def find_peer_chat(self, pairing_id: str, context_key: str) -> Conversation | None:
        rows = self._select(
            "SELECT * FROM conversations WHERE pairing_id = ? AND context_key = ?",
            (pairing_id, context_key),
        )
        return _from_row(Conversation, rows[0]) if rows else None

    def set_agent(self, conversation_id: str, agent_id: str | None) -> None:
        with self._transaction():
            self._require(conversation_id)
            self._db.execute(
                "UPDATE conversations SET agent = ? WHERE id = ?", (agent_id, conversation_id)
            )

    def set_mode(self, conversation_id: str, mode: Mode) -> None:
        """The chat's mode for running code; only the user's own requests reach this."""
        if mode not in ("ask", "auto", "read"):
            raise ValueError(f"mode must be ask, auto or read, not {mode!r}")
        with self._transaction():
            self._require(conversation_id)
            self._db.execute(
                "UPDATE conversations SET mode = ? WHERE id = ?", (mode, conversation_id)
            )

    def set_taint(self, conversation_id: str, taint: dict[str, Any]) -> None:
        """Mark the chat as holding someone else's words. The first taint stays for good."""
        with self._transaction():
            self._require(conversation_id)
            self._db.execute(
                "UPDATE conversations SET tainted = ? WHERE id = ? AND tainted IS NULL",
                (encode_json(taint), conversation_id),
            )

    def delete_conversation(self, conversation_id: str) -> bool:
        """Delete a chat with its messages, events and contexts; its spend stays counted."""
        with self._transaction():
            cursor = self._db.execute("DELETE FROM conversations WHERE id = ?", (conversation_id,))
        return cursor.rowcount > 0

    # -- messages and events ------------------------------------------------------------------

    def add_message(
        self,
        conversation_id: str,
        role: Role,
        text: str,
        agent: str | None = None,
        round: dict[str, Any] | None = None,
        *,
        id: str | None = None,
        tool: dict[str, Any] | None = None,
    ) -> Message:
        if role not in ("user", "agent", "outside", "note", "tool"):
            raise ValueError(f"role must be user, agent, outside, note or tool, not {role!r}")
        if (role == "tool") != (tool is not None):
            raise ValueError("a tool message, and only a tool message, carries its tool call")
        message = Message(
            id or f"m_{uuid.uuid4().hex[:16]}",
            conversation_id,
            role,
            text,
            self._clock(),
            agent,
            round,
            tool,
        )
        with self._transaction():
            self._require(conversation_id)
            seq = self._insert("messages", message)
        return dataclasses.replace(message, seq=seq)

    def messages(self, conversation_id: str, limit: int | None = None) -> list[Message]:
        """Oldest first; with `limit`, only the last `limit` of them."""
        # LIMIT -1 is SQLite's "no limit".
        rows = self._select(
            "SELECT * FROM (SELECT * FROM messages WHERE conversation_id = ?"
            " ORDER BY seq DESC LIMIT ?) ORDER BY seq",
            (conversation_id, -1 if limit is None else max(limit, 0)),
        )
        return [_from_row(Message, row) for row in rows]

    def last_agent_message(self, conversation_id: str) -> Message | None:
        """The latest reply by one of your agents (role "agent")."""
        rows = self._select(
            "SELECT * FROM messages WHERE conversation_id = ? AND role = 'agent'"
            " ORDER BY seq DESC LIMIT 1",
            (conversation_id,),
        )
        return _from_row(Message, rows[0]) if rows else None

    def add_event(self, conversation_id: str, type: str, data: dict[str, Any]) -> Event:
        clash = {"seq", "type", "created"} & set(data)
        if clash:
            raise ValueError(f"event data may not use the names {sorted(clash)}")
        event = Event(0, conversation_id, type, dict(data), self._clock())
        with self._transaction():
            self._require(conversation_id)
            seq = self._insert("events", event)
        return dataclasses.replace(event, seq=seq)

    def events(self, conversation_id: str, after_seq: int = 0) -> list[Event]:
        rows = self._select(
            "SELECT * FROM events WHERE conversation_id = ? AND seq > ? ORDER BY seq",
            (conversation_id, after_seq),
        )
        return [_from_row(Event, row) for row in rows]

    # -- spend --------------------------------------------------------------------------------

    def add_spend(
        self,
        usd: float,
        *,
        conversation_id: str | None = None,
        agent: str | None = None,
        payer: str | None = None,
        input_tokens: int = 0,
        output_tokens: int = 0,
        estimated: bool = False,
    ) -> None:
        """Record metered spend. `payer` names who it is charged to beyond the chat (a pairing);
        `estimated` marks an amount Conch counted because the provider reported none."""
        if not math.isfinite(usd) or usd < 0:
            raise ValueError(f"spend must be a finite amount of dollars, zero or more, not {usd}")
        spend = Spend(
            float(usd),
            conversation_id,
            agent,
            payer,
            input_tokens,
            output_tokens,
            self._clock(),
            estimated,
        )
        with self._transaction():
            self._insert("spend", spend)

    def spent(self, conversation_id: str) -> float:
        rows = self._select(
            "SELECT COALESCE(SUM(usd), 0.0) AS usd FROM spend WHERE conversation_id = ?",
            (conversation_id,),
        )
        return float(rows[0]["usd"])

    def spend_entries(self, conversation_id: str) -> list[Spend]:
        """A chat's ledger rows, oldest first."""
        rows = self._select(
            "SELECT * FROM spend WHERE conversation_id = ? ORDER BY seq", (conversation_id,)
        )
        return [Spend(**{**row, "estimated": bool(row["estimated"])}) for row in rows]

    def spent_since(self, since: float, payer: str | None = None) -> float:
        """Spend recorded at or after `since`; by one payer, or by everyone when None."""
        sql = "SELECT COALESCE(SUM(usd), 0.0) AS usd FROM spend WHERE created >= ?"
        args: tuple[Any, ...] = (since,)
        if payer is not None:
            sql, args = sql + " AND payer = ?", (since, payer)
        return float(self._select(sql, args)[0]["usd"])

    # -- outside contexts (an outside agent's contextId for one of our chats) ------------------

    def context_id(self, conversation_id: str, outside_id: str) -> str | None:
        rows = self._select(
            "SELECT context_id FROM contexts WHERE conversation_id = ? AND outside_id = ?",
            (conversation_id, outside_id),
        )
        return str(rows[0]["context_id"]) if rows else None

    def set_context_id(self, conversation_id: str, outside_id: str, context_id: str) -> None:
        with self._transaction():
            self._require(conversation_id)
            self._db.execute(
                "INSERT INTO contexts (conversation_id, outside_id, context_id) VALUES (?, ?, ?)"
                " ON CONFLICT (conversation_id, outside_id) DO UPDATE SET"
                " context_id = excluded.context_id",
                (conversation_id, outside_id, context_id),
            )

    # -- the door's tasks -----------------------------------------------------------------------

    def create_door_task(
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
    ) -> DoorTask:
        now = self._clock()
        task = DoorTask(
            str(uuid.uuid4()),
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
        with self._transaction():
            self._insert("door_tasks", task)
        return task

    def finish_door_task(
        self, task_id: str, state: str, *, reply: str | None = None, words: str | None = None
    ) -> None:
        with self._transaction():
            self._db.execute(
                "UPDATE door_tasks SET state = ?, reply = ?, words = ?, updated = ? WHERE id = ?",
                (state, reply, words, self._clock(), task_id),
            )

    def door_task(self, task_id: str, pairing_id: str, agent: str) -> DoorTask | None:
        """The task, only when it belongs to this pairing and agent: anyone else's is not found."""
        rows = self._select(
            "SELECT * FROM door_tasks WHERE id = ? AND pairing_id = ? AND agent = ?",
            (task_id, pairing_id, agent),
        )
        return _from_row(DoorTask, rows[0]) if rows else None

    def door_tasks(
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
        total = self._select(count, tuple(args))
        rows = self._select(
            f"SELECT * FROM door_tasks WHERE {where}"  # noqa: S608
            " ORDER BY created DESC, rowid DESC LIMIT ? OFFSET ?",
            (*args, max(limit, 0), max(offset, 0)),
        )
        return [_from_row(DoorTask, row) for row in rows], int(total[0]["n"])

    def fail_unfinished_door_tasks(self, words: str) -> int:
        """End tasks a stopped server left working: their answers are not coming."""
        with self._transaction():
            cursor = self._db.execute(
                "UPDATE door_tasks SET state = 'TASK_STATE_FAILED', words = ?, updated = ?"
                " WHERE state IN ('TASK_STATE_SUBMITTED', 'TASK_STATE_WORKING')",
                (words, self._clock()),
            )
        return cursor.rowcount

    def forget_pairing(self, pairing_id: str) -> None:
        """Delete a revoked pairing's tasks and chats; what it spent stays counted."""
        with self._transaction():
            self._db.execute("DELETE FROM door_tasks WHERE pairing_id = ?", (pairing_id,))
            self._db.execute(
                "DELETE FROM conversations WHERE origin = 'peer' AND pairing_id = ?", (pairing_id,)
            )

    # -- inside --------------------------------------------------------------------------------

    @contextlib.contextmanager
    def _guard(self, doing: str) -> Iterator[None]:
        """sqlite3's errors, said in words and naming the file."""
        try:
            yield
        except (sqlite3.ProgrammingError, sqlite3.InterfaceError, sqlite3.IntegrityError):
            raise  # A mistake in the call (a closed store, a duplicate id), not in the file.
        except sqlite3.OperationalError as e:
            if "full" in str(e):
                why = "the disk (or the database's size limit) is full"
            else:
                why = f"SQLite said: {e}"
            raise StoreError(f"Could not {doing} {self.path}: {why}.", self.path) from e
        except sqlite3.DatabaseError as e:
            raise StoreError(
                f"{self.path} is not a Conch database or is damaged (SQLite said: {e}); "
                f"{_LEAVE_IT}.",
                self.path,
            ) from e

    @contextlib.contextmanager
    def _transaction(self) -> Iterator[None]:
        with self._guard("save to"):
            # IMMEDIATE takes the write lock up front, so a commit never fails on a busy lock.
            self._db.execute("BEGIN IMMEDIATE")
            try:
                yield
                self._db.execute("COMMIT")
            except BaseException:
                # SQLite may have rolled back already (a full disk does that).
                if self._db.in_transaction:
                    with contextlib.suppress(sqlite3.Error):
                        self._db.execute("ROLLBACK")
                raise

    def _select(self, sql: str, args: tuple[Any, ...]) -> list[dict[str, Any]]:
        with self._guard("read"):
            return [dict(row) for row in self._db.execute(sql, args).fetchall()]

    def _insert(self, table: str, item: Conversation | Message | Event | Spend | DoorTask) -> int:
        """Insert a row from its dataclass (field = column; seq is SQLite's); return its seq."""
        row = {
            name: encode_json(value) if name in _JSON_COLUMNS else value
            for name, value in dataclasses.asdict(item).items()
            if name != "seq"
        }
        # The table and column names come from this module, never from a caller.
        columns, marks = ", ".join(row), ", ".join("?" * len(row))
        sql = f"INSERT INTO {table} ({columns}) VALUES ({marks})"  # noqa: S608
        return self._db.execute(sql, tuple(row.values())).lastrowid or 0

    def _require(self, conversation_id: str) -> None:
        row = self._db.execute("SELECT 1 FROM conversations WHERE id = ?", (conversation_id,))
        if row.fetchone() is None:
            raise NotFound(conversation_id)

    def _version(self) -> int:
        """The schema version, refusing a file that is someone else's or a newer Conch's."""
        # The first read of the file: this is where "not a database" shows.
        version = int(self._db.execute("PRAGMA user_version").fetchone()[0])
        if version > SCHEMA_VERSION:
            raise StoreError(
                f"{self.path} was written by a newer Conch (schema {version}); "
                "update Conch to open it.",
                self.path,
            )
        if version == 0 and self._db.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]:
            raise StoreError(
                f"{self.path} is a SQLite database, but not Conch's; {_LEAVE_IT}.", self.path
            )
        return version

    def _migrate(self, version: int) -> None:
        while version < SCHEMA_VERSION:
            with self._transaction():
                # Read again under the write lock: another server may have just migrated it.
                version = int(self._db.execute("PRAGMA user_version").fetchone()[0])
                if version < SCHEMA_VERSION:
                    _MIGRATIONS[version](self._db)
                    version += 1
                    self._db.execute(f"PRAGMA user_version = {version}")


def _from_row(cls: type[_R], row: Mapping[str, Any]) -> _R:
    return cls(**{name: decode_json(v) if name in _JSON_COLUMNS else v for name, v in row.items()})
