"""pairing.py: the pairings file on a real disk — keys shown once, only their hashes kept."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from conch_jupyter.a2a.door.rules import hash_key
from conch_jupyter.core.files import StoreError
from conch_jupyter.door.pairing import PairingError, PairingStore, paste_text

from ..support.api import Clock


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / "conch" / "pairings.json"


@pytest.fixture
def store(path: Path) -> PairingStore:
    return PairingStore(path, Clock())


ADDRESS = "http://127.0.0.1:8888/a%40b/a2a/writer"


def test_a_pairing_shows_its_key_once_and_keeps_only_its_hash(
    store: PairingStore, path: Path
) -> None:
    made = store.create([("writer", "Writer"), ("researcher", "Researcher")], address=ADDRESS)
    assert made.key.startswith("conch_a2a_")
    assert made.paste == f"Conch pairing for Writer\nAddress: {ADDRESS}\nKey: {made.key}"
    assert made.paste.splitlines() == [
        "Conch pairing for Writer",
        f"Address: {ADDRESS}",
        f"Key: {made.key}",
    ]
    pairing = made.pairing
    assert pairing.agents == ("writer", "researcher")
    assert pairing.remote is False
    assert pairing.label == "Pairing for Writer"
    text = path.read_text()
    assert made.key not in text
    assert hash_key(made.key) in text
    stored = json.loads(text)["pairings"][0]
    assert stored["scopes"] == ["agent:writer", "agent:researcher"]
    public = pairing.to_public()
    assert not {"key", "paste", "key_sha256"} & set(public)
    assert hash_key(made.key) not in json.dumps(public)
    assert store.door()[0].match(made.key) == (pairing.id, False)
    assert store.list() == [pairing]
    assert store.get(pairing.id) == pairing


@pytest.mark.skipif(os.name == "nt", reason="POSIX permissions")
def test_the_file_is_private(store: PairingStore, path: Path) -> None:
    store.create([("writer", "Writer")], address=ADDRESS)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700


def test_removing_a_pairing_revokes_it_at_once(store: PairingStore) -> None:
    kept = store.create([("writer", "Writer")], address=ADDRESS)
    gone = store.create([("writer", "Writer")], address=ADDRESS, remote=True, label="Bot")
    assert gone.pairing.remote is True
    assert gone.pairing.label == "Bot"
    assert store.door()[0].match(gone.key) == (gone.pairing.id, True)
    store.delete(gone.pairing.id)
    assert store.door()[0].match(gone.key) is None
    assert store.door()[0].match(kept.key) == (kept.pairing.id, False)
    with pytest.raises(PairingError):
        store.delete(gone.pairing.id)
    with pytest.raises(PairingError):
        store.get(gone.pairing.id)


def test_another_writer_is_seen_at_once(path: Path) -> None:
    # Two stores on one file (a second server on the same data): a removal by one is seen by
    # the other on its next read, not after a restart.
    first, second = PairingStore(path, Clock()), PairingStore(path, Clock())
    made = first.create([("writer", "Writer")], address=ADDRESS)
    assert second.door()[0].match(made.key) == (made.pairing.id, False)
    second.delete(made.pairing.id)
    assert len(first.door()[0]) == 0


@pytest.mark.parametrize(
    ("agents", "words"),
    [
        ([], "at least one agent"),
        ([("writer", "Writer"), ("writer", "Writer")], "twice"),
        ([(f"a{n}", f"A{n}") for n in range(21)], "at most 20"),
    ],
)
def test_what_a_pairing_may_not_be(
    store: PairingStore, path: Path, agents: list[tuple[str, str]], words: str
) -> None:
    with pytest.raises(PairingError, match=words):
        store.create(agents, address=ADDRESS)
    assert not path.exists()


def test_a_label_is_one_short_line(store: PairingStore) -> None:
    made = store.create([("writer", "Writer")], address=ADDRESS, label="Bot\n\x1b[31m" + "x" * 200)
    assert "\n" not in made.pairing.label
    assert "\x1b" not in made.pairing.label
    assert len(made.pairing.label) == 80


def test_a_hand_edited_file_is_named_and_never_overwritten(store: PairingStore, path: Path) -> None:
    store.create([("writer", "Writer")], address=ADDRESS)
    for text in ("{broken", '{"version": 1, "pairings": [{"id": "p_1"}]}', '{"version": 2}'):
        path.write_text(text)
        with pytest.raises(StoreError, match=r"pairings\.json"):
            store.door()[0]
        with pytest.raises(StoreError):
            store.create([("writer", "Writer")], address=ADDRESS)
        assert path.read_text() == text


def test_a_scope_that_is_not_an_agent_is_refused_on_read(store: PairingStore, path: Path) -> None:
    store.create([("writer", "Writer")], address=ADDRESS)
    data = json.loads(path.read_text())
    data["pairings"][0]["scopes"] = ["admin"]
    path.write_text(json.dumps(data))
    with pytest.raises(StoreError, match="agent:<id>"):
        store.list()


def test_paste_text() -> None:
    assert paste_text("Writer", "https://x/a2a/writer", "conch_a2a_k") == (
        "Conch pairing for Writer\nAddress: https://x/a2a/writer\nKey: conch_a2a_k"
    )
