"""An administrator's policy set on a server that already holds things it now forbids: after a
restart with the policy in the server's config file (as an image or a spawner sets it), each
kept thing stops with words and nothing is deleted; a policy Conch cannot read keeps Conch from
loading at all, with words in the log naming the key."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from ..support.a2a_peers import Peer
from ..support.jupyter_process import JupyterProcess, until
from ..support.scripted_models import Reply, ScriptedModels

pytestmark = pytest.mark.timeout(240)

BY_ADMIN = "set by your administrator."
POLICY = {
    "modes": ["ask", "read"],
    "door": False,
    "outside_hosts": ["agents.example.org"],
    "providers": {"kinds": ["openai", "offline"]},
}


def settled(http: httpx.Client, server: JupyterProcess, chat_id: str) -> dict[str, Any]:
    def done() -> dict[str, Any] | None:
        chat: dict[str, Any] = http.get(server.api(f"conversations/{chat_id}")).json()
        return None if chat["busy"] or chat["round"] else chat

    found: dict[str, Any] = until(done, 30)
    return found


def test_things_made_before_a_policy_stop_with_words_and_stay(server: JupyterProcess) -> None:
    with ScriptedModels() as models, Peer(behaviour="echo") as peer:
        models.responder = lambda body: Reply(text="Bonjour")
        server.start()
        with server.client() as http:
            provider = {"kind": "anthropic", "model": "m", "base_url": models.anthropic_url}
            made = http.post(server.api("agents"), json={"name": "Claude", "provider": provider})
            assert made.status_code == 201, made.text
            helper = http.post(server.api("outside"), json={"paste": peer.address})
            assert helper.status_code == 201, helper.text
            pairing = http.post(server.api("pairings"), json={"agents": ["researcher"]}).json()
            chat_id = http.post(server.api("conversations"), json={}).json()["id"]
            path = f"conversations/{chat_id}"
            assert http.patch(server.api(path), json={"mode": "auto"}).status_code == 200
            kinds = ("agents", "outside", "pairings")
            before = {kind: http.get(server.api(kind)).json() for kind in kinds}
        server.stop()
        server.configure({"ConchApp": {"policy": POLICY}})
        server.start()
        sent_before = len(peer.received)
        with server.client() as http:
            assert http.get(server.api("policy")).json()["locked"] == POLICY
            # Nothing deleted.
            for kind, was in before.items():
                assert http.get(server.api(kind)).json() == was, kind
            # The chat kept in Auto runs in the most careful mode allowed, and says why.
            chat = http.get(server.api(path)).json()
            assert chat["mode"] == "read"
            assert "Auto is off on this server, so this chat runs in Read" in chat["mode_words"]
            # The agent on a provider now off answers with words at its turn; no model is asked.
            http.post(server.api(f"{path}/messages"), json={"text": "@Claude salut"})
            note = settled(http, server, chat_id)["messages"][-1]
            assert note["role"] == "note"
            assert note["text"].startswith("Claude could not answer: Anthropic models are off")
            assert note["text"].endswith(BY_ADMIN)
            assert models.requests == []
            # The outside agent on a host now not allowed is never contacted.
            http.post(server.api(f"{path}/messages"), json={"text": "@Helper hello"})
            chat = settled(http, server, chat_id)
            assert chat["messages"][-1]["text"].startswith(
                "Helper did not answer: Helper was not contacted: Outside agents at 127.0.0.1 "
                "are not allowed on this server"
            )
            assert chat["tainted"] is None
            repaired = http.post(server.api("outside/repair"))
            assert repaired.status_code == 200
            assert len(peer.received) == sent_before
            # The pairing's key is refused at the door, in words.
            door = httpx.post(
                f"{server.url}a2a/researcher/",  # the new port: the address's is the old one's
                json={"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "t"}},
                headers={"Authorization": f"Bearer {pairing['key']}", "A2A-Version": "1.0"},
                trust_env=False,
            )
            assert door.status_code == 403
            assert door.json()["error"]["code"] == "policy"
            assert door.json()["error"]["message"].endswith(BY_ADMIN)


def test_a_policy_conch_cannot_read_keeps_conch_from_loading(server: JupyterProcess) -> None:
    server.configure({"ConchApp": {"policy": {"modes": ["ask"], "max_chat_usd": "five"}}})
    server.start(ready="api/status")
    with server.client() as http:
        assert http.get(server.api("agents")).status_code == 404  # no API, and no door
        assert http.get(f"{server.url}.well-known/agent-card.json").status_code == 404
    assert (
        "Conch is not loaded: c.ConchApp.policy: max_chat_usd must be a number of US dollars, "
        "not a str ('five')."
    ) in server.log()
