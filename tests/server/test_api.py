"""The REST API on a real Jupyter server (base_url /a%40b/): agents, chats, bad input, auth."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from ..support.api import Api, settled

pytestmark = pytest.mark.timeout(60)


async def test_default_agents_on_first_start(api: Api, conch_dir: Path) -> None:
    status, body = await api("GET", "agents")
    assert status == 200
    assert [(a["id"], a["name"], a["provider"]["kind"]) for a in body["agents"]] == [
        ("researcher", "Researcher", "offline"),
        ("writer", "Writer", "offline"),
    ]
    assert (conch_dir / "agents" / "agents.json").exists()
    assert oct((conch_dir).stat().st_mode & 0o777) == "0o700"
    assert oct((conch_dir / "conch.sqlite3").stat().st_mode & 0o777) == "0o600"


async def test_agent_lifecycle(api: Api) -> None:
    status, agent = await api(
        "POST",
        "agents",
        {
            "name": "Code Reviewer",
            "persona": "Reads diffs.",
            "instructions": "Be terse.",
            "provider": {"kind": "openai", "model": "gpt-x", "api_key": "sk-secret-123"},
            "price": {"input_per_mtok": 1.5, "output_per_mtok": 6},
        },
    )
    assert status == 201, agent
    assert agent["id"] == "code-reviewer"
    assert agent["has_key"] is True
    assert "sk-secret-123" not in json.dumps(agent)

    status, listed = await api("GET", "agents")
    assert "sk-secret-123" not in json.dumps(listed)
    assert [a["name"] for a in listed["agents"]][-1] == "Code Reviewer"

    status, changed = await api(
        "PATCH", "agents/code-reviewer", {"name": "Reviewer", "price": None}
    )
    assert status == 200, changed
    assert (changed["id"], changed["name"], changed["price"]) == ("code-reviewer", "Reviewer", None)

    status, _ = await api("DELETE", "agents/code-reviewer")
    assert status == 204
    status, body = await api("GET", "agents/code-reviewer")
    assert status == 404
    assert body["error"]["code"] == "not_found"


@pytest.mark.parametrize(
    ("method", "path", "body", "status", "code"),
    [
        ("POST", "agents", "{not json", 400, "invalid"),
        ("POST", "agents", [1, 2], 400, "invalid"),
        ("POST", "agents", {"name": "X", "colour": "red"}, 400, "invalid"),
        ("POST", "agents", {"name": 5}, 400, "invalid"),
        ("POST", "agents", {"persona": "no name"}, 400, "invalid"),
        ("POST", "agents", {"name": "Writer"}, 409, "name_taken"),
        ("POST", "agents", {"name": "wRiTeR"}, 409, "name_taken"),
        ("POST", "agents", {"name": "x" * 41}, 400, "invalid_name"),
        ("POST", "agents", {"name": "@evil"}, 400, "invalid_name"),
        ("POST", "agents", {"name": "A", "provider": {"kind": "gpt"}}, 400, "invalid"),
        (
            "POST",
            "agents",
            {"name": "A", "provider": {"kind": "openai", "base_url": "file:///etc"}},
            400,
            "invalid",
        ),
        (
            "POST",
            "agents",
            {"name": "A", "price": {"input_per_mtok": -1, "output_per_mtok": 1}},
            400,
            "invalid",
        ),
        ("PATCH", "agents/nobody", {"name": "Z"}, 404, "not_found"),
        ("DELETE", "agents/nobody", None, 404, "not_found"),
        ("GET", "conversations/c_nothere", None, 404, "not_found"),
        ("POST", "conversations/c_nothere/messages", {"text": "hi"}, 404, "not_found"),
        ("POST", "conversations/c_nothere/round/stop", None, 404, "not_found"),
        ("GET", "conversations/c_nothere/events", None, 404, "not_found"),
        ("GET", "nothing/here", None, 404, "not_found"),
        ("POST", "conversations", {"title": 7}, 400, "invalid"),
    ],
)
async def test_bad_input_gets_words_not_a_500(
    api: Api, method: str, path: str, body: Any, status: int, code: str
) -> None:
    got_status, got = await api(method, path, body)
    assert got_status == status, got
    assert got["error"]["code"] == code
    assert got["error"]["message"]
    # Nothing stored was touched.
    _, agents = await api("GET", "agents")
    assert [a["name"] for a in agents["agents"]] == ["Researcher", "Writer"]


async def test_message_bodies_are_checked(api: Api) -> None:
    _, chat = await api("POST", "conversations", {"title": "t"})
    path = f"conversations/{chat['id']}/messages"
    for body, code in [
        ({"text": ""}, "invalid"),
        ({"text": "   "}, "invalid"),
        ({}, "invalid"),
        ({"text": "x" * 16_001}, "invalid"),
    ]:
        status, got = await api("POST", path, body)
        assert (status, got["error"]["code"]) == (400, code), got
    status, got = await api("POST", path, "x" * 1_000_001)
    assert (status, got["error"]["code"]) == (413, "too_large")
    status, chat_after = await api("GET", f"conversations/{chat['id']}")
    assert chat_after["messages"] == []


async def test_text_in_a_body_is_cleaned_as_it_enters_and_a_lone_surrogate_is_refused(
    api: Api,
) -> None:
    status, chat = await api("POST", "conversations", {"title": "Pl\u202ean\x00s\u200b"})
    assert (status, chat["title"]) == (201, "Plans")
    path = f"conversations/{chat['id']}/messages"
    status, _ = await api("POST", path, {"text": "a\x00b\x1b[1m\u2066c\r\nd\te"})
    assert status == 202
    status, got = await api("POST", path, {"text": "\u200b\ufeff"})  # nothing left of it
    assert (status, got["error"]["message"]) == (400, "text: Value error, the message is empty.")
    status, got = await api("POST", path, b'{"text": "a\\ud800b"}')  # valid JSON, no text
    assert (status, got["error"]["code"]) == (400, "invalid")
    assert "lone surrogate" in got["error"]["message"]
    status, agent = await api("PATCH", "agents/writer", {"persona": "Wri\x07tes\u202e"})
    assert (status, agent["persona"]) == (200, "Writes")
    done = await settled(api, chat["id"])
    assert [m["text"] for m in done["messages"] if m["role"] == "user"] == ["ab[1mc\nd\te"]


async def test_a_plain_message_is_answered_by_the_chats_agent(api: Api) -> None:
    status, chat = await api("POST", "conversations", {"title": "Plans"})
    assert status == 201
    assert chat["title"] == "Plans"
    status, sent = await api(
        "POST", f"conversations/{chat['id']}/messages", {"text": "What should we try?"}
    )
    assert status == 202
    done = await settled(api, chat["id"])
    user, reply = done["messages"]
    assert (user["id"], user["role"], user["text"]) == (
        sent["message_id"],
        "user",
        "What should we try?",
    )
    assert (reply["role"], reply["agent"], reply["name"]) == ("agent", "researcher", "Researcher")
    assert "offline" in reply["text"].lower()
    assert "round" not in reply  # a plain message is not a round
    assert done["agent"] == "researcher"
    assert done["events"] == []
    assert done["spent_usd"] == 0

    status, listed = await api("GET", "conversations")
    assert [c["id"] for c in listed["conversations"]] == [chat["id"]]


async def test_the_chat_stays_with_whoever_spoke_last(api: Api) -> None:
    _, chat = await api("POST", "conversations", {})
    await api("POST", f"conversations/{chat['id']}/messages", {"text": "@Writer draft a line"})
    await settled(api, chat["id"])
    await api("POST", f"conversations/{chat['id']}/messages", {"text": "and another"})
    done = await settled(api, chat["id"])
    answers = [m["agent"] for m in done["messages"] if m["role"] == "agent"]
    assert answers == ["writer", "writer"]


async def test_requests_without_jupyter_auth_are_refused(
    http_server_client: Any, jp_base_url: str
) -> None:
    response = await http_server_client.fetch(f"{jp_base_url}conch/api/agents", raise_error=False)
    assert response.code == 403
    response = await http_server_client.fetch(
        f"{jp_base_url}conch/api/agents",
        raise_error=False,
        headers={"X-Conch-Kernel-Key": "guess"},
    )
    assert response.code == 403


async def test_the_kernel_key_opens_conch_api_and_nothing_else(
    jp_serverapp: Any, http_server_client: Any, jp_base_url: str
) -> None:
    key = os.environ["CONCH_KERNEL_KEY"]
    assert os.environ["CONCH_SERVER_URL"].rstrip("/").endswith(jp_base_url.rstrip("/"))
    headers = {"X-Conch-Kernel-Key": key}
    response = await http_server_client.fetch(f"{jp_base_url}conch/api/agents", headers=headers)
    assert response.code == 200
    # POST needs no XSRF cookie with the kernel key (it is not ambient).
    response = await http_server_client.fetch(
        f"{jp_base_url}conch/api/conversations",
        method="POST",
        body="{}",
        headers=headers,
        raise_error=False,
    )
    assert response.code == 201
    for path in ("api/contents", "api/kernels", "api/status"):
        response = await http_server_client.fetch(
            f"{jp_base_url}{path}", headers=headers, raise_error=False
        )
        assert response.code == 403, path


async def test_a_hand_edited_agents_file_is_named_and_never_overwritten(
    api: Api, conch_dir: Path
) -> None:
    path = conch_dir / "agents" / "agents.json"
    await api("GET", "agents")
    path.write_text('{"version": 1, "agents": [')
    before = path.read_bytes()
    status, body = await api("GET", "agents")
    assert status == 503
    assert body["error"]["code"] == "storage"
    assert "agents.json" in body["error"]["message"]
    status, body = await api("POST", "agents", {"name": "Fresh"})
    assert status == 503
    assert path.read_bytes() == before
