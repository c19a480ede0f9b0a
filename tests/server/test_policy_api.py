"""An administrator's policy (c.ConchApp.policy) on a real Jupyter server: GET /policy says what
is locked, each change it forbids answers 403 `policy` in words ending "set by your
administrator" and changes nothing, and what it forbids that exists already stops with words
(nothing deleted). Kept things from before a policy, across a restart: tests/system/
test_policy_restart.py."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from conch_jupyter.client import AsyncConchClient
from conch_jupyter.server_ext.services import ConchServices
from conch_jupyter.widget import SettingsWidget

from ..support.a2a_peers import Peer
from ..support.api import Api, settled
from ..support.scripted_models import Reply, ScriptedModels

pytestmark = pytest.mark.timeout(90)

BY_ADMIN = "set by your administrator."


def class_policy(models: ScriptedModels) -> dict[str, Any]:
    """A class's hub: Ask and Read only, small limits, no door, no outside agents, only the
    school's model gateway (here the scripted model server)."""
    return {
        "modes": ["ask", "read"],
        "max_chat_usd": 0.01,
        "max_monthly_usd": 1,
        "door": False,
        "outside_hosts": ["agents.school.example"],
        "providers": {"kinds": ["openai"], "base_urls": [models.openai_url + "/"]},
        "acp": False,
    }


@pytest.fixture
def conch_config(models: ScriptedModels) -> dict[str, Any]:
    return {"policy": class_policy(models), "chat_limit_usd": 5.0}


@pytest.fixture
def conch(jp_serverapp: Any) -> ConchServices:
    services: ConchServices = jp_serverapp.web_app.settings["conch"]
    return services


def refused(status: int, answer: Any) -> str:
    assert status == 403, answer
    assert answer["error"]["code"] == "policy"
    words: str = answer["error"]["message"]
    assert words.endswith(BY_ADMIN)
    return words


async def gateway_agent(api: Api, models: ScriptedModels, **extra: Any) -> dict[str, Any]:
    provider = {"kind": "openai", "model": "m", "base_url": models.openai_url}
    status, made = await api("POST", "agents", {"name": "Tutor", "provider": provider, **extra})
    assert status == 201, made
    return dict(made)


async def test_get_policy_says_what_is_locked(api: Api, models: ScriptedModels) -> None:
    status, answer = await api("GET", "policy")
    assert status == 200
    assert answer["locked"] == {
        "modes": ["ask", "read"],
        "max_chat_usd": 0.01,
        "max_monthly_usd": 1.0,
        "door": False,
        "outside_hosts": ["agents.school.example"],
        "providers": {"kinds": ["openai"], "base_urls": [models.openai_url]},
        "acp": False,
    }


@pytest.mark.parametrize("conch_config", [{}])
async def test_with_no_policy_nothing_is_locked(api: Api, conch_config: dict[str, Any]) -> None:
    assert (await api("GET", "policy"))[1]["locked"] == {}


async def test_a_mode_turned_off_is_refused_and_the_chat_keeps_its_own(api: Api) -> None:
    _, chat = await api("POST", "conversations", {})
    path = f"conversations/{chat['id']}"
    words = refused(*await api("PATCH", path, {"mode": "auto"}))
    assert words == (
        "Auto is off on this server (the modes allowed: Ask, Read): set by your administrator."
    )
    after = (await api("GET", path))[1]
    assert after["mode"] == "ask"
    assert not [e for e in after["events"] if e["type"] == "mode.changed"]
    status, changed = await api("PATCH", path, {"mode": "read"})
    assert (status, changed["mode"]) == (200, "read")


async def test_a_chat_kept_in_auto_runs_in_read_and_says_why(
    api: Api, models: ScriptedModels, conch: ConchServices
) -> None:
    await gateway_agent(api, models)
    _, chat = await api("POST", "conversations", {})
    # Set as it was before the policy: straight in the store, as an older Conch left it.
    await conch.store.set_mode(chat["id"], "auto")
    shown = (await api("GET", f"conversations/{chat['id']}"))[1]
    assert shown["mode"] == "read"
    assert shown["mode_words"].startswith(
        "Auto is off on this server, so this chat runs in Read: set by your administrator."
    )
    models.script(
        Reply(tool_calls=(("run_code", {"code": "print('ran')"}),)), Reply(text="I could not.")
    )
    await api("POST", f"conversations/{chat['id']}/messages", {"text": "@Tutor run it"})
    done = await settled(api, chat["id"])
    tools = [m for m in done["messages"] if m["role"] == "tool"]
    assert len(tools) == 1
    assert "Read mode" in tools[0]["text"]
    assert [e["state"] for e in done["events"] if e["type"] == "tool.ended"] == ["refused"]
    # Nothing lost: the chat still holds its own mode, for when the policy lifts.
    stored = conch.store.get_conversation(chat["id"])
    assert stored is not None
    assert stored.mode == "auto"


async def test_providers_only_the_kinds_and_base_urls_allowed(
    api: Api, models: ScriptedModels
) -> None:
    anthropic = {"kind": "anthropic", "model": "m", "base_url": models.anthropic_url}
    words = refused(*await api("POST", "agents", {"name": "Claude", "provider": anthropic}))
    assert words.startswith("Anthropic models are off on this server")
    elsewhere = {"kind": "openai", "model": "m"}  # api.openai.com, its default address
    words = refused(*await api("POST", "agents", {"name": "Gpt", "provider": elsewhere}))
    assert words.startswith("The model address https://api.openai.com/v1 is not allowed")
    tutor = await gateway_agent(api, models)
    words = refused(*await api("PATCH", f"agents/{tutor['id']}", {"provider": anthropic}))
    assert "Anthropic models are off" in words
    # A change that leaves the provider alone is no provider change.
    assert (await api("PATCH", f"agents/{tutor['id']}", {"persona": "patient"}))[0] == 200
    names = [a["name"] for a in (await api("GET", "agents"))[1]["agents"]]
    assert "Claude" not in names
    assert "Gpt" not in names
    assert (await api("GET", f"agents/{tutor['id']}"))[1]["provider"]["kind"] == "openai"


async def test_an_agent_on_a_provider_turned_off_answers_with_words(
    api: Api, models: ScriptedModels
) -> None:
    # The default agents are on the offline model, which this policy does not allow.
    _, chat = await api("POST", "conversations", {})
    await api("POST", f"conversations/{chat['id']}/messages", {"text": "@Researcher hello"})
    done = await settled(api, chat["id"])
    note = done["messages"][-1]
    assert note["role"] == "note"
    assert note["text"] == (
        "Researcher could not answer: The offline model is off on this server (the provider "
        "kinds allowed: openai): set by your administrator."
    )
    assert [e.get("reason") for e in done["events"] if e["type"] == "round.ended"] == ["error"]
    assert "researcher" in [a["id"] for a in (await api("GET", "agents"))[1]["agents"]]


async def test_the_chat_limit_is_capped_by_max_chat_usd(api: Api, models: ScriptedModels) -> None:
    # c.ConchApp.chat_limit_usd is $5 here; the policy caps every chat at $0.01.
    models.responder = lambda body: Reply(text="priced", usage=(0, 10_000))  # $0.02 a reply
    await gateway_agent(api, models, price={"input_per_mtok": 0, "output_per_mtok": 2})
    _, chat = await api("POST", "conversations", {})
    for text in ("@Tutor first", "@Tutor second"):
        await api("POST", f"conversations/{chat['id']}/messages", {"text": text})
        done = await settled(api, chat["id"])
    assert len(models.requests) == 1
    assert done["messages"][-1]["text"] == (
        "This chat has spent $0.02 of its $0.01 limit, so Tutor did not answer. A chat's limit "
        "can be at most $0.01 on this server: set by your administrator."
    )


async def test_no_pairing_and_a_kept_key_is_refused_at_the_door(
    api: Api, conch: ConchServices, jp_http_port: int, jp_base_url: str
) -> None:
    words = refused(*await api("POST", "pairings", {"agents": ["researcher"]}))
    assert words == (
        "The door is closed on this server, so no agent can be let in: set by your administrator."
    )
    assert (await api("GET", "pairings"))[1]["pairings"] == []
    # A pairing made before the policy (kept in pairings.json): its key opens nothing now.
    address = f"http://127.0.0.1:{jp_http_port}{jp_base_url}a2a/researcher/"
    made = conch.pairings.create([("researcher", "Researcher")], address=address)
    call = {"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "t"}}
    async with httpx.AsyncClient(timeout=10) as http:
        for url in (address, f"http://127.0.0.1:{jp_http_port}{jp_base_url}a2a/researcher"):
            answer = await http.post(
                url,
                json=call,
                headers={"Authorization": f"Bearer {made.key}", "A2A-Version": "1.0"},
            )
            assert answer.status_code == 403
            assert answer.json()["error"]["code"] == "policy"
            assert answer.json()["error"]["message"].endswith(BY_ADMIN)
    assert [p["id"] for p in (await api("GET", "pairings"))[1]["pairings"]] == [made.pairing.id]


@pytest.mark.parametrize("conch_config", [{"policy": {"door_remote": False}}])
async def test_no_pairing_for_other_computers(api: Api, conch_config: dict[str, Any]) -> None:
    words = refused(*await api("POST", "pairings", {"agents": ["researcher"], "remote": True}))
    assert (
        words == "The door is closed to other computers on this server: set by your administrator."
    )
    assert (await api("POST", "pairings", {"agents": ["researcher"]}))[0] == 201


async def test_an_outside_agent_on_a_host_not_allowed_is_never_contacted(api: Api) -> None:
    with Peer(behaviour="echo") as peer:
        words = refused(*await api("POST", "outside", {"paste": peer.address}))
        assert peer.received == []
    assert words == (
        "Outside agents at 127.0.0.1 are not allowed on this server (the hosts allowed: "
        "agents.school.example): set by your administrator."
    )
    assert (await api("GET", "outside"))[1]["outside"] == []


@pytest.mark.parametrize("conch_config", [{"policy": {"outside_hosts": False}}])
async def test_no_outside_agents_at_all(api: Api, conch_config: dict[str, Any]) -> None:
    with Peer(behaviour="echo") as peer:
        words = refused(*await api("POST", "outside", {"paste": peer.address}))
        assert peer.received == []
    assert words == "Outside agents are off on this server: set by your administrator."


async def test_the_kernel_side_reads_the_policy_for_settings_drawn_through_it(
    api: Api, conch: ConchServices, jp_http_port: int, jp_base_url: str
) -> None:
    """Settings drawn through the kernel (no Jupyter server of the page's own) get the same
    locks in their `locked` trait: the kernel key reads GET /policy."""
    url = f"http://127.0.0.1:{jp_http_port}{jp_base_url}"
    key = conch.kernel_key
    async with httpx.AsyncClient(timeout=10) as http:
        answer = await http.get(f"{url}conch/api/policy", headers={"X-Conch-Kernel-Key": key})
    assert answer.status_code == 200
    assert answer.json()["locked"]["door"] is False
    widget = SettingsWidget(
        "pairings", client_factory=lambda: AsyncConchClient(url, kernel_key=key)
    )
    widget.send = lambda content, buffers=None: None
    await widget.acting()
    assert widget.locked == answer.json()["locked"]
    await widget.client().aclose()
