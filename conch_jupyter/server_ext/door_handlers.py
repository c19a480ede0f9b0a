"""The A2A door on HTTP: thin tornado adapters over a2a/door/.

The door lives under `base_url` but outside conch/api/, with its own keys:
  GET  {base_url}.well-known/agent-card.json             the first agent the key was given
  GET  {base_url}a2a/<agent>/.well-known/agent-card.json
  POST {base_url}a2a/<agent>  (or a2a/<agent>/)           JSON-RPC
and everything else under `a2a/` and `.well-known/`, whatever the method, is a JSON 404 or 405,
never one of Jupyter's HTML pages.

The door is not a Jupyter handler: it is built on tornado's plain RequestHandler, because
nothing of Jupyter's handler machinery serves it. Jupyter's sign-in (JupyterHandler.prepare) asks
the server's identity provider about every request, and in a JupyterHub single-user server the
provider takes any `Authorization: Bearer …` for a hub token and sends it to the hub to check; a
door key goes nowhere but the door's own hash comparison (a2a/door/rules.py). Jupyter's cookies,
XSRF, templates and activity tracking are for the user's browser, which the door never lets in.
What the door keeps of Jupyter's checks it runs itself, with Jupyter's rules and settings: the
Host check (`allow_remote_access`, `local_hostnames`: 403) and the Origin check (`allow_origin`,
`allow_origin_pat`: 404), before its rules refuse any browser at all; and Jupyter's default
headers (nosniff, the API's Content-Security-Policy). Jupyter's `log_function` still logs each
request and records its metrics (it asks only for what any RequestHandler has). The handlers'
methods are @allow_unauthenticated so Jupyter does not warn about them: its auth does not apply,
and the door answers the same with ServerApp.allow_unauthenticated_access off. XSRF is off: a
door key travels in a header, never in a cookie, so no page can make a browser send it.
"""

from __future__ import annotations

import asyncio
import functools
import ipaddress
import json
import logging
import os
import re
from collections.abc import Sequence
from http import HTTPStatus
from typing import Any, ClassVar
from urllib.parse import urlparse

from jupyter_server.auth.decorator import allow_unauthenticated
from jupyter_server.services.security import csp_report_uri
from jupyter_server.utils import origin_matches_pat, url_path_join, urldecode_unix_socket_path
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
_PORT = re.compile(r":\d+$")


def local_host(host: str, local_hostnames: Sequence[str]) -> bool:
    """Jupyter's Host rule (JupyterHandler.check_host) when remote access is off: a loopback
    address, one of `local_hostnames`, or the path of a UNIX socket that exists."""
    host = _PORT.sub("", host)
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]  # an IPv6 address as browsers write it
    socket_path = urldecode_unix_socket_path(host)
    if socket_path.startswith("/") and os.path.exists(socket_path):
        return True
    return _local_name(host, tuple(local_hostnames))


@functools.lru_cache(maxsize=64)
def _local_name(host: str, local_hostnames: tuple[str, ...]) -> bool:
    """A loopback address or a local hostname: the same few Hosts come on every request."""
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host in local_hostnames


def origin_allowed(
    origin: str | None, host: str | None, allow_origin: str, allow_origin_pat: str | None
) -> bool:
    """Jupyter's Origin rule (JupyterHandler.check_origin) for a request with no token: no Origin
    (a script) or the page's own host passes; another only if the CORS settings allow it."""
    if allow_origin == "*" or origin is None or host is None:
        return True
    origin = origin.lower()
    if urlparse(origin).netloc == host:
        return True
    if allow_origin:
        return allow_origin == origin
    return bool(allow_origin_pat) and origin_matches_pat(str(allow_origin_pat), origin)


@functools.lru_cache(maxsize=8)
def _csp(base_url: str, report_uri: str | None, owners: str | None) -> str:
    """Jupyter's Content-Security-Policy for its API (APIHandler's): the owner's, or Jupyter's
    default, then "default-src 'none'"."""
    report = report_uri or url_path_join(base_url, csp_report_uri)
    policy = owners or f"frame-ancestors 'self'; report-uri {report}"
    return f"{policy}; default-src 'none'"


class DoorError(web.HTTPError):
    """A request turned away before any JSON-RPC: a status and words."""

    def __init__(self, denied: Denied) -> None:
        super().__init__(denied.status, log_message=denied.words.replace("%", "%%"))
        self.denied = denied


@web.stream_request_body
class DoorHandler(web.RequestHandler):
    """What every door endpoint shares: Jupyter's host and origin checks without the rest of its
    handler machinery, the gate, the body (read with a limit), the answers in JSON."""

    pairing: Pairing
    # With False, the handler only answers 404 (DoorNotFoundHandler): no key is looked at.
    gated: ClassVar[bool] = True

    # No CORS preflight answer: the door lets no browser in, so there is nothing to allow;
    # OPTIONS gets the same JSON 405 as any method a route does not serve.

    def initialize(self) -> None:
        self._body = bytearray()
        self._too_large = False
        self._prepared = False
        # The door has no Jupyter user (its callers are pairings), and never asks for one.
        self.current_user = None

    @property
    def conch(self) -> ConchServices:
        return services_of(self)

    @property
    def log(self) -> logging.Logger:
        """Jupyter's log, as for its own handlers (its log_function writes each request there)."""
        app = self.settings.get("serverapp")
        return app.log if app is not None else log

    def set_default_headers(self) -> None:
        # Jupyter's API headers: the owner's own (ServerApp.tornado_settings' headers) win.
        settings = self.settings
        headers = settings.get("headers", {})
        self.set_header("X-Content-Type-Options", "nosniff")
        for name, value in headers.items():
            self.set_header(name, value)
        self.set_header(
            "Content-Security-Policy",
            _csp(
                settings.get("base_url", "/"),
                settings.get("csp_report_uri"),
                headers.get("Content-Security-Policy"),
            ),
        )

    def check_xsrf_cookie(self) -> None:
        """No XSRF check: see the module docstring."""

    def check_host(self) -> bool:
        if self.settings.get("allow_remote_access", False):
            return True
        if local_host(self.request.host, self.settings.get("local_hostnames", ["localhost"])):
            return True
        self.log.warning(
            "Blocking request with non-local 'Host' %s. If the server should be accessible at "
            "that name, set ServerApp.allow_remote_access to disable the check.",
            self.request.host,
        )
        return False

    def check_origin(self) -> bool:
        headers = self.request.headers
        origin = headers.get("Origin")
        if origin_allowed(
            origin,
            headers.get("Host"),
            self.settings.get("allow_origin", ""),
            self.settings.get("allow_origin_pat"),
        ):
            return True
        self.log.warning("Blocking Cross Origin request at the door. Origin: %s", origin)
        return False

    async def prepare(self) -> None:
        if not self.check_host():
            raise web.HTTPError(403)  # the words are in the log, as Jupyter's own
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
        self.set_header("Content-Type", "application/json")
        self.finish(data if isinstance(data, bytes) else json.dumps(data))

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
