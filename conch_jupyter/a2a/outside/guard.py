"""The guarded fetch: which addresses Conch may connect to for an outside agent, and only those.

Every request to an outside agent goes through `GuardedTransport`, an httpx transport that wraps
the real one. The rules, per request and so per redirect hop (each hop is a new request here):

- Never: cloud metadata (169.254.169.254, fd00:ec2::254, 100.100.100.200, 192.0.0.192),
  link-local (169.254/16, fe80::/10, any address with a zone), unspecified (0.0.0.0/8, ::),
  multicast, and reserved ranges (240/4 and broadcast, 192.0.0/24, 198.18/15, fec0::/10, 100::/64,
  IPv6 outside 2000::/3), and Teredo tunnels, whose far end cannot be checked.
- Your own network only for an agent that lives there. An agent's "home" is the kind of address
  its own address resolved to when it was added: "loopback" (this computer), "private" (RFC 1918,
  fc00::/7, and 100.64/10 — carrier-grade NAT space, which tailnets such as Tailscale use for
  machines you own) or "public". A request may reach public addresses and its agent's home, so a
  public agent can never be bounced onto this computer or your LAN, and a LAN agent cannot reach
  this computer either.
- HTTPS, except on your own network.
- Only http: and https:.
- Only the hosts an administrator's policy allows (`outside_hosts`), when it names any: a host
  it does not name is never looked up nor contacted, on any hop.

Theory of operation: the transport resolves the name itself, picks the first address the rules
allow and sends the request to that address literally, keeping the name in the Host header and
as the TLS server name (so the certificate is still checked for the name). There is no second
lookup for a rebinding DNS server to answer differently. Numeric hosts are read the way the C
library's inet_aton reads them (1–4 parts, each decimal, 0-octal or 0x-hex), so "2852039166",
"0xA9FEA9FE" and "0251.0376.0251.0376" are 169.254.169.254 here too; IPv6 spellings that carry
an IPv4 address (mapped, compatible, translated, NAT64, 6to4) are judged by the address carried.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from collections.abc import Awaitable, Callable
from typing import Literal

import httpx

from ...core.errors import ConchError
from ...core.policy import NO_POLICY, Policy, PolicyRefused, check_outside_host

Home = Literal["public", "private", "loopback"]
IP = ipaddress.IPv4Address | ipaddress.IPv6Address
Resolver = Callable[[str, int], Awaitable[list[IP]]]

_net = ipaddress.ip_network
_METADATA = frozenset(
    ipaddress.ip_address(a)
    for a in ("169.254.169.254", "169.254.170.2", "100.100.100.200", "192.0.0.192", "fd00:ec2::254")
)
# First match wins; an address in none of these is public (IPv4) or reserved (IPv6 off 2000::/3).
_V4 = [
    (_net("0.0.0.0/8"), "unspecified"),
    (_net("127.0.0.0/8"), "loopback"),
    (_net("169.254.0.0/16"), "link-local"),
    (_net("10.0.0.0/8"), "private"),
    (_net("172.16.0.0/12"), "private"),
    (_net("192.168.0.0/16"), "private"),
    (_net("100.64.0.0/10"), "private"),
    (_net("224.0.0.0/4"), "multicast"),
    (_net("240.0.0.0/4"), "reserved"),
    (_net("192.0.0.0/24"), "reserved"),
    (_net("198.18.0.0/15"), "reserved"),
]
_V6 = [
    (_net("2001::/32"), "tunnel"),
    (_net("fe80::/10"), "link-local"),
    (_net("fec0::/10"), "reserved"),
    (_net("ff00::/8"), "multicast"),
    (_net("fc00::/7"), "private"),
    (_net("100::/64"), "reserved"),
    (_net("2000::/3"), "public"),
]
_NAT64 = (_net("64:ff9b::/96"), _net("64:ff9b:1::/48"))
_TRANSLATED = _net("::ffff:0:0:0/96")
_COMPATIBLE = _net("::/96")
NEVER = {
    "metadata": "a cloud metadata address",
    "link-local": "a link-local address",
    "unspecified": "the unspecified address (0.0.0.0 or ::)",
    "multicast": "a multicast address",
    "reserved": "a reserved address",
    "tunnel": "a tunnel (Teredo) address, whose far end cannot be checked",
}
_OWN = {"loopback": "this computer", "private": "your own network"}
_DIGITS = {8: set("01234567"), 10: set("0123456789"), 16: set("0123456789abcdef")}


class Refused(ConchError):
    """A request the guard will not make; `reason` is words for a person (no key, no body).
    Code `refused`, 400: asking again will not help."""

    def __init__(self, reason: str) -> None:
        super().__init__("refused", reason)
        self.reason = reason


def ipv4_loose(host: str) -> ipaddress.IPv4Address | None:
    """`host` as inet_aton reads it ("127.1", "0x7f000001", "017700000001"), else None."""
    parts = (host[:-1] if host.endswith(".") else host).split(".")
    if not 1 <= len(parts) <= 4:
        return None
    numbers = []
    for part in parts:
        if part[:2].lower() == "0x":
            digits, base = part[2:] or "0", 16
        elif len(part) > 1 and part.startswith("0"):
            digits, base = part[1:], 8
        else:
            digits, base = part, 10
        if not digits or not set(digits.lower()) <= _DIGITS[base]:
            return None
        numbers.append(int(digits, base))
    *head, last = numbers
    if any(n > 255 for n in head) or last >= 256 ** (4 - len(head)):
        return None
    value = last
    for i, n in enumerate(head):
        value += n << (8 * (3 - i))
    return ipaddress.IPv4Address(value)


def literal_address(host: str) -> IP | None:
    """The address a numeric host spells (IPv6 without brackets, IPv4 in any spelling)."""
    if ":" in host:
        try:
            # "%25" is how a zone id is written in a URL; ipaddress wants the bare "%".
            return ipaddress.IPv6Address(host.replace("%25", "%"))
        except ValueError:
            return None
    return ipv4_loose(host)


def kind_of(ip: IP) -> str:
    """ "public", "private", "loopback", or a key of NEVER."""
    if ip in _METADATA:
        return "metadata"
    if isinstance(ip, ipaddress.IPv4Address):
        return next((kind for net, kind in _V4 if ip in net), "public")
    if ip.scope_id:
        return "link-local"
    if ip == ipaddress.IPv6Address("::"):
        return "unspecified"
    if ip == ipaddress.IPv6Address("::1"):
        return "loopback"
    carried = ip.ipv4_mapped or (
        ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
        if ip in _TRANSLATED or ip in _COMPATIBLE
        else None
    )
    if carried is not None:
        return kind_of(carried)  # the socket really connects to the IPv4 address
    tunnelled = ip.sixtofour or (
        ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF) if any(ip in n for n in _NAT64) else None
    )
    if tunnelled is not None:
        # A gateway would carry the request on; only to the public internet is that ours to allow.
        inner = kind_of(tunnelled)
        return inner if inner == "public" or inner in NEVER else "reserved"
    return next((kind for net, kind in _V6 if ip in net), "reserved")


async def system_resolver(host: str, port: int) -> list[IP]:
    """The operating system's answer for `host`, in its order, without repeats."""
    infos = await asyncio.get_running_loop().getaddrinfo(
        host, port, type=socket.SOCK_STREAM, proto=socket.IPPROTO_TCP
    )
    found: list[IP] = []
    for info in infos:
        ip = ipaddress.ip_address(str(info[4][0]).split("%")[0])
        if isinstance(info[4], tuple) and len(info[4]) == 4 and info[4][3]:
            ip = ipaddress.IPv6Address(f"{ip}%{info[4][3]}")  # keep the zone: it is refused
        if ip not in found:
            found.append(ip)
    return found


def _shown(host: str) -> str:
    return host if len(host) <= 80 else host[:79] + "…"


async def addresses(host: str, port: int, resolver: Resolver) -> list[IP]:
    """What `host` means: the address it spells, or the resolver's answer (ConnectError if none)."""
    literal = literal_address(host)
    if literal is not None:
        return [literal]
    if ":" in host:
        raise Refused(f"{_shown(host)} is not an address Conch can read")
    try:
        found = await resolver(host, port)
    except (OSError, UnicodeError) as e:
        raise httpx.ConnectError(f"could not find {_shown(host)}") from e
    if not found:
        raise httpx.ConnectError(f"could not find {_shown(host)}")
    return found


def choose(host: str, found: list[IP], home: Home | None) -> tuple[IP, str]:
    """The first address of `found` the rules allow for an agent at `home` (None: any home)."""
    reasons = []
    for ip in found:
        kind = kind_of(ip)
        if kind in NEVER:
            reasons.append(
                f"{_shown(host)} is {NEVER[kind]} ({ip}), and Conch never connects there"
            )
        elif kind in _OWN and home is not None and kind != home:
            reasons.append(
                f"{_shown(host)} is on {_OWN[kind]} ({ip}), and only an agent whose own address "
                f"is on {_OWN[kind]} may be reached there"
            )
        else:
            return ip, kind
    raise Refused(reasons[0])


def host_and_port(url: httpx.URL) -> tuple[str, int]:
    """The host as it is looked up (IDNA, IPv6 without brackets) and the port; or Refused."""
    if url.scheme not in ("http", "https"):
        given = f", not {url.scheme[:20]}:" if url.scheme else ""
        raise Refused(f"only whole http:// and https:// addresses are allowed{given}")
    if not url.raw_host:
        raise Refused("the address has no host")
    return url.raw_host.decode("ascii"), url.port or (443 if url.scheme == "https" else 80)


async def home_of(url: httpx.URL, resolver: Resolver = system_resolver) -> Home:
    """Where an agent whose address is `url` lives; Refused if Conch may not go there."""
    host, port = host_and_port(url)
    _, kind = choose(host, await addresses(host, port, resolver), None)
    if kind == "public" and url.scheme != "https":
        raise Refused("over the internet Conch only uses https://, and this address is http://")
    return "loopback" if kind == "loopback" else "private" if kind == "private" else "public"


class GuardedTransport(httpx.AsyncBaseTransport):
    """Checks each request by the rules above, then sends it to the address it checked."""

    def __init__(
        self,
        home: Home,
        *,
        resolver: Resolver = system_resolver,
        inner: httpx.AsyncBaseTransport | None = None,
        policy: Policy = NO_POLICY,
    ) -> None:
        self.home: Home = home
        self.policy = policy
        self._resolver = resolver
        self._inner = inner if inner is not None else httpx.AsyncHTTPTransport()

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        url = request.url
        host, port = host_and_port(url)
        try:  # the administrator's hosts, before any name is looked up
            check_outside_host(self.policy, host)
        except PolicyRefused as refused:
            raise Refused(refused.message.removesuffix(".")) from None
        ip, kind = choose(host, await addresses(host, port, self._resolver), self.home)
        if kind == "public" and url.scheme != "https":
            raise Refused(
                f"over the internet Conch only uses https://, and {_shown(host)} was asked for "
                "with http://"
            )
        extensions = dict(request.extensions)
        if url.scheme == "https" and literal_address(host) is None:
            extensions["sni_hostname"] = host  # the certificate is checked for the name
        # The request keeps its headers, Host included: only where it connects changes.
        target = httpx.Request(
            request.method,
            url.copy_with(host=str(ip)),
            headers=request.headers,
            stream=request.stream,
            extensions=extensions,
        )
        return await self._inner.handle_async_request(target)

    async def aclose(self) -> None:
        await self._inner.aclose()


class Guard:
    """What OutsideAgents holds: one resolver, and a fresh real transport per guarded client.

    A fresh connection pool per client keeps a pooled connection to one name from serving a
    request for another name on the same address.
    """

    def __init__(
        self,
        resolver: Resolver = system_resolver,
        inner: Callable[[], httpx.AsyncBaseTransport] = httpx.AsyncHTTPTransport,
    ) -> None:
        self.resolver = resolver
        self._inner = inner

    async def home_of(self, url: httpx.URL) -> Home:
        return await home_of(url, self.resolver)

    def transport(self, home: Home, policy: Policy = NO_POLICY) -> GuardedTransport:
        return GuardedTransport(home, resolver=self.resolver, inner=self._inner(), policy=policy)
