"""What a chat's event stream opens with (the SSE of `GET …/events`, DESIGN.md "Long chats"):
the whole chat, a page of it (`?limit=N`), or, for a stream that resumes from its place
(`Last-Event-ID` or `?after=`), only what it missed and the chat's live parts (`resumed`). The
handler only sends; this decides, reading the store at one instant (no await here, so no item
can be published between the reads), and tells which queued items the opening already holds.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..store.pages import StreamCursor

if TYPE_CHECKING:
    from .driver import RoundService

Item = dict[str, Any]

# The items that carry the stream's place as their SSE id (a delta or a round state keeps the
# last one: SSE's last event id stays until a later id changes it).
STORED_KINDS = frozenset({"snapshot", "resumed", "message", "event"})
# A stream that missed more than this many messages (or events) opens with a new snapshot.
RESUME_LIMIT = 500


def stream_opening(
    rounds: RoundService, conversation_id: str, cursor: StreamCursor | None, limit: int | None
) -> tuple[list[Item], StreamCursor]:
    """What the stream opens with, and where that leaves it. An empty opening means the whole
    chat: the caller makes that one a chunk at a time (RoundService.conversation_text)."""
    pages = rounds.store.pages
    if cursor is not None:
        messages, more = pages.messages_after(conversation_id, cursor.messages, RESUME_LIMIT)
        events, more_events = pages.events_after(conversation_id, cursor.events, RESUME_LIMIT)
        if not (more or more_events):
            # Messages before events at one instant: a round ends after its last message.
            names = rounds.names()
            said = [
                (m.created, 0, message_item(rounds.message_json(m, names), m.seq)) for m in messages
            ]
            said += [(e.created, 1, {"type": "event", "event": e.to_json()}) for e in events]
            said.sort(key=lambda entry: entry[:2])
            seen = StreamCursor(
                messages[-1].seq if messages else cursor.messages,
                events[-1].seq if events else cursor.events,
            )
            resumed = {"type": "resumed", "conversation": rounds.live_json(conversation_id)}
            return [*(item for *_, item in said), resumed], seen
        # Missed too much to catch up item by item: a new snapshot, as if opened afresh.
    if limit is None:
        return [], StreamCursor()
    snapshot = rounds.conversation_json(conversation_id, limit)
    seen = StreamCursor(*pages.last_seqs(conversation_id))
    return [{"type": "snapshot", "conversation": snapshot}], seen


def message_item(message: Item, seq: int) -> Item:
    return {"type": "message", "message": message, "seq": seq}


def read_already(item: Item, seen: StreamCursor) -> bool:
    """Whether a queued item was already read from the store when the stream opened."""
    if item["type"] == "message":
        seq = int(item.get("seq") or 0)
        return 0 < seq <= seen.messages
    if item["type"] == "event":
        return int(item["event"]["seq"]) <= seen.events
    return False
