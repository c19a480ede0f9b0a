"""The chat store's one writer: a thread that makes every change to the SQLite file, in the order
the changes were asked for, so no commit (and no fsync) ever runs on the server's event loop.

Group commit: whatever is queued when the writer is free goes into one transaction, so a burst of
messages costs one fsync, not one each. A change that fails (a chat deleted meanwhile, a duplicate
id) is undone alone and its caller gets the error, while the others in the same commit are made:
the batch is rolled back and made again with each change in a savepoint of its own. When the
commit itself fails (a full disk), the batch is rolled back and each change is tried again in a
transaction of its own, so every caller learns about its own change and nothing is half made.

A change is a function of the writer's connection, called on the writer thread; it must not touch
anything else that is shared. `writer.change(fn)` queues it at once; awaiting what it returns
gives the result once the change is committed (durable, as `synchronous=FULL` makes it), never
before: a 202 still means stored.

Thread hops are what a change costs beyond SQLite, so they are counted: the changes an event loop
asks for in one step (a chat, its question and its task; a reply and its task's end) are handed
to the writer together at the end of that step, so they share a commit and wake the writer once;
and the callers of one commit are told with one wake-up of their loop.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import queue
import sqlite3
import threading
from collections.abc import Awaitable, Callable, Coroutine, Generator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, TypeVar

from ..core.files import StoreError
from .db import guard, rollback

log = logging.getLogger(__name__)
_T = TypeVar("_T")
# What a change of the store gives its caller: queued already; awaited, its result once committed.
# A coroutine, so that mypy --strict (unused-coroutine) flags a change nobody awaits.
Pending = Coroutine[Any, Any, _T]
# Enough to make a burst one commit; a bound so one commit never grows without limit.
_BATCH_MAX = 256
# The future a caller waits on: its event loop's own when it asked from one (told in a batch,
# with one wake-up), else a thread-safe one (start-up, and callers with no loop running).
_Done = asyncio.Future[Any] | concurrent.futures.Future[Any]


@dataclass
class _Job(Generic[_T]):
    change: Callable[[sqlite3.Connection], _T]
    done: _Done
    loop: asyncio.AbstractEventLoop | None  # the loop `done` belongs to, if it is a loop's


class StoreClosed(StoreError):
    """The store was closed (the server is shutting down): asked of it after, it says so (503
    `shutting_down`; the log names the file)."""

    def __init__(self, path: Path) -> None:
        super().__init__(
            "Conch has stopped: the Jupyter server is shutting down.",
            path,
            code="shutting_down",
            logged=f"The chat store {path} is closed: the server is shutting down.",
        )


class _BatchBroken(Exception):
    """SQLite rolled the whole transaction back under a change (a full disk does that).

    No ConchError: control flow inside the writer, which catches it, makes the batch's changes
    again one by one, and hands each caller its own change's error (a StoreError in words)."""


class Writer:
    """The thread that owns the writing connection. Start it with a connection opened (and
    migrated) by db.open_writer; `close()` makes what is queued, then stops it."""

    def __init__(self, db: sqlite3.Connection, path: Path) -> None:
        self.path = path
        self._db = db
        self._jobs: queue.SimpleQueue[list[_Job[Any]] | None] = queue.SimpleQueue()
        # Asked for in the current step of `_waiting_loop`, not yet handed to the writer.
        self._waiting: list[_Job[Any]] = []
        self._waiting_loop: asyncio.AbstractEventLoop | None = None
        self._closed = False
        self._lock = threading.Lock()  # orders close() against a last put
        self._thread = threading.Thread(target=self._run, name="conch-store-writer", daemon=True)
        self._thread.start()

    def change(self, change: Callable[[sqlite3.Connection], _T]) -> Pending[_T]:
        """Queue one change now, and return what to await for its result once committed.

        Queued at the call, not at the await: changes are made in the order they were asked
        for, so a caller may ask for several and await them together (one commit for all).
        """
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return _committed(self._put(change))
        done: asyncio.Future[_T] = loop.create_future()
        with self._lock:
            if self._closed:
                raise StoreClosed(self.path)
            if self._waiting_loop is not loop:
                # Asked from another loop than the one waiting (a test's next loop): what that
                # one asked for goes first, so the order holds.
                self._hand_over_locked()
            if not self._waiting:
                self._waiting_loop = loop
                loop.call_soon(self._hand_over)
            self._waiting.append(_Job(change, done, loop))
        return _committed(done)

    def change_now(self, change: Callable[[sqlite3.Connection], _T]) -> _T:
        """Make one change and wait for it, blocking: for start-up, before the server serves."""
        done: concurrent.futures.Future[_T] = self._put(change)
        return done.result()

    @property
    def closed(self) -> bool:
        return self._closed

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._hand_over_locked()
            self._jobs.put(None)
        self._thread.join()

    def _put(self, change: Callable[[sqlite3.Connection], _T]) -> concurrent.futures.Future[_T]:
        done: concurrent.futures.Future[_T] = concurrent.futures.Future()
        with self._lock:
            if self._closed:
                raise StoreClosed(self.path)
            self._hand_over_locked()  # what was asked before goes first
            self._jobs.put([_Job(change, done, None)])
        return done

    def _hand_over(self) -> None:
        with self._lock:
            self._hand_over_locked()

    def _hand_over_locked(self) -> None:
        if self._waiting:
            self._jobs.put(self._waiting)
            self._waiting = []
        self._waiting_loop = None

    # --- the writer thread ---

    def _run(self) -> None:
        try:
            stopping = False
            while not stopping:
                first = self._jobs.get()
                if first is None:
                    break
                jobs = first
                while len(jobs) < _BATCH_MAX:
                    try:
                        more = self._jobs.get_nowait()
                    except queue.Empty:
                        break
                    if more is None:
                        stopping = True
                        break
                    jobs = jobs + more
                for start in range(0, len(jobs), _BATCH_MAX):
                    batch = jobs[start : start + _BATCH_MAX]
                    try:
                        _tell(batch, self._commit(batch))
                    except Exception as error:  # a bug here must not leave callers waiting
                        log.exception("Conch store: the writer failed a batch")
                        _tell(batch, [(False, error)] * len(batch))
        finally:
            self._db.close()

    def _commit(self, batch: list[_Job[Any]]) -> list[tuple[bool, Any]]:
        """Each change's outcome. Most batches fail nowhere, so they are made without a
        savepoint per change (two statements each); one that fails is rolled back and made
        again change by change (`_commit_apart`): the changes see the same file again."""
        try:
            with guard(self.path, "save to"):
                self._db.execute("BEGIN IMMEDIATE")
                values = [job.change(self._db) for job in batch]
                self._db.execute("COMMIT")
        except Exception:
            rollback(self._db)
            return self._commit_apart(batch)
        return [(True, value) for value in values]

    def _commit_apart(self, batch: list[_Job[Any]]) -> list[tuple[bool, Any]]:
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
                # Each on its own, so each caller hears of its own change.
                return [outcome for job in batch for outcome in self._commit_apart([job])]
            cause = error.__cause__ if isinstance(error, _BatchBroken) else None
            return [(False, cause or error)]
        return outcomes

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


def _tell(batch: list[_Job[Any]], outcomes: list[tuple[bool, Any]]) -> None:
    """Tell the callers of a commit: a loop's all at once, with one wake-up of that loop."""
    by_loop: dict[asyncio.AbstractEventLoop, list[tuple[_Done, bool, Any]]] = {}
    for job, (ok, value) in zip(batch, outcomes, strict=True):
        if job.loop is None:
            _settle(job.done, ok, value)
        else:
            by_loop.setdefault(job.loop, []).append((job.done, ok, value))
    for loop, told in by_loop.items():
        with contextlib.suppress(RuntimeError):  # the loop is closed: nobody is waiting
            loop.call_soon_threadsafe(_settle_all, told)


def _settle_all(told: list[tuple[_Done, bool, Any]]) -> None:
    for done, ok, value in told:
        _settle(done, ok, value)


def _settle(done: _Done, ok: bool, value: Any) -> None:
    """Tell the caller; one that is already told (or gave up) is left alone."""
    if done.done():
        return
    with contextlib.suppress(concurrent.futures.InvalidStateError, asyncio.InvalidStateError):
        if ok:
            done.set_result(value)
        else:
            done.set_exception(value)


async def _committed(queued: asyncio.Future[_T] | concurrent.futures.Future[_T]) -> _T:
    done = asyncio.wrap_future(queued) if isinstance(queued, concurrent.futures.Future) else queued
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


_A = TypeVar("_A")
_B = TypeVar("_B")


def then(queued: Awaitable[_A], result: Callable[[_A], _B]) -> Pending[_B]:
    """What a change (queued already) gives its caller once committed."""

    async def committed() -> _B:
        return result(await queued)

    return committed()


class Queued(Generic[_A]):
    """A new row queued for the writer: the row as it will be stored, known at once (`row`),
    and, awaited, the same row once committed."""

    def __init__(self, row: _A, committed: Awaitable[object]) -> None:
        self.row = row
        self._committed = committed

    def __await__(self) -> Generator[Any, None, _A]:
        yield from self._committed.__await__()
        return self.row
