"""Chats on a real server: the live event stream, the kernel client, spending limits, Anthropic."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from typing import Any

import httpx
import pytest

from ..support.api import Api, settled
from ..support.scripted_models import Reply, ScriptedModels

pytestmark = pytest.mark.timeout(90)


async def agent_on(
    api: Api, name: str, kind: str, url: str, price: dict[str, float] | None = None
) -> None:
    body: dict[str, Any] = {
        "name": name,
        "provider": {"kind": kind, "model": "m", "base_url": url, "api_key": "k-123"},
    }
    if price:
        body["price"] = price
    status, agent = await api("POST", "agents", body)
    assert status == 201, agent


async def test_the_event_stream_shows_a_snapshot_then_deltas_then_the_stored_reply(
    api: Api, models: ScriptedModels, jp_http_port: int, jp_base_url: str, jp_auth_header: Any
) -> None:
    models.script(Reply(chunks=["Hel", "lo ", "there"], delay_per_chunk=0.02))
    await agent_on(api, "Bot", "openai", models.openai_url)
    _, chat = await api("POST", "conversations", {})
    url = f"http://127.0.0.1:{jp_http_port}{jp_base_url}conch/api/conversations/{chat['id']}/events"
    items: list[dict[str, Any]] = []
    async with (
        httpx.AsyncClient(headers=jp_auth_header, timeout=10) as http,
        http.stream("GET", url) as response,
    ):
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        async for line in response.aiter_lines():
            if not line.startswith("data:"):
                continue
            items.append(json.loads(line[5:]))
            if len(items) == 1:
                await api("POST", f"conversations/{chat['id']}/messages", {"text": "@Bot hi"})
            if items[-1]["type"] == "event" and items[-1]["event"]["type"] == "round.ended":
                break
    kinds = [i["type"] for i in items]
    assert kinds[0] == "snapshot"
    assert items[0]["conversation"]["messages"] == []
    deltas = [i for i in items if i["type"] == "delta"]
    assert "".join(d["text"] for d in deltas) == "Hello there"
    stored = [
        i["message"] for i in items if i["type"] == "message" and i["message"]["role"] == "agent"
    ]
    assert stored[0]["text"] == "Hello there"
    assert stored[0]["id"] == deltas[0]["reply"]  # the streamed reply keeps its id when stored
    assert kinds.index("delta") < kinds.index("message", kinds.index("delta"))
    round_states = [i["round"] for i in items if i["type"] == "round"]
    assert round_states[0] == {"speaker": "bot", "replies": 0, "limit": 8, "waiting": []}
    assert round_states[-1] is None


async def test_a_follower_that_joins_mid_reply_loses_no_words_and_doubles_none(
    api: Api, models: ScriptedModels, jp_http_port: int, jp_base_url: str, jp_auth_header: Any
) -> None:
    """What a view does after its stream dropped: follow again, from a snapshot that carries the
    words of the reply still streaming (and who is who, and each message drawn sealed)."""
    chunks = [f"w{n} " for n in range(30)]
    models.script(Reply(chunks=chunks, delay_per_chunk=0.03))
    await agent_on(api, "Bot", "openai", models.openai_url)
    _, chat = await api("POST", "conversations", {})
    url = f"http://127.0.0.1:{jp_http_port}{jp_base_url}conch/api/conversations/{chat['id']}/events"
    await api("POST", f"conversations/{chat['id']}/messages", {"text": "@Bot **go**"})
    for _ in range(200):  # until the reply is under way
        _, now = await api("GET", f"conversations/{chat['id']}")
        if now["streaming"] and len(now["streaming"][0]["text"]) > 10:
            break
        await asyncio.sleep(0.02)
    items: list[dict[str, Any]] = []
    async with (
        httpx.AsyncClient(headers=jp_auth_header, timeout=10) as http,
        http.stream("GET", url) as response,
    ):
        async for line in response.aiter_lines():
            if line.startswith("data:"):
                items.append(json.loads(line[5:]))
                if items[-1]["type"] == "message" and items[-1]["message"]["role"] == "agent":
                    break
    snapshot = items[0]["conversation"]
    [streaming] = snapshot["streaming"]
    assert streaming["agent"] == "bot"
    assert 0 < len(streaming["text"]) < len("".join(chunks))
    later = "".join(i["text"] for i in items if i["type"] == "delta")
    assert streaming["text"] + later == "".join(chunks)
    reply = items[-1]["message"]
    assert reply["id"] == streaming["reply"]
    assert reply["text"] == "".join(chunks)
    assert {"id": "bot", "name": "Bot"} in snapshot["roster"]["agents"]
    assert snapshot["messages"][0]["html"] == "<p>@Bot <strong>go</strong></p>\n"
    assert reply["html"] == "<p>" + "".join(chunks).strip() + "</p>\n"
    done = await settled(api, chat["id"])
    assert done["streaming"] == []


async def test_a_kernel_finds_the_server_and_talks_to_it(api: Api, jp_serverapp: Any) -> None:
    """A child process with the environment a kernel inherits uses conch_jupyter.client."""
    code = (
        "from conch_jupyter.client import ConchClient\n"
        "c = ConchClient.from_environment()\n"
        "chat = c.create_conversation('from a kernel')\n"
        "c.send(chat['id'], 'hello')\n"
        "print([a['name'] for a in c.agents()], chat['id'])\n"
    )
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        code,
        env={**os.environ},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(process.communicate(), 30)
    assert process.returncode == 0, err.decode()
    names, chat_id = out.decode().rsplit(" ", 1)
    assert names == "['Researcher', 'Writer']"
    chat = await settled(api, chat_id.strip())
    assert chat["title"] == "from a kernel"
    assert [m["role"] for m in chat["messages"]] == ["user", "agent"]


async def test_a_kernel_client_without_a_server_says_so_in_words() -> None:
    from conch_jupyter.client import ConchClient, ConchClientError, ConchNotFound

    with pytest.raises(ConchNotFound, match="No Jupyter server with Conch"):
        ConchClient.from_environment({})
    client = ConchClient("http://127.0.0.1:9/", kernel_key="x", timeout=2)
    with pytest.raises(ConchClientError, match="did not answer"):
        client.agents()


@pytest.mark.parametrize("conch_config", [{"chat_limit_usd": 0.01}])
async def test_a_turn_over_the_chats_limit_is_not_started(
    api: Api, models: ScriptedModels, conch_config: dict[str, Any]
) -> None:
    # 10,000 output tokens at $2/Mtok: $0.02, over the chat's $0.01 limit after one reply.
    models.responder = lambda body: Reply(text="priced", usage=(0, 10_000))
    await agent_on(
        api, "Bot", "openai", models.openai_url, {"input_per_mtok": 0, "output_per_mtok": 2}
    )
    _, chat = await api("POST", "conversations", {})
    await api("POST", f"conversations/{chat['id']}/messages", {"text": "@Bot first"})
    first = await settled(api, chat["id"])
    assert first["spent_usd"] == pytest.approx(0.02)
    await api("POST", f"conversations/{chat['id']}/messages", {"text": "@Bot second"})
    done = await settled(api, chat["id"])
    assert len(models.requests) == 1  # the second turn never reached the model
    note = done["messages"][-1]
    assert note["role"] == "note"
    assert "$0.02 of its $0.01 limit" in note["text"]
    assert "Bot did not answer" in note["text"]
    assert [(e["type"], e.get("reason")) for e in done["events"]][-1] == ("round.ended", "spend")
    # An unpriced agent costs nothing, so it still answers.
    status, _ = await api(
        "POST", f"conversations/{chat['id']}/messages", {"text": "@Researcher hi"}
    )
    assert status == 202
    last = await settled(api, chat["id"])
    assert last["messages"][-1]["agent"] == "researcher"


@pytest.mark.parametrize("conch_config", [{"chat_limit_usd": 0.01}])
async def test_a_round_stops_at_the_limit_its_last_reply_reached(
    api: Api, models: ScriptedModels, conch_config: dict[str, Any]
) -> None:
    # The next turn is decided as Bot's reply is stored, before its cost is in the ledger: the
    # limit still counts that reply, so Bob's turn is refused, never noted or sent.
    models.responder = lambda body: Reply(text="priced", usage=(0, 10_000))
    price = {"input_per_mtok": 0, "output_per_mtok": 2}
    await agent_on(api, "Bot", "openai", models.openai_url, price)
    await agent_on(api, "Bob", "openai", models.openai_url, price)
    _, chat = await api("POST", "conversations", {})
    await api("POST", f"conversations/{chat['id']}/messages", {"text": "@Bot then @Bob, go"})
    done = await settled(api, chat["id"])
    assert len(models.requests) == 1
    notes = [m["text"] for m in done["messages"] if m["role"] == "note"]
    assert "Bob's turn" not in notes
    assert "Bob did not answer" in notes[-1]
    assert "$0.02 of its $0.01 limit" in notes[-1]


@pytest.mark.parametrize("conch_config", [{"monthly_budget_usd": 0.03, "chat_limit_usd": None}])
async def test_the_monthly_budget_holds_across_chats(
    api: Api, models: ScriptedModels, conch_config: dict[str, Any]
) -> None:
    models.responder = lambda body: Reply(text="priced", usage=(0, 10_000))
    await agent_on(
        api, "Bot", "openai", models.openai_url, {"input_per_mtok": 0, "output_per_mtok": 2}
    )
    chats = []
    for _ in range(3):
        _, chat = await api("POST", "conversations", {})
        await api("POST", f"conversations/{chat['id']}/messages", {"text": "@Bot hi"})
        chats.append(await settled(api, chat["id"]))
    assert len(models.requests) == 2  # $0.02 + $0.02 reached the $0.03 budget
    assert "month's spending" in chats[2]["messages"][-1]["text"]


async def test_an_anthropic_agent_streams_and_is_metered(api: Api, models: ScriptedModels) -> None:
    models.script(Reply(chunks=["Bon", "jour"], usage=(1_000_000, 0)))
    await agent_on(
        api,
        "Claude",
        "anthropic",
        models.anthropic_url,
        {"input_per_mtok": 0.5, "output_per_mtok": 1},
    )
    _, chat = await api("POST", "conversations", {})
    await api("POST", f"conversations/{chat['id']}/messages", {"text": "@Claude salut"})
    done = await settled(api, chat["id"])
    assert done["messages"][-1]["text"] == "Bonjour"
    assert done["spent_usd"] == pytest.approx(0.5)
    request = models.requests[0]
    assert request.path == "/v1/messages"
    assert request.headers["x-api-key"] == "k-123"
    assert request.json["system"].startswith("You are Claude.")
    assert request.json["stream"] is True


async def test_a_passing_failure_is_tried_once_more(api: Api, models: ScriptedModels) -> None:
    models.script(Reply(status=503), Reply(text="second time lucky"))
    await agent_on(api, "Bot", "openai", models.openai_url)
    _, chat = await api("POST", "conversations", {})
    await api("POST", f"conversations/{chat['id']}/messages", {"text": "@Bot hi"})
    done = await settled(api, chat["id"])
    assert done["messages"][-1]["text"] == "second time lucky"
    assert len(models.requests) == 2


async def test_an_unknown_model_is_said_in_words(api: Api, models: ScriptedModels) -> None:
    models.script(Reply(status=404))
    await agent_on(api, "Bot", "openai", models.openai_url)
    _, chat = await api("POST", "conversations", {})
    await api("POST", f"conversations/{chat['id']}/messages", {"text": "hello @Bot"})
    done = await settled(api, chat["id"])
    note = done["messages"][-1]
    assert note["role"] == "note"
    assert "not found" in note["text"]
    assert len(models.requests) == 1  # not a passing failure: no second try
