"""Checking an outside agent's card signatures, and what a check means for the key kept for it.

Owns where a signature's key may come from: only the `jku` its protected header names, only on
the host the card came from (the same host as its endpoint, cards.py), fetched through the same
guarded client as the card, with the same limits. A `jku` anywhere else is never fetched, and a
signature that names none cannot be checked (Conch takes no key the card carries itself). The
signature math is a2a/signing.py's.

And the pinning, pure (`after_read`): the key a card was signed with when the agent was added is
kept; a card later signed by another key, or no longer signed, or whose signature does not check
out, keeps the agent from being called until the user accepts the key it now shows (or, for a
signature that does not check out, until a read checks out again). A card that was not signed
and now is has its key kept from then on.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

import httpx

from ...core.deadlines import duration, within
from .. import signing
from .client import A2AClient, CallFailed, same_host


@dataclass(frozen=True)
class Key:
    """A key a card was signed with: its `kid` (the card's word) and its RFC 7638 thumbprint
    (what it is)."""

    kid: str
    thumbprint: str

    @property
    def short(self) -> str:
        return self.thumbprint[:10] + "…"


@dataclass(frozen=True)
class CardCheck:
    """A card's signatures as read: unsigned (all None), checked out (`key`, and `card`: the
    form the signature covers, which is what Conch reads), or not (`problem`: words finishing
    "its signature …")."""

    key: Key | None = None
    card: dict[str, Any] | None = None
    problem: str | None = None


async def check_card(
    client: A2AClient, raw: dict[str, Any], found_at: httpx.URL, pinned: str | None = None
) -> CardCheck:
    """The card's signatures checked with keys from their `jku` on the card's own host; the
    signature by the `pinned` key (a thumbprint) is preferred when several check out."""
    seconds = client.limits.card_seconds
    try:
        return await within(seconds, _check(client, raw, found_at, pinned))
    except asyncio.TimeoutError:
        return CardCheck(
            problem=f"could not be checked: its key was not read within {duration(seconds)}"
        )


async def _check(
    client: A2AClient, raw: dict[str, Any], found_at: httpx.URL, pinned: str | None
) -> CardCheck:
    read = signing.signatures_of(raw)
    if not read:
        return CardCheck()
    try:
        forms = signing.signed_forms(raw)
    except signing.SignatureError as e:
        return CardCheck(problem=f"cannot be checked: the card {e}")
    key_sets: dict[httpx.URL, Any] = {}
    good: list[CardCheck] = []
    reasons: list[str] = []
    for signature in read:
        if isinstance(signature, signing.SignatureError):
            reasons.append(str(signature))
            continue
        try:
            jwk = await _key(client, signature, found_at, key_sets)
        except signing.SignatureError as e:
            reasons.append(str(e))
            continue
        form = next((f for f in forms if signing.checks_out(signature, f.payload, jwk)), None)
        if form is None:
            reasons.append(
                "does not match the card (changed after it was signed, or signed with another key)"
            )
            continue
        good.append(CardCheck(Key(signature.kid, signing.thumbprint(jwk)), form.card))
    if good:
        return next((c for c in good if c.key and c.key.thumbprint == pinned), good[0])
    return CardCheck(problem=reasons[0] if reasons else "does not check out")


async def _key(
    client: A2AClient,
    signature: signing.Signature,
    found_at: httpx.URL,
    key_sets: dict[httpx.URL, Any],
) -> dict[str, Any]:
    if signature.jku is None:
        raise signing.SignatureError(
            "names no jku (where its key is), and Conch takes keys only from there"
        )
    try:
        jku = found_at.join(signature.jku)
    except (httpx.InvalidURL, UnicodeError):
        raise signing.SignatureError("names a jku Conch cannot read") from None
    if jku.scheme not in ("http", "https") or not same_host(jku, found_at):
        host = jku.raw_host.decode("ascii", "replace")[:80] or jku.scheme[:20]
        raise signing.SignatureError(
            f"names a key on another host ({host}); Conch fetches keys only from the host the "
            "card came from"
        )
    if jku.scheme == "http" and found_at.scheme == "https":
        raise signing.SignatureError("names a key at an http:// address from an https:// card")
    if jku not in key_sets:
        try:
            key_sets[jku], _ = await client.fetch("GET", jku, None, client.limits.card_bytes, "1.0")
        except CallFailed as e:
            raise signing.SignatureError(
                f"names a key Conch could not read: its key set {e.words}"
            ) from None
    return signing.key_in(key_sets[jku], signature.kid)


# --- what a read means for the key kept --------------------------------------------------


@dataclass(frozen=True)
class Pinning:
    """What is kept for an agent's card: the key pinned (None: its card was not signed when
    added, or you accepted it unsigned), the key its card shows now instead (`NOT_SIGNED`: no
    longer signed), and why it is not called (None: it may be)."""

    signed: Key | None = None
    key_change: Key | None = None
    problem: str | None = None


NOT_SIGNED = Key("", "")  # a key_change to "no longer signed"


def after_read(name: str, kept: Pinning, check: CardCheck) -> Pinning:
    """The pinning after a read of the card, with words for a problem."""
    pinned = kept.signed
    if check.problem is not None:
        return Pinning(
            pinned,
            None,
            f"{name} is not called: its card is signed, but its signature {check.problem}. "
            "Repair it once its owner fixes the card, or remove it.",
        )
    if check.key is None:
        if pinned is None:
            return Pinning()
        return Pinning(
            pinned,
            NOT_SIGNED,
            f"{name} is not called: its card is no longer signed (it was signed with key "
            f"{pinned.short} when you added it). Accept it unsigned in Settings if you trust "
            "the change.",
        )
    if pinned is None or pinned.thumbprint == check.key.thumbprint:
        return Pinning(check.key)
    return Pinning(
        pinned,
        check.key,
        f"{name} is not called: its card is now signed with another key ({check.key.short}) "
        f"than when you added it ({pinned.short}). Accept the new key in Settings if you trust "
        "the change.",
    )


def accepted(check: CardCheck) -> Pinning:
    """The pinning once the user accepts the key the card shows now (or its being unsigned)."""
    return Pinning(check.key)
