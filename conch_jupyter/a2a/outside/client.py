"""Talking to one outside agent over HTTP: JSON-RPC calls and fetches, within bounds.

Owns the HTTP side of A2A as a caller (cards.py decides where a card is looked for): redirects
(at most five, each on the agent's own host, so neither your words nor your key go anywhere
else), sizes (a card at most 256 KB, an answer at most 1 MB, cut off while reading), one deadline
per request (so a server that drips bytes cannot hold a round), and turning every way a request
can fail into words. Every connection goes through the guarded transport it is given; it never
reads proxy settings from the environment, since a proxy would connect where the guard never
checked.

Failures are CallFailed, whose `words` finish a sentence about the agent: "Helper" +
" refused the key (HTTP 401)". `passing` marks the ones worth one more try after a moment. The
words never quote the other side (not its error message, nor its content type unless it looks
like one): they may be shown in the chat as Conch's own note.
"""

from __future__ import annotations

import asyncio
import http
import json
import re
from dataclasses import dataclass
from typing import Any

import httpx

from ...core.deadlines import duration, within
from ...core.errors import ConchError
from ...core.nesting import JSON_DEPTH, nests_deeper
from ..wire import (
    REASONS,
    VERSION_HEADER,
    ErrorCode,
    Op,
    RpcFault,
    Version,
    WireError,
    method_name,
    new_id,
    rpc_answer,
    rpc_call,
)
from .guard import Refused

URL_LIMIT = 2_000  # for any address Conch keeps: what a person pastes, a card, an endpoint
_PASSING_STATUS = frozenset({408, 429, 500, 502, 503, 504})
# A 1.0 agent that answers these to SendMessage is asked again the 0.3 way.
UNKNOWN_METHOD = frozenset({ErrorCode.METHOD_NOT_FOUND, ErrorCode.VERSION_NOT_SUPPORTED})
_MEDIA = re.compile(r"[a-z0-9.+-]{1,30}/[a-z0-9.+-]{1,40}")  # shown only if it looks like one


class CallFailed(ConchError):
    """A request that did not give an answer: `code` for programs, `words` for a person.

    Status 502: the agent called, not the caller, failed (the outside service says it as an
    OutsideError or a note). `peer_status` is the HTTP status the agent answered with, if any;
    `rpc_code` its JSON-RPC error's number, if any.
    """

    status = 502

    def __init__(
        self,
        code: str,
        words: str,
        *,
        passing: bool = False,
        peer_status: int | None = None,
        rpc_code: int | None = None,
    ) -> None:
        super().__init__(code, words)
        self.words = words
        self.passing = passing
        self.peer_status = peer_status
        self.rpc_code = rpc_code


@dataclass(frozen=True)
class Limits:
    card_bytes: int = 256 * 1024
    answer_bytes: int = 1024 * 1024
    card_seconds: float = 10.0  # for the whole search, every place and redirect included
    call_seconds: float = 30.0  # per call
    redirects: int = 5


_TOO_DEEP = "sent JSON nested too deeply to read"


def json_of(data: bytes, depth: int = JSON_DEPTH) -> Any:
    """The JSON an outside agent sent, read only within `depth` (the one place JSON from an
    outside agent is read): deeper, or not JSON, is CallFailed `bad_json`, in words. What it
    gives back can be walked, copied and signed without exhausting the stack."""
    try:
        value = json.loads(data)
    except RecursionError:
        raise CallFailed("bad_json", _TOO_DEEP) from None
    except ValueError:
        raise CallFailed("bad_json", "sent something that is not valid JSON") from None
    if nests_deeper(value, depth):
        raise CallFailed("bad_json", _TOO_DEEP)
    return value


def same_host(a: httpx.URL, b: httpx.URL) -> bool:
    """One host: the same name, and the same port (an http→https move keeps the default ports)."""
    ports = {"http": 80, "https": 443}
    port_a, port_b = a.port or ports.get(a.scheme), b.port or ports.get(b.scheme)
    default = port_a == ports.get(a.scheme) and port_b == ports.get(b.scheme)
    return a.raw_host.lower() == b.raw_host.lower() and (port_a == port_b or default)


def _amount(size: int) -> str:
    return f"{size // (1024 * 1024)} MB" if size % (1024 * 1024) == 0 else f"{size // 1024} KB"


def _transport_words(error: httpx.TransportError) -> str:
    # By kind, not by text: a protocol error's text can quote what the server sent.
    if isinstance(error, httpx.ConnectError):
        found = str(error).startswith("could not find")  # the guard's own words
        return str(error)[:120] if found else "could not be reached (no connection)"
    if isinstance(error, httpx.RemoteProtocolError):
        return "broke off the answer or broke the HTTP rules"
    if isinstance(error, httpx.ReadError | httpx.WriteError):
        return "dropped the connection"
    return f"could not be reached ({type(error).__name__})"


def _status_words(status: int) -> str:
    try:
        return f"HTTP {status} ({http.HTTPStatus(status).phrase})"
    except ValueError:
        return f"HTTP {status}"


class A2AClient:
    """One operation's connections to one agent (`async with`); the key goes only to its host."""

    def __init__(
        self, transport: httpx.AsyncBaseTransport, key: str | None, limits: Limits | None = None
    ) -> None:
        self._key = key
        self.limits = limits = limits or Limits()
        self._http = httpx.AsyncClient(
            transport=transport,
            follow_redirects=False,  # redirects are followed below, by our rules
            trust_env=False,
            timeout=httpx.Timeout(max(limits.call_seconds, limits.card_seconds)),
        )

    async def __aenter__(self) -> A2AClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self._http.aclose()

    # -- JSON-RPC --------------------------------------------------------------------------

    async def check(self, endpoint: httpx.URL, version: Version) -> Version:
        """Whether `endpoint` answers A2A, and which version: GetTask for a made-up task (none
        of your words), asked the 0.3 way too if a 1.0 endpoint does not know the method."""
        versions: list[Version] = [version, "0.3"] if version == "1.0" else [version]
        for v in versions:
            try:
                await self.call(endpoint, v, "get", {"id": f"conch-check-{new_id()}"})
                return v
            except CallFailed as e:
                unknown = e.rpc_code in UNKNOWN_METHOD
                if unknown and v != versions[-1]:
                    continue
                if e.code == "rpc" and not unknown:
                    return v  # it answered about the made-up task, in JSON-RPC: it is there
                raise
        raise CallFailed("rpc", "does not answer A2A's methods")

    async def call(
        self, endpoint: httpx.URL, version: Version, op: Op, params: dict[str, Any]
    ) -> Any:
        """One call (`op` is "send", "get" or "cancel"); its result, or CallFailed."""
        body = json.dumps(rpc_call(method_name(op, version), params, new_id())).encode()
        seconds = self.limits.call_seconds
        try:
            raw, _ = await within(
                seconds, self.fetch("POST", endpoint, body, self.limits.answer_bytes, version)
            )
        except asyncio.TimeoutError:
            raise CallFailed("timeout", f"did not answer within {duration(seconds)}") from None
        try:
            return rpc_answer(raw)
        except RpcFault as fault:
            # Its own words stay out: these words may become a note in the chat, which is ours.
            name = REASONS.get(fault.rpc_code, "").replace("_", " ").lower()
            shown = f"{fault.rpc_code} ({name})" if name else str(fault.rpc_code)
            raise CallFailed(
                "rpc", f"answered with error {shown}", rpc_code=fault.rpc_code
            ) from None
        except WireError as e:
            raise CallFailed("wire", f"sent an answer that is not A2A: {e}") from None

    # -- one request, its redirects and its answer -----------------------------------------

    async def fetch(
        self, method: str, start: httpx.URL, body: bytes | None, limit: int, version: Version
    ) -> tuple[Any, httpx.URL]:
        """One request and its redirects: the JSON it answered, and the URL that answered it."""
        url = start
        for _ in range(self.limits.redirects + 1):
            headers = {
                VERSION_HEADER: version,
                "Accept": "application/json",
                "Accept-Encoding": "identity",  # sizes are counted on the wire, unexpanded
                "User-Agent": "Conch",
            }
            if body is not None:
                headers["Content-Type"] = "application/json"
            if self._key and same_host(url, start):
                headers["Authorization"] = f"Bearer {self._key}"
            request = self._http.build_request(method, url, headers=headers, content=body)
            try:
                response = await self._http.send(request, stream=True)
                try:
                    if not response.is_redirect:
                        return await self._answer(response, limit, rpc=body is not None), url
                    url = self._next_hop(response, method, start)
                finally:
                    await response.aclose()
            except Refused as e:
                raise CallFailed("refused", f"was not contacted: {e.reason}") from None
            except httpx.TimeoutException:
                raise CallFailed("timeout", "did not answer in time", passing=True) from None
            except httpx.TransportError as e:
                raise CallFailed("unreachable", _transport_words(e), passing=True) from None
        raise CallFailed("redirect", f"redirected more than {self.limits.redirects} times")

    def _next_hop(self, response: httpx.Response, method: str, start: httpx.URL) -> httpx.URL:
        try:
            target = response.url.join(response.headers["Location"])
        except (httpx.InvalidURL, UnicodeError):
            raise CallFailed("redirect", "redirected to an address Conch cannot read") from None
        if target.scheme not in ("http", "https"):
            raise CallFailed("redirect", f"redirected to a {target.scheme[:20]}: address")
        if len(str(target)) > URL_LIMIT:
            raise CallFailed("redirect", f"redirected to an address over {URL_LIMIT:,} characters")
        if not same_host(target, start):
            host = target.raw_host.decode("ascii", "replace")[:80]
            raise CallFailed("redirect", f"redirected to another host ({host})")
        if method == "POST" and response.status_code not in (307, 308):
            # 301/302/303 turn a POST into a GET, which would drop the call.
            shown = _status_words(response.status_code)
            raise CallFailed("redirect", f"answered a call with a redirect that drops it ({shown})")
        return target

    async def _answer(self, response: httpx.Response, limit: int, *, rpc: bool) -> Any:
        status = response.status_code
        if status in (401, 403):
            words = "refused the key" if self._key else "wants a key; add it again with its key"
            raise CallFailed("key", f"{words} ({_status_words(status)})", peer_status=status)
        media = response.headers.get("Content-Type", "").split(";")[0].strip().lower()
        is_json = media == "application/json" or media.endswith("+json")
        if status >= 300:
            # A JSON-RPC error may come with an HTTP error status (a card never does); anything
            # else in an error answer is not worth reading: the status says it.
            value = await self._json(response, limit) if is_json and rpc else None
            error = value.get("error") if isinstance(value, dict) else None
            if isinstance(error, dict) and isinstance(error.get("code"), int):
                return value
            code = "not_found" if status in (404, 405, 410) else "http"
            words = f"answered {_status_words(status)}"
            raise CallFailed(code, words, peer_status=status, passing=status in _PASSING_STATUS)
        if not is_json:
            shown = media if _MEDIA.fullmatch(media) else "something else"
            raise CallFailed("not_json", f"answered with {shown}, not JSON", peer_status=status)
        return await self._json(response, limit, strict=True)

    async def _json(self, response: httpx.Response, limit: int, *, strict: bool = False) -> Any:
        """The body as JSON (None when not `strict` and it is not JSON)."""
        try:
            if response.headers.get("Content-Encoding", "identity").strip().lower() != "identity":
                raise CallFailed("bad_json", "sent a compressed answer although asked for none")
            return json_of(await self._read(response, limit))
        except CallFailed:
            if strict:
                raise
            return None

    async def _read(self, response: httpx.Response, limit: int) -> bytes:
        declared = response.headers.get("Content-Length", "")
        if declared.isdigit() and int(declared) > limit:
            raise CallFailed("too_large", f"sent more than {_amount(limit)}")
        data = bytearray()
        async for chunk in response.aiter_raw():
            data += chunk
            if len(data) > limit:
                raise CallFailed("too_large", f"sent more than {_amount(limit)}")
        return bytes(data)
