"""Where a request at the door came from, and over what, when proxies stand in front of Jupyter.

Pure: the handlers pass in what the socket saw and the request's headers. Without
`ServerApp.trust_xheaders` the socket is the answer. With it (JupyterHub turns it on in every
single-user server), tornado itself reads the forwarded headers in a way that suits logging but
not the door's rule 4 (from another computer: HTTPS, door_remote and a key marked remote):

- it takes `X-Real-Ip` whenever there is one, and a proxy that does not replace it (the hub's
  configurable-http-proxy does not) passes on whatever the client wrote: `X-Real-Ip: 127.0.0.1`
  would pass for this computer. Here a request is from this computer only when every address it
  names is (its socket peer, each `X-Forwarded-For` entry, `X-Real-Ip`; what is not an address
  is skipped, as tornado skips it); otherwise it is from the address tornado would name (so the
  throttle counts failures where it always did), or, if that one claims to be this computer, the
  nearest hop that does not.
- it takes the *last* `X-Forwarded-Proto` entry: the nearest hop, which behind an ingress that
  ends TLS and then the hub's proxy is the proxy's own `http`. Here the scheme is the *first*
  entry, the one the outermost proxy (the ingress, which must set it) wrote.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping

from .rules import is_loopback


def _entries(value: str | None) -> list[str]:
    return [part.strip() for part in (value or "").split(",") if part.strip()]


def _is_address(text: str) -> bool:
    try:
        ipaddress.ip_address(text.split("%", 1)[0])
    except ValueError:
        return False
    return True


def door_address(peer: str, headers: Mapping[str, str], *, trust_forwarded: bool) -> str:
    """The address the door's rules see for a request whose socket peer is `peer`."""
    if not trust_forwarded:
        return peer
    forwarded = [hop for hop in _entries(headers.get("X-Forwarded-For")) if _is_address(hop)]
    real = headers.get("X-Real-Ip", "").strip()
    real = real if _is_address(real) else ""
    hops = [*forwarded, *([real] if real else []), peer]
    elsewhere = [hop for hop in hops if not is_loopback(hop)]
    if not elsewhere:
        return peer
    named = real or (forwarded[-1] if forwarded else peer)  # what tornado would take
    return named if named in elsewhere else elsewhere[-1]


def door_scheme(seen: str, headers: Mapping[str, str], *, trust_forwarded: bool) -> str:
    """ "http" or "https": how the caller reached the first proxy (or the socket, without one)."""
    if not trust_forwarded:
        return seen
    forwarded = _entries(headers.get("X-Scheme") or headers.get("X-Forwarded-Proto"))
    first = forwarded[0].lower() if forwarded else ""
    return first if first in ("http", "https") else seen
