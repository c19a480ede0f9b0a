"""The A2A door's rules, pure: who gets in, and how much a key may ask.

No tornado, asyncio or httpx here, and the clock is passed in, so every rule is tested without a
server (tests/unit/test_door_rules.py). The handlers (door/http.py) put each request
through these rules in this order; door/peer.py runs what they let through.

1. A browser never gets in: a request with `Origin` or `Sec-Fetch-Site` is refused. A header key
   is not ambient, but no web page should be able to drive your agents, even with a stolen key.
2. The key (`Authorization: Bearer conch_a2a_…`) is looked up by its SHA-256 (DoorKeys): one
   dict lookup, the same time however many pairings there are. The Jupyter token and the kernel
   key are not door keys. A right key is let on whatever other callers got wrong.
3. A wrong key is throttled (FailureThrottle), as with sign-ins: per address and key prefix, and
   per address however the keys vary; first slower answers, then 429 with Retry-After.
4. From another computer: HTTPS, the door's remote switch and a key marked remote, all three.
5. The agent in the path must be one the key was given; any other looks like nothing is there.
6. The body is read as JSON-RPC (calls.py), then a message must fit the key's bounds
   (message_refusal, then KeyBuckets): its size, one at a time, the day's spend, the month's
   budget, then five at once and 20 a minute.
"""

from __future__ import annotations

import functools
import hashlib
import ipaddress
import math
import re
import secrets
import unicodedata
from collections import OrderedDict, deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Literal

from ...core.policy import NO_POLICY, Policy, PolicyRefused, check_door, check_door_remote
from ...core.text import clean_text

KEY_PREFIX = "conch_a2a_"
# Anything else is not one of our keys: never hashed, never compared, never echoed.
_KEY_SHAPE = re.compile(r"conch_a2a_[A-Za-z0-9_\-]{20,100}")
BROWSER_HEADERS = ("Origin", "Sec-Fetch-Site")


# --- keys ------------------------------------------------------------------------------------


def new_key() -> str:
    return KEY_PREFIX + secrets.token_urlsafe(32)


def hash_key(key: str) -> str:
    """What is stored instead of a key: its SHA-256, in hex (a key has 256 random bits)."""
    return hashlib.sha256(key.encode("ascii")).hexdigest()


def bearer_key(authorization: str | None) -> str | None:
    """The key in an `Authorization: Bearer <key>` header; None when there is none."""
    scheme, _, value = (authorization or "").strip().partition(" ")
    if scheme.lower() != "bearer" or not value.strip():
        return None
    return value.strip()


def key_prefix(key: str) -> str:
    """The part of a presented key the throttle counts failures by (with the address): a caller
    stuck on one stale key is held back without holding back the others on its address."""
    return key[len(KEY_PREFIX) : len(KEY_PREFIX) + 8] if _KEY_SHAPE.fullmatch(key) else ""


class DoorKeys:
    """Every pairing's key, by its SHA-256: (pairing id, marked remote). Built once each time the
    pairings change (pairing.py), so checking a key is one hash and one dict lookup.

    Constant time where it matters: the lookup's time can depend only on the presented key's own
    SHA-256, and that says nothing about any stored key (making a key whose hash shares a chosen
    prefix with a stored hash is as hard as guessing the key), so there is nothing to time.
    """

    def __init__(self, entries: Iterable[tuple[str, str, bool]]) -> None:
        self._by_hash = {digest: (pairing_id, remote) for pairing_id, digest, remote in entries}

    def __len__(self) -> int:
        return len(self._by_hash)

    def with_key(self, pairing_id: str, digest: str, remote: bool) -> DoorKeys:
        """These keys and one more (a new pairing), without building them all again."""
        more = DoorKeys(())
        more._by_hash = {**self._by_hash, digest: (pairing_id, remote)}
        return more

    def match(self, key: str) -> tuple[str, bool] | None:
        """(pairing id, marked remote) of the pairing `key` opens, or None."""
        if not _KEY_SHAPE.fullmatch(key):
            return None  # not one of our keys: never hashed, never compared
        return self._by_hash.get(hash_key(key))


# --- who may knock ----------------------------------------------------------------------------


def browser_refusal(headers: Mapping[str, str]) -> str | None:
    """Words refusing a request a web browser sent, or None."""
    if any(name in headers for name in BROWSER_HEADERS):
        return "The door does not take requests from web browsers."
    return None


@functools.lru_cache(maxsize=1024)
def is_loopback(address: str) -> bool:
    """Whether a request came from this computer (IPv4-mapped IPv6 included). Cached: the same
    few addresses come again and again, and reading one is most of a request's rule work."""
    try:
        ip = ipaddress.ip_address(address.split("%", 1)[0])
    except ValueError:
        return False  # an address we cannot read is not ours
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return ip.is_loopback


def remote_refusal(
    *, address: str, protocol: str, door_remote: bool, key_remote: bool
) -> str | None:
    """Words refusing a request from another computer that does not meet all three rules."""
    if is_loopback(address):
        return None
    if protocol != "https":
        return "From another computer, the door only takes requests over HTTPS."
    if not door_remote:
        return (
            "The door is closed to other computers: its owner has not turned on "
            "c.ConchApp.door_remote."
        )
    if not key_remote:
        return "This key was not made for use from another computer."
    return None


@dataclass(frozen=True)
class ThrottleRules:
    free: int = 5  # failures in the window answered at the normal speed
    lockout: int = 20  # failures in the window after which the source waits (429)
    window: float = 600.0  # seconds a failure counts for
    max_delay: float = 1.0  # the slowest a refusal is answered, in seconds


# However its keys vary, one address is held back after ten times the failures of one key prefix.
ADDRESS_RULES = ThrottleRules(free=50, lockout=200)


class FailureThrottle:
    """Wrong keys per source (an address, or an address and a key prefix), as for sign-ins:
    slower answers, then a wait.

    Only a key that was presented and is wrong counts: a request with no key guesses nothing.
    A right key does not clear the count, so one leaked key cannot be used to reset it while
    guessing others. At most `max_addresses` sources are remembered; the longest quiet is
    forgotten first.
    """

    def __init__(self, rules: ThrottleRules = ThrottleRules(), max_addresses: int = 4096) -> None:
        self.rules = rules
        self.max_addresses = max_addresses
        self._failures: OrderedDict[str, deque[float]] = OrderedDict()

    def wait(self, address: str, now: float) -> int | None:
        """Whole seconds the source must wait before a wrong key is answered; None if not."""
        times = self._recent(address, now)
        if times is None or len(times) < self.rules.lockout:
            return None
        # Locked until the oldest of the last `lockout` failures leaves the window.
        return max(1, math.ceil(times[0] + self.rules.window - now))

    def failed(self, address: str, now: float) -> float:
        """Count a failure; the seconds to hold back the answer to it."""
        times = self._recent(address, now)
        if times is None:
            times = self._failures[address] = deque(maxlen=self.rules.lockout)
            while len(self._failures) > self.max_addresses:
                self._failures.popitem(last=False)
        times.append(now)
        self._failures.move_to_end(address)
        over = len(times) - self.rules.free
        return 0.0 if over <= 0 else min(self.rules.max_delay, 0.1 * 2 ** (over - 1))

    def _recent(self, address: str, now: float) -> deque[float] | None:
        times = self._failures.get(address)
        if times is None:
            return None
        while times and times[0] <= now - self.rules.window:
            times.popleft()
        return times


# --- how much a key may ask -------------------------------------------------------------------


@dataclass(frozen=True)
class DoorBounds:
    """Per key. Constants like ROUND_LIMITS, not settings; tests pass smaller ones."""

    message_chars: int = 16_000
    burst: int = 5  # messages at once …
    per_minute: float = 20.0  # … then this many a minute
    day_usd: float = 1.0  # metered answers per UTC day
    answer_seconds: float = 120.0


DOOR_BOUNDS = DoorBounds()


class TokenBucket:
    """`capacity` at once, refilled at `per_second`: five messages at once, then 20 a minute."""

    def __init__(self, capacity: int, per_second: float, now: float) -> None:
        self.capacity = capacity
        self.per_second = per_second
        self._tokens = float(capacity)
        self._at = now

    def take(self, now: float) -> int | None:
        """Take one token: None when taken, else the whole seconds until one is there."""
        # A clock that steps back must not mint tokens or go negative.
        self._tokens = min(self.capacity, self._tokens + max(0.0, now - self._at) * self.per_second)
        self._at = now
        if self._tokens >= 1.0:
            self._tokens -= 1.0
            return None
        # The epsilon keeps float dust (1.0000000002 s) from adding a whole second.
        return max(1, math.ceil((1.0 - self._tokens) / self.per_second - 1e-9))


def day_start(ts: float) -> float:
    """The start (UTC) of the day holding `ts`: where a key's daily spend restarts."""
    day = datetime.fromtimestamp(ts, tz=timezone.utc)
    return day.replace(hour=0, minute=0, second=0, microsecond=0).timestamp()


@dataclass(frozen=True)
class OverBound:
    """A message a key's bounds refuse: why (the A2A error's reason), and words for the caller."""

    reason: Literal["TOO_LONG", "BUSY", "DAILY_LIMIT", "BUDGET", "RATE_LIMITED"]
    words: str
    retry_after: int | None = None  # RATE_LIMITED: whole seconds


def message_refusal(
    text: str,
    bounds: DoorBounds,
    *,
    busy: bool,
    spent_today: float,
    month_full: bool,
    agent_name: str,
) -> OverBound | None:
    """The bounds that refuse a message before anything is stored or counted, in this order:
    its size, one message at a time (`busy`: the key's last one is still being answered), the
    key's spend today (metered answers it was the payer of), the month's budget for a metered
    agent (`month_full`)."""
    if len(text) > bounds.message_chars:
        return OverBound(
            "TOO_LONG",
            f"A message can be at most {bounds.message_chars:,} characters long "
            f"(this one has {len(text):,}).",
        )
    if busy:
        return OverBound(
            "BUSY",
            "One message at a time: the last one sent with this key is still being answered.",
        )
    if spent_today >= bounds.day_usd:
        return OverBound(
            "DAILY_LIMIT",
            f"This key has used its ${bounds.day_usd:.2f} of answers for today: try again "
            "tomorrow (days start at midnight UTC).",
        )
    if month_full:
        return OverBound(
            "BUDGET", f"{agent_name} cannot take more messages this month: try again later."
        )
    return None


class KeyBuckets:
    """Each key's token bucket: `bounds.burst` messages at once, then `bounds.per_minute`.

    Taken after message_refusal, and after the message is known to be a new one, so a refused
    message costs no token.
    """

    def __init__(self, bounds: DoorBounds) -> None:
        self.bounds = bounds
        self._buckets: dict[str, TokenBucket] = {}

    def take(self, pairing_id: str, now: float) -> OverBound | None:
        bucket = self._buckets.get(pairing_id)
        if bucket is None:
            per_second = self.bounds.per_minute / 60
            bucket = self._buckets[pairing_id] = TokenBucket(self.bounds.burst, per_second, now)
        wait = bucket.take(now)
        if wait is None:
            return None
        return OverBound(
            "RATE_LIMITED",
            f"Too many messages: a key may send {self.bounds.burst} at once, then "
            f"{self.bounds.per_minute:g} a minute. Try again in {wait} s.",
            retry_after=wait,
        )

    def forget(self, pairing_id: str) -> None:
        self._buckets.pop(pairing_id, None)


def is_command(text: str) -> bool:
    """Whether a message is a command ("/…"), however it is dressed: leading spaces, invisible
    characters, a fullwidth "／"."""
    visible = clean_text(text, max(1, len(text)))
    return unicodedata.normalize("NFKC", visible).lstrip().startswith("/")


# --- the gate: rules 1 to 4 in order ----------------------------------------------------------


@dataclass(frozen=True)
class Denied:
    """A request the gate turns away: an HTTP status and words, never a JSON-RPC error."""

    status: int
    code: str
    words: str
    retry_after: int | None = None  # 429: whole seconds
    delay: float = 0.0  # hold the answer back this long (a wrong key, once the address has failed)
    bad_key: bool = False  # 401 for a key that was presented (RFC 6750: error="invalid_token")


class DoorGate:
    """Who gets in: browser, key, throttle, from where. `remote` is c.ConchApp.door_remote;
    `policy` the administrator's: with the door off (`door: false`) a right key is turned away
    in words (403 `policy`), and with `door_remote: false` so is every request from another
    computer, whatever door_remote says. Pairings made before stay, and work again once the
    policy lifts."""

    def __init__(
        self,
        *,
        remote: bool,
        clock: Callable[[], float],
        throttle: FailureThrottle | None = None,
        address_throttle: FailureThrottle | None = None,
        policy: Policy = NO_POLICY,
    ) -> None:
        self.remote = remote
        self.policy = policy
        self.clock = clock
        self.throttle = throttle or FailureThrottle()  # by address and key prefix
        self.address_throttle = address_throttle or FailureThrottle(ADDRESS_RULES)

    def admit(
        self, *, headers: Mapping[str, str], address: str, protocol: str, keys: DoorKeys
    ) -> str | Denied:
        """The id of the pairing whose key the request carries, or why it is turned away."""
        browser = browser_refusal(headers)
        if browser:
            return Denied(403, "browser", browser)
        key = bearer_key(headers.get("Authorization"))
        if key is None:
            return Denied(401, "no_key", "The door needs a key: Authorization: Bearer <key>.")
        found = keys.match(key)
        if found is None:
            return self._wrong_key(address, key)
        pairing_id, key_remote = found
        try:
            check_door(self.policy)
            if not is_loopback(address):
                check_door_remote(self.policy)
        except PolicyRefused as refused:
            return Denied(refused.status, refused.code, refused.message)
        refusal = remote_refusal(
            address=address, protocol=protocol, door_remote=self.remote, key_remote=key_remote
        )
        if refusal:
            return Denied(403, "not_from_there", refusal)
        return pairing_id

    def _wrong_key(self, address: str, key: str) -> Denied:
        now = self.clock()
        source = f"{address} {key_prefix(key)}"
        waits = (self.throttle.wait(source, now), self.address_throttle.wait(address, now))
        wait = max((w for w in waits if w is not None), default=None)
        if wait is not None:
            words = f"Too many wrong keys came from this address: try again in {wait} s."
            return Denied(429, "too_many_failures", words, retry_after=wait)
        delay = max(self.throttle.failed(source, now), self.address_throttle.failed(address, now))
        return Denied(401, "bad_key", "That key opens nothing here.", delay=delay, bad_key=True)
