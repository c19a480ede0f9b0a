"""The chat store's one writer: a thread that makes every change to the SQLite file, in the order
the changes were asked for, so no commit (and no fsync) ever runs on the server's event loop.

Group commit: whatever is queued when the writer is free goes into one transaction, so a burst of
messages costs one fsync, not one each. Each change runs in a savepoint of its own: a change that
fails (a chat deleted meanwhile, a duplicate id) is undone alone and its caller gets the error,
while the others in the same commit are made. When the commit itself fails (a full disk), the
batch is rolled back and each change is tried again in a transaction of its own, so every caller
learns about its own change and nothing is half made.

A change is a function of the writer's connection, called on the writer thread; it must not touch
anything else that is shared. `writer.change(fn)` queues it at once; awaiting what it returns
gives the result once the change is committed (durable, as `synchronous=FULL` makes it), never
before: a 202 still means stored.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import queue
import sqlite3
import threading
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, TypeVar

from .files import StoreError
from .store_db import guard, rollback

log = logging.getLogger(__name__)
_T = TypeVar("_T")
# What a change of the store gives its caller: queued already; awaited, its result once committed.
# A coroutine, so that mypy --strict (unused-coroutine) flags a change nobody awaits.
Pending = Coroutine[Any, Any, _T]
# Enough to make a burst one commit; a bound so one commit never grows without limit.
_BATCH_MAX = 256


@dataclass
class _Job(Generic[_T]):
    change: Callable[[sqlite3.Connection], _T]
    done: concurrent.futures.Future[_T]


class StoreClosed(StoreError):
    """The store was closed (the server is shutting down): asked of it after, it says so."""

    def __init__(self, path: Path) -> None:
        super().__init__(f"The chat store {path} is closed: the server is shutting down.", path)


class _BatchBroken(Exception):
    """SQLite rolled the whole transaction back under a change (a full disk does that)."""


class Writer:
    """The thread that owns the writing connection. Start it with a connection opened (and
    migrated) by store_db.open_writer; `close()` makes what is queued, then stops it."""

    def __init__(self, db: sqlite3.Connection, path: Path) -> None:
        self.path = path
        self._db = db
        self._jobs: queue.SimpleQueue[_Job[Any] | None] = queue.SimpleQueue()
        self._closed = False
        self._lock = threading.Lock()  # orders close() against a last put
        self._thread = threading.Thread(target=self._run, name="conch-store-writer", daemon=True)
        self._thread.start()

    def change(self, change: Callable[[sqlite3.Connection], _T]) -> Pending[_T]:
        """Queue one change now, and return what to await for its result once committed.

        Queued at the call, not at the await: changes are made in the order they were asked
        for, so a caller may ask for several and await them together (one commit for all).
        """
        return _committed(self._put(change))

    def change_now(self, change: Callable[[sqlite3.Connection], _T]) -> _T:
        """Make one change and wait for it, blocking: for start-up, before the server serves."""
        return self._put(change).result()

    @property
    def closed(self) -> bool:
        return self._closed

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._jobs.put(None)
        self._thread.join()

    def _put(self, change: Callable[[sqlite3.Connection], _T]) -> concurrent.futures.Future[_T]:
        done: concurrent.futures.Future[_T] = concurrent.futures.Future()
        with self._lock:
            if self._closed:
                raise StoreClosed(self.path)
            self._jobs.put(_Job(change, done))
        return done

    # --- the writer thread ---

    def _run(self) -> None:
        try:
            stopping = False
            while not stopping:
                first = self._jobs.get()
                if first is None:
                    break
                batch = [first]
                while len(batch) < _BATCH_MAX:
                    try:
                        job = self._jobs.get_nowait()
                    except queue.Empty:
                        break
                    if job is None:
                        stopping = True
                        break
                    batch.append(job)
                try:
                    self._commit(batch)
                except Exception as error:  # a bug here must not leave callers waiting forever
                    log.exception("Conch store: the writer failed a batch")
                    for job in batch:
                        _settle(job.done, False, error)
        finally:
            self._db.close()

    def _commit(self, batch: list[_Job[Any]]) -> None:
        outcomes: list[tuple[bool, Any]] = []
        try:
            with guard(self.path, "save to"):
                self._db.execute("BEGIN IMMEDIATE")
                for job in batch:
                    outcomes.append(self._one(job))
                self._db.execute("COMMIT")
        except Exception as error:
            rollback(self._db)
            if len(batch) > 1:
                for job in batch:  # each on its own, so each caller hears of its own change
                    self._commit([job])
                return
            cause = error.__cause__ if isinstance(error, _BatchBroken) else None
            outcomes = [(False, cause or error)]
        for job, (ok, value) in zip(batch, outcomes, strict=True):
            _settle(job.done, ok, value)

    def _one(self, job: _Job[Any]) -> tuple[bool, Any]:
        self._db.execute("SAVEPOINT change")
        try:
            with guard(self.path, "save to"):
                value = job.change(self._db)
        except Exception as error:
            if not self._db.in_transaction:
                raise _BatchBroken from error
            self._db.execute("ROLLBACK TO change")
            self._db.execute("RELEASE change")
            return False, error
        self._db.execute("RELEASE change")
        return True, value


def _settle(done: concurrent.futures.Future[Any], ok: bool, value: Any) -> None:
    """Tell the caller; one that is already told (or gave up) is left alone."""
    with contextlib.suppress(concurrent.futures.InvalidStateError):
        if ok:
            done.set_result(value)
        else:
            done.set_exception(value)


async def _committed(queued: concurrent.futures.Future[_T]) -> _T:
    done = asyncio.wrap_future(queued)
    try:
        # Shielded: a cancelled caller does not take back a change already queued.
        return await asyncio.shield(done)
    except asyncio.CancelledError:
        # Let the cancellation through only once the change is made, so the caller's next step
        # (and whoever catches the cancellation) finds the store as the call left it.
        while not done.done():
            try:
                await asyncio.shield(done)
            except asyncio.CancelledError:
                continue
            except Exception:  # the caller is cancelled: its change's error is moot
                break
        raise
