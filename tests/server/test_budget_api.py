"""Cost in sight on a real server (DESIGN.md, "Cost in sight"; issue 23, item 10): a chat's
`budget` (round, chat, month, each against its limit), a metered reply's tokens and cost in the
snapshot and on the live stream, the chat's own limit set with PATCH and the month's budget with
`PATCH /budget`, each going by what was set for the next turn, and bad values refused in words."""

from __future__ import annotations

from typing import Any

import pytest

from ..support.api import Api, settled, stream_of_a_round
from ..support.scripted_models import Reply, ScriptedModels
from .test_chat_server import agent_on

pytestmark = pytest.mark.timeout(90)

PRICE = {"input_per_mtok": 1, "output_per_mtok": 2}


async def priced_bot(api: Api, models: ScriptedModels) -> None:
    # 1,000 input and 10,000 output tokens: $0.001 + $0.02 a reply.
    models.responder = lambda body: Reply(text="priced", usage=(1_000, 10_000))
    await agent_on(api, "Bot", "openai", models.openai_url, PRICE)


async def test_a_new_chat_shows_the_servers_limits(api: Api) -> None:
    _, chat = await api("POST", "conversations", {})
    assert chat["budget"] == {
        "round": None,
        "chat": {"spent": 0.0, "limit": 5.0},
        "month": {"spent": 0.0, "limit": 50.0},
    }
    status, month = await api("GET", "budget")
    assert status == 200
    assert month == {"month": {"spent": 0.0, "limit": 50.0}, "by_agent": []}


async def test_a_metered_reply_carries_its_cost_and_the_totals_follow(
    api: Api, models: ScriptedModels, jp_http_port: int, jp_base_url: str, jp_auth_header: Any
) -> None:
    await priced_bot(api, models)
    _, chat = await api("POST", "conversations", {})
    url = f"http://127.0.0.1:{jp_http_port}{jp_base_url}conch/api/conversations/{chat['id']}/events"
    items = await stream_of_a_round(
        url,
        jp_auth_header,
        lambda: api("POST", f"conversations/{chat['id']}/messages", {"text": "@Bot hi"}),
    )
    cost = {"usd": 0.021, "input_tokens": 1_000, "output_tokens": 10_000, "estimated": False}
    [live] = [i["message"] for i in items if i["type"] == "message" and "cost" in i["message"]]
    assert (live["agent"], live["cost"]) == ("bot", cost)
    [budget] = [i["budget"] for i in items if i["type"] == "budget"]
    assert budget["chat"] == {"spent": 0.021, "limit": 5.0}
    assert budget["month"] == {"spent": 0.021, "limit": 50.0}
    assert budget["round"] == {"spent": 0.021, "limit": 1.0}  # the round it ended, for its fold
    done = await settled(api, chat["id"])
    [reply] = [m for m in done["messages"] if m["role"] == "agent"]
    assert reply["cost"] == cost
    assert "cost" not in done["messages"][0]  # the user's message costs nothing
    assert done["spend"][0]["message_id"] == reply["id"]
    assert done["budget"]["round"] is None  # no round runs now
    # An unmetered agent's reply has no cost at all (the view says "not metered" once, elsewhere).
    await api("POST", f"conversations/{chat['id']}/messages", {"text": "@Researcher hi"})
    done = await settled(api, chat["id"])
    assert "cost" not in done["messages"][-1]
    _, month = await api("GET", "budget")
    assert month["month"] == {"spent": 0.021, "limit": 50.0}
    assert month["by_agent"] == [{"agent": "bot", "name": "Bot", "spent": 0.021}]


async def test_the_chats_limit_set_in_its_header_stops_the_next_turn_in_words(
    api: Api, models: ScriptedModels
) -> None:
    await priced_bot(api, models)
    _, chat = await api("POST", "conversations", {})
    path = f"conversations/{chat['id']}"
    status, changed = await api("PATCH", path, {"limit_usd": 0.02})
    assert status == 200, changed
    assert changed["budget"]["chat"] == {"spent": 0.0, "limit": 0.02}
    assert changed["mode"] == "ask"  # the mode is left as it was
    await api("POST", f"{path}/messages", {"text": "@Bot first"})
    await settled(api, chat["id"])
    await api("POST", f"{path}/messages", {"text": "@Bot second"})
    done = await settled(api, chat["id"])
    assert len(models.requests) == 1  # the second turn never reached the model
    words = done["messages"][-1]["text"]
    assert "This chat has spent $0.02 of its $0.02 limit, so Bot did not answer." in words
    assert "Raise the chat's limit in its header to go on." in words
    # The folded card says the chat's limit stopped it, not the round's $1.
    ended = [e for e in done["events"] if e["type"] == "round.ended"][-1]
    assert (ended["reason"], ended["limit"]) == ("spend", "chat")
    assert ended["words"] == (
        "The round ended before anyone answered: the chat reached its spending limit"
    )
    # Raised again: the next turn goes; null gives the chat the server's default back.
    await api("PATCH", path, {"limit_usd": 1})
    await api("POST", f"{path}/messages", {"text": "@Bot third"})
    done = await settled(api, chat["id"])
    assert len(models.requests) == 2
    status, back = await api("PATCH", path, {"limit_usd": None})
    assert (status, back["budget"]["chat"]["limit"]) == (200, 5.0)
    status, both = await api("PATCH", path, {"limit_usd": 2.5, "mode": "read"})
    assert (status, both["mode"], both["budget"]["chat"]["limit"]) == (200, "read", 2.5)


@pytest.mark.parametrize("conch_config", [{"chat_limit_usd": None}])
async def test_the_months_budget_set_in_settings_holds_across_chats(
    api: Api, models: ScriptedModels, conch_config: dict[str, Any]
) -> None:
    await priced_bot(api, models)
    status, month = await api("PATCH", "budget", {"monthly_usd": 0.03})
    assert (status, month["month"]) == (200, {"spent": 0.0, "limit": 0.03})
    chats = []
    for _ in range(3):
        _, chat = await api("POST", "conversations", {})
        assert chat["budget"]["chat"]["limit"] is None  # the server sets no chat limit here
        await api("POST", f"conversations/{chat['id']}/messages", {"text": "@Bot hi"})
        chats.append(await settled(api, chat["id"]))
    assert len(models.requests) == 2  # $0.021 + $0.021 reached the $0.03 budget
    words = chats[2]["messages"][-1]["text"]
    assert "This month's spending has reached $0.04 of the $0.03 budget" in words
    assert "Raise the month's budget in Settings" in words
    ended = [e for e in chats[2]["events"] if e["type"] == "round.ended"][-1]
    assert (ended["reason"], ended["limit"]) == ("spend", "month")
    assert ended["words"].endswith(": this month's spending reached its budget")
    assert chats[2]["budget"]["month"] == {"spent": 0.042, "limit": 0.03}
    status, month = await api("PATCH", "budget", {"monthly_usd": None})
    assert (status, month["month"]["limit"]) == (200, 50.0)  # the server's default again


@pytest.mark.parametrize(
    ("body", "words"),
    [
        ({"limit_usd": -1}, "A chat's limit must be between $0 and $10,000."),
        ({"limit_usd": 1e9}, "A chat's limit must be between $0 and $10,000."),
        ({"limit_usd": "lots"}, "limit_usd: Input should be a valid number"),
        ({"limit_usd": 1e400}, "a limit must be a finite number of dollars"),
        ({}, "give mode or limit_usd"),
        ({"mode": None}, "mode must be ask, auto or read"),
    ],
)
async def test_a_bad_chat_limit_is_refused_in_words_and_changes_nothing(
    api: Api, body: dict[str, Any], words: str
) -> None:
    _, chat = await api("POST", "conversations", {})
    path = f"conversations/{chat['id']}"
    status, answer = await api("PATCH", path, body)
    assert status == 400, answer
    assert answer["error"]["code"] == "invalid"
    assert words in answer["error"]["message"]
    assert (await api("GET", path))[1]["budget"]["chat"]["limit"] == 5.0


@pytest.mark.parametrize(
    ("body", "words"),
    [
        ({"monthly_usd": -0.5}, "The month's budget must be between $0 and $10,000."),
        ({}, "Missing field: monthly_usd."),
        ({"monthly_usd": 5, "extra": 1}, "Unknown field: extra."),
    ],
)
async def test_a_bad_monthly_budget_is_refused_in_words(
    api: Api, body: dict[str, Any], words: str
) -> None:
    status, answer = await api("PATCH", "budget", body)
    assert (status, answer["error"]["code"]) == (400, "invalid"), answer
    assert words in answer["error"]["message"]
    assert (await api("GET", "budget"))[1]["month"]["limit"] == 50.0


async def test_no_such_chat_has_no_limit_to_set(api: Api) -> None:
    status, answer = await api("PATCH", "conversations/c_nobody", {"limit_usd": 1})
    assert (status, answer["error"]["code"]) == (404, "not_found")
