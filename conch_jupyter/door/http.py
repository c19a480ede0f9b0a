"""The A2A door on HTTP: one tornado message delegate per request, over a2a/door/.

The door lives under `base_url` but outside conch/api/, with its own keys:
  GET  {base_url}.well-known/agent-card.json             the first agent the key was given
  GET  {base_url}a2a/<agent>/.well-known/agent-card.json
  GET  {base_url}.well-known/jwks.json                   the public key the cards are signed with
  POST {base_url}a2a/<agent>  (or a2a/<agent>/)           JSON-RPC
and everything else under `a2a/` and `.well-known/`, whatever the method, is a JSON 404 or 405,
never one of Jupyter's HTML pages.

The door is no Jupyter handler, nor any RequestHandler: it is the first rule of the server's
router (`install_door`), and each request is a `DoorExchange`, tornado's HTTPMessageDelegate,
which reads the request line and headers, the body (with a limit) and writes one answer. Nothing
of Jupyter's or tornado's handler machinery serves it, and all of it costs: routing through every
other extension's rules, the handler's setup, Jupyter's sign-in (JupyterHandler.prepare asks the
server's identity provider about every request, and in a JupyterHub single-user server the
provider takes any `Authorization: Bearer …` for a hub token and sends it to the hub; a door key
goes nowhere but the door's own hash comparison, a2a/door/rules.py), its cookies, XSRF, templates
and activity tracking (for the user's browser, which the door never lets in). What the door keeps
of Jupyter's it leaves to Jupyter's own functions, called on the exchange: JupyterHandler's
`check_origin` (`allow_origin`, `allow_origin_pat`: 404), before its rules refuse any browser at
all; APIHandler's default headers (nosniff, the owner's `headers`, the API's
Content-Security-Policy); Jupyter's `log_function` and its Prometheus helper. Two pieces stay
re-coded for their cost, each saying its numbers where it stands: the Host check
(JupyterHandler's `check_host`: `allow_remote_access`, `local_hostnames`: 403, in local_host) and
a success's log line, skipped where no handler writes debug lines. XSRF does not apply: a door
key travels in a header, never in a cookie, so no page can make a browser send it.
"""

from __future__ import annotations

import asyncio
import functools
import ipaddress
import json
import logging
import os
import re
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any, Literal, Protocol, cast
from urllib.parse import unquote_to_bytes

from jupyter_server.base.handlers import APIHandler, JupyterHandler
from jupyter_server.prometheus import log_functions
from jupyter_server.utils import urldecode_unix_socket_path
from tornado import httputil, web
from tornado.httputil import HTTPMessageDelegate, HTTPServerRequest
from tornado.iostream import StreamClosedError
from tornado.routing import PathMatches, Router, Rule

from ..a2a.door.calls import Call, Refusal, read_call
from ..a2a.door.card import agent_card
from ..a2a.door.forwarded import door_address
from ..a2a.door.params import TaskParams
from ..a2a.door.rules import Denied, DoorGate
from ..a2a.wire import VERSION_HEADER, ErrorCode, RequestId, rpc_error, rpc_result
from ..agents.agent_store import Agent, AgentError, AgentStore
from ..core.errors import ConchError
from ..core.files import StoreError
from ..store.chats import Store
from .address import caller_scheme, endpoint_url, jwks_url_for, socket_peer, trusts_forwarded
from .pairing import Pairing, PairingError, PairingStore
from .service import PeerService
from .signer import DoorSigner

log = logging.getLogger(__name__)

# Room for a 16,000-character message however it is escaped, and not much more.
MAX_BODY_BYTES = 256 * 1024
NOTHING_HERE = Denied(404, "not_found", "There is nothing here.")


@functools.lru_cache(maxsize=256)
def card_bytes(signer: DoorSigner, name: str, persona: str, endpoint: str, jku: str) -> bytes:
    """A card as sent, signed: made once for each agent (as it is now), endpoint and key set's
    address, not per request."""
    card = agent_card(name=name, persona=persona, endpoint=endpoint)
    return json.dumps(signer.signed(card, jku)).encode()


TOO_LARGE = Denied(413, "too_large", "The body is larger than 256 KB.")
_PORT = re.compile(r":\d+$")


def local_host(host: str, local_hostnames: Sequence[str]) -> bool:
    """Jupyter's Host rule (JupyterHandler.check_host) when remote access is off: a loopback
    address, one of `local_hostnames`, or the path of a UNIX socket that exists."""
    socket_path = _socket_path(host)
    if socket_path is not None and os.path.exists(socket_path):
        return True
    return _local_name(host, tuple(local_hostnames))


def _bare(host: str) -> str:
    host = _PORT.sub("", host)
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]  # an IPv6 address as browsers write it
    return host


@functools.lru_cache(maxsize=64)
def _socket_path(host: str) -> str | None:
    """The UNIX socket a Host names, or None: it names none."""
    socket_path = urldecode_unix_socket_path(_bare(host))
    return socket_path if socket_path.startswith("/") else None


@functools.lru_cache(maxsize=64)
def _local_name(host: str, local_hostnames: tuple[str, ...]) -> bool:
    """A loopback address or a local hostname: the same few Hosts come on every request."""
    host = _bare(host)
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host in local_hostnames


# Jupyter's own Prometheus helper (log_function calls it too): its histogram, its labels.
record_metric: Callable[[object], None] = log_functions.prometheus_log_method


def writes_debug(logger: logging.Logger) -> bool:
    """Whether a debug line of `logger` is written anywhere: enabled, and some handler on its way
    up takes it (traitlets sets Jupyter's logger to DEBUG and its console handler to log_level)."""
    if not logger.isEnabledFor(logging.DEBUG):
        return False
    current: logging.Logger | None = logger
    while current is not None:
        if any(handler.level <= logging.DEBUG for handler in current.handlers):
            return True
        current = current.parent if current.propagate else None
    return logging.lastResort is not None and logging.lastResort.level <= logging.DEBUG


class JupyterHeaders(APIHandler):
    """Jupyter's API handler, asked for its default headers only (`set_default_headers`: nosniff,
    the owner's `headers`, then APIHandler's Content-Security-Policy, made with the owner's),
    which it sets here instead of on an answer. It serves no request and is made without tornado's
    handler set-up: the door asks it once a second (Door.headers), so its cost does not count."""

    def __init__(self, settings: dict[str, Any]) -> None:  # no RequestHandler.__init__: no request
        self._settings = settings
        self.made: dict[str, str] = {}

    @property
    def settings(self) -> dict[str, Any]:
        return self._settings

    def set_header(self, name: str, value: Any) -> None:
        self.made[name] = str(value)


def header(headers: httputil.HTTPHeaders, name: str) -> str | None:
    """A request's header, or None. HTTPHeaders.get raises and catches a KeyError inside for a
    header that is not there (Origin, say, on every request from a script)."""
    return headers[name] if name in headers else None  # noqa: SIM401 (see above)


class DoorError(ConchError):
    """A request turned away before any JSON-RPC: the gate's Denied (its status, code, words)."""

    def __init__(self, denied: Denied) -> None:
        super().__init__(denied.code, denied.words, status=denied.status)
        self.denied = denied


SUPPORTED_METHODS = frozenset(("GET", "HEAD", "POST", "DELETE", "PATCH", "PUT", "OPTIONS"))
# Below base_url. An agent's id as it travels in the path (percent-encoded).
_ROUTE = re.compile(
    r"\.well-known/agent-card\.json"
    r"|(?P<keys>\.well-known/jwks\.json)"
    r"|a2a/(?P<card>[^/]{1,300})/\.well-known/agent-card\.json"
    r"|a2a/(?P<rpc>[^/]{1,300})/?"
)
_PHRASES = {status.value: status.phrase for status in HTTPStatus}
_NOT_ALLOWED = Denied(405, "method_not_allowed", "Method Not Allowed.")
_BAD_NAME = Denied(400, "bad_request", "The agent's name in the address is not valid UTF-8.")
_STORAGE = Denied(503, "storage", "The door cannot read its pairings right now.")
_INTERNAL = Denied(500, "internal", "Something went wrong inside Conch.")


# --- how the door says no: its one mapping of errors to answers ------------------------------
#
# The door's callers are other people's programs: they hear the door's own errors (DoorError
# before a call is read, Refusal after) in their words, and nothing else of Conch's words, which
# are for the owner and may name files; those go to the server's log.


def denied_for(error: BaseException, request: HTTPServerRequest) -> Denied:
    """The HTTP answer to an error met before any JSON-RPC (admitting a request, finding the
    agent, its card): the door's own as it is; a store or pairings file that cannot be read
    503 `storage`; anything else 500 `internal`."""
    if isinstance(error, DoorError):
        return error.denied
    if isinstance(error, StoreError | PairingError):
        log.error("Conch door: %s", error)
        return _STORAGE
    log.error("Conch door: %s %s failed", request.method, request.path, exc_info=error)
    return _INTERNAL


def rpc_error_for(error: BaseException, request_id: RequestId, agent_id: str) -> Any:
    """The JSON-RPC answer to an error met answering a call: a Refusal with its number and
    words; anything else, never a 500 page for a caller, -32603 in words (details in the log)."""
    if isinstance(error, Refusal):
        return error.answer(request_id)
    log.error("Conch door: answering a call to %s failed", agent_id, exc_info=error)
    return rpc_error(request_id, ErrorCode.INTERNAL, "Something went wrong inside Conch.")


@dataclass(frozen=True)
class DoorRoute:
    """What a path below base_url asks for: an agent's card or its JSON-RPC endpoint (`agent`:
    the id as the path spells it; None for the card at the root), or nothing the door has."""

    kind: Literal["card", "keys", "rpc", "nothing"]
    method: str  # the one HTTP method the route serves
    agent: str | None = None


NOTHING = DoorRoute("nothing", "")


_LONGEST_ROUTE = len("a2a/") + 300 + len("/.well-known/agent-card.json")


def door_route(below_base: str) -> DoorRoute:
    if len(below_base) > _LONGEST_ROUTE:
        return NOTHING  # and not kept: only what can be a route is
    return _route(below_base)


@functools.lru_cache(maxsize=256)
def _route(below_base: str) -> DoorRoute:
    """A route, made once for each path: callers ask at the same few again and again."""
    found = _ROUTE.fullmatch(below_base)
    if found is None:
        return NOTHING
    if found["rpc"] is not None:
        return DoorRoute("rpc", "POST", found["rpc"])
    if found["keys"] is not None:
        return DoorRoute("keys", "GET")
    return DoorRoute("card", "GET", found["card"])


@functools.lru_cache(maxsize=256)
def agent_id_of(spelled: str) -> str:
    """The agent's id from its percent-encoded spelling in the path; ValueError if not UTF-8."""
    return unquote_to_bytes(spelled).decode()


class Answers:
    """GetTask's answers as sent (the JSON-RPC result's text), kept while the store has not
    committed anything since: A2A callers poll a task again and again, and its answer can only
    change with a commit. Any commit at all (store.data_version) drops them all."""

    LIMIT = 1024

    def __init__(self) -> None:
        self._version: int | None = None
        self._texts: dict[tuple[Any, ...], bytes] = {}

    def text(self, key: tuple[Any, ...], version: int, make: Callable[[], Any]) -> bytes:
        if version != self._version or len(self._texts) >= self.LIMIT:
            self._texts.clear()
            self._version = version
        found = self._texts.get(key)
        if found is None:
            found = self._texts[key] = json.dumps(make()).encode()
        return found


def rpc_result_text(request_id: RequestId, result: bytes) -> bytes:
    """json.dumps(rpc_result(request_id, …)), with the result's text made already."""
    return (
        b'{"jsonrpc": "2.0", "id": '
        + json.dumps(request_id).encode()
        + b', "result": '
        + result
        + b"}"
    )


class Door(Router):
    """The door's place in tornado's router: every request below `{base_url}a2a` or
    `{base_url}.well-known` becomes a DoorExchange. `settings` is the web application's, so
    Conch's services and Jupyter's settings are read as they are when a request comes."""

    def __init__(self, settings: dict[str, Any]) -> None:
        self.settings = settings
        self.answering: set[asyncio.Task[None]] = set()  # JSON-RPC calls being answered
        self._headers: tuple[int, dict[str, str]] = (0, {})
        self.answers = Answers()

    def find_handler(self, request: HTTPServerRequest, **kwargs: Any) -> HTTPMessageDelegate:
        return DoorExchange(self, request)

    def headers(self) -> dict[str, str]:
        """Every answer's headers but its length: the Date, then Jupyter's API headers as its
        APIHandler sets them (JupyterHeaders), then the door's. Made once a second, for the
        Date; the settings are read then too."""
        now = int(time.time())
        if self._headers[0] != now:
            jupyters = JupyterHeaders(self.settings)
            jupyters.set_default_headers()
            made = {
                "Date": httputil.format_timestamp(now),
                **jupyters.made,
                "Cache-Control": "no-store",
                "Content-Type": "application/json",
            }
            self._headers = (now, made)
        return self._headers[1]


def install_door(web_app: web.Application) -> Door:
    """Put the door first in the server's router, so its requests are not matched against every
    other rule first. It takes everything under a2a/ and .well-known/, as the routes above say."""
    door = Door(web_app.settings)
    base = re.escape(web_app.settings.get("base_url", "/"))
    web_app.default_router.rules.insert(
        0, Rule(PathMatches(base + r"(?:a2a|\.well-known)(?:/.*)?$"), door)
    )
    return door


class DoorServices(Protocol):
    """What the door uses of Conch's services (server_ext's ConchServices has them all)."""

    store: Store
    agents: AgentStore
    pairings: PairingStore
    door_gate: DoorGate
    peers: PeerService
    door_signer: DoorSigner


class DoorExchange(HTTPMessageDelegate):
    """One request at the door and its answer. It also stands for a handler to the Jupyter
    functions it calls: JupyterHandler's check_origin, which asks for `request`, `log`,
    `allow_origin`, `allow_origin_pat` and `skip_check_origin()`, and the log_function, which
    asks for `settings`, `current_user` and `get_status()` too."""

    current_user = None  # the door's callers are pairings, not Jupyter users
    allow_origin = JupyterHandler.allow_origin
    allow_origin_pat = JupyterHandler.allow_origin_pat

    def __init__(self, door: Door, request: HTTPServerRequest) -> None:
        self.door = door
        self.request = request
        self.settings = door.settings
        self.route = NOTHING
        self.pairing: Pairing | None = None
        self.agent_id: str | None = None  # the route's agent, decoded (None: the key's first)
        self._body = bytearray()
        self._too_large = False
        self._status = 0  # the answer's, once sent
        self._closed = False

    @property
    def conch(self) -> DoorServices:
        services: DoorServices = self.settings["conch"]  # Conch's services (server_ext)
        return services

    @property
    def log(self) -> logging.Logger:
        """Jupyter's log, as for its own handlers (its log_function writes each request there)."""
        app = self.settings.get("serverapp")
        return app.log if app is not None else log

    def get_status(self) -> int:
        return self._status

    def skip_check_origin(self) -> bool:
        """Never, where Jupyter's skips it for a token's request or a preflight (OPTIONS): it would
        ask the identity provider, which the door never asks, and a door key is no Jupyter token;
        a preflight is a browser's, and no browser gets in."""
        return False

    # tornado's side: headers, body, end of the request, a dropped connection

    def headers_received(
        self,
        start_line: httputil.RequestStartLine | httputil.ResponseStartLine,
        headers: httputil.HTTPHeaders,
    ) -> Awaitable[None] | None:
        try:
            refused = self._admit()
        except Exception as error:
            refused = denied_for(error, self.request)
        if refused is None:
            return None
        if refused.delay:
            return self._refuse_later(refused)
        self._refuse(refused)
        return None

    def data_received(self, chunk: bytes) -> None:
        if self._status:
            return  # answered already: what is left of the body is not read
        if len(self._body) + len(chunk) > MAX_BODY_BYTES:
            self._too_large = True
        elif not self._too_large:
            self._body.extend(chunk)

    def finish(self) -> None:
        if self._status:
            return
        if self._too_large:
            self._answer(TOO_LARGE)
        elif self.route.kind == "card":
            self._answer_card()
        elif self.route.kind == "keys":
            self._answer_keys()
        else:
            self._answer_call()

    def on_connection_close(self) -> None:
        self._closed = True

    # the door's side

    def _admit(self) -> Denied | None:
        """Why the request is turned away before its body is read, or None: let it in."""
        request = self.request
        if request.method not in SUPPORTED_METHODS:
            return _NOT_ALLOWED
        if not self._host_allowed():
            return Denied(403, "forbidden", "Forbidden.")  # the words are in the log, as Jupyter's
        if not self._origin_allowed():
            return Denied(404, "not_found", "Not Found.")
        length = header(request.headers, "Content-Length")
        if length is not None and (not length.isdigit() or int(length) > MAX_BODY_BYTES):
            return TOO_LARGE
        if request.connection is not None:
            # A chunked body is cut off at the same size.
            request.connection.set_max_body_size(MAX_BODY_BYTES)  # type: ignore[attr-defined]
        base_url = self.settings.get("base_url", "/")
        self.route = door_route(request.path[len(base_url) :])
        if self.route.kind == "nothing":
            return NOTHING_HERE
        if self.route.agent is not None:
            try:
                self.agent_id = agent_id_of(self.route.agent)
            except ValueError:
                return _BAD_NAME
        conch = self.conch
        keys, pairings = conch.pairings.door()
        verdict = conch.door_gate.admit(
            headers=request.headers,
            address=door_address(
                socket_peer(self), request.headers, trust_forwarded=trusts_forwarded(self)
            ),
            protocol=caller_scheme(self),
            keys=keys,
        )
        if isinstance(verdict, Denied):
            return verdict
        if request.method != self.route.method:
            return _NOT_ALLOWED
        self.pairing = pairings[verdict]
        return None

    def _host_allowed(self) -> bool:
        # Jupyter's check_host, re-coded (local_host) with its parsing cached per Host: called on
        # the exchange, Jupyter's own took 5-7 µs a request in-process against 0.4-0.6, the one
        # piece here that cost more than 2 µs; with it one client's GetTask came to 1.31-1.72x
        # the reference (median 1.50, 8 runs) against 1.51-2.01x (1.57, 6 runs) without it.
        # test_door_checks.py holds the copy to Jupyter's answers (benchmarks/README.md).
        settings = self.settings
        if settings.get("allow_remote_access", False):
            return True
        if local_host(self.request.host, settings.get("local_hostnames", ["localhost"])):
            return True
        self.log.warning(
            "Blocking request with non-local 'Host' %s. If the server should be accessible at "
            "that name, set ServerApp.allow_remote_access to disable the check.",
            self.request.host,
        )
        return False

    def _origin_allowed(self) -> bool:
        return bool(JupyterHandler.check_origin(cast(JupyterHandler, self)))

    async def _refuse_later(self, refused: Denied) -> None:
        await asyncio.sleep(refused.delay)  # slower answers, as for sign-ins
        self._refuse(refused)

    def _refuse(self, refused: Denied) -> None:
        """Turned away before the body was read: tornado drops the connection after this
        answer, so say so, or a client reusing it gets a reset instead of the words."""
        self._answer(refused, close=True)

    def scoped_agent(self) -> Agent:
        """The agent, if the key was given it; any other looks like nothing is there (404)."""
        assert self.pairing is not None
        given = self.pairing.agents
        wanted = given if self.agent_id is None else (self.agent_id,)
        for candidate in wanted:
            if candidate not in given:
                break
            try:
                return self.conch.agents.get(candidate)
            except AgentError:
                continue  # given once, deleted since
        raise DoorError(NOTHING_HERE)

    def _answer_card(self) -> None:
        try:
            agent = self.scoped_agent()
            endpoint = endpoint_url(self, agent.id)
            card = card_bytes(
                self.conch.door_signer, agent.name, agent.persona, endpoint, jwks_url_for(endpoint)
            )
        except Exception as error:
            self._answer(denied_for(error, self.request))
            return
        self._send(200, card)

    def _answer_keys(self) -> None:
        """The JWK Set the cards' signatures name: for any key let in, like the cards."""
        try:
            keys = self.conch.door_signer.key_set()
        except Exception as error:
            self._answer(denied_for(error, self.request))
            return
        self._send(200, keys)

    def _answer_call(self) -> None:
        """A JSON-RPC call: answered here and now if it waits for nothing, else in a task."""
        try:
            agent = self.scoped_agent()
        except Exception as error:
            self._answer(denied_for(error, self.request))
            return
        peers = self.conch.peers
        try:
            call = read_call(
                bytes(self._body),
                header(self.request.headers, "Content-Type"),
                header(self.request.headers, VERSION_HEADER),
            )
        except Refusal as refusal:
            self._send_rpc(rpc_error_for(refusal, None, agent.id))
            return

        def endpoint() -> str:
            return endpoint_url(self, agent.id)

        if not peers.waits(call):
            try:
                text = self._text_at_once(call, agent, endpoint)
            except Exception as error:
                self._send_rpc(rpc_error_for(error, call.id, agent.id))
            else:
                self._send(200, rpc_result_text(call.id, text))
            return
        task = asyncio.ensure_future(self._answer_later(call, agent, endpoint))
        self.door.answering.add(task)
        task.add_done_callback(self.door.answering.discard)

    def _text_at_once(self, call: Call, agent: Agent, endpoint: Callable[[], str]) -> bytes:
        """The result's text of a call that does not wait; a task's from Answers."""
        assert self.pairing is not None
        pairing, peers = self.pairing, self.conch.peers

        def make() -> Any:
            return peers.answer_at_once(call, pairing, agent, endpoint)

        params = call.params
        if call.op != "get" or not isinstance(params, TaskParams):
            return json.dumps(make()).encode()
        key = (pairing.id, agent.id, call.version, params.id, params.history_length)
        return self.door.answers.text(key, self.conch.store.data_version(), make)

    async def _answer_later(self, call: Call, agent: Agent, endpoint: Callable[[], str]) -> None:
        assert self.pairing is not None
        try:
            result = await self.conch.peers.answer(call, self.pairing, agent, endpoint)
            answer = rpc_result(call.id, result)
        except Exception as error:
            answer = rpc_error_for(error, call.id, agent.id)
        self._send_rpc(answer)

    def _send_rpc(self, answer: Any) -> None:
        self._send(200, json.dumps(answer).encode())

    def _answer(self, denied: Denied, *, close: bool = False) -> None:
        extra: dict[str, str] = {}
        if denied.status == 401:
            extra["WWW-Authenticate"] = (
                'Bearer error="invalid_token"' if denied.bad_key else "Bearer"
            )
        if denied.retry_after is not None:
            extra["Retry-After"] = str(denied.retry_after)
        if close:
            extra["Connection"] = "close"
        body = {"error": {"code": denied.code, "message": denied.words}}
        self._send(denied.status, json.dumps(body).encode(), extra)

    def _send(self, status: int, body: bytes, extra: dict[str, str] | None = None) -> None:
        """Write the one answer: Jupyter's API headers (the owner's own win), then the door's."""
        self._status = status
        connection = self.request.connection
        if not self._closed and connection is not None:
            headers = httputil.HTTPHeaders(
                {**self.door.headers(), "Content-Length": str(len(body)), **(extra or {})}
            )
            start = httputil.ResponseStartLine("HTTP/1.1", status, _PHRASES[status])
            try:
                connection.write_headers(
                    start, headers, None if self.request.method == "HEAD" else body
                )
                connection.finish()
            except StreamClosedError:
                pass  # the caller has gone; the answer, if any, is stored
        self._log_request()

    def _log_request(self) -> None:
        """Jupyter's log_function for the request: its line and its metric. A success's line is
        at debug level, which traitlets lets through its logger and drops in its handler, after
        the line is made: so for a success with no debug handler, Jupyter's metric alone.

        Re-coded on purpose (writes_debug), as the one part of Jupyter's checks, headers, log and
        metrics the door does not leave to Jupyter's own functions (issue 22, item 4): the whole
        log_function costs 19-30 µs a success in-process against 5-6 for the metric alone (a
        GetTask's CPU: 410-620 µs on the machine measured, ~180 on a quiet one), where
        Jupyter's check_origin and metric helper cost 0.1-1 and 0.5-2.6 µs more than the door's
        old copies of them; see benchmarks/README.md, "Inside-out parts"."""
        log_function = self.settings.get("log_function")
        if log_function is None:
            return
        if self._status >= 300 or writes_debug(self.log):
            log_function(self)
        elif getattr(self.settings.get("serverapp"), "record_http_request_metrics", True):
            record_metric(self)
