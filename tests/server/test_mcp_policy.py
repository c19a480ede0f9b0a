"""The administrator's policy key `mcp` on a real Jupyter server: GET /policy says what is
locked, a server it refuses answers 403 `policy` in words and is not made, and a server made
before the policy that it now refuses is not started: its row says so, and a turn is offered
none of its tools (said in words)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from conch_jupyter.core.policy import parse_policy
from conch_jupyter.server_ext.services import ConchServices

from ..support.api import Api, settled
from ..support.mcp_servers import stdio_body
from ..support.scripted_models import Reply, ScriptedModels

pytestmark = pytest.mark.timeout(90)


@pytest.fixture
def conch_config() -> dict[str, Any]:
    return {"policy": {"mcp": {"commands": [sys.executable], "urls": ["http://tools.example"]}}}


@pytest.fixture
def conch(jp_serverapp: Any) -> ConchServices:
    services: ConchServices = jp_serverapp.web_app.settings["conch"]
    return services


def refused(status: int, answer: Any) -> str:
    assert status == 403, answer
    assert answer["error"]["code"] == "policy"
    words: str = answer["error"]["message"]
    assert words.endswith("set by your administrator.")
    return words


async def test_the_policy_allows_some_and_refuses_the_rest_in_words(
    api: Api, tmp_path: Path, models: ScriptedModels, conch: ConchServices
) -> None:
    locked = (await api("GET", "policy"))[1]["locked"]
    assert locked["mcp"] == {"commands": [sys.executable], "urls": ["http://tools.example:80"]}
    words = refused(
        *await api("POST", "mcp-servers", {"name": "x", "transport": "stdio", "command": "npx"})
    )
    assert "npx" in words
    refused(
        *await api(
            "POST", "mcp-servers", {"name": "y", "transport": "http", "url": "https://evil.test/"}
        )
    )
    status, ok = await api(
        "POST", "mcp-servers", {"name": "z", "transport": "http", "url": "http://tools.example/mcp"}
    )
    assert status == 201, ok
    made = (await api("POST", "mcp-servers", stdio_body("demo", tmp_path / "marks")))[1]
    refused(*await api("PATCH", f"mcp-servers/{made['id']}", {"command": "/bin/sh"}))
    assert [s["name"] for s in (await api("GET", "mcp-servers"))[1]["servers"]] == ["z", "demo"]
    # The administrator turns servers off later (here, in place of a restart with a new policy):
    # the kept server is not started, its row says why, and a turn goes on without its tools.
    conch.mcp_servers.policy = parse_policy({"mcp": False})
    row = (await api("GET", f"mcp-servers/{made['id']}"))[1]
    assert row["problem"].startswith("Not started: Your own MCP servers are off")
    body = {
        "name": "Keeper",
        "provider": {"kind": "openai", "model": "m", "base_url": models.openai_url},
        "mcp": [made["id"]],
    }
    assert (await api("POST", "agents", body))[0] == 201
    models.script(Reply(text="No tools today."))
    chat = (await api("POST", "conversations", {}))[1]["id"]
    await api("POST", f"conversations/{chat}/messages", {"text": "@Keeper hello"})
    done = await settled(api, chat, 30)
    notes = [m["text"] for m in done["messages"] if m["role"] == "note"]
    assert any("demo" in n and "set by your administrator" in n for n in notes), notes
    offered = {t["function"]["name"] for t in models.requests[0].json.get("tools", [])}
    assert not any(name.startswith("demo__") for name in offered)
    assert conch.mcp_servers.connection(made["id"]) is None  # never started
