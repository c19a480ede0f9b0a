"""Pairings: who may come in through the A2A door, kept in `<data_dir>/pairings.json`.

A pairing is a key that opens only the agents it was given (scopes `agent:<id>`, a kind of scope
that grants nothing else). The key is shown once, in the answer that made it, as one text the
other side pastes; only its SHA-256 is kept, so the file (or a backup of it) lets nobody in.
Removing a pairing revokes it at once: the door reads the file again whenever it changes.

Not thread-safe: one thread (the Jupyter server's event loop) reads and writes the file.
"""

from __future__ import annotations

import builtins
import json
import re
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal

import pydantic

from ..a2a.door.rules import DoorKeys, hash_key, new_key
from ..core.errors import ConchError
from ..core.files import Stamp, atomic_write_bytes, file_stamp, read_json

SCOPE_PREFIX = "agent:"
LABEL_MAX = 80
AGENTS_MAX = 20


class PairingError(ConchError):
    """A pairing that cannot be made (400 `invalid`) or found (404 `not_found`); `message` is a
    sentence for a person."""

    statuses: ClassVar[Mapping[str, int]] = {"not_found": 404}


def _scope(value: str) -> str:
    if not value.startswith(SCOPE_PREFIX) or len(value) <= len(SCOPE_PREFIX):
        raise ValueError(f"“{value}” is not an agent:<id> scope")
    return value


class StoredPairing(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="allow")

    id: str = pydantic.Field(pattern=r"^p_[0-9a-f]{16}$")
    label: str = pydantic.Field(max_length=LABEL_MAX)
    scopes: list[Annotated[str, pydantic.AfterValidator(_scope)]] = pydantic.Field(min_length=1)
    remote: bool = False
    key_sha256: str = pydantic.Field(pattern=r"^[0-9a-f]{64}$")
    address: str
    created: float


class PairingsFile(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="allow")

    version: Literal[1]
    pairings: list[StoredPairing] = []


@dataclass(frozen=True)
class Pairing:
    id: str
    label: str
    agents: tuple[str, ...]  # agent ids, in the order given: the first one's card is the door's
    remote: bool
    address: str
    created: float

    def to_public(self) -> dict[str, Any]:
        """What GET /pairings shows: never the key, never its hash."""
        return {
            "id": self.id,
            "label": self.label,
            "agents": list(self.agents),
            "scopes": [SCOPE_PREFIX + a for a in self.agents],
            "remote": self.remote,
            "address": self.address,
            "created": self.created,
        }


@dataclass(frozen=True)
class NewPairing:
    """A pairing just made: the only time its key exists outside the caller's hands."""

    pairing: Pairing
    key: str
    paste: str


def paste_text(agent_name: str, address: str, key: str) -> str:
    """The one text the other side pastes (the outside-agent reader relies on these lines)."""
    return f"Conch pairing for {agent_name}\nAddress: {address}\nKey: {key}"


def _pairing(stored: StoredPairing) -> Pairing:
    agents = tuple(s.removeprefix(SCOPE_PREFIX) for s in stored.scopes)
    return Pairing(stored.id, stored.label, agents, stored.remote, stored.address, stored.created)


@dataclass(frozen=True)
class _Known:
    """The file as last read or written, with what the door looks up in it, made once."""

    stamp: Stamp
    file: PairingsFile
    by_id: dict[str, Pairing]
    keys: DoorKeys


def _known(stamp: Stamp, file: PairingsFile) -> _Known:
    by_id = {p.id: _pairing(p) for p in file.pairings}
    keys = DoorKeys((p.id, p.key_sha256, p.remote) for p in file.pairings)
    return _Known(stamp, file, by_id, keys)


class PairingStore:
    """The pairings file. Reads come from memory while the file is unchanged on disk (one stat
    per request), so the door does not parse it for every request, yet a removal (or a hand
    edit) is seen at once. What the door looks up (a pairing by id, a key by its hash) is built
    once per change of the file."""

    def __init__(self, path: Path | str, clock: Callable[[], float]) -> None:
        self.path = Path(path)
        self._clock = clock
        self._cache: _Known | None = None
        self._lines: dict[str, tuple[StoredPairing, str]] = {}  # id → (pairing, its JSON line)

    def __repr__(self) -> str:
        return f"PairingStore({str(self.path)!r})"

    def list(self) -> list[Pairing]:
        return builtins.list(self._current().by_id.values())

    def get(self, pairing_id: str) -> Pairing:
        found = self._current().by_id.get(pairing_id)
        if found is None:
            raise PairingError("not_found", "There is no such pairing.")
        return found

    def door(self) -> tuple[DoorKeys, Mapping[str, Pairing]]:
        """What the door looks up for one request, from one look at the file: the keys, and the
        pairings by id."""
        known = self._current()
        return known.keys, known.by_id

    def create(
        self,
        agents: Sequence[tuple[str, str]],
        *,
        address: str,
        remote: bool = False,
        label: str = "",
    ) -> NewPairing:
        """A pairing for `agents` ((id, name) pairs, first = the card's); `address` is the first
        one's JSON-RPC endpoint as the person who made it reaches it."""
        if not agents:
            raise PairingError("invalid", "Give the pairing at least one agent.")
        if len(agents) > AGENTS_MAX:
            raise PairingError("invalid", f"A pairing can open at most {AGENTS_MAX} agents.")
        ids = [agent_id for agent_id, _ in agents]
        if len(set(ids)) != len(ids):
            raise PairingError("invalid", "An agent is named twice in the pairing.")
        pairing_id = f"p_{uuid.uuid4().hex[:16]}"
        label = " ".join(re.sub(r"[\x00-\x1f\x7f]", " ", label).split())[:LABEL_MAX]
        key = new_key()
        stored = StoredPairing(
            id=pairing_id,
            label=label or f"Pairing for {agents[0][1]}",
            scopes=[SCOPE_PREFIX + agent_id for agent_id in ids],
            remote=remote,
            key_sha256=hash_key(key),
            address=address,
            created=self._clock(),
        )
        # A new file around the pairings already read (and validated): a shallow copy.
        current = self._current().file
        self._write(current.model_copy(update={"pairings": [*current.pairings, stored]}), stored)
        return NewPairing(_pairing(stored), key, paste_text(agents[0][1], address, key))

    def delete(self, pairing_id: str) -> None:
        """Revoke a pairing: its key opens nothing from the next request on."""
        current = self._current().file
        kept = [p for p in current.pairings if p.id != pairing_id]
        if len(kept) == len(current.pairings):
            raise PairingError("not_found", "There is no such pairing.")
        self._write(current.model_copy(update={"pairings": kept}))

    def _current(self) -> _Known:
        """The file as it is on disk now (cached while unchanged); never to be changed: a change
        makes a new PairingsFile and goes through _write."""
        stamp = file_stamp(self.path)
        if self._cache is None or self._cache.stamp != stamp:
            file = read_json(self.path, PairingsFile) or PairingsFile(version=1)
            self._cache = _known(stamp, file)
        return self._cache

    def _write(self, file: PairingsFile, added: StoredPairing | None = None) -> None:
        before = self._cache
        atomic_write_bytes(self.path, self._text(file).encode("utf-8"))
        # What was just written is what the next read would parse: keep it instead, and for one
        # pairing added, add it to what was known rather than build it all again.
        stamp = file_stamp(self.path)
        if added is None or before is None:
            self._cache = _known(stamp, file)
            return
        by_id = {**before.by_id, added.id: _pairing(added)}
        keys = before.keys.with_key(added.id, added.key_sha256, added.remote)
        self._cache = _Known(stamp, file, by_id, keys)

    def _text(self, file: PairingsFile) -> str:
        """The file as indented JSON, one pairing a line. Each pairing's line is made once and
        kept (a stored pairing never changes), so making a pairing does not re-encode them all:
        json's indented encoding is pure Python, about 15 ms for 1,000 pairings."""
        lines = []
        for pairing in file.pairings:
            made = self._lines.get(pairing.id)
            if made is None or made[0] is not pairing:
                made = self._lines[pairing.id] = (pairing, _json(pairing.model_dump(mode="json")))
            lines.append(made[1])
        if len(self._lines) > len(lines):  # some were removed
            for gone in self._lines.keys() - {p.id for p in file.pairings}:
                del self._lines[gone]
        top = file.model_dump(mode="json", exclude={"pairings"})
        fields = [f"  {_json(name)}: {_json(value)}" for name, value in top.items()]
        listed = "[\n" + ",\n".join(f"    {line}" for line in lines) + "\n  ]" if lines else "[]"
        return "{\n" + ",\n".join([*fields, f'  "pairings": {listed}']) + "\n}\n"


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, allow_nan=False)
