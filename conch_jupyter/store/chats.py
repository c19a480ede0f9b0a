"""The chat store in SQLite: conversations, messages, events, the spend ledger, outside contexts,
and the A2A door's tasks.

Reads are plain calls, on the thread that opened the store (the Jupyter server's event loop), over
a connection that only reads (store/db.py). Every change is awaited: it is queued when the method
is called (so changes are made in the order they were asked for, even when awaited together),
made by the store's one writer thread (store/writer.py), committed with `synchronous=FULL` and so
durable when the await returns, and never blocks the event loop on the disk. Each change is all
or nothing: a failure (a full disk, a damaged page) leaves what was stored before and surfaces as
a StoreError in words.
A file that is not Conch's database is never recreated over: that too is a StoreError naming it.

Spend rows outlive their chat (`ON DELETE SET NULL`): deleting a chat must not give back what it
spent against the monthly budget.
"""

from __future__ import annotations

import dataclasses
import math
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..core.errors import ConchError
from .db import from_row, insert, open_reader, open_writer
from .door_tasks import DoorTasks
from .file import StoreFile
from .mcp_servers import McpServers
from .pages import BadCursor, Pages, StreamCursor
from .rows import (
    Conversation,
    DoorTask,
    Event,
    Message,
    Mode,
    Origin,
    Role,
    Spend,
    encode_json,
    month_start,
    row_id,
)
from .schema import SCHEMA_VERSION
from .writer import Pending, Queued, Writer, then

__all__ = [
    "SCHEMA_VERSION",
    "BadCursor",
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
    "StreamCursor",
    "month_start",
]


class NotFound(ConchError, LookupError):
    """No chat with that id (it may have been deleted): 404 `not_found`. The words do not echo
    the id back; the log (`str()`) names it."""

    status = 404

    def __init__(self, conversation_id: str) -> None:
        super().__init__(
            "not_found",
            "There is no such chat.",
            logged=f"There is no chat with the id “{conversation_id}”.",
        )
        self.conversation_id = conversation_id


class Store(StoreFile):
    """The chat store over one SQLite file; see the module docstring.

    The clock is read and ids are made by the caller, before a change is queued, so what a change
    stores does not depend on when the writer gets to it.
    """

    def __init__(self, path: Path | str, clock: Callable[[], float]) -> None:
        self.path = Path(path)
        self._clock = clock
        self._writer = Writer(open_writer(self.path), self.path)
        try:
            self._db = open_reader(self.path)
        except BaseException:
            self._writer.close()
            raise
        self.door_tasks = DoorTasks(self)
        self.mcp_servers = McpServers(self)
        self.pages = Pages(self)

    def __repr__(self) -> str:
        return f"Store({str(self.path)!r})"

    def close(self) -> None:
        """Make the changes still queued, then close. Closing twice is harmless."""
        self._writer.close()
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
        agent: str | None = None,
        path: str | None = None,
    ) -> Queued[Conversation]:
        if origin not in ("user", "peer"):
            raise ValueError(f"origin must be 'user' or 'peer', not {origin!r}")
        conversation = Conversation(
            row_id("c"),
            title,
            self._clock(),
            origin,
            agent,
            tainted,
            pairing_id,
            context_key,
            path,
        )
        return Queued(
            conversation,
            self._writer.change(lambda db: insert(db, "conversations", conversation)),
        )

    def get_conversation(self, conversation_id: str) -> Conversation | None:
        rows = self.select("SELECT * FROM conversations WHERE id = ?", (conversation_id,))
        return from_row(Conversation, rows[0]) if rows else None

    def list_conversations(self, origin: Origin = "user") -> list[Conversation]:
        """Newest first."""
        rows = self.select(
            "SELECT * FROM conversations WHERE origin = ? ORDER BY created DESC, rowid DESC",
            (origin,),
        )
        return [from_row(Conversation, row) for row in rows]

    def find_chat_room(self, chat_id: str) -> Conversation | None:
        """The chat kept for the Jupyter Chat file with this id (its `metadata.id`), if any."""
        rows = self.select("SELECT * FROM conversations WHERE chat_id = ?", (chat_id,))
        return from_row(Conversation, rows[0]) if rows else None

    def chat_room(self, chat_id: str, chat_file: str) -> Pending[Conversation]:
        """The chat kept for a Jupyter Chat file, found by the file's own id (which a rename
        keeps), its path brought up to date; made, titled by the file, the first time."""
        if not chat_id or not chat_file:
            raise ValueError("a chat room needs its file's id and path")
        made = Conversation(
            row_id("c"),
            chat_file.rsplit("/", 1)[-1].removesuffix(".chat"),
            self._clock(),
            "user",
            None,
            None,
            chat_file=chat_file,
            chat_id=chat_id,
        )

        def change(db: sqlite3.Connection) -> Conversation:
            cursor = db.execute("SELECT * FROM conversations WHERE chat_id = ?", (chat_id,))
            found = cursor.fetchone()
            if found is None:
                insert(db, "conversations", made)
                return made
            columns = [d[0] for d in cursor.description]
            kept = from_row(Conversation, dict(zip(columns, found, strict=True)))
            if kept.chat_file != chat_file:
                sql = "UPDATE conversations SET chat_file = ? WHERE id = ?"
                db.execute(sql, (chat_file, kept.id))
                kept = dataclasses.replace(kept, chat_file=chat_file)
            return kept

        return self._writer.change(change)

    def peer_chats(self, pairing_id: str) -> list[Conversation]:
        """The chats a pairing's door opened, newest first."""
        rows = self.select(
            "SELECT * FROM conversations WHERE pairing_id = ? ORDER BY created DESC, rowid DESC",
            (pairing_id,),
        )
        return [from_row(Conversation, row) for row in rows]

    def find_peer_chat(self, pairing_id: str, context_key: str) -> Conversation | None:
        rows = self.select(
            "SELECT * FROM conversations WHERE pairing_id = ? AND context_key = ?",
            (pairing_id, context_key),
        )
        return from_row(Conversation, rows[0]) if rows else None

    def set_agent(self, conversation_id: str, agent_id: str | None) -> Pending[None]:
        def change(db: sqlite3.Connection) -> None:
            _require(db, conversation_id)
            db.execute(
                "UPDATE conversations SET agent = ? WHERE id = ?", (agent_id, conversation_id)
            )

        return self._writer.change(change)

    def set_mode(self, conversation_id: str, mode: Mode) -> Pending[None]:
        """The chat's mode for running code; only the user's own requests reach this."""
        if mode not in ("ask", "auto", "read"):
            raise ValueError(f"mode must be ask, auto or read, not {mode!r}")

        def change(db: sqlite3.Connection) -> None:
            _require(db, conversation_id)
            db.execute("UPDATE conversations SET mode = ? WHERE id = ?", (mode, conversation_id))

        return self._writer.change(change)

    def set_chat_limit(self, conversation_id: str, usd: float | None) -> Pending[None]:
        """The chat's own spending limit (None: back to the server's default)."""
        checked = None if usd is None else _dollars(usd, "a chat's limit")

        def change(db: sqlite3.Connection) -> None:
            _require(db, conversation_id)
            db.execute(
                "UPDATE conversations SET limit_usd = ? WHERE id = ?", (checked, conversation_id)
            )

        return self._writer.change(change)

    def monthly_budget(self) -> float | None:
        """The month's budget set in Settings; None when none was (the server's default holds)."""
        rows = self.select("SELECT usd FROM limits WHERE name = ?", ("month",))
        return float(rows[0]["usd"]) if rows else None

    def set_monthly_budget(self, usd: float | None) -> Pending[None]:
        """The month's budget (None: back to the server's default)."""
        checked = None if usd is None else _dollars(usd, "the month's budget")

        def change(db: sqlite3.Connection) -> None:
            if checked is None:
                db.execute("DELETE FROM limits WHERE name = 'month'")
            else:
                db.execute(
                    "INSERT INTO limits (name, usd) VALUES ('month', ?)"
                    " ON CONFLICT (name) DO UPDATE SET usd = excluded.usd",
                    (checked,),
                )

        return self._writer.change(change)

    def set_taint(self, conversation_id: str, taint: dict[str, Any]) -> Pending[None]:
        """Mark the chat as holding someone else's words. The first taint stays for good."""
        encoded = encode_json(taint)

        def change(db: sqlite3.Connection) -> None:
            _require(db, conversation_id)
            db.execute(
                "UPDATE conversations SET tainted = ? WHERE id = ? AND tainted IS NULL",
                (encoded, conversation_id),
            )

        return self._writer.change(change)

    def delete_conversation(self, conversation_id: str) -> Pending[bool]:
        """Delete a chat with its messages, events and contexts; its spend stays counted."""

        def change(db: sqlite3.Connection) -> bool:
            sql = "DELETE FROM conversations WHERE id = ?"
            return db.execute(sql, (conversation_id,)).rowcount > 0

        return self._writer.change(change)

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
        chat_agent: bool = False,
        via: str | None = None,
    ) -> Pending[Message]:
        """Store a message; with `chat_agent`, its agent becomes the chat's, in the same change."""
        if role not in ("user", "agent", "outside", "note", "tool"):
            raise ValueError(f"role must be user, agent, outside, note or tool, not {role!r}")
        if (role == "tool") != (tool is not None):
            raise ValueError("a tool message, and only a tool message, carries its tool call")
        message = Message(
            id or row_id("m"),
            conversation_id,
            role,
            text,
            self._clock(),
            agent,
            round,
            tool,
            via,
        )

        def change(db: sqlite3.Connection) -> int:
            _require(db, conversation_id)
            if chat_agent:
                sql = "UPDATE conversations SET agent = ? WHERE id = ?"
                db.execute(sql, (agent, conversation_id))
            return insert(db, "messages", message)

        return then(self._writer.change(change), lambda seq: dataclasses.replace(message, seq=seq))

    def set_tool(self, message: Message, tool: dict[str, Any]) -> Pending[Message]:
        """Change what a tool message says of its call (a write undone: `undo` false)."""
        if message.role != "tool":
            raise ValueError("only a tool message carries its tool call")
        encoded = encode_json(tool)

        def change(db: sqlite3.Connection) -> None:
            sql = "UPDATE messages SET tool = ? WHERE id = ? AND conversation_id = ?"
            db.execute(sql, (encoded, message.id, message.conversation_id))

        return then(self._writer.change(change), lambda _: dataclasses.replace(message, tool=tool))

    def end_undos(self) -> Pending[None]:
        """At the server's start: no write of an earlier run can be undone any more (what undoes
        it was held in memory), so no tool message offers Undo."""

        def change(db: sqlite3.Connection) -> None:
            db.execute(
                "UPDATE messages SET tool = json_set(tool, '$.undo', json('false'))"
                " WHERE role = 'tool' AND json_extract(tool, '$.undo') = 1"
            )

        return self._writer.change(change)

    def messages(self, conversation_id: str, limit: int | None = None) -> list[Message]:
        """Oldest first; with `limit`, only the last `limit` of them."""
        # LIMIT -1 is SQLite's "no limit".
        rows = self.select(
            "SELECT * FROM (SELECT * FROM messages WHERE conversation_id = ?"
            " ORDER BY seq DESC LIMIT ?) ORDER BY seq",
            (conversation_id, -1 if limit is None else max(limit, 0)),
        )
        return [from_row(Message, row) for row in rows]

    def last_agent_message(self, conversation_id: str) -> Message | None:
        """The latest reply by one of your agents (role "agent")."""
        rows = self.select(
            "SELECT * FROM messages WHERE conversation_id = ? AND role = 'agent'"
            " ORDER BY seq DESC LIMIT 1",
            (conversation_id,),
        )
        return from_row(Message, rows[0]) if rows else None

    def add_event(self, conversation_id: str, type: str, data: dict[str, Any]) -> Pending[Event]:
        clash = {"seq", "type", "created"} & set(data)
        if clash:
            raise ValueError(f"event data may not use the names {sorted(clash)}")
        event = Event(0, conversation_id, type, dict(data), self._clock())

        def change(db: sqlite3.Connection) -> int:
            _require(db, conversation_id)
            return insert(db, "events", event)

        return then(self._writer.change(change), lambda seq: dataclasses.replace(event, seq=seq))

    def events(self, conversation_id: str, after_seq: int = 0) -> list[Event]:
        rows = self.select(
            "SELECT * FROM events WHERE conversation_id = ? AND seq > ? ORDER BY seq",
            (conversation_id, after_seq),
        )
        return [from_row(Event, row) for row in rows]

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
        message_id: str | None = None,
    ) -> Pending[None]:
        """Record metered spend. `payer` names who it is charged to beyond the chat (a pairing);
        `estimated` marks an amount Conch counted because the provider reported none;
        `message_id` the reply it paid for."""
        _dollars(usd, "spend")
        spend = Spend(
            float(usd),
            conversation_id,
            agent,
            payer,
            input_tokens,
            output_tokens,
            self._clock(),
            estimated,
            message_id,
        )
        return then(self._writer.change(lambda db: insert(db, "spend", spend)), lambda _: None)

    def billed_before(self, agent: str) -> bool:
        """Whether the ledger holds a row of this agent's (a coding agent that has reported what
        a reply cost)."""
        return bool(self.select("SELECT 1 AS one FROM spend WHERE agent = ? LIMIT 1", (agent,)))

    def spent(self, conversation_id: str) -> float:
        rows = self.select(
            "SELECT COALESCE(SUM(usd), 0.0) AS usd FROM spend WHERE conversation_id = ?",
            (conversation_id,),
        )
        return float(rows[0]["usd"])

    def spend_entries(self, conversation_id: str) -> list[Spend]:
        """A chat's ledger rows, oldest first."""
        rows = self.select(
            "SELECT * FROM spend WHERE conversation_id = ? ORDER BY seq", (conversation_id,)
        )
        return [Spend(**{**row, "estimated": bool(row["estimated"])}) for row in rows]

    def spent_since(self, since: float, payer: str | None = None) -> float:
        """Spend recorded at or after `since`; by one payer, or by everyone when None."""
        sql = "SELECT COALESCE(SUM(usd), 0.0) AS usd FROM spend WHERE created >= ?"
        args: tuple[Any, ...] = (since,)
        if payer is not None:
            sql, args = sql + " AND payer = ?", (since, payer)
        return float(self.select(sql, args)[0]["usd"])

    def spent_by_agent_since(self, since: float) -> list[tuple[str | None, float]]:
        """Spend recorded at or after `since`, by agent (the most first)."""
        rows = self.select(
            "SELECT agent, SUM(usd) AS usd FROM spend WHERE created >= ?"
            " GROUP BY agent ORDER BY usd DESC, agent",
            (since,),
        )
        return [(row["agent"], float(row["usd"])) for row in rows]

    # -- outside contexts (an outside agent's contextId for one of our chats) ------------------

    def context_id(self, conversation_id: str, outside_id: str) -> str | None:
        rows = self.select(
            "SELECT context_id FROM contexts WHERE conversation_id = ? AND outside_id = ?",
            (conversation_id, outside_id),
        )
        return str(rows[0]["context_id"]) if rows else None

    def set_context_id(
        self, conversation_id: str, outside_id: str, context_id: str
    ) -> Pending[None]:
        def change(db: sqlite3.Connection) -> None:
            _require(db, conversation_id)
            db.execute(
                "INSERT INTO contexts (conversation_id, outside_id, context_id) VALUES (?, ?, ?)"
                " ON CONFLICT (conversation_id, outside_id) DO UPDATE SET"
                " context_id = excluded.context_id",
                (conversation_id, outside_id, context_id),
            )

        return self._writer.change(change)


def _dollars(usd: float, what: str) -> float:
    if not isinstance(usd, int | float) or not math.isfinite(usd) or usd < 0:
        raise ValueError(f"{what} must be a finite amount of dollars, zero or more, not {usd}")
    return float(usd)


def _require(db: sqlite3.Connection, conversation_id: str) -> None:
    found = db.execute("SELECT 1 FROM conversations WHERE id = ?", (conversation_id,))
    if found.fetchone() is None:
        raise NotFound(conversation_id)
