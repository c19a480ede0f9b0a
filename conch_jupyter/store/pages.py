"""A long chat read a page at a time: the last messages before one of them, what came after a
stream's last delivered item, and the chat list newest first. A part the store holds
(`store.pages`), sharing its file.

Every read here walks an index from one end of a page (messages and events by their chat and
seq or time, spend by its chat and time, chats by origin and time), so what a page costs does
not grow with the chat's length: a chat of 10,000 messages pages as fast as one of 100.
"""

from __future__ import annotations

from ..core.errors import ConchError
from .db import from_row
from .file import StoreFile
from .rows import Conversation, Event, Message, Origin, Spend

# Asked for more than this at once, a page is this long: one answer stays well under a megabyte.
PAGE_LIMIT = 1_000


class BadCursor(ConchError):
    """A page or a stream asked to start from something this chat does not hold."""

    status = 400

    def __init__(self, words: str) -> None:
        super().__init__("bad_cursor", words)


class Pages:
    """Reads by the page over the store's indexes; see the module docstring."""

    def __init__(self, file: StoreFile) -> None:
        self._file = file

    def seq_of(self, conversation_id: str, message_id: str) -> tuple[int, float]:
        """A message's place in its chat (seq) and time, or BadCursor in words."""
        rows = self._file.select(
            "SELECT seq, created FROM messages WHERE id = ? AND conversation_id = ?",
            (message_id, conversation_id),
        )
        if not rows:
            raise BadCursor("There is no message with that id in this chat to page from.")
        return int(rows[0]["seq"]), float(rows[0]["created"])

    def messages_before(
        self, conversation_id: str, limit: int, before_seq: int | None = None
    ) -> tuple[list[Message], bool]:
        """The last `limit` messages (before `before_seq`, if given), oldest first, and whether
        there are earlier ones."""
        limit = max(0, min(limit, PAGE_LIMIT))
        rows = self._file.select(
            "SELECT * FROM messages WHERE conversation_id = ? AND seq < ?"
            " ORDER BY seq DESC LIMIT ?",
            (conversation_id, _END if before_seq is None else before_seq, limit + 1),
        )
        earlier = len(rows) > limit
        return [from_row(Message, row) for row in reversed(rows[:limit])], earlier

    def messages_after(
        self, conversation_id: str, after_seq: int, limit: int
    ) -> tuple[list[Message], bool]:
        """Up to `limit` messages after `after_seq`, oldest first, and whether more came."""
        rows = self._file.select(
            "SELECT * FROM messages WHERE conversation_id = ? AND seq > ? ORDER BY seq LIMIT ?",
            (conversation_id, after_seq, limit + 1),
        )
        return [from_row(Message, row) for row in rows[:limit]], len(rows) > limit

    def events_after(
        self, conversation_id: str, after_seq: int, limit: int
    ) -> tuple[list[Event], bool]:
        """Up to `limit` events after `after_seq`, oldest first, and whether more came."""
        rows = self._file.select(
            "SELECT * FROM events WHERE conversation_id = ? AND seq > ? ORDER BY seq LIMIT ?",
            (conversation_id, after_seq, limit + 1),
        )
        return [from_row(Event, row) for row in rows[:limit]], len(rows) > limit

    def events_between(
        self, conversation_id: str, since: float, until: float | None = None
    ) -> list[Event]:
        """Events at or after `since` (and before `until`), oldest first: those of a page of
        messages. Pages meet at a message's time, so an event is on one page, never two."""
        rows = self._file.select(
            "SELECT * FROM events WHERE conversation_id = ? AND created >= ? AND created < ?"
            " ORDER BY seq",
            (conversation_id, since, _FOREVER if until is None else until),
        )
        return [from_row(Event, row) for row in rows]

    def spend_between(
        self, conversation_id: str, since: float, until: float | None = None
    ) -> list[Spend]:
        """A chat's ledger rows at or after `since` (and before `until`), oldest first."""
        rows = self._file.select(
            "SELECT * FROM spend WHERE conversation_id = ? AND created >= ? AND created < ?"
            " ORDER BY seq",
            (conversation_id, since, _FOREVER if until is None else until),
        )
        return [Spend(**{**row, "estimated": bool(row["estimated"])}) for row in rows]

    def costs(self, messages: list[Message]) -> dict[str, Spend]:
        """The ledger row that paid for each of these replies, by message id (schema v8's
        spend_by_message index): what each metered reply's quiet cost line shows."""
        ids = [m.id for m in messages if m.agent]
        if not ids:
            return {}
        marks = ", ".join("?" * len(ids))
        sql = f"SELECT * FROM spend WHERE message_id IN ({marks})"  # noqa: S608 (only ?s)
        rows = self._file.select(sql, tuple(ids))
        found = (Spend(**{**row, "estimated": bool(row["estimated"])}) for row in rows)
        return {spend.message_id: spend for spend in found if spend.message_id is not None}

    def last_seqs(self, conversation_id: str) -> tuple[int, int]:
        """The seq of the chat's last message and of its last event (0 where none): where a
        stream that has delivered everything stands."""
        rows = self._file.select(
            "SELECT (SELECT MAX(seq) FROM messages WHERE conversation_id = ?) AS m,"
            " (SELECT MAX(seq) FROM events WHERE conversation_id = ?) AS e",
            (conversation_id, conversation_id),
        )
        return int(rows[0]["m"] or 0), int(rows[0]["e"] or 0)

    def conversations(
        self, origin: Origin, limit: int, before_id: str | None = None
    ) -> tuple[list[Conversation], str | None]:
        """Up to `limit` chats newest first (after the chat `before_id`, the last of the page
        before), and the cursor of the next page (None on the last)."""
        limit = max(1, min(limit, PAGE_LIMIT))
        # Before the first chat: a place later than any (created, rowid) can be.
        created: float = _FOREVER
        rowid: int = _END
        if before_id is not None:
            rows = self._file.select(
                "SELECT created, rowid FROM conversations WHERE id = ? AND origin = ?",
                (before_id, origin),
            )
            if not rows:
                raise BadCursor("There is no chat with that id to page the list from.")
            created, rowid = float(rows[0]["created"]), int(rows[0]["rowid"])
        rows = self._file.select(
            "SELECT * FROM conversations WHERE origin = ? AND (created, rowid) < (?, ?)"
            " ORDER BY created DESC, rowid DESC LIMIT ?",
            (origin, created, rowid, limit + 1),
        )
        chats = [from_row(Conversation, row) for row in rows[:limit]]
        return chats, chats[-1].id if len(rows) > limit else None


_END = 2**63 - 1  # beyond every seq
_FOREVER = float("inf")


class StreamCursor:
    """Where a chat's live stream stands: the seq of the last message and of the last event it
    delivered. Sent as each stored item's SSE `id` ("<message seq>-<event seq>"), so a stream
    that drops resumes from it (`Last-Event-ID`, or `?after=`)."""

    __slots__ = ("events", "messages")

    def __init__(self, messages: int = 0, events: int = 0) -> None:
        self.messages, self.events = messages, events

    @classmethod
    def parse(cls, text: str) -> StreamCursor:
        message, dash, event = text.strip().partition("-")
        if not (dash and message.isdigit() and event.isdigit()):
            raise BadCursor(
                "A stream resumes from the id of the last event it delivered"
                " (two numbers joined by a dash, as the server sent it)."
            )
        return cls(int(message), int(event))

    def __str__(self) -> str:
        return f"{self.messages}-{self.events}"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, StreamCursor) and str(self) == str(other)

    def __hash__(self) -> int:
        return hash(str(self))
