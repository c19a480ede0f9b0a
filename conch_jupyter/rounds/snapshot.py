"""What a chat's snapshot holds of its log: all of it (the plain GET, for existing clients), or
a page (DESIGN.md "Long chats"): the last N messages before one of them, the events and ledger
rows since the first of those, and whether there are earlier ones. Reads only the store's
indexes (store/pages.py), so a page costs the same in a chat of 10,000 messages as in one of 100.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

from ..store.chats import Message, Store
from ..store.rows import Spend

Log = dict[str, Any]
# A message as the API answers it, with the ledger row that paid for it (a metered reply).
MessageJson = Callable[[Message, Spend | None], Log]

# The whole log is built this many messages at a time, handing the event loop back between two
# (drawing 25 messages' Markdown for the first time takes some 8 ms on a small machine).
CHUNK = 25


def whole_log(store: Store, conversation_id: str, message_json: MessageJson) -> Log:
    ledger = store.spend_entries(conversation_id)
    costs = {e.message_id: e for e in ledger if e.message_id is not None}
    return {
        "spend": [e.to_json() for e in ledger],
        "messages": [message_json(m, costs.get(m.id)) for m in store.messages(conversation_id)],
        "events": [e.to_json() for e in store.events(conversation_id)],
        "earlier": False,
    }


def paged_log(
    store: Store,
    conversation_id: str,
    message_json: MessageJson,
    limit: int,
    before: str | None = None,
) -> Log:
    """The last `limit` messages before the message `before` (the newest, without it), with
    the events and ledger rows of their time. Pages meet at a message's time: what happened at
    or after a page's first message and before the next page's first is on that page only."""
    pages = store.pages
    before_seq: int | None = None
    until: float | None = None
    if before is not None:
        before_seq, until = pages.seq_of(conversation_id, before)
    messages, earlier = pages.messages_before(conversation_id, limit, before_seq)
    if messages:
        since = messages[0].created if earlier else float("-inf")
    elif earlier:  # an empty page of a chat that has messages (limit 0): only the live parts
        since = until = float("inf")
    else:  # no messages at all (before the first one, or a chat with none)
        since = float("-inf")
    costs = pages.costs(messages)
    return {
        "spend": [e.to_json() for e in pages.spend_between(conversation_id, since, until)],
        "messages": [message_json(m, costs.get(m.id)) for m in messages],
        "events": [e.to_json() for e in pages.events_between(conversation_id, since, until)],
        "earlier": earlier,
    }


async def whole_log_json(
    store: Store,
    conversation_id: str,
    message_json: MessageJson,
    upto: tuple[int, int],
) -> str:
    """The whole log up to the message and the event `upto` names (by seq), as the members of
    a JSON object ('"spend": [...], "messages": [...], …'), made a chunk at a time with the
    event loop handed back between chunks, so a chat of any length never holds the server's
    loop for long (every chat, stream and kernel message waits on it)."""
    pages = store.pages
    last_message, last_event = upto
    messages: list[str] = []
    after = 0
    while after < last_message:
        chunk, _ = pages.messages_after(conversation_id, after, CHUNK)
        chunk = [m for m in chunk if m.seq <= last_message]
        if not chunk:
            break
        costs = pages.costs(chunk)
        messages.append(json.dumps([message_json(m, costs.get(m.id)) for m in chunk])[1:-1])
        after = chunk[-1].seq
        await asyncio.sleep(0)
    events: list[str] = []
    after = 0
    while after < last_event:
        rows, _ = pages.events_after(conversation_id, after, CHUNK * 10)
        rows = [e for e in rows if e.seq <= last_event]
        if not rows:
            break
        events.append(json.dumps([e.to_json() for e in rows])[1:-1])
        after = rows[-1].seq
        await asyncio.sleep(0)
    spend = json.dumps([e.to_json() for e in store.spend_entries(conversation_id)])
    return (
        f'"spend": {spend}, "messages": [{", ".join(m for m in messages if m)}],'
        f' "events": [{", ".join(e for e in events if e)}], "earlier": false'
    )
