"""Where a door request came from behind proxies (a2a/door/forwarded.py): pure, no server."""

from __future__ import annotations

import pytest

from conch_jupyter.a2a.door.forwarded import door_address, door_scheme

LOCAL = "127.0.0.1"

ADDRESSES = [
    # (what, socket peer, headers, trust_xheaders, the address the door sees)
    ("no proxy", "203.0.113.9", {}, False, "203.0.113.9"),
    ("headers ignored without trust", LOCAL, {"X-Forwarded-For": "203.0.113.9"}, False, LOCAL),
    ("the hub's proxy on this computer", LOCAL, {"X-Forwarded-For": LOCAL}, True, LOCAL),
    (
        "IPv6 loopback all the way",
        "::1",
        {"X-Forwarded-For": "::1", "X-Real-Ip": "::1"},
        True,
        "::1",
    ),
    ("an ingress in front", LOCAL, {"X-Forwarded-For": "203.0.113.9, 10.0.0.5"}, True, "10.0.0.5"),
    (
        "the ingress names the client",
        LOCAL,
        {"X-Forwarded-For": "203.0.113.9, 10.0.0.5", "X-Real-Ip": "203.0.113.9"},
        True,
        "203.0.113.9",
    ),
    (
        "X-Real-Ip claims this computer",
        LOCAL,
        {"X-Forwarded-For": "203.0.113.9", "X-Real-Ip": LOCAL},
        True,
        "203.0.113.9",
    ),
    (
        "X-Forwarded-For claims this computer, the proxy appended the truth",
        LOCAL,
        {"X-Forwarded-For": f"{LOCAL}, 198.51.100.7"},
        True,
        "198.51.100.7",
    ),
    ("a proxy on another computer", "10.0.0.5", {"X-Real-Ip": LOCAL}, True, "10.0.0.5"),
    (
        "what is not an address is skipped",
        LOCAL,
        {"X-Forwarded-For": "not an address, 127.0.0.1", "X-Real-Ip": "x"},
        True,
        LOCAL,
    ),
]


@pytest.mark.parametrize(
    ("peer", "headers", "trust", "seen"), [a[1:] for a in ADDRESSES], ids=[a[0] for a in ADDRESSES]
)
def test_a_request_is_from_this_computer_only_if_every_hop_is(
    peer: str, headers: dict[str, str], trust: bool, seen: str
) -> None:
    assert door_address(peer, headers, trust_forwarded=trust) == seen


SCHEMES = [
    ("no proxy", "http", {}, False, "http"),
    ("headers ignored without trust", "http", {"X-Forwarded-Proto": "https"}, False, "http"),
    ("one proxy", "https", {"X-Forwarded-Proto": "https"}, True, "https"),
    (
        "an HTTPS ingress, then the hub's proxy",
        "http",
        {"X-Forwarded-Proto": "https,http"},
        True,
        "https",
    ),
    ("plain HTTP at the ingress", "https", {"X-Forwarded-Proto": "http, https"}, True, "http"),
    ("X-Scheme first", "http", {"X-Scheme": "https", "X-Forwarded-Proto": "http"}, True, "https"),
    ("not a scheme", "http", {"X-Forwarded-Proto": "gopher"}, True, "http"),
    ("no header", "http", {}, True, "http"),
]


@pytest.mark.parametrize(
    ("seen", "headers", "trust", "scheme"), [s[1:] for s in SCHEMES], ids=[s[0] for s in SCHEMES]
)
def test_the_scheme_is_the_one_the_outermost_proxy_saw(
    seen: str, headers: dict[str, str], trust: bool, scheme: str
) -> None:
    assert door_scheme(seen, headers, trust_forwarded=trust) == scheme
