"""Finding an outside agent from its address: where its card is, and where its calls go.

Owns the card search (the address itself, then `<address>/.well-known/agent-card.json`, then the
host's `/.well-known/agent-card.json`, then the pre-0.3 `/.well-known/agent.json`) and the rule
that the endpoint a card names is on the host the card came from, so a card cannot send Conch,
or your key, anywhere else. A place that answers 404, 405, something not JSON, or JSON that is
not a card is a miss and the search goes on; anything worse (refused, too large, too slow, the
key refused, too many redirects) ends it at once. One exception: a 403 at the address itself is a
miss too. That address is often a JSON-RPC endpoint that takes only POST, and a server that
guards every GET with its own sign-in (Jupyter with allow_unauthenticated_access off, in front of
an older Conch's door) answers 403 there before its card is ever asked for.

A card found has its signatures checked (signatures.py); one whose signature checks out is read
as the signature covers it, so nothing it leaves out decides where calls go.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

import httpx

from ...core.deadlines import duration, within
from ..reading import CardInfo, parse_card
from ..wire import WireError
from .client import URL_LIMIT, A2AClient, CallFailed, same_host
from .signatures import CardCheck, check_card

WELL_KNOWN = "/.well-known/agent-card.json"
OLD_WELL_KNOWN = "/.well-known/agent.json"
_MISS = frozenset({"not_found", "not_json", "http"})


def card_places(address: httpx.URL) -> list[httpx.URL]:
    """The address itself, then the well-known places under it and at the root of its host."""
    base = address.copy_with(query=None, fragment=None)
    # The path as written: "/a%40b/" must not become "/a@b/", which a server may route apart.
    path = base.raw_path.rstrip(b"/")
    places = [base]
    if not path.endswith(b".json"):
        places.append(base.copy_with(raw_path=path + WELL_KNOWN.encode()))
    places += [base.copy_with(path=WELL_KNOWN), base.copy_with(path=OLD_WELL_KNOWN)]
    return list(dict.fromkeys(places))


async def read_card(
    client: A2AClient, places: list[httpx.URL], bare: httpx.URL | None = None
) -> tuple[dict[str, Any], httpx.URL]:
    """The first A2A card at `places` as it came, and the URL it came from (all within
    card_seconds).
    `bare` is the address itself, where a 403 is a miss (see above)."""
    seconds = client.limits.card_seconds
    try:
        return await within(seconds, _search(client, places, bare))
    except asyncio.TimeoutError:
        raise CallFailed("timeout", f"did not show its card within {duration(seconds)}") from None


async def _search(
    client: A2AClient, places: list[httpx.URL], bare: httpx.URL | None
) -> tuple[dict[str, Any], httpx.URL]:
    unusable: CallFailed | None = None
    last = "nothing answered"
    for place in places:
        try:
            raw, found_at = await client.fetch("GET", place, None, client.limits.card_bytes, "1.0")
            parse_card(raw)  # a card, or a miss (WireError)
            return raw, found_at
        except WireError as e:
            unusable = unusable or CallFailed("no_card", f"has a card Conch cannot use: {e}")
        except CallFailed as e:
            if e.code not in _MISS and not (e.peer_status == 403 and place == bare):
                raise
            last = e.words
    if unusable is not None:
        raise unusable
    raise CallFailed(
        "no_card", f"has no A2A card at its address or the well-known places (last: {last})"
    )


@dataclass(frozen=True)
class Found:
    card: CardInfo
    found_at: httpx.URL  # where the card came from
    endpoint: httpx.URL  # on that same host
    signed: CardCheck  # its signatures, checked


async def find_agent(
    client: A2AClient,
    address: httpx.URL,
    first: httpx.URL | None = None,
    pinned: str | None = None,
) -> Found:
    """The card of the agent at `address` (looked for at `first` before the usual places), the
    URL it came from, its endpoint — which must be on that same host — and its signatures
    checked (the one by the `pinned` key's thumbprint preferred)."""
    usual = card_places(address)
    places = list(dict.fromkeys([*([first] if first else []), *usual]))
    raw, found_at = await read_card(client, places, bare=usual[0])
    signed = await check_card(client, raw, found_at, pinned)
    try:
        card = parse_card(signed.card if signed.card is not None else raw)
    except WireError as e:
        raise CallFailed("no_card", f"has a signed card Conch cannot use: {e}") from None
    try:
        endpoint = found_at.join(card.endpoint)
    except (httpx.InvalidURL, UnicodeError):
        raise CallFailed("no_card", "has a card whose endpoint Conch cannot read") from None
    if len(str(endpoint)) > URL_LIMIT:
        raise CallFailed("no_card", f"has a card whose endpoint is over {URL_LIMIT:,} characters")
    if endpoint.scheme not in ("http", "https"):
        scheme = endpoint.scheme[:20]
        raise CallFailed("no_card", f"has a card whose endpoint is a {scheme}: address")
    if not (same_host(endpoint, found_at) and same_host(endpoint, address)):
        host = endpoint.raw_host.decode("ascii", "replace")[:80]
        raise CallFailed(
            "moved",
            f"has a card that sends calls to another host ({host}); Conch only calls the host "
            "the card came from",
        )
    if endpoint.scheme == "http" and address.scheme == "https":
        raise CallFailed("refused", "has a card that sends calls over http:// from https://")
    return Found(card, found_at, endpoint, signed)
