"""Where this server is reached, as a caller reached it: for the addresses the door hands to
others (a pairing's paste, an agent's card). Behind proxies (c.ServerApp.trust_xheaders) the first
proxy's view counts (a2a/door/forwarded.py reads the headers).
"""

from __future__ import annotations

import re
from typing import Any, Protocol
from urllib.parse import quote

from tornado.httputil import HTTPServerRequest

from ..a2a.door.forwarded import door_scheme

_HOST = re.compile(r"[A-Za-z0-9.\-:\[\]]{1,300}")


class Exchange(Protocol):
    """A request with the web application's settings: a RequestHandler, or the door's
    DoorExchange (http.py), which is none."""

    @property
    def request(self) -> HTTPServerRequest: ...

    @property
    def settings(self) -> dict[str, Any]: ...


def trusts_forwarded(handler: Exchange) -> bool:
    """Whether ServerApp.trust_xheaders is on (JupyterHub turns it on in single-user servers)."""
    return bool(getattr(handler.settings.get("serverapp"), "trust_xheaders", False))


def socket_peer(handler: Exchange) -> str:
    """The address at the other end of the socket, whatever forwarded headers say."""
    context = getattr(handler.request.connection, "context", None)
    address = getattr(context, "address", None)
    if isinstance(address, tuple) and address:
        return str(address[0])
    return handler.request.remote_ip or ""


def caller_scheme(handler: Exchange) -> str:
    """ "http" or "https" as the caller reached the first proxy (a2a/door/forwarded.py)."""
    return door_scheme(
        handler.request.protocol, handler.request.headers, trust_forwarded=trusts_forwarded(handler)
    )


def request_origin(handler: Exchange) -> str:
    """scheme://host as the caller reached us; with ServerApp.trust_xheaders, as the first proxy
    was reached (X-Forwarded-Proto's first entry, X-Forwarded-Host's first)."""
    host = handler.request.host
    if trusts_forwarded(handler):
        forwarded = handler.request.headers.get("X-Forwarded-Host", "").split(",")[0].strip()
        host = forwarded or host
    if not _HOST.fullmatch(host):
        host = "localhost"  # a Host no address can hold: the card must still be well formed
    return f"{caller_scheme(handler)}://{host}"


def endpoint_url(handler: Exchange, agent_id: str) -> str:
    """The absolute URL of an agent's JSON-RPC endpoint, base_url included (the door answers
    it with and without a trailing slash)."""
    base_url = handler.settings.get("base_url", "/")
    return f"{request_origin(handler)}{base_url}a2a/{quote(agent_id, safe='')}"


def jwks_url_for(endpoint: str) -> str:
    """The absolute URL of the door's JWK Set, which its cards' signatures name as `jku`, beside
    an agent's endpoint (endpoint_url): `{origin}{base_url}.well-known/jwks.json`."""
    return endpoint[: endpoint.rindex("a2a/")] + ".well-known/jwks.json"
