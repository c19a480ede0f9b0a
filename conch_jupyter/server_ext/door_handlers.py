"""The A2A door on HTTP: thin tornado adapters over a2a/door/.

The door lives under `base_url` but outside conch/api/, with its own keys:
  GET  {base_url}.well-known/agent-card.json             the first agent the key was given
  GET  {base_url}a2a/<agent>/.well-known/agent-card.json
  POST {base_url}a2a/<agent>  (or a2a/<agent>/)           JSON-RPC
and everything else under `a2a/` and `.well-known/`, whatever the method, is a JSON 404 or 405,
never one of Jupyter's HTML pages.

The door never runs Jupyter's sign-in (JupyterHandler.prepare): that asks the server's identity
provider about every request, and in a JupyterHub single-user server the provider takes any
`Authorization: Bearer …` for a hub token and sends it to the hub to check. A door key goes
nowhere but the door's own hash comparison (a2a/door/rules.py). What the door keeps of Jupyter's
checks it runs itself: the Host check (403, as Jupyter's own) and the Origin check (404), before
its rules refuse any browser at all. Its handlers are @allow_unauthenticated because Jupyter's
auth does not apply, so the door answers the same with ServerApp.allow_unauthenticated_access
off. XSRF is off: a door key travels in a header, never in a cookie, so no page can make a
browser send it.
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
from http import HTTPStatus
from typing import Any, ClassVar

from jupyter_server.auth.decorator import allow_unauthenticated
from jupyter_server.base.handlers import APIHandler
from tornado import web

from ..a2a.door.calls import Refusal, read_call
from ..a2a.door.card import agent_card
from ..a2a.door.forwarded import door_address
from ..a2a.door.pairing import Pairing, PairingError
from ..a2a.door.rules import Denied
from ..a2a.wire import VERSION_HEADER, ErrorCode, RequestId, rpc_error, rpc_result
from ..agents import Agent, AgentError
from ..files import StoreError
from .base import (
    caller_scheme,
    endpoint_url,
    error_code,
    services_of,
    socket_peer,
    trusts_forwarded,
)
from .services import ConchServices

log = logging.getLogger(__name__)

# Room for a 16,000-character message however it is escaped, and not much more.
MAX_BODY_BYTES = 256 * 1024
NOTHING_HERE = Denied(404, "not_found", "There is nothing here.")


@functools.lru_cache(maxsize=256)
def card_bytes(name: str, persona: str, endpoint: str) -> bytes:
    """A card as sent: made once for each agent (as it is now) and endpoint, not per request."""
    return json.dumps(agent_card(name=name, persona=persona, endpoint=endpoint)).encode()


TOO_LARGE = Denied(413, "too_large", "The body is larger than 256 KB.")


class DoorError(web.HTTPError):
    """A request turned away before any JSON-RPC: a status and words."""

    def __init__(self, denied: Denied) -> None:
        super().__init__(denied.status, log_message=denied.words.replace("%", "%%"))
        self.denied = denied


@web.stream_request_body
class DoorHandler(APIHandler):
    """What every door endpoint shares: Jupyter's host and origin checks without its sign-in,
    the gate, the body (read with a limit), the answers in JSON."""

    pairing: Pairing
    # With False, the handler only answers 404 (DoorNotFoundHandler): no key is looked at.
    gated: ClassVar[bool] = True

    # Not APIHandler's CORS preflight answer: the door lets no browser in, so there is
    # nothing to allow; OPTIONS gets the same JSON 405 as any method a route does not serve.
    options = web.RequestHandler._unimplemented_method

    def initialize(self) -> None:
        self._body = bytearray()
        self._too_large = False
        self._prepared = False
        # The door has no Jupyter user (its callers are pairings), and never asks for one.
        self.current_user = None

    @property
    def conch(self) -> ConchServices:
        return services_of(self)

    def skip_check_origin(self) -> bool:
        # Jupyter skips it for token-authenticated requests, asking its identity provider;
        # no door request is one.
        return False

    def check_xsrf_cookie(self) -> None:
        """No XSRF check: see the module docstring."""

    async def prepare(self) -> None:  # type: ignore[override]
        if not self.check_host():
            raise web.HTTPError(403)  # Jupyter's words are in its log
        if not self.check_origin():
            raise web.HTTPError(404)
        length = self.request.headers.get("Content-Length", "0")
        if not length.isdigit() or int(length) > MAX_BODY_BYTES:
            raise DoorError(TOO_LARGE)
        if self.request.connection is not None:
            # A chunked body is cut off at the same size.
            self.request.connection.set_max_body_size(MAX_BODY_BYTES)  # type: ignore[attr-defined]
        if not self.gated:
            raise DoorError(NOTHING_HERE)
        verdict = self.conch.door_gate.admit(
            headers=self.request.headers,
            address=door_address(
                socket_peer(self), self.request.headers, trust_forwarded=trusts_forwarded(self)
            ),
            protocol=caller_scheme(self),
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
        elif isinstance(error, web.HTTPError):  # the host check, tornado's 405, a bad path …
            words = error.log_message or f"{HTTPStatus(status_code).phrase}."
            denied = Denied(status_code, error_code(status_code), words)
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
            raise DoorError(TOO_LARGE)
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


class DoorNotFoundHandler(DoorHandler):
    """Anything else under a2a/ or .well-known/, whatever the method: a JSON 404."""

    gated = False


def door_routes() -> list[tuple[str, type[DoorHandler]]]:
    agent = r"a2a/(?P<agent_id>[^/]{1,300})"
    return [
        (r"\.well-known/agent-card\.json", DoorCardHandler),
        (agent + r"/\.well-known/agent-card\.json", DoorCardHandler),
        (agent + r"/?", DoorRpcHandler),
        (r"(?:a2a|\.well-known)(?:/.*)?", DoorNotFoundHandler),
    ]
