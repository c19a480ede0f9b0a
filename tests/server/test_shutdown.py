"""While the Jupyter server shuts down, Conch answers in words, never a 500 (issue 12).

Jupyter stops its extensions before its HTTP server: a request that comes in on a connection
still open (a browser's stream reconnecting) reaches Conch after its store has closed. It must get
a JSON 503 that says so, and a stream that was open ends instead of hanging.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from conch_jupyter.core.files import StoreError
from conch_jupyter.server_ext.app import ConchApp
from conch_jupyter.store.chats import Store
from conch_jupyter.store.hub import Hub

from ..support.api import Api

pytestmark = pytest.mark.timeout(60)


def conch_app(jp_serverapp: Any) -> ConchApp:
    for point in jp_serverapp.extension_manager.extension_points.values():
        if isinstance(point.app, ConchApp):
            return point.app
    raise AssertionError("ConchApp is not loaded")


async def test_a_request_after_conch_stopped_gets_a_503_in_words(
    api: Api, jp_serverapp: Any, jp_fetch: Any
) -> None:
    status, chat = await api("POST", "conversations", {})
    assert status == 201, chat
    # A stream open before the shutdown: it must end, not hang.
    lines: list[str] = []
    stream = asyncio.ensure_future(
        jp_fetch(
            "conch",
            "api",
            "conversations",
            chat["id"],
            "events",
            streaming_callback=lambda chunk: lines.append(chunk.decode()),
            request_timeout=20,
        )
    )
    while not any("snapshot" in line for line in lines):
        await asyncio.sleep(0.02)
    # What Jupyter's shutdown does first, while its HTTP server still serves.
    await conch_app(jp_serverapp).stop_extension()
    ended = await asyncio.wait_for(stream, 10)
    assert ended.code == 200
    for path in (f"conversations/{chat['id']}/events", f"conversations/{chat['id']}", ""):
        status, body = await api("GET", path or "conversations")
        assert status == 503, (path, body)
        assert body == {
            "error": {
                "code": "shutting_down",
                "message": "Conch has stopped: the Jupyter server is shutting down.",
            }
        }
    status, body = await api("POST", f"conversations/{chat['id']}/messages", {"text": "late"})
    assert (status, body["error"]["code"]) == (503, "shutting_down")


async def test_a_closed_store_refuses_reads_and_changes_in_words(tmp_path: Any) -> None:
    store = Store(tmp_path / "conch.sqlite3", clock=lambda: 1.0)
    chat = await store.create_conversation()
    store.close()
    with pytest.raises(StoreError, match="closed"):
        store.messages(chat.id)
    with pytest.raises(StoreError, match="closed"):
        await store.add_message(chat.id, "user", "too late")


async def test_following_a_closed_hub_ends_at_once() -> None:
    hub = Hub()
    hub.close()
    async with hub.follow("c_1") as queue:
        assert await asyncio.wait_for(queue.get(), 1) is None
