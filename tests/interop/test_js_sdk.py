"""Conch and the JavaScript A2A SDK (@a2a-js/sdk, under Node), both ways.

Its client reads the door's card from the address exactly as the pairing's paste prints it and
calls every method it has there; its server (an Express app) is added as an outside agent and
asked in a chat. Both run as `node` processes, the SDK installed by npm from the lock file.
"""

from __future__ import annotations

from typing import Any

import pytest

from ..support.api import Api
from .chat import add_outside, ask_in_chat, ended, outside_answers, pairing, stop_while_asking
from .tools import node_project, run_json, serving

pytestmark = pytest.mark.timeout(300)


async def test_the_js_client_at_the_door(api: Api) -> None:
    js = node_project()
    address, key = await pairing(api, "writer")
    # The SDK resolves the card relative to this address: the paste's trailing slash matters.
    assert address.endswith("/a2a/writer/")
    said: dict[str, Any] = await run_json(
        "node", str(js / "client.mjs"), address, key, "What is a conch?"
    )
    assert "connect" not in said, said
    card = said["card"]
    assert card["name"] == "Writer"
    assert [i["protocolVersion"] for i in card["supportedInterfaces"]] == ["1.0", "0.3"]
    sent = said["send"]
    assert sent["status"]["state"] == "TASK_STATE_COMPLETED", sent
    assert "What is a conch?" in sent["artifacts"][0]["parts"][0]["text"]
    assert sent["contextId"] == "js-context"
    assert said["get"]["id"] == sent["id"]
    assert said["get"] == said["getAgain"]  # the same task reads the same, ids and all
    assert [t["id"] for t in said["list"].get("tasks", [])] == [sent["id"]], said["list"]
    assert said["cancel"]["error"] == "JsonRpcTaskNotCancelableError", said["cancel"]
    assert said["missing"]["error"] == "JsonRpcTaskNotFoundError", said["missing"]


async def test_the_js_server_as_an_outside_agent(api: Api) -> None:
    js = node_project()
    async with serving("node", str(js / "server.mjs")) as served:
        added = await add_outside(api, f"http://127.0.0.1:{served.port}")
        assert (added["name"], added["version"]) == ("Scribe", "1.0")
        chat = await ask_in_chat(api, "Scribe", "which trains run on Sunday?")
        assert outside_answers(chat) == ["Scribe heard: @Scribe which trains run on Sunday?"]
        assert ended(chat) == ("done", 1)
        # Stop while it works: the round ends at once and the agent hears CancelTask.
        stopped = await stop_while_asking(api, served, "Scribe", "slow search, please")
        assert ended(stopped) == ("stopped", 0)
        assert "canceled" in await served.next_said(timeout=10)
