"""The A2A door on HTTP, and the /pairings API that lets someone in: thin tornado adapters.

The door lives under `base_url` but outside conch/api/, so Jupyter's sign-in does not apply:
  GET  {base_url}.well-known/agent-card.json             the first agent the key was given
  GET  {base_url}a2a/<agent>/.well-known/agent-card.json
  POST {base_url}a2a/<agent>                              JSON-RPC
Its handlers are @allow_unauthenticated and check their own keys (a2a/door/rules.py); Jupyter's host
and origin checks still run first, in APIHandler.prepare. XSRF is off: a door key travels in a
header, never in a cookie, so no page can make a browser send it.

The /pairings handlers are ConchHandlers (Jupyter auth or the kernel key), like the rest of the
API; a door key opens nothing there.
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import re
from http import HTTPStatus
from typing import Any
from urllib.parse import quote

from jupyter_server.auth.decorator import allow_unauthenticated, authorized
from jupyter_server.base.handlers import APIHandler, JupyterHandler
from pydantic import Field, StrictBool, StrictStr
from tornado import web

from ..a2a.door.calls import Refusal, read_call
from ..a2a.door.card import agent_card
from ..a2a.door.pairing import Pairing, PairingError
from ..a2a.door.rules import Denied
from ..a2a.wire import VERSION_HEADER, ErrorCode, RequestId, rpc_error, rpc_result
from ..agents import Agent, AgentError
from ..files import StoreError
from .bodies import Body
from .handlers import ApiError, ConchHandler
from .services import ConchServices

log = logging.getLogger(__name__)

# Room for a 16,000-character message however it is escaped, and not much more.
MAX_BODY_BYTES = 256 * 1024
_HOST = re.compile(r"[A-Za-z0-9.\-:\[\]]{1,300}")


def request_origin(handler: JupyterHandler) -> str:
    """scheme://host as the caller reached us. With ServerApp.trust_xheaders, tornado has
    already applied X-Forwarded-Proto (and X-Real-Ip); X-Forwarded-Host is honoured here."""
    host = handler.request.host
    if getattr(handler.serverapp, "trust_xheaders", False):
        forwarded = handler.request.headers.get("X-Forwarded-Host", "").split(",")[0].strip()
        host = forwarded or host
    if not _HOST.fullmatch(host):
        host = "localhost"  # a Host no address can hold: the card must still be well formed
    return f"{handler.request.protocol}://{host}"


def endpoint_url(handler: JupyterHandler, agent_id: str) -> str:
    """The absolute URL of an agent's JSON-RPC endpoint, base_url included."""
    return f"{request_origin(handler)}{handler.base_url}a2a/{quote(agent_id, safe='')}"


class DoorError(web.HTTPError):
    """A request turned away before any JSON-RPC: a status and words."""

    def __init__(self, denied: Denied) -> None:
        super().__init__(denied.status, log_message=denied.words.replace("%", "%%"))
        self.denied = denied


NOTHING_HERE = Denied(404, "not_found", "There is nothing here.")


@functools.lru_cache(maxsize=256)
def card_bytes(name: str, persona: str, endpoint: str) -> bytes:
    """A card as sent: made once for each agent (as it is now) and endpoint, not per request."""
    return json.dumps(agent_card(name=name, persona=persona, endpoint=endpoint)).encode()


@web.stream_request_body
class DoorHandler(APIHandler):
    """What every door endpoint shares: the gate, the body (read with a limit), the answers."""

    pairing: Pairing

    def initialize(self) -> None:
        self._body = bytearray()
        self._too_large = False
        self._prepared = False

    @property
    def conch(self) -> ConchServices:
        services: ConchServices = self.settings["conch"]
        return services

    def check_xsrf_cookie(self) -> None:
        """No XSRF check: see the module docstring."""

    async def prepare(self) -> None:  # type: ignore[override]
        await super().prepare()  # Jupyter's host (403) and origin (404) checks
        length = self.request.headers.get("Content-Length", "0")
        if not length.isdigit() or int(length) > MAX_BODY_BYTES:
            raise DoorError(Denied(413, "too_large", "The body is larger than 256 KB."))
        if self.request.connection is not None:
            # A chunked body is cut off at the same size.
            self.request.connection.set_max_body_size(MAX_BODY_BYTES)  # type: ignore[attr-defined]
        verdict = self.conch.door_gate.admit(
            headers=self.request.headers,
            address=self.request.remote_ip or "",
            protocol=self.request.protocol,
            keys=self.conch.pairings.door_keys(),
        )
        if isinstance(verdict, Denied):
            if verdict.delay:
                await asyncio.sleep(verdict.delay)  # slower answers, as for sign-ins
            raise DoorError(verdict)
        self.pairing = self.conch.pairings.get(verdict)
        self._prepared = True

    def data_received(self, chunk: bytes) -> None:
        if len(self._body) + len(chunk) > MAX_BODY_BYTES:
            self._too_large = True
        elif not self._too_large:
            self._body.extend(chunk)

    def scoped_agent(self, agent_id: str | None) -> Agent:
        """The agent, if the key was given it; any other looks like nothing is there (404)."""
        wanted = self.pairing.agents if agent_id is None else (agent_id,)
        for candidate in wanted:
            if candidate not in self.pairing.agents:
                break
            try:
                return self.conch.agents.get(candidate)
            except AgentError:
                continue  # given once, deleted since
        raise DoorError(NOTHING_HERE)

    def answer(self, data: Any) -> None:
        """Send JSON data, or bytes already made (the card)."""
        self.set_header("Cache-Control", "no-store")
        body = data if isinstance(data, bytes) else json.dumps(data)
        self.finish(body, set_content_type="application/json")

    def write_error(self, status_code: int, **kwargs: Any) -> None:
        error = kwargs.get("exc_info", (None, None, None))[1]
        if isinstance(error, DoorError):
            denied = error.denied
        elif isinstance(error, StoreError | PairingError):
            log.error("Conch door: %s", error)
            denied = Denied(503, "storage", "The door cannot read its pairings right now.")
        elif isinstance(error, web.HTTPError):  # Jupyter's host check, tornado's 405 …
            phrase = HTTPStatus(status_code).phrase
            code = phrase.lower().replace(" ", "_")
            denied = Denied(status_code, code, error.log_message or f"{phrase}.")
        else:
            denied = Denied(500, "internal", "Something went wrong inside Conch.")
        if denied.status == 401:
            self.set_header(
                "WWW-Authenticate", 'Bearer error="invalid_token"' if denied.bad_key else "Bearer"
            )
        if denied.retry_after is not None:
            self.set_header("Retry-After", str(denied.retry_after))
        if not self._prepared:
            # Turned away before the body was read: tornado will drop the connection after
            # this answer, so say so, or a client reusing it gets a reset instead of the words.
            self.set_header("Connection", "close")
        self.set_status(denied.status)
        self.answer({"error": {"code": denied.code, "message": denied.words}})


class DoorCardHandler(DoorHandler):
    @allow_unauthenticated
    def get(self, agent_id: str | None = None) -> None:
        agent = self.scoped_agent(agent_id)
        self.answer(card_bytes(agent.name, agent.persona, endpoint_url(self, agent.id)))


class DoorRpcHandler(DoorHandler):
    @allow_unauthenticated
    async def post(self, agent_id: str) -> None:
        if self._too_large:
            raise DoorError(Denied(413, "too_large", "The body is larger than 256 KB."))
        agent = self.scoped_agent(agent_id)
        request_id: RequestId = None
        try:
            call = read_call(
                bytes(self._body),
                self.request.headers.get("Content-Type"),
                self.request.headers.get(VERSION_HEADER),
            )
            request_id = call.id
            endpoint = endpoint_url(self, agent.id)
            result = await self.conch.peers.answer(call, self.pairing, agent, endpoint)
            answer = rpc_result(request_id, result)
        except Refusal as refusal:
            answer = refusal.answer(request_id)
        except Exception:
            # Never a 500 page for a caller: words, and the details in the owner's log.
            log.exception("Conch door: answering a call to %s failed", agent.id)
            answer = rpc_error(request_id, ErrorCode.INTERNAL, "Something went wrong inside Conch.")
        self.answer(answer)


# --- the pairings API -----------------------------------------------------------------------


class PairingIn(Body):
    agents: list[StrictStr] = Field(min_length=1, max_length=20)
    remote: StrictBool = False
    label: StrictStr = Field(default="", max_length=80)


REMOTE_NOTE = (
    "Marked remote: this key also works from other computers, only over HTTPS and only while "
    "c.ConchApp.door_remote is on (it is {state})."
)


class PairingsHandler(ConchHandler):
    @web.authenticated
    @authorized
    def get(self) -> None:
        pairings = self.conch.pairings.list()
        self.reply({"pairings": [p.to_public() for p in pairings]})

    @web.authenticated
    @authorized
    def post(self) -> None:
        body = self.body(PairingIn)
        try:
            agents = [self.conch.agents.get(agent_id) for agent_id in body.agents]
        except AgentError as error:
            raise ApiError(400, "unknown_agent", error.message) from None
        try:
            made = self.conch.pairings.create(
                [(a.id, a.name) for a in agents],
                address=endpoint_url(self, agents[0].id),
                remote=body.remote,
                label=body.label,
            )
        except PairingError as error:
            raise ApiError(400, error.code, error.message) from None
        data = {**made.pairing.to_public(), "key": made.key, "paste": made.paste}
        if made.pairing.remote:
            state = "on" if self.conch.door_gate.remote else "off"
            data["note"] = REMOTE_NOTE.format(state=state)
        self.set_header("Cache-Control", "no-store")  # the key is shown this once
        self.reply(data, 201)


class PairingHandler(ConchHandler):
    @web.authenticated
    @authorized
    async def delete(self, pairing_id: str) -> None:
        try:
            self.conch.pairings.delete(pairing_id)
        except PairingError as error:
            raise ApiError(404, "not_found", error.message) from None
        await self.conch.peers.forget(pairing_id)
        self.set_status(204)
        self.finish()


class PairingChatsHandler(ConchHandler):
    """ "What it said": the chats a pairing's door opened, each readable at /conversations/{id}."""

    @web.authenticated
    @authorized
    def get(self, pairing_id: str) -> None:
        try:
            self.conch.pairings.get(pairing_id)
        except PairingError as error:
            raise ApiError(404, "not_found", error.message) from None
        store = self.conch.store
        chats = [
            {**c.to_json(), "spent_usd": round(store.spent(c.id), 6)}
            for c in store.peer_chats(pairing_id)
        ]
        self.reply({"chats": chats})


def door_routes() -> list[tuple[str, type[APIHandler]]]:
    """The /pairings API (before conch/api's catch-all) and the door's three endpoints."""
    pairing = r"conch/api/pairings/(?P<pairing_id>[^/]{1,64})"
    agent = r"a2a/(?P<agent_id>[^/]{1,300})"
    return [
        (r"conch/api/pairings", PairingsHandler),
        (pairing, PairingHandler),
        (pairing + r"/chats", PairingChatsHandler),
        (r"\.well-known/agent-card\.json", DoorCardHandler),
        (agent + r"/\.well-known/agent-card\.json", DoorCardHandler),
        (agent, DoorRpcHandler),
    ]
