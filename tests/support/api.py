"""What tests share besides fixtures: the API caller's type, the one test clock, and waiting
for a chat to settle."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

Api = Callable[..., Awaitable[tuple[int, Any]]]


class Clock:
    """The one test clock, for code that takes a clock: each reading moves it on by `step`
    (so every stored row gets its own time), and a test moves it further with `now +=`.
    `step=0.0` keeps it still between a test's own moves."""

    def __init__(self, now: float = 1_700_000_000.0, step: float = 1.0) -> None:
        self.now, self.step = now, step

    def __call__(self) -> float:
        self.now += self.step
        return self.now


async def wait_for(check: Callable[[], Awaitable[Any]], timeout: float = 10.0) -> Any:
    """Poll an async check until it returns something truthy; fail with the last value."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        last = await check()
        if last:
            return last
        await asyncio.sleep(0.02)
    raise AssertionError(f"timed out waiting; last value: {last!r}")


async def settled(api: Api, conversation_id: str, timeout: float = 10.0) -> dict[str, Any]:
    """The chat once it has answered everything it was sent."""

    async def check() -> dict[str, Any] | None:
        status, chat = await api("GET", f"conversations/{conversation_id}")
        assert status == 200, chat
        return None if chat["busy"] else chat

    result: dict[str, Any] = await wait_for(check, timeout)
    return result
