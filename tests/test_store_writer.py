"""store_writer.py: the store's one writer thread, on a real SQLite file.

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

import pytest

from conch_jupyter.files import StoreError
from conch_jupyter.store import NotFound, Store
from conch_jupyter.store_writer import StoreClosed


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
