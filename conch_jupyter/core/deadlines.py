"""Deadlines and waiting on tasks, cancellation-safe: the one place that bounds how long work runs.

`within` bounds an awaitable by a time limit; `settle` waits for a task that someone else may
cancel (Stop), passing our own cancellation on to it; `duration` says a limit in words. None of
them is `asyncio.wait_for`: before Python 3.12 it can drop a cancellation that arrives just as
the work finishes, and Stop must always stop.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import Any, TypeVar

T = TypeVar("T")


async def within(seconds: float | None, work: Awaitable[T]) -> T:
    """`work`'s result, or asyncio.TimeoutError once `seconds` have passed (`work` is cancelled
    and waited for, so its own cleanup runs first). No limit when `seconds` is None."""
    if seconds is None:
        return await work  # no task of its own to wait on: a cancellation reaches it directly
    task = asyncio.ensure_future(work)
    try:
        done, _ = await asyncio.wait({task}, timeout=seconds)
    except asyncio.CancelledError:
        await _stop(task)
        raise
    if not done:
        await _stop(task)
        raise asyncio.TimeoutError
    return task.result()


async def settle(task: asyncio.Task[Any]) -> None:
    """Wait until `task` is done, however it ends (a cancelled task returns here too, unlike
    `await task`). When our own caller is cancelled, `task` is cancelled and waited for first."""
    try:
        await asyncio.wait({task})
    except asyncio.CancelledError:
        await _stop(task)
        raise


async def _stop(task: asyncio.Future[Any]) -> None:
    task.cancel()
    await asyncio.wait({task})
    if not task.cancelled():
        task.exception()  # seen: what it ended with no longer matters


def duration(seconds: float) -> str:
    """ "2 minutes", "30 seconds", "0.5 seconds" """
    if seconds >= 60 and seconds % 60 == 0:
        minutes = int(seconds // 60)
        return f"{minutes} minute{'s' * (minutes != 1)}"
    return f"{seconds:g} second{'s' * (seconds != 1)}"
