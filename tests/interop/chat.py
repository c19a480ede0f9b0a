"""Conch's side of an interop test: pair an agent for a caller, add an outside agent, chat."""

from __future__ import annotations

import asyncio
import re
from typing import Any

from ..support.api import Api, settled
from .tools import Served


async def pairing(api: Api, agent: str = "writer") -> tuple[str, str]:
    """(address, key), read from the paste exactly as the pairing prints it for the other side."""
    status, made = await api("POST", "pairings", {"agents": [agent]})
    assert status == 201, made
    address = re.search(r"^Address: (\S+)$", made["paste"], re.M)
    key = re.search(r"^Key: (\S+)$", made["paste"], re.M)
    assert address, made["paste"]
    assert key, made["paste"]
    return address[1], key[1]


async def add_outside(api: Api, paste: str) -> dict[str, Any]:
    status, added = await api("POST", "outside", {"paste": paste})
    assert status == 201, added
    return dict(added)


async def ask_in_chat(api: Api, name: str, text: str) -> dict[str, Any]:
    """Mention an outside agent in a new chat; the chat once its round has ended."""
    _, chat = await api("POST", "conversations", {})
    status, _ = await api(
        "POST", f"conversations/{chat['id']}/messages", {"text": f"@{name} {text}"}
    )
    assert status == 202
    return await settled(api, chat["id"], timeout=30)


def outside_answers(chat: dict[str, Any]) -> list[str]:
    return [m["text"] for m in chat["messages"] if m["role"] == "outside"]


def ended(chat: dict[str, Any]) -> tuple[str, int]:
    last = [e for e in chat["events"] if e["type"] == "round.ended"][-1]
    return last["reason"], last["turns"]


async def stop_while_asking(api: Api, served: Served, name: str, text: str) -> dict[str, Any]:
    """Mention an outside agent served by `served`, press Stop once it says it is working on the
    task and Conch has had a moment to read the task's id; the chat once the round has ended."""
    _, chat = await api("POST", "conversations", {})
    chat_id = chat["id"]
    await api("POST", f"conversations/{chat_id}/messages", {"text": f"@{name} {text}"})
    assert "working" in await served.next_said(timeout=20)
    await asyncio.sleep(0.3)
    status, body = await api("POST", f"conversations/{chat_id}/round/stop")
    assert (status, body) == (200, {"stopped": True})
    return await settled(api, chat_id)
