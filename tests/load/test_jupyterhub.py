"""Conch behind a real JupyterHub: configurable-http-proxy in front, a simple local spawner, a dummy
authenticator, each user's single-user server running its own Conch under /user/<name>/.

Checked with Jupyter's default auth setting and with `ServerApp.allow_unauthenticated_access`
off: the API through the proxy, pairing addresses under /user/<name>/, the door's 401/200/404
through the proxy, SendMessage, Conch↔Conch across users, separate data dirs, the kernel finding
its server, and that no door key ever reaches the hub — every byte sent to the hub goes through a
relay that keeps it (tests/support/jupyterhub_process.py), and the hub's log is read too.

The full suite (both settings, two users) is marked slow; the short version (the strict setting,
one user, the door and the hub) runs in the default suite.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from ..server.test_door_server import text_message
from ..support.jupyter_process import ready_kernel, until
from ..support.jupyterhub_process import JupyterHubProcess, proxy_command

pytestmark = pytest.mark.timeout(600)

DEFAULT: dict[str, Any] = {}
STRICT: dict[str, Any] = {"allow_unauthenticated_access": False}
KERNEL_CODE = """
import json, os
from conch_jupyter.client import ConchClient
with ConchClient.from_environment() as conch:
    chat = conch.create_conversation("Made in the kernel")
print(json.dumps({"url": os.environ["CONCH_SERVER_URL"], "chat": chat["id"]}))
"""

Hub = Callable[..., JupyterHubProcess]


@pytest.fixture(scope="module")
def proxy() -> Path:
    found = proxy_command()
    if isinstance(found, str):
        pytest.skip(found)
    return found


@pytest.fixture
def start_hub(proxy: Path, tmp_path: Path) -> Iterator[Hub]:
    started: list[JupyterHubProcess] = []

    def start(
        users: tuple[str, ...], serverapp: dict[str, Any], conch: dict[str, Any] | None = None
    ) -> JupyterHubProcess:
        config = {
            "ServerApp": {"jpserver_extensions": {"conch_jupyter": True}, **serverapp},
            "ConchApp": {
                "offline_delay": 0,
                "retry_delay": 0.05,
                "door_remote": True,
                **(conch or {}),
            },
        }
        hub = JupyterHubProcess(tmp_path / f"hub{len(started)}", users, config)
        started.append(hub)
        hub.start(proxy)
        return hub

    try:
        yield start
    finally:
        for hub in started:
            hub.stop()


def send(text: str, context_id: str = "") -> dict[str, Any]:
    params = text_message(text, context_id)
    return {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": params}


def rpc_headers(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}", "A2A-Version": "1.0"}


def check_the_door(
    hub: JupyterHubProcess, user: str, token: str
) -> tuple[dict[str, Any], list[str]]:
    """The API through the proxy, a pairing under /user/<name>/ and its door; the pairing, and
    every door key made."""
    with hub.user_client(user, token) as api:
        agents = api.get("conch/api/agents")
        assert agents.status_code == 200, agents.text
        made = api.post("conch/api/pairings", json={"agents": ["researcher"]})
        assert made.status_code == 201, made.text
    pairing: dict[str, Any] = made.json()
    address = f"{hub.url}/user/{user}/a2a/researcher/"
    assert pairing["address"] == address
    assert f"\nAddress: {address}\n" in pairing["paste"]
    key = pairing["key"]
    base = f"{hub.url}/user/{user}/"
    with httpx.Client(trust_env=False, timeout=30, follow_redirects=False) as http:
        # No key: the door's own 401 in JSON, never the hub's sign-in redirect.
        for url in (f"{base}.well-known/agent-card.json", address, address.rstrip("/")):
            refused = http.get(url)
            assert refused.status_code == 401, (url, refused.status_code, refused.text[:300])
            assert refused.json()["error"]["code"] == "no_key"
            assert "Location" not in refused.headers
        card = http.get(f"{address}.well-known/agent-card.json", headers=rpc_headers(key))
        assert card.status_code == 200, card.text
        assert card.json()["name"] == "Researcher"
        assert card.json()["supportedInterfaces"][0]["url"] == address.rstrip("/")
        for nothing in (f"{base}a2a/writer/.well-known/agent-card.json", f"{base}a2a/x/y"):
            response = http.get(nothing, headers=rpc_headers(key))
            assert response.status_code == 404, (nothing, response.text[:300])
            assert response.json()["error"]["code"] == "not_found"
        wrong = http.get(address, headers=rpc_headers(key))
        assert (wrong.status_code, wrong.json()["error"]["code"]) == (405, "method_not_allowed")
        for url in (address, address.rstrip("/")):
            answer = http.post(
                url, json=send("Hello through the hub", "c1"), headers=rpc_headers(key)
            )
            assert answer.status_code == 200, answer.text
            task = answer.json()["result"]["task"]
            assert task["status"]["state"] == "TASK_STATE_COMPLETED", task
    remote_key = check_an_https_ingress(hub, user, token, key)
    return pairing, [key, remote_key]


# What an ingress that ends TLS in front of the hub's proxy adds (the proxy appends its own hop).
INGRESS = {
    "X-Forwarded-For": "203.0.113.9",
    "X-Forwarded-Proto": "https",
    "X-Forwarded-Host": "conch.example.org",
}


def check_an_https_ingress(hub: JupyterHubProcess, user: str, token: str, local_key: str) -> str:
    """door_remote with HTTPS at the ingress: a remote key gets in, a local one does not, however
    the request claims to be from this computer. The remote key."""
    with hub.user_client(user, token) as api:
        made = api.post(
            "conch/api/pairings", json={"agents": ["researcher"], "remote": True}, headers=INGRESS
        )
        assert made.status_code == 201, made.text
    remote = made.json()
    public = f"https://conch.example.org/user/{user}/a2a/researcher/"
    assert remote["address"] == public
    card = f"{hub.url}/user/{user}/.well-known/agent-card.json"
    with httpx.Client(trust_env=False, timeout=30) as http:
        response = http.get(card, headers={**rpc_headers(remote["key"]), **INGRESS})
        assert response.status_code == 200, response.text
        assert response.json()["supportedInterfaces"][0]["url"] == public.rstrip("/")
        for claim in ({}, {"X-Real-Ip": "127.0.0.1"}):
            response = http.get(card, headers={**rpc_headers(local_key), **INGRESS, **claim})
            assert response.status_code == 403, (claim, response.text)
            assert response.json()["error"]["code"] == "not_from_there"
    return str(remote["key"])


def check_no_door_key_reached_the_hub(hub: JupyterHubProcess, keys: list[str]) -> None:
    sent, log = hub.relay.sent(), hub.log()
    # The relay did see the hub being asked about the users' own tokens (the API calls above):
    # it watches the right road.
    assert b"GET /hub/api/user" in sent
    for key in keys:
        assert key.encode() not in sent, "a door key was sent to the hub"
        assert key not in log, "a door key is in the hub's log"
        assert key[-12:] not in log
    assert "403 GET /hub/api/user" not in log


@pytest.mark.parametrize("serverapp", [STRICT], ids=["strict"])
def test_the_door_behind_jupyterhub(start_hub: Hub, serverapp: dict[str, Any]) -> None:
    hub = start_hub(("ann",), serverapp)
    token = hub.spawn("ann")
    _, keys = check_the_door(hub, "ann", token)
    check_no_door_key_reached_the_hub(hub, keys)


@pytest.mark.slow
@pytest.mark.parametrize("serverapp", [DEFAULT, STRICT], ids=["default", "strict"])
def test_two_users_behind_jupyterhub(start_hub: Hub, serverapp: dict[str, Any]) -> None:
    hub = start_hub(("ann", "bob"), serverapp)
    tokens = {user: hub.spawn(user) for user in ("ann", "bob")}
    pairing, keys = check_the_door(hub, "ann", tokens["ann"])

    # One user's hub token opens nothing of the other's server.
    with hub.user_client("bob", tokens["ann"]) as intruder:
        response = intruder.get("conch/api/agents")
        assert response.status_code == 403, response.text[:300]
        assert "researcher" not in response.text

    # Conch↔Conch across users: Bob pastes Ann's pairing and asks her Researcher in a chat.
    with hub.user_client("bob", tokens["bob"]) as bob:
        # Bob has a Researcher of his own, so Ann's gets a name of Bob's choosing.
        paste = {"paste": pairing["paste"], "name": "Ann Researcher"}
        added = bob.post("conch/api/outside", json=paste)
        assert added.status_code == 201, added.text
        assert added.json()["name"] == "Ann Researcher"
        assert pairing["key"] not in added.text
        chat = bob.post("conch/api/conversations", json={"title": "Bob asks Ann's"}).json()["id"]
        question = "@Ann Researcher what would you look at first?"
        posted = bob.post(f"conch/api/conversations/{chat}/messages", json={"text": question})
        assert posted.status_code == 202, posted.text
        done = until(
            lambda: (c := bob.get(f"conch/api/conversations/{chat}").json())["busy"] is False and c,
            60,
        )
    answers = [m for m in done["messages"] if m["role"] == "outside"]
    assert len(answers) == 1, done["messages"]
    assert "Researcher" in answers[0]["text"]

    # Ann's side keeps what it said, in her own data; Bob's chats are not hers.
    with hub.user_client("ann", tokens["ann"]) as ann:
        said = ann.get(f"conch/api/pairings/{pairing['id']}/chats").json()["chats"]
        assert len(said) == 2  # the context "c1" of the door checks, and Bob's chat
        listed = ann.get("conch/api/conversations").json()["conversations"]
        assert chat not in {c["id"] for c in listed}

    # Separate data dirs, each in its user's home.
    ann_data, bob_data = hub.data_dir("ann"), hub.data_dir("bob")
    assert pairing["id"] in (ann_data / "pairings.json").read_text()
    assert not (bob_data / "pairings.json").exists()
    assert pairing["address"] in (bob_data / "agents" / "outside.json").read_text()
    assert not (ann_data / "agents" / "outside.json").exists()
    for data in (ann_data, bob_data):
        assert (data / "conch.sqlite3").exists()

    # The kernel finds its own server (not the proxy, not the other user's).
    made = run_in_a_kernel(hub, "ann", tokens["ann"], KERNEL_CODE)
    assert made["url"].startswith("http://127.0.0.1:")
    assert made["url"].endswith("/user/ann/")
    with hub.user_client("ann", tokens["ann"]) as ann:
        titles = {
            c["id"]: c["title"] for c in ann.get("conch/api/conversations").json()["conversations"]
        }
    assert titles.get(made["chat"]) == "Made in the kernel"
    with hub.user_client("bob", tokens["bob"]) as bob:
        listed = bob.get("conch/api/conversations").json()["conversations"]
    assert made["chat"] not in {c["id"] for c in listed}

    check_no_door_key_reached_the_hub(hub, keys)

    # A stopped server has no door: the hub answers for it (not in JSON), and the request, key
    # and all, is the hub's to see. It keeps the key out of its log (docs/jupyterhub.md).
    assert hub.hub("DELETE", "users/ann/server").status_code in (202, 204)
    until(lambda: not hub.hub("GET", "users/ann").json().get("servers"), 60)
    with httpx.Client(trust_env=False, timeout=30, follow_redirects=False) as http:
        response = http.post(
            pairing["address"], json=send("Anyone there?"), headers=rpc_headers(pairing["key"])
        )
    assert response.status_code in (302, 403, 424, 503), response.text[:300]
    assert pairing["key"] not in hub.log()


# A class's policy, in the single-user servers' config file (where z2jh's singleuser.extraFiles
# or the image puts it: docs/jupyterhub.md).
CLASS_POLICY = {
    "modes": ["ask", "read"],
    "max_chat_usd": 1,
    "max_monthly_usd": 10,
    "door": False,
    "outside_hosts": False,
    "providers": {"kinds": ["offline"]},
}


def test_two_users_under_one_policy(start_hub: Hub) -> None:
    hub = start_hub(("ann", "bob"), STRICT, {"policy": CLASS_POLICY})
    tokens = {user: hub.spawn(user) for user in ("ann", "bob")}
    for user, token in tokens.items():
        with hub.user_client(user, token) as api:
            assert api.get("conch/api/policy").json()["locked"] == {
                **CLASS_POLICY,
                "max_chat_usd": 1.0,
                "max_monthly_usd": 10.0,
            }
            chat = api.post("conch/api/conversations", json={}).json()["id"]
            refusals = [
                api.patch(f"conch/api/conversations/{chat}", json={"mode": "auto"}),
                api.post("conch/api/pairings", json={"agents": ["researcher"]}),
                api.post("conch/api/outside", json={"paste": f"{hub.url}/user/ann/a2a/x/"}),
                api.post(
                    "conch/api/agents",
                    json={"name": "Gpt", "provider": {"kind": "openai", "model": "m"}},
                ),
            ]
            for refused in refusals:
                assert refused.status_code == 403, (user, refused.text)
                assert refused.json()["error"]["code"] == "policy"
                assert refused.json()["error"]["message"].endswith("set by your administrator.")
            # What the policy allows still works, for each user in their own server.
            switched = api.patch(f"conch/api/conversations/{chat}", json={"mode": "read"})
            assert (switched.status_code, switched.json()["mode"]) == (200, "read")
            # No request changes the policy.
            changed = api.patch("conch/api/policy", json={"locked": {}})
            assert changed.status_code in (404, 405), changed.text
            assert api.get("conch/api/policy").json()["locked"]["door"] is False
    # Nothing was made, in either user's data.
    for user in tokens:
        assert not (hub.data_dir(user) / "pairings.json").exists()
        assert not (hub.data_dir(user) / "agents" / "outside.json").exists()


def run_in_a_kernel(hub: JupyterHubProcess, user: str, token: str, code: str) -> Any:
    """Run `code` in a kernel the user's server starts for a notebook; its last printed line."""
    with hub.user_client(user, token) as api:
        session = api.post(
            "api/sessions",
            json={"path": "hub.ipynb", "type": "notebook", "kernel": {"name": "python3"}},
        )
        assert session.status_code == 201, session.text
    kernel_id = session.json()["kernel"]["id"]
    runtime = hub.home(user) / ".local" / "share" / "jupyter" / "runtime"
    connection = until(lambda: next(runtime.glob(f"kernel-{kernel_id}.json"), None), 30)

    def state() -> str:
        with hub.user_client(user, token) as api:
            answer = api.get(f"api/kernels/{kernel_id}")
        return "gone" if answer.status_code == 404 else str(answer.json().get("execution_state"))

    client = ready_kernel(connection, state, lambda: "\n".join(hub.log().splitlines()[-60:]))
    out: list[str] = []
    errors: list[str] = []

    def hook(message: dict[str, Any]) -> None:
        if message["msg_type"] == "stream":
            out.append(message["content"]["text"])
        elif message["msg_type"] == "error":
            errors.append("\n".join(message["content"]["traceback"]))

    try:
        client.execute_interactive(code, timeout=60, output_hook=hook)
    finally:
        client.stop_channels()
    assert not errors, errors
    return json.loads("".join(out).strip().splitlines()[-1])
