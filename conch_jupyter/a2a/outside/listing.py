"""The kept list of outside agents: `agents/outside.json`, and their keys in `a2a.secrets.json`.

Owns the stored file's shape, the agents as the rest of Conch sees them (OutsideAgent), and the
names they get: an outside agent is mentioned as @Name like your own agents, so its name follows
the same rules (core/names.py); no two outside agents read alike, and none may clash with one of
yours (service.py checks that, knowing yours). Keys are kept only in
the sealed file, under "outside:<id>", never in outside.json, `to_public()` or a repr. A file that
does not read is an error naming it, and is never written over (core/files.py).
"""

from __future__ import annotations

import builtins
import dataclasses
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal

import pydantic

from ...core.errors import ConchError
from ...core.files import Stamp, atomic_write_json, file_stamp, read_json
from ...core.names import NAME_MAX, name_problem, same_name, slug_of
from ...core.sealed import SealedFile
from ..wire import Version
from .guard import Home
from .signatures import Key, Pinning


class OutsideError(ConchError):
    """Something about outside agents that did not work; `message` is words for a person.

    `answered` marks an agent that did answer, but with no words to show (its task failed, it
    turned the request down, it wants a sign-in): unlike one that never answered, that is news
    the round can go on after.

    An agent whose card cannot be read or used is 422; a paste or a name that is not one, and an
    address the guard refuses, 400 (asking again will not help); an unknown id 404; an agent
    added twice, or a name that clashes, 409.
    """

    status = 422
    statuses: ClassVar[Mapping[str, int]] = {
        "not_found": 404,
        "exists": 409,
        "name_taken": 409,
        "invalid_paste": 400,
        "invalid_name": 400,
        "refused": 400,
        "policy": 403,  # the administrator's policy does not allow its host
        "key_changed": 409,  # a key to accept that is not the one the user was shown
    }

    def __init__(self, code: str, message: str, *, answered: bool = False) -> None:
        super().__init__(code, message)
        self.answered = answered


@dataclass(frozen=True)
class OutsideAgent:
    id: str
    name: str
    address: str
    endpoint: str
    version: Version
    claim: str  # what its card says about it, phrased as its claim
    has_key: bool
    last_problem: str | None
    card_url: str = ""
    home: Home = "public"  # the kind of network its address is on (guard.py)
    created: float = 0.0
    # Your agent whose name this one's clashes with (kept from before the rule, or a hand-edited
    # file): mentions of it go to yours until it is renamed. Not stored: it follows your agents.
    clashes_with: str | None = None
    # Its card's signature (signatures.py): the key pinned, the key the card shows instead
    # (NOT_SIGNED: none), and why it is not called until you accept that key or it is repaired.
    signed: Key | None = None
    key_change: Key | None = None
    signature_problem: str | None = None

    @property
    def pinning(self) -> Pinning:
        return Pinning(self.signed, self.key_change, self.signature_problem)

    def to_public(self) -> dict[str, Any]:
        """The API's outside agent: never a key."""
        return {
            "id": self.id,
            "name": self.name,
            "address": self.address,
            "claim": self.claim,
            "has_key": self.has_key,
            "last_problem": self.last_problem,
            "version": self.version,
            "created": self.created,
            "clashes_with": self.clashes_with,
            "signed": None
            if self.signed is None
            else {
                "verified": self.signature_problem is None,
                "kid": self.signed.kid,
                "thumbprint": self.signed.thumbprint,
            },
            "key_change": None
            if self.key_change is None
            else {
                "kid": self.key_change.kid or None,
                "thumbprint": self.key_change.thumbprint or None,
            },
            "signature_problem": self.signature_problem,
        }


def _id(value: str) -> str:
    if slug_of(value) != value or len(value) > 60:
        raise ValueError("must be lowercase words joined by “-”")
    return value


def _name(value: str) -> str:
    problem = name_problem(value)
    if problem:
        raise ValueError(problem)
    return value


def _web(value: str) -> str:
    # Room for a pasted address of URL_LIMIT characters with the well-known path after it.
    if len(value) > 2_100 or not value.startswith(("http://", "https://")):
        raise ValueError("must be an http:// or https:// address")
    return value


_Web = Annotated[str, pydantic.AfterValidator(_web)]


class StoredKey(pydantic.BaseModel):
    """A key a card was signed with ("" and "": no longer signed, in a key_change)."""

    kid: str = pydantic.Field(max_length=200)
    thumbprint: str = pydantic.Field(max_length=100)

    def key(self) -> Key:
        return Key(self.kid, self.thumbprint)


def stored_key(key: Key | None) -> StoredKey | None:
    return None if key is None else StoredKey(kid=key.kid, thumbprint=key.thumbprint)


class StoredOutside(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="allow")  # a later Conch's fields survive

    id: Annotated[str, pydantic.AfterValidator(_id)]
    name: Annotated[str, pydantic.AfterValidator(_name)]
    address: _Web
    card_url: _Web
    endpoint: _Web
    version: Version
    home: Home
    claim: str = pydantic.Field(default="", max_length=1_000)
    created: float
    last_problem: str | None = pydantic.Field(default=None, max_length=1_000)
    signed: StoredKey | None = None
    key_change: StoredKey | None = None
    signature_problem: str | None = pydantic.Field(default=None, max_length=1_000)


def pinning_fields(pinning: Pinning) -> dict[str, Any]:
    """The stored fields that keep `pinning` (for OutsideList.update, StoredOutside)."""
    return {
        "signed": stored_key(pinning.signed),
        "key_change": stored_key(pinning.key_change),
        "signature_problem": pinning.problem,
    }


class OutsideFile(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="allow")

    version: Literal[1]
    agents: list[StoredOutside] = []

    @pydantic.model_validator(mode="after")
    def _unique(self) -> OutsideFile:
        for field in ("id", "name"):
            seen = [getattr(a, field).casefold() for a in self.agents]
            if len(set(seen)) != len(seen):
                raise ValueError(f"two outside agents have the same {field} (ignoring case)")
        return self


def fit_name(text: str) -> str:
    """`text` made into an agent name (letters, digits, spaces, "-", "_", "."), or ""."""
    kept = "".join(
        ch
        if ch.isalpha() or ch.isdecimal() or ch in " -_." or unicodedata.category(ch)[0] == "M"
        else " "
        for ch in unicodedata.normalize("NFC", text)
    )
    words = " ".join(kept.split())
    while words and not (words[0].isalpha() or words[0].isdecimal()):
        words = words[1:]
    name = words[:NAME_MAX].rstrip()
    return name if name and name_problem(name) is None else ""


def unique_name(name: str, taken: set[str], joiner: str = " ") -> str:
    """`name`, or "name 2", "name 3"… — the first that reads as none of `taken` (same_name)."""
    candidate, n = name, 1
    while any(same_name(candidate, other) for other in taken):
        n += 1
        candidate = f"{name[: NAME_MAX - len(str(n)) - 1].rstrip(' -')}{joiner}{n}"
    return candidate


class OutsideList:
    """The file and the keys. Lists come from memory while neither file has changed on disk
    (a hand edit is seen at once): every message a chat publishes names its agents, and a fresh
    read would parse the file and unseal the keys each time."""

    def __init__(self, path: Path, secrets: SealedFile) -> None:
        self.path = path
        self._secrets = secrets
        self._cache: tuple[tuple[Stamp, Stamp], builtins.list[OutsideAgent]] | None = None

    def __repr__(self) -> str:
        return f"OutsideList({str(self.path)!r})"

    def list(self) -> builtins.list[OutsideAgent]:
        stamp = (file_stamp(self.path), file_stamp(self._secrets.path))
        if self._cache is None or self._cache[0] != stamp:
            keys = set(self._secrets.names())
            fields = {f.name for f in dataclasses.fields(OutsideAgent)} - {
                "has_key",
                "clashes_with",
                "signed",
                "key_change",
            }
            agents = [
                OutsideAgent(
                    has_key=_secret(s.id) in keys,
                    signed=s.signed.key() if s.signed else None,
                    key_change=s.key_change.key() if s.key_change else None,
                    **{k: getattr(s, k) for k in fields},
                )
                for s in self.read().agents
            ]
            self._cache = (stamp, agents)
        return builtins.list(self._cache[1])

    def get(self, outside_id: str) -> OutsideAgent:
        for agent in self.list():
            if agent.id == outside_id:
                return agent
        raise OutsideError("not_found", f"There is no outside agent with the id “{outside_id}”.")

    def key(self, outside_id: str) -> str | None:
        return self._secrets.get(_secret(outside_id))

    def read(self) -> OutsideFile:
        return read_json(self.path, OutsideFile) or OutsideFile(version=1)

    def append(self, file: OutsideFile, stored: StoredOutside, key: str | None) -> None:
        """Add `stored` to `file` (read just before, on this loop) and keep its key, or neither."""
        file.agents.append(stored)
        self._write(file)
        try:
            if key:
                self._secrets.set(_secret(stored.id), key)
                self._cache = None
            else:  # a key left under this id by an older agent must not be sent to this one
                self._secrets.delete(_secret(stored.id))
                self._cache = None
        except Exception:
            file.agents.remove(stored)
            self._write(file)
            raise

    def remove(self, outside_id: str) -> None:
        file = self.read()
        kept = [a for a in file.agents if a.id != outside_id]
        if len(kept) == len(file.agents):
            raise OutsideError(
                "not_found", f"There is no outside agent with the id “{outside_id}”."
            )
        file.agents = kept
        self._write(file)
        # After the entry is gone: a key left behind by a failure here is never sent, because
        # append() clears any key kept under the id it stores.
        self._secrets.delete(_secret(outside_id))
        self._cache = None

    def _write(self, file: OutsideFile) -> None:
        self._cache = None
        atomic_write_json(self.path, file)

    def update(self, outside_id: str, **changes: Any) -> None:
        """Change stored fields of one agent; the file is written only if something changed."""
        file = self.read()
        for i, stored in enumerate(file.agents):
            if stored.id == outside_id:
                new = StoredOutside.model_validate({**stored.model_dump(), **changes})
                if new != stored:
                    file.agents[i] = new
                    self._write(file)
                return


def _secret(outside_id: str) -> str:
    return f"outside:{outside_id}"
