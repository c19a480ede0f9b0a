"""A room in Jupyter Chat outlives its server: after a restart the same .chat file finds the same
Conch conversation again (by the file's own id), and a new round there goes on in it. A whole
`jupyter server` with Conch and jupyterlab-chat, a person in the chat over its WebSocket."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from tornado.httpclient import HTTPRequest
from tornado.websocket import websocket_connect

from ..support.chat_client import ChatClient
from ..support.jupyter_process import JupyterProcess

pytestmark = pytest.mark.timeout(180)


async def a_round(server: JupyterProcess, text: str, ends: int) -> ChatClient:
    """Say `text` in work/plan.chat as a person and wait for the `ends`-th round's end line."""
    url = f"ws://127.0.0.1:{server.port}{server.base_url}api/chat/ws/work/plan.chat"
    headers = {"Authorization": f"token {server.token}"}
    ws = await websocket_connect(HTTPRequest(url, headers=headers))
    chat = await ChatClient.open(ws)
    await chat.until(lambda c: "conch" in c.users)
    await chat.send(text)
    await chat.until(lambda c: len([m for m in c.by("conch") if "answered" in m["body"]]) >= ends)
    ws.close()
    return chat


def rooms(server: JupyterProcess) -> list[dict[str, Any]]:
    with server.client() as http:
        listed = http.get(server.api("conversations")).json()["conversations"]
    return [c for c in listed if c.get("chat_file")]


def test_the_room_is_found_again_after_a_restart(server: JupyterProcess) -> None:
    # jupyterlab-chat is enabled as it installs itself (its jupyter_server_config.d file).
    server.start()
    with server.client() as http:
        assert http.put(f"{server.url}api/contents/work", json={"type": "directory"}).is_success
        made = {"type": "file", "format": "text", "content": "{}"}
        assert http.put(f"{server.url}api/contents/work/plan.chat", json=made).is_success
    asyncio.run(a_round(server, "@Researcher say something", 1))
    [before] = rooms(server)
    assert before["chat_file"] == "work/plan.chat"

    server.stop()
    server.start()
    chat = asyncio.run(a_round(server, "@Writer and you", 2))
    [after] = rooms(server)
    assert after["id"] == before["id"]
    with server.client() as http:
        whole = http.get(server.api(f"conversations/{after['id']}")).json()
    said = [m["text"] for m in whole["messages"] if m["role"] == "user"]
    assert said == ["@Researcher say something", "@Writer and you"]
    # The chat itself kept everything: the first round's lines came back from the file.
    # (A token's person may have another name after a restart: people are those not bots.)
    people = [m["body"] for m in chat.shown() if not chat.users[m["sender"]].get("bot")]
    assert people == said
    # The new chat's welcome line was said once, first, and not again after the restart.
    welcomes = [m for m in chat.by("conch") if m["body"].startswith("Conch's agents are in")]
    assert [m["id"] for m in welcomes] == [chat.shown()[0]["id"]]
    # One round line each: the two rounds' ends, changed in place from their handovers.
    assert [m["body"].split(" · ")[0] for m in chat.by("conch")[1:]] == [
        "Researcher answered",
        "Writer answered",
    ]
