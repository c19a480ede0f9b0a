"""The guarded fetch: refused addresses in every spelling, redirect hops, and no DNS rebinding.

Every refused case aims at a canary listener on loopback (or at an address that would leave
this machine) and checks that nothing was reached: the canary counts its connections, and the
real transport under the guard is wrapped so that it only ever connects to loopback — a guard
that let a request through to 169.254.169.254 fails the test instead of sending a packet.
Names are resolved by a fake resolver: `agent.test` is a "public" agent (a documentation address
that is rerouted to a local TLS server with a certificate for that name).
"""

from __future__ import annotations

import asyncio
import ipaddress
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from conch_jupyter.a2a.outside.guard import (
    IP,
    GuardedTransport,
    Home,
    Refused,
    home_of,
    ipv4_loose,
    kind_of,
    literal_address,
)
from conch_jupyter.core.policy import Policy

from ..support.a2a_peers import Answer, Hostile, LoopbackOnly, fake_resolver, tls_contexts

pytestmark = pytest.mark.timeout(60)

PUBLIC_IP = "198.51.100.7"  # TEST-NET-2: routes nowhere, so even a mistake sends nothing
NAMES = {
    "agent.test": [PUBLIC_IP],
    "other.test": [PUBLIC_IP],
    "localhost.test": ["127.0.0.1"],
    "metadata.test": ["169.254.169.254"],
    "lan.test": ["192.168.1.5"],
    "mixed.test": ["169.254.169.254", "127.0.0.1"],
}


@pytest.mark.parametrize(
    ("host", "address"),
    [
        ("2852039166", "169.254.169.254"),
        ("0xA9FEA9FE", "169.254.169.254"),
        ("0xa9.0xfe.0xa9.0xfe", "169.254.169.254"),
        ("0251.0376.0251.0376", "169.254.169.254"),
        ("0251.0376.43518", "169.254.169.254"),
        ("169.16689662", "169.254.169.254"),
        ("127.1", "127.0.0.1"),
        ("0x7f.1", "127.0.0.1"),
        ("017700000001", "127.0.0.1"),
        ("127.0.0.1.", "127.0.0.1"),
        ("0", "0.0.0.0"),  # noqa: S104
        ("0x", "0.0.0.0"),  # noqa: S104
        ("1.2.3.256", None),
        ("08.1.1.1", None),
        ("1..2", None),
        ("1.2.3.4.5", None),
        ("256.1", None),
        ("example.com", None),
        ("0x1g", None),
    ],
)
def test_numeric_hosts_are_read_as_inet_aton_reads_them(host: str, address: str | None) -> None:
    found = ipv4_loose(host)
    assert (str(found) if found else None) == address


@pytest.mark.parametrize(
    ("address", "kind"),
    [
        ("169.254.169.254", "metadata"),
        ("100.100.100.200", "metadata"),
        ("192.0.0.192", "metadata"),
        ("fd00:ec2::254", "metadata"),
        ("::ffff:169.254.169.254", "metadata"),
        ("::ffff:0:a9fe:a9fe", "metadata"),
        ("::169.254.169.254", "metadata"),
        ("64:ff9b::a9fe:a9fe", "metadata"),
        ("2002:a9fe:a9fe::1", "metadata"),
        ("169.254.1.1", "link-local"),
        ("fe80::1", "link-local"),
        ("fe80::1%eth0", "link-local"),
        ("0.0.0.0", "unspecified"),  # noqa: S104
        ("0.1.2.3", "unspecified"),
        ("::", "unspecified"),
        ("224.0.0.1", "multicast"),
        ("ff02::1", "multicast"),
        ("255.255.255.255", "reserved"),
        ("240.0.0.1", "reserved"),
        ("198.18.0.1", "reserved"),
        ("fec0::1", "reserved"),
        ("4000::1", "reserved"),
        ("64:ff9b::7f00:1", "reserved"),
        ("2001:0:4136:e378:8000:63bf:3fff:fdd2", "tunnel"),
        ("127.0.0.1", "loopback"),
        ("127.255.0.9", "loopback"),
        ("::1", "loopback"),
        ("::ffff:127.0.0.1", "loopback"),
        ("10.0.0.1", "private"),
        ("172.31.255.255", "private"),
        ("192.168.1.5", "private"),
        ("100.64.0.1", "private"),
        ("fc00::1", "private"),
        ("fd12:3456::1", "private"),
        ("8.8.8.8", "public"),
        ("172.32.0.1", "public"),
        (PUBLIC_IP, "public"),
        ("2606:4700::1", "public"),
        ("64:ff9b::808:808", "public"),
        ("2002:808:808::1", "public"),
    ],
)
def test_every_address_has_a_kind(address: str, kind: str) -> None:
    ip = literal_address(address.replace("%", "%25"))
    assert ip is not None
    assert kind_of(ip) == kind


@pytest.mark.parametrize(
    ("url", "home"),
    [
        ("https://agent.test/a2a", "public"),
        ("http://127.0.0.1:8888/a2a", "loopback"),
        ("http://localhost.test/", "loopback"),
        ("http://[::1]/", "loopback"),
        ("http://lan.test/", "private"),
        ("http://100.64.0.7/", "private"),
        ("http://mixed.test/", "loopback"),  # the first address Conch may use decides
        ("http://agent.test/", "over the internet Conch only uses https://"),
        ("http://metadata.test/", "a cloud metadata address"),
        ("https://169.254.169.254/", "a cloud metadata address"),
        ("http://0.0.0.0:8888/", "the unspecified address"),
        ("http://[fe80::1%25eth0]/", "a link-local address"),
        ("https://nowhere.test/", "could not find nowhere.test"),
    ],
)
def test_an_agent_lives_where_its_address_resolves(url: str, home: str) -> None:
    async def check() -> str:
        try:
            return await home_of(httpx.URL(url), fake_resolver(NAMES))
        except (Refused, httpx.ConnectError) as e:
            return str(e)

    found = asyncio.run(check())
    assert home in found


@pytest.fixture(scope="module")
def canary() -> Iterator[Hostile]:
    with Hostile() as server:
        yield server


@pytest.fixture(scope="module")
def ok_server() -> Iterator[Hostile]:
    def answer(method: str, path: str, body: Any) -> Answer:
        return Answer.json({"ok": True, "path": path})

    with Hostile(answer) as server:
        yield server


@pytest.fixture(scope="module")
def tls() -> tuple[Any, Any]:
    return tls_contexts("agent.test")


async def _get(transport: httpx.AsyncBaseTransport, url: str) -> httpx.Response:
    async with httpx.AsyncClient(
        transport=transport, trust_env=False, follow_redirects=True, timeout=5
    ) as client:
        return await client.get(url)


REFUSED: list[tuple[Home, str, str]] = [
    # A public agent never reaches this computer or your network, in any spelling.
    ("public", "https://127.0.0.1:{canary}/", "this computer"),
    ("public", "https://0x7f.1:{canary}/", "this computer"),
    ("public", "https://2130706433:{canary}/", "this computer"),
    ("public", "https://017700000001:{canary}/", "this computer"),
    ("public", "https://127.1:{canary}/", "this computer"),
    ("public", "https://[::1]:{canary}/", "this computer"),
    ("public", "https://[::ffff:127.0.0.1]:{canary}/", "this computer"),
    ("public", "https://localhost.test:{canary}/", "this computer"),
    ("public", "https://lan.test/", "your own network"),
    ("public", "http://agent.test/", "only uses https://"),
    # Nobody reaches metadata, link-local, unspecified, multicast or reserved addresses.
    ("loopback", "http://0.0.0.0:{canary}/", "unspecified"),
    ("loopback", "http://0:{canary}/", "unspecified"),
    ("loopback", "http://[::]:{canary}/", "unspecified"),
    ("loopback", "http://169.254.169.254/latest/meta-data/", "metadata"),
    ("loopback", "http://2852039166/", "metadata"),
    ("loopback", "http://0xA9FEA9FE/", "metadata"),
    ("loopback", "http://0xa9.0xfe.0xa9.0xfe/", "metadata"),
    ("loopback", "http://0251.0376.43518/", "metadata"),
    ("loopback", "http://[::ffff:169.254.169.254]/", "metadata"),
    ("loopback", "http://[64:ff9b::a9fe:a9fe]/", "metadata"),
    ("loopback", "http://[2002:a9fe:a9fe::]/", "metadata"),
    ("loopback", "http://[fd00:ec2::254]/", "metadata"),
    ("loopback", "http://100.100.100.200/", "metadata"),
    ("loopback", "http://metadata.test/", "metadata"),
    ("loopback", "http://169.254.10.10/", "link-local"),
    ("loopback", "http://[fe80::1%25eth0]:{canary}/", "link-local"),
    ("loopback", "http://224.0.0.1/", "multicast"),
    ("loopback", "http://255.255.255.255/", "reserved"),
    ("loopback", "http://[2001:0:4136:e378:8000:63bf:3fff:fdd2]/", "tunnel"),
    # Your own network, only for an agent that lives on that same part of it.
    ("loopback", "http://192.168.1.5/", "your own network"),
    ("private", "http://127.0.0.1:{canary}/", "this computer"),
    # Only http and https.
    ("loopback", "ftp://127.0.0.1:{canary}/", "not ftp:"),
    ("loopback", "file:///etc/passwd", "only whole http:// and https:// addresses"),
]


@pytest.mark.parametrize(("home", "url", "words"), REFUSED)
def test_refused_addresses_reach_nothing(home: Home, url: str, words: str, canary: Hostile) -> None:
    inner = LoopbackOnly()
    transport = GuardedTransport(home, resolver=fake_resolver(NAMES), inner=inner)
    before = canary.connections
    with pytest.raises(Refused, match=words):
        asyncio.run(_get(transport, url.format(canary=canary.port)))
    assert canary.connections == before
    assert inner.attempts == []


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:{port}/here",
        "http://0x7f.1:{port}/here",
        "http://localhost.test:{port}/here",
        "http://mixed.test:{port}/here",
    ],
)
def test_allowed_addresses_connect_to_the_checked_address(url: str, ok_server: Hostile) -> None:
    inner = LoopbackOnly()
    transport = GuardedTransport("loopback", resolver=fake_resolver(NAMES), inner=inner)
    response = asyncio.run(_get(transport, url.format(port=ok_server.port)))
    assert response.json() == {"ok": True, "path": "/here"}
    # The connection went to the address that was checked; the name stayed in Host.
    assert inner.sent[-1].url.host == "127.0.0.1"
    assert (
        ok_server.received[-1].headers["host"]
        == httpx.URL(url.format(port=1)).host + f":{ok_server.port}"
    )


def test_ipv6_loopback_agent(canary: Hostile) -> None:
    def answer(method: str, path: str, body: Any) -> Answer:
        return Answer.json({"v6": True})

    with Hostile(answer, host="::1") as server:
        transport = GuardedTransport("loopback", inner=LoopbackOnly())
        assert asyncio.run(_get(transport, f"{server.url}/")).json() == {"v6": True}


def _public(tls: tuple[Any, Any], server: Hostile) -> tuple[GuardedTransport, LoopbackOnly]:
    inner = LoopbackOnly(verify=tls[1], reroute={PUBLIC_IP: server.port})
    return GuardedTransport("public", resolver=fake_resolver(NAMES), inner=inner), inner


def test_a_public_agent_over_https_is_reached_by_name(tls: tuple[Any, Any]) -> None:
    def answer(method: str, path: str, body: Any) -> Answer:
        return Answer.json({"public": True})

    with Hostile(answer, tls=tls[0]) as server:
        transport, inner = _public(tls, server)
        assert asyncio.run(_get(transport, "https://agent.test/card")).json() == {"public": True}
        # Connected by address, but TLS checked the certificate for the name:
        assert inner.sent[-1].extensions["sni_hostname"] == "agent.test"
        # … so the same address under another name fails the certificate check.
        transport, _ = _public(tls, server)
        with pytest.raises(httpx.ConnectError, match="certificate"):
            asyncio.run(_get(transport, "https://other.test/card"))


@pytest.mark.parametrize(
    "location",
    [
        "http://127.0.0.1:{canary}/",
        "https://127.0.0.1:{canary}/",
        "https://0x7f000001:{canary}/",
        "https://[::ffff:7f00:1]:{canary}/",
        "https://localhost.test:{canary}/",
        "http://169.254.169.254/latest/meta-data/iam/",
        "https://[fd00:ec2::254]/",
        "http://agent.test/",
        "file:///etc/passwd",
    ],
)
def test_every_redirect_hop_is_checked(
    location: str, tls: tuple[Any, Any], canary: Hostile
) -> None:
    """A public agent that redirects toward this computer or the metadata service: the guard
    refuses the hop before connecting, so the canary is never reached."""
    target = location.format(canary=canary.port)

    def answer(method: str, path: str, body: Any) -> Answer:
        return Answer.redirect(target, 307)

    with Hostile(answer, tls=tls[0]) as server:
        transport, inner = _public(tls, server)
        before = canary.connections
        with pytest.raises((Refused, httpx.UnsupportedProtocol)):
            asyncio.run(_get(transport, "https://agent.test/start"))
    assert canary.connections == before
    assert inner.attempts == []
    assert len(server.received) == 1


def test_a_name_that_rebinds_between_requests_is_checked_each_time(
    tls: tuple[Any, Any], canary: Hostile
) -> None:
    answers = iter([[PUBLIC_IP], ["127.0.0.1"]])

    async def rebinding(host: str, port: int) -> list[Any]:
        return [ipaddress.ip_address(a) for a in next(answers)]

    def answer(method: str, path: str, body: Any) -> Answer:
        return Answer.json({"first": True})

    with Hostile(answer, tls=tls[0]) as server:
        inner = LoopbackOnly(verify=tls[1], reroute={PUBLIC_IP: server.port})
        transport = GuardedTransport("public", resolver=rebinding, inner=inner)

        async def twice() -> None:
            async with httpx.AsyncClient(transport=transport, trust_env=False) as client:
                assert (await client.get("https://agent.test/")).json() == {"first": True}
                await client.get(f"https://agent.test:{canary.port}/")

        before = canary.connections
        with pytest.raises(Refused, match="this computer"):
            asyncio.run(twice())
    assert canary.connections == before
    assert len(server.received) == 1


@pytest.mark.parametrize(
    ("hosts", "url"),
    [
        ((), "http://127.0.0.1:{port}/here"),
        (("agents.example.org",), "http://127.0.0.1:{port}/here"),
        (("agents.example.org",), "http://localhost.test:{port}/here"),
    ],
)
def test_a_host_the_administrator_did_not_allow_is_not_looked_up_nor_contacted(
    hosts: tuple[str, ...], url: str, ok_server: Hostile
) -> None:
    looked_up: list[str] = []

    async def resolver(host: str, port: int) -> list[IP]:
        looked_up.append(host)
        return await fake_resolver(NAMES)(host, port)

    inner = LoopbackOnly()
    policy = Policy(outside_hosts=hosts)
    transport = GuardedTransport("loopback", resolver=resolver, inner=inner, policy=policy)
    before = len(ok_server.received)
    with pytest.raises(Refused, match=r": set by your administrator$"):
        asyncio.run(_get(transport, url.format(port=ok_server.port)))
    assert (looked_up, inner.attempts, len(ok_server.received)) == ([], [], before)
    # The host it names is let through, by the same rules as ever.
    allowed = GuardedTransport(
        "loopback",
        resolver=resolver,
        inner=LoopbackOnly(),
        policy=Policy(outside_hosts=("localhost.test", "127.0.0.1")),
    )
    response = asyncio.run(_get(allowed, url.format(port=ok_server.port)))
    assert response.json()["path"] == "/here"
