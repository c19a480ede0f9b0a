"""The door's HTTP edges on a real Jupyter server: JSON for everything under a2a/ and
.well-known/, whatever the method and whatever Jupyter's own auth setting; the endpoint with and
without its trailing slash; and door requests that never reach Jupyter's identity provider (in a
JupyterHub single-user server, that provider would send every bearer key to the hub)."""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable
from typing import Any, ClassVar
from urllib.parse import urljoin

import httpx
import pytest
from jupyter_server.auth.identity import IdentityProvider, User
from tornado import web

from ..support.api import Api
from .test_door_server import bearer, call, http_server, pair, text_message

__all__ = ["http_server"]  # the server with xheaders as ServerApp makes it, for trust_xheaders

pytestmark = pytest.mark.timeout(60)

STRICT = {"allow_unauthenticated_access": False}
METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE", "OPTIONS")


class RecordingIdentityProvider(IdentityProvider):
    """Jupyter's own identity provider, noting every request it is asked about."""

    asked: ClassVar[list[str]] = []

    def get_user(self, handler: web.RequestHandler) -> User | Awaitable[User | None] | None:
        self.asked.append(handler.request.path)
        return super().get_user(handler)


@pytest.fixture
def serverapp_config() -> dict[str, Any]:
    return {}


@pytest.fixture
def jp_server_config(jp_server_config: dict[str, Any], serverapp_config: dict[str, Any]) -> Any:
    jp_server_config["ServerApp"].update(
        identity_provider_class=RecordingIdentityProvider, **serverapp_config
    )
    return jp_server_config


@pytest.fixture
def door(jp_http_port: int, jp_base_url: str) -> str:
    return f"http://127.0.0.1:{jp_http_port}{jp_base_url}"


def assert_json_error(response: httpx.Response, status: int, code: str, what: str) -> None:
    assert response.status_code == status, (what, response.status_code, response.text[:200])
    assert response.headers["Content-Type"].startswith("application/json"), what
    if response.request.method != "HEAD":
        error = response.json()["error"]
        assert (error["code"], bool(error["message"])) == (code, True), (what, error)


@pytest.mark.parametrize("serverapp_config", [{}, STRICT], ids=["default", "strict"])
async def test_everything_under_the_door_answers_json(api: Api, door: str) -> None:
    made = await pair(api, "writer")
    key = made["key"]
    rpc, card = f"{door}a2a/writer", f"{door}a2a/writer/.well-known/agent-card.json"
    nowhere = [
        f"{door}a2a",
        f"{door}a2a/",
        f"{door}a2a/writer/tasks",
        f"{door}a2a/writer/.well-known/agent.json",
        f"{door}a2a/.well-known/agent-card.json",  # the card beside a slashless address
        f"{door}.well-known",
        f"{door}.well-known/",
        f"{door}.well-known/agent.json",
        f"{door}.well-known/openid-configuration",
    ]
    get_task = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "x"}})
    async with httpx.AsyncClient(timeout=10) as http:
        for method in METHODS:
            content = get_task if method in ("POST", "PUT", "PATCH") else None
            for url in nowhere:
                for headers in ({}, bearer(key)):
                    response = await http.request(method, url, headers=headers, content=content)
                    assert_json_error(response, 404, "not_found", f"{method} {url}")
            for url, served in ((rpc, "POST"), (rpc + "/", "POST"), (card, "GET")):
                if method == served:
                    continue
                response = await http.request(method, url, headers=bearer(key), content=content)
                assert_json_error(response, 405, "method_not_allowed", f"{method} {url}")
                response = await http.request(method, url, content=content)
                assert_json_error(response, 401, "no_key", f"{method} {url} with no key")
        response = await http.head(card, headers=bearer(key))
        assert_json_error(response, 405, "method_not_allowed", "HEAD on the card")
        # A browser's form post with a cookie and no XSRF token: the door's words, not Jupyter's
        # "_xsrf argument missing" page.
        for url in (rpc, rpc + "/"):
            headers = {
                "Cookie": "_xsrf=abc",
                "Content-Type": "application/json",
                "A2A-Version": "1.0",
            }
            response = await http.post(url, content=get_task, headers={**headers, **bearer(key)})
            assert response.status_code == 200, response.text
            assert response.json()["error"]["code"] == -32001  # no such task, in JSON-RPC
        # Jupyter's API headers, kept though the door is no Jupyter handler, on answers and
        # refusals alike.
        for response in (
            await http.get(card, headers=bearer(key)),
            await http.get(card),
            await http.get(card, headers={**bearer(key), "Host": "evil.example"}),
        ):
            assert response.headers["X-Content-Type-Options"] == "nosniff"
            policy = response.headers["Content-Security-Policy"]
            assert policy.startswith("frame-ancestors 'self'; report-uri "), policy
            assert policy.endswith("; default-src 'none'"), policy
            assert response.headers["Content-Type"] == "application/json"


@pytest.mark.parametrize("serverapp_config", [{}, STRICT], ids=["default", "strict"])
async def test_the_address_with_and_without_its_slash_is_one_endpoint(
    api: Api, door: str, jp_http_port: int
) -> None:
    made = await pair(api, "writer")
    address = made["address"]
    assert address == f"http://127.0.0.1:{jp_http_port}/a%40b/a2a/writer/"
    assert f"\nAddress: {address}\n" in made["paste"]
    # A client that resolves the card relative to the pasted address finds it there.
    async with httpx.AsyncClient(headers=bearer(made["key"]), timeout=10) as http:
        card = await http.get(urljoin(address, ".well-known/agent-card.json"))
    assert card.status_code == 200, card.text
    assert card.json()["name"] == "Writer"
    first = await call(address, made["key"], "SendMessage", text_message("With a slash", "c"))
    second = await call(address.rstrip("/"), made["key"], "SendMessage", text_message("No", "c"))
    for status, answer in (first, second):
        assert status == 200
        assert answer["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
    # One endpoint: both messages went to the same agent and the same chat.
    assert first[1]["result"]["task"]["contextId"] == second[1]["result"]["task"]["contextId"]
    _, said = await api("GET", f"pairings/{made['id']}/chats")
    assert len(said["chats"]) == 1


@pytest.mark.parametrize("serverapp_config", [{}, STRICT], ids=["default", "strict"])
async def test_the_door_never_asks_jupyters_identity_provider(
    api: Api, door: str, jp_serverapp: Any
) -> None:
    assert isinstance(jp_serverapp.identity_provider, RecordingIdentityProvider)
    made = await pair(api, "writer")
    token = jp_serverapp.identity_provider.token
    RecordingIdentityProvider.asked.clear()
    async with httpx.AsyncClient(timeout=10) as http:
        for headers in (bearer(made["key"]), bearer(token), bearer("conch_a2a_" + "x" * 43), {}):
            await http.get(f"{door}.well-known/agent-card.json", headers=headers)
            await http.get(f"{door}a2a/writer", headers=headers)
            await http.get(f"{door}a2a/nothing/here", headers=headers)
        status, _ = await call(f"{door}a2a/writer/", made["key"], "SendMessage", text_message("Hi"))
        assert status == 200
        assert RecordingIdentityProvider.asked == []
        # The API still goes through it, with the token as ever.
        response = await http.get(
            f"{door}conch/api/agents", headers={"Authorization": f"token {token}"}
        )
    assert response.status_code == 200
    assert RecordingIdentityProvider.asked == [f"{door.split(':', 2)[2][5:]}conch/api/agents"]


# An HTTPS ingress in front of JupyterHub's proxy, as the single-user server sees a request: the
# ingress wrote the client and the scheme, the hub's proxy appended its own hop to each.
INGRESS = {
    "X-Forwarded-For": "203.0.113.9, 127.0.0.1",
    "X-Forwarded-Proto": "https,http",
    "X-Forwarded-Host": "conch.example.org",
}


@pytest.mark.parametrize("serverapp_config", [{"trust_xheaders": True}])
@pytest.mark.parametrize("conch_config", [{"door_remote": True}])
async def test_behind_an_ingress_and_the_hubs_proxy(api: Api, door: str, jp_base_url: str) -> None:
    local = await pair(api, "researcher")
    status, remote = await api(  # a copy: jp_fetch adds the token to the headers it is given
        "POST", "pairings", {"agents": ["researcher"], "remote": True}, headers=dict(INGRESS)
    )
    assert status == 201, remote
    # The address handed out is the one the ingress serves, over HTTPS.
    assert remote["address"] == f"https://conch.example.org{jp_base_url}a2a/researcher/"
    card = f"{door}.well-known/agent-card.json"
    async with httpx.AsyncClient(timeout=10) as http:
        response = await http.get(card, headers={**bearer(remote["key"]), **INGRESS})
        assert response.status_code == 200, response.text
        assert response.json()["supportedInterfaces"][0]["url"] == remote["address"].rstrip("/")
        # From another computer, a key not marked remote stays out …
        response = await http.get(card, headers={**bearer(local["key"]), **INGRESS})
        assert (response.status_code, response.json()["error"]["code"]) == (403, "not_from_there")
        # … however the request claims to be from this computer.
        for claim in ({"X-Real-Ip": "127.0.0.1"}, {"X-Forwarded-For": "127.0.0.1, 203.0.113.9"}):
            headers = {**bearer(local["key"]), **INGRESS, **claim}
            response = await http.get(card, headers=headers)
            assert response.status_code == 403, (claim, response.text)
        # Plain HTTP at the ingress: not for a remote key either.
        plain = {**INGRESS, "X-Forwarded-Proto": "http,http"}
        response = await http.get(card, headers={**bearer(remote["key"]), **plain})
        assert response.status_code == 403
        assert "HTTPS" in response.json()["error"]["message"]
        # Through the hub's proxy alone, on this computer, the local key works.
        response = await http.get(
            card, headers={**bearer(local["key"]), "X-Forwarded-For": "127.0.0.1"}
        )
        assert response.status_code == 200


class Lines(logging.Handler):
    def __init__(self, level: int) -> None:
        super().__init__(level)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


def requests_counted(metrics: str, status: int) -> float:
    """Jupyter's request histogram's count for the door's GETs answered `status`."""
    label = (
        'http_request_duration_seconds_count{handler="conch_jupyter.door.http.'
        f'DoorExchange",method="GET",status_code="{status}"}}'
    )
    for line in metrics.splitlines():
        if line.startswith(label):
            return float(line.split()[-1])
    return 0.0


async def test_the_door_is_in_jupyters_request_log_and_metrics(
    api: Api, door: str, jp_serverapp: Any
) -> None:
    made = await pair(api, "writer")
    card = f"{door}a2a/writer/.well-known/agent-card.json"
    token = {"Authorization": f"token {jp_serverapp.identity_provider.token}"}
    path = card.split(":", 2)[2][5:]
    async with httpx.AsyncClient(timeout=10) as http:

        async def counted(status: int) -> float:
            metrics = await http.get(f"{door}metrics", headers=token)
            assert metrics.status_code == 200, metrics.text[:200]
            return requests_counted(metrics.text, status)

        for level, success_logged in ((logging.INFO, False), (logging.DEBUG, True)):
            lines = Lines(level)
            jp_serverapp.log.addHandler(lines)
            try:
                before = await counted(200), await counted(401)
                assert (await http.get(card, headers=bearer(made["key"]))).status_code == 200
                assert (await http.get(card)).status_code == 401
                after = await counted(200), await counted(401)
            finally:
                jp_serverapp.log.removeHandler(lines)
            # Every door request is measured, as any of Jupyter's ...
            assert (after[0] - before[0], after[1] - before[1]) == (1, 1), level
            # ... and logged as Jupyter logs them: a refusal as a warning; a success at debug
            # level, so only where a debug line is written.
            assert any(line.startswith(f"401 GET {path} ") for line in lines.lines), lines.lines
            success = [line for line in lines.lines if line.startswith(f"200 GET {path} ")]
            assert bool(success) is success_logged, (level, lines.lines)
