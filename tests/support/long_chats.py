"""A long chat, written straight into a Conch store (the real SQLite file, through the store's
own writer): what weeks of rounds leave behind, made in seconds instead of hours of rounds.
The tests of long chats and benchmarks/bench_long_chats.py use it.

Each exchange is a user's message naming an agent, the round's start, the agent's answer (a few
lines of Markdown, about the size of an offline reply) and the round's end, as a round stores them.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import time
from pathlib import Path
from typing import Any

from conch_jupyter.store.chats import Store

# An answer of a few hundred characters with some Markdown, like a short real reply.
ANSWER = (
    "Here is what I found for question {n}: **three options**, each with its cost.\n\n"
    "- the first keeps the data where it is and reads it in pages;\n"
    "- the second copies it once, then reads the copy;\n"
    "- the third asks the server for a summary.\n\n"
    "I would take the first: it is the cheapest to run and the easiest to undo."
)


async def fill_chat(
    store: Store, conversation_id: str, exchanges: int, agent: str = "researcher"
) -> None:
    """Add `exchanges` exchanges to a chat; queued together, so the writer commits them in
    batches (its group commit), not one fsync each."""
    pending: list[Any] = []
    for n in range(exchanges):
        pending.append(store.add_message(conversation_id, "user", f"@Researcher question {n}?"))
        pending.append(store.add_event(conversation_id, "round.started", {"named": [agent]}))
        pending.append(
            store.add_message(
                conversation_id,
                "agent",
                ANSWER.format(n=n),
                agent=agent,
                round={"turn": 1, "handed_by": None},
            )
        )
        pending.append(
            store.add_event(conversation_id, "round.ended", {"turns": 1, "reason": "done"})
        )
        if len(pending) >= 2_000:
            await asyncio.gather(*pending)
            pending = []
    await asyncio.gather(*pending)


def long_chat_file(
    data_dir: Path, exchanges: int, *, title: str = "long", path: str | None = None
) -> str:
    """A chat of `exchanges` exchanges (twice as many messages) in the store of a Conch data
    folder that no server has open yet; returns its id."""

    async def make() -> str:
        with Store(data_dir / "conch.sqlite3", time.time) as store:
            chat = await store.create_conversation(title=title, path=path)
            await fill_chat(store, chat.id, exchanges)
            return chat.id

    # A thread of its own: the caller may be on a running loop (pytest's), where asyncio.run
    # cannot run.
    with concurrent.futures.ThreadPoolExecutor(1) as thread:
        return thread.submit(lambda: asyncio.run(make())).result()
