"""store/writer.py: the store's one writer thread, on a real SQLite file.

A change that blocks the writer (a `threading.Event` it waits on) stands in for a slow fsync:
while it holds, the next changes queue up, so what goes into one commit is decided by the test.
"""

from __future__ import annotations

import asyncio
import sqlite3
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from conch_jupyter.core.files import StoreError
from conch_jupyter.store.chats import NotFound, Store
from conch_jupyter.store.writer import StoreClosed


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    with Store(tmp_path / "conch.sqlite3", time.time) as opened:
        yield opened


class Held:
    """Holds the writer busy until released, as a slow disk would."""

    def __init__(self, store: Store) -> None:
        self.release = threading.Event()
        self.job = asyncio.ensure_future(store._writer.change(lambda db: self.release.wait(10)))

    async def __aenter__(self) -> Held:
        await asyncio.sleep(0.05)  # the writer has taken it
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.release.set()
        await self.job


async def commits(store: Store) -> list[int]:
    """A list that counts the writer's COMMITs from now on (one element each)."""
    seen: list[int] = []

    def trace(db: sqlite3.Connection) -> None:
        db.set_trace_callback(lambda sql: seen.append(1) if sql == "COMMIT" else None)

    await store._writer.change(trace)
    seen.clear()  # the COMMIT of the change that set the callback
    return seen


async def test_a_burst_is_one_commit_in_the_order_it_was_asked(store: Store) -> None:
    chat = await store.create_conversation()
    counted = await commits(store)
    async with Held(store):
        burst = [
            asyncio.ensure_future(store.add_message(chat.id, "user", f"m{n}")) for n in range(50)
        ]
        await asyncio.sleep(0.05)
        assert not any(job.done() for job in burst)  # not stored yet: nobody was told so
    said = await asyncio.gather(*burst)
    assert len(counted) == 2  # the held change's commit, then the whole burst's
    assert [m.text for m in said] == [f"m{n}" for n in range(50)]
    assert [m.seq for m in said] == sorted(m.seq for m in said)
    assert [m.text for m in store.messages(chat.id)] == [f"m{n}" for n in range(50)]


async def test_the_event_loop_runs_on_while_a_commit_waits_on_the_disk(store: Store) -> None:
    chat = await store.create_conversation()
    async with Held(store):
        pending = asyncio.ensure_future(store.add_message(chat.id, "user", "slow disk"))
        ticks = 0
        started = time.monotonic()
        while time.monotonic() - started < 0.2:
            await asyncio.sleep(0.01)
            ticks += 1
        assert ticks >= 5  # the loop was never held by the write
        assert store.messages(chat.id) == []  # reads go on, and see only what is committed
        assert not pending.done()
    await pending
    assert [m.text for m in store.messages(chat.id)] == ["slow disk"]


async def test_a_change_that_fails_is_undone_alone(store: Store) -> None:
    chat = await store.create_conversation()
    async with Held(store):
        jobs = [
            asyncio.ensure_future(store.add_message(chat.id, "user", "before")),
            asyncio.ensure_future(store.add_message("c_gone", "user", "lost")),
            asyncio.ensure_future(store.add_message(chat.id, "user", "dup", id="m_twice")),
            asyncio.ensure_future(store.add_message(chat.id, "user", "dup", id="m_twice")),
            asyncio.ensure_future(store.add_message(chat.id, "user", "after")),
        ]
        await asyncio.sleep(0.05)
    results = await asyncio.gather(*jobs, return_exceptions=True)
    assert isinstance(results[1], NotFound)
    assert isinstance(results[3], sqlite3.IntegrityError)
    texts = [m.text for m in store.messages(chat.id)]
    assert texts == ["before", "dup", "after"]


async def test_text_that_utf8_cannot_hold_is_refused_in_words_and_the_writer_goes_on(
    store: Store,
) -> None:
    """The last line of defence behind the cleaning: a lone surrogate never reaches the file."""
    chat = await store.create_conversation()
    async with Held(store):
        jobs = [
            asyncio.ensure_future(store.add_message(chat.id, "user", "before")),
            asyncio.ensure_future(store.add_message(chat.id, "agent", "x\ud800y")),
            asyncio.ensure_future(store.add_event(chat.id, "peer.message", {"text": "\udfff"})),
            asyncio.ensure_future(store.add_message(chat.id, "user", "after")),
        ]
        await asyncio.sleep(0.05)
    results = await asyncio.gather(*jobs, return_exceptions=True)
    for refused in results[1:3]:
        assert isinstance(refused, StoreError), refused
        assert "not Unicode text" in refused.message
        assert "not stored" in refused.message
    assert [m.text for m in store.messages(chat.id)] == ["before", "after"]
    assert store.events(chat.id) == []
    await store.add_message(chat.id, "user", "later")
    assert [m.text for m in store.messages(chat.id)][-1] == "later"


async def test_a_full_disk_in_a_burst_fails_only_the_change_that_did_not_fit(
    store: Store,
) -> None:
    chat = await store.create_conversation()
    pages = store._db.execute("PRAGMA page_count").fetchone()[0]
    await store._writer.change(lambda db: db.execute(f"PRAGMA max_page_count = {pages + 2}"))
    async with Held(store):
        jobs = [
            asyncio.ensure_future(store.add_message(chat.id, "user", "small one")),
            asyncio.ensure_future(store.add_message(chat.id, "user", "x" * 200_000)),
            asyncio.ensure_future(store.add_message(chat.id, "user", "small two")),
        ]
        await asyncio.sleep(0.05)
    results = await asyncio.gather(*jobs, return_exceptions=True)
    assert isinstance(results[1], StoreError)
    assert "is full" in str(results[1])
    assert [m.text for m in store.messages(chat.id)] == ["small one", "small two"]


async def test_a_cancelled_caller_still_gets_its_change_made_before_it_hears(
    store: Store,
) -> None:
    chat = await store.create_conversation()
    async with Held(store):
        caller = asyncio.ensure_future(store.add_message(chat.id, "user", "asked for"))
        await asyncio.sleep(0.05)
        caller.cancel()
        await asyncio.sleep(0.05)
        assert not caller.done()  # it waits for the change it asked for
    with pytest.raises(asyncio.CancelledError):
        await caller
    assert [m.text for m in store.messages(chat.id)] == ["asked for"]


async def test_closing_makes_what_is_queued_then_refuses_more(tmp_path: Path) -> None:
    path = tmp_path / "conch.sqlite3"
    store = Store(path, time.time)
    chat = await store.create_conversation()
    queued = [asyncio.ensure_future(store.add_message(chat.id, "user", f"m{n}")) for n in range(20)]
    await asyncio.sleep(0)  # each has been queued
    store.close()
    await asyncio.gather(*queued)
    with pytest.raises(StoreClosed, match="is closed: the server is shutting down"):
        await store.add_message(chat.id, "user", "too late")
    with Store(path, time.time) as again:
        assert len(again.messages(chat.id)) == 20


async def test_changes_are_made_in_the_order_asked_not_the_order_awaited(store: Store) -> None:
    opened = store.create_conversation("new")  # queued now; its row is known at once
    chat = opened.row
    first = store.add_message(chat.id, "user", "first")  # queued behind the chat it belongs to
    second = store.add_message(chat.id, "user", "second")
    said_second, said_first = await second, await first
    assert await opened == chat == store.get_conversation(chat.id)
    assert said_first.seq < said_second.seq
    assert [m.text for m in store.messages(chat.id)] == ["first", "second"]


async def test_changes_asked_in_one_step_share_a_commit_even_with_the_writer_idle(
    store: Store,
) -> None:
    chat = await store.create_conversation()
    counted = await commits(store)
    for _ in range(20):  # the writer is free each time: nothing holds it
        asked = [store.add_message(chat.id, "user", f"m{n}") for n in range(3)]
        said = [await one for one in asked]
        assert [m.text for m in said] == ["m0", "m1", "m2"]
    assert len(counted) == 20  # one commit a step, never the first change alone


def test_a_change_asked_with_no_loop_running_is_made_in_order(tmp_path: Path) -> None:
    with Store(tmp_path / "conch.sqlite3", time.time) as store:
        opened = store.create_conversation("no loop yet")  # asked before any loop runs
        said = store.add_message(opened.row.id, "user", "first")

        async def then() -> list[str]:
            await opened
            await said
            await store.add_message(opened.row.id, "user", "second")
            return [m.text for m in store.messages(opened.row.id)]

        assert asyncio.run(then()) == ["first", "second"]


def test_changes_left_waiting_by_one_loop_go_before_the_next_loops(tmp_path: Path) -> None:
    with Store(tmp_path / "conch.sqlite3", time.time) as store:
        chat = asyncio.run(_opened(store))
        left: list[Any] = []

        async def ask_and_leave() -> None:
            # Asked, never awaited, and the loop ends before its step does.
            left.append(store.set_agent(chat, "left-behind"))

        one = asyncio.new_event_loop()
        one.run_until_complete(ask_and_leave())
        one.close()
        for pending in left:
            pending.close()  # nobody can await it now; the change is still asked for

        async def agent_seen_by_the_writer() -> str:
            sql = "SELECT agent FROM conversations WHERE id = ?"
            return str(
                await store._writer.change(lambda db: db.execute(sql, (chat,)).fetchone()[0])
            )

        # The next loop's change is made after the one left waiting.
        assert asyncio.run(agent_seen_by_the_writer()) == "left-behind"


async def _opened(store: Store) -> str:
    return (await store.create_conversation()).id
