"""Reading what a person pastes to add an outside agent: its address, and its key if one came too.

Owns `read_paste`. A paste is whatever was copied from somewhere: the three lines Conch's own
pairing prints ("Conch pairing for <Name>" / "Address: <url>" / "Key: <key>"), a URL with
`?key=`/`?token=`, a URL with "key=…", "token=…", "Bearer …" or "Authorization: Bearer …" on its
line or the next, or a URL with a bare key on the next line. The key is always taken out of the
address, because the address is kept in plain text and shown.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import httpx

from ...core.errors import ConchError
from ...core.text import clean_text
from .client import URL_LIMIT

PASTE_LIMIT = 10_000
KEY_LIMIT = 4_096

_URL = re.compile(r"https?://[^\s<>\"'`]+", re.IGNORECASE)
_OTHER_SCHEME = re.compile(r"\b(file|ftp|ftps|sftp|data|javascript|gopher|ws|wss|ssh):", re.I)
_PAIRING = re.compile(r"^\s*Conch pairing for (.+?)\s*$", re.MULTILINE)
_VALUE = r"(?:\"([^\"]*)\"|'([^']*)'|(\S+))"  # quoted, or up to the next space
_KEYED = [
    re.compile(r"\bBearer\s+" + _VALUE, re.IGNORECASE),
    re.compile(r"\b(?:api[_-]?key|key|token|access[_-]?token)\s*[:=]\s*" + _VALUE, re.I),
]
# A line that is one long word with letters and digits: keys look like that, words do not.
_BARE_KEY = re.compile(r"^\s*(?=\S*[A-Za-z])(?=\S*[0-9])([A-Za-z0-9._~+/=-]{16,})\s*$")
_KEY_PARAMS = frozenset({"key", "token", "api_key", "apikey", "access_token"})
_KEY_CHARS = re.compile(r"^[\x21-\x7e]+$")


class PasteError(ConchError, ValueError):
    """A paste Conch cannot add an agent from; the message says what to paste instead (code
    `invalid_paste`, 400)."""

    def __init__(self, words: str) -> None:
        super().__init__("invalid_paste", words)


@dataclass(frozen=True)
class Paste:
    address: httpx.URL  # http(s), absolute, without key, user info or fragment
    key: str | None = None
    name: str | None = None  # the name a Conch pairing text gives the agent

    def __repr__(self) -> str:  # never show the key
        return f"Paste(address={str(self.address)!r}, key={'…' if self.key else None})"


def read_paste(paste: str) -> Paste:
    if len(paste) > PASTE_LIMIT:
        raise PasteError(f"The paste is longer than {PASTE_LIMIT:,} characters.")
    lines = clean_text(paste, PASTE_LIMIT).splitlines()
    at = next(((i, m) for i, line in enumerate(lines) if (m := _URL.search(line))), None)
    if at is None:
        other = _OTHER_SCHEME.search(paste)
        if other:
            raise PasteError(
                f"Only http:// and https:// addresses can be added, not {other.group(1).lower()}:."
            )
        raise PasteError("Paste the agent's address, starting with https:// (or http://).")
    index, found = at
    line = lines[index]
    raw = found.group(0).rstrip(".,;:!?)]}>")
    address, key = _address(raw)
    rest = line[: found.start()] + " " + line[found.start() + len(raw) :]
    next_line = lines[index + 1] if index + 1 < len(lines) else ""
    key = key or _key_in(rest) or _key_in(next_line) or _bare_key(next_line)
    if key is not None:
        key = key.strip("\"'`,;")
        if not key or len(key) > KEY_LIMIT or not _KEY_CHARS.match(key):
            raise PasteError(
                "The key holds spaces or characters a key cannot have, or is too long; "
                "paste it exactly as it was given."
            )
    pairing = _PAIRING.search("\n".join(lines))
    name = pairing.group(1).strip() if pairing else None
    return Paste(address=address, key=key, name=name or None)


def _address(raw: str) -> tuple[httpx.URL, str | None]:
    if len(raw) > URL_LIMIT:
        raise PasteError(f"The address is longer than {URL_LIMIT:,} characters.")
    try:
        url = httpx.URL(raw)
    except (httpx.InvalidURL, UnicodeError):
        raise PasteError("The address is not one Conch can read; check it for typos.") from None
    if not url.host:
        raise PasteError("The address has no host; paste the agent's whole address.")
    if url.userinfo:
        raise PasteError(
            "Take the user name and password out of the address; paste the key after it instead "
            "(key=…)."
        )
    key = None
    kept: list[tuple[str, str | int | float | bool | None]] = []
    for name, value in url.params.multi_items():
        if name.lower() in _KEY_PARAMS and value:
            key = key or value
        else:
            kept.append((name, value))
    if key is not None:
        url = url.copy_with(query=str(httpx.QueryParams(kept)).encode() or None)
    return url.copy_with(fragment=None), key


def _key_in(text: str) -> str | None:
    for pattern in _KEYED:
        found = pattern.search(text)
        if found:
            return next(group for group in found.groups() if group is not None)
    return None


def _bare_key(line: str) -> str | None:
    found = _BARE_KEY.match(line)
    return found.group(1) if found and "://" not in line else None
