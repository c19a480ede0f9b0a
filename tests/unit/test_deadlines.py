"""core/deadlines.py: bounding work in time without ever losing a Stop."""

from __future__ import annotations

import asyncio

import pytest

from conch_jupyter.core.deadlines import duration, settle, within


def test_work_within_its_limit_gives_its_result() -> None:
    async def work() -> int:
        await asyncio.sleep(0.01)
        return 7

    assert asyncio.run(within(1, work())) == 7
    assert asyncio.run(within(None, work())) == 7  # no limit


def test_work_past_its_limit_is_cancelled_and_waited_for() -> None:
    cleaned: list[str] = []

    async def work() -> None:
        try:
            await asyncio.sleep(10)
        finally:
            await asyncio.sleep(0)  # its own cleanup may await, and is waited for
            cleaned.append("closed")

    async def main() -> None:
        with pytest.raises(asyncio.TimeoutError):
            await within(0.05, work())
        assert cleaned == ["closed"]

    asyncio.run(main())


@pytest.mark.parametrize("seconds", [10.0, None])
def test_cancelling_the_wait_cancels_the_work_first(seconds: float | None) -> None:
    cleaned: list[str] = []

    async def work() -> None:
        try:
            await asyncio.sleep(10)
        finally:
            cleaned.append("closed")

    async def main() -> None:
        waiting = asyncio.ensure_future(within(seconds, work()))
        await asyncio.sleep(0.02)
        waiting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiting
        assert cleaned == ["closed"]

    asyncio.run(main())


def test_settle_returns_however_the_task_ends_and_passes_our_cancellation_on() -> None:
    async def main() -> None:
        stopped = asyncio.ensure_future(asyncio.sleep(10))
        stopping = asyncio.ensure_future(settle(stopped))
        await asyncio.sleep(0.01)
        stopped.cancel()  # Stop, from elsewhere: settle returns, it does not raise
        await stopping
        assert stopped.cancelled()

        running = asyncio.ensure_future(asyncio.sleep(10))
        waiting = asyncio.ensure_future(settle(running))
        await asyncio.sleep(0.01)
        waiting.cancel()  # the server stopping: the task goes with us
        with pytest.raises(asyncio.CancelledError):
            await waiting
        assert running.cancelled()

    asyncio.run(main())


@pytest.mark.parametrize(
    ("seconds", "words"),
    [
        (120, "2 minutes"),
        (60, "1 minute"),
        (30, "30 seconds"),
        (1, "1 second"),
        (0.5, "0.5 seconds"),
    ],
)
def test_duration_in_words(seconds: float, words: str) -> None:
    assert duration(seconds) == words


def test_a_stop_that_comes_as_an_answer_arrives_is_never_lost() -> None:
    """asyncio.wait_for before 3.12 returns the answer and drops the cancellation here."""

    async def race() -> str:
        answer = asyncio.get_running_loop().create_future()

        async def work() -> int:
            return int(await answer)

        waiting = asyncio.ensure_future(within(10, work()))
        for _ in range(3):
            await asyncio.sleep(0)
        answer.set_result(1)
        await asyncio.sleep(0)  # the work is done; the wait has not woken up yet
        waiting.cancel()  # Stop
        try:
            return str(await waiting)
        except asyncio.CancelledError:
            return "stopped"

    assert asyncio.run(race()) == "stopped"
