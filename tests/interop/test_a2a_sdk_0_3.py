"""Conch and the Python a2a-sdk 0.3 (the last version before A2A 1.0), both ways.

a2a-sdk 0.3 cannot share the test venv with 1.x, so both of its sides run as programs in a venv
of their own (built once by tools.python_env): its client reads the door's card from the address
the pairing's paste prints and calls what 0.3 has (card, send, get, cancel); its server, an
AgentExecutor in the SDK's Starlette app, is added as an outside agent, asked in a chat, and
stopped mid-answer.
"""

from __future__ import annotations

from typing import Any

import pytest

from ..support.api import Api
from .chat import add_outside, ask_in_chat, ended, outside_answers, pairing, stop_while_asking
from .tools import PY, python_env, run_json, serving

pytestmark = pytest.mark.timeout(900)  # the first run builds the venv

SDK_0_3 = ["a2a-sdk[http-server]==0.3.26", "uvicorn==0.38.0"]


@pytest.fixture(scope="module")
def python() -> str:
    return str(python_env("a2a-sdk-0.3", SDK_0_3))


async def test_the_0_3_client_at_the_door(api: Api, python: str) -> None:
    address, key = await pairing(api, "writer")
    said: dict[str, Any] = await run_json(
        python, str(PY / "sdk03_client.py"), address, key, "What is a conch?"
    )
    assert "connect" not in said, said
    # It read the one card: the 0.3 members, and the extended card it asked for the 0.3 way.
    assert said["card"]["name"] == "Writer"
    assert said["card"]["url"].rstrip("/") == address.rstrip("/")  # the endpoint, slash or not
    sent = said["send"]
    assert (sent["kind"], sent["status"]["state"]) == ("task", "completed"), sent
    assert "What is a conch?" in sent["artifacts"][0]["parts"][0]["text"]
    assert sent["contextId"] == "sdk03-context"
    assert said["get"]["id"] == sent["id"]
    assert said["get"] == said["getAgain"]
    assert said["cancel"]["error"] == "A2AClientJSONRPCError", said["cancel"]
    assert "-32002" in said["cancel"]["message"]
    assert "-32001" in said["missing"]["message"], said["missing"]


async def test_the_0_3_server_as_an_outside_agent(api: Api, python: str) -> None:
    async with serving(python, str(PY / "sdk03_server.py")) as served:
        added = await add_outside(api, f"http://127.0.0.1:{served.port}")
        assert (added["name"], added["version"]) == ("Archivist", "0.3")
        chat = await ask_in_chat(api, "Archivist", "where is the 1851 census?")
        assert outside_answers(chat) == ["Archivist heard: @Archivist where is the 1851 census?"]
        assert ended(chat) == ("done", 1)

        # Stop while it works: the round ends at once and the agent hears tasks/cancel.
        stopped = await stop_while_asking(api, served, "Archivist", "slow search, please")
        assert ended(stopped) == ("stopped", 0)
        assert "canceled" in await served.next_said(timeout=10)
