"""What tests share besides fixtures: the API caller's type, the one test clock, and waiting
for a chat to settle."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable
from typing import Any

import httpx

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


async def stream_of_a_round(
    url: str, headers: Any, send: Callable[[], Awaitable[Any]], timeout: float = 30.0
) -> list[dict[str, Any]]:
    """The items a chat's event stream (`url`) sends from its opening to its next round's end:
    `send` is called once the stream has opened, so nothing of the round comes before it."""
    items: list[dict[str, Any]] = []
    async with (
        httpx.AsyncClient(headers=headers, timeout=timeout) as http,
        http.stream("GET", url) as response,
    ):
        async for line in response.aiter_lines():
            if not line.startswith("data:"):
                continue
            items.append(json.loads(line[5:]))
            if len(items) == 1:
                await send()
            if items[-1]["type"] == "event" and items[-1]["event"]["type"] == "round.ended":
                break
    return items
