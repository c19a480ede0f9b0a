"""core/sealed.py: secrets on disk only as a Fernet token; never overwritten if unreadable."""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Callable
from pathlib import Path

import pytest
from cryptography.fernet import Fernet

from conch_jupyter.core.files import StoreError
from conch_jupyter.core.sealed import SealedFile

SECRET = "sk-test-5f3a9c0e-very-secret"


@pytest.fixture
def places(tmp_path: Path) -> tuple[Path, Path]:
    data = tmp_path / "data"
    data.mkdir()
    return data / "models.secrets.json", tmp_path / "keys" / "conch-seal.key"


def test_round_trip_across_instances(places: tuple[Path, Path]) -> None:
    path, key = places
    sealed = SealedFile(path, key)
    assert sealed.get("writer") is None
    assert sealed.names() == []
    sealed.set("writer", SECRET)
    sealed.set("researcher", "other")
    again = SealedFile(path, key)
    assert again.get("writer") == SECRET
    assert again.names() == ["researcher", "writer"]
    again.delete("writer")
    again.delete("never-there")
    assert SealedFile(path, key).names() == ["researcher"]


def test_the_file_holds_only_the_token(places: tuple[Path, Path]) -> None:
    path, key = places
    SealedFile(path, key).set("writer", SECRET)
    raw = path.read_bytes()
    assert SECRET.encode() not in raw
    assert b"writer" not in raw
    assert Fernet(key.read_bytes().strip()).decrypt(raw.strip())  # nothing but a token
    assert SECRET.encode() not in key.read_bytes()


@pytest.mark.skipif(os.name == "nt", reason="POSIX permissions")
def test_files_are_private(places: tuple[Path, Path]) -> None:
    path, key = places
    SealedFile(path, key).set("writer", SECRET)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(key.stat().st_mode) == 0o600
    assert stat.S_IMODE(key.parent.stat().st_mode) == 0o700


def test_the_key_is_made_on_first_write_only(places: tuple[Path, Path]) -> None:
    path, key = places
    sealed = SealedFile(path, key)
    sealed.get("x")
    sealed.names()
    sealed.delete("x")
    assert not key.exists()
    assert not path.exists()
    sealed.set("x", "1")
    assert key.exists()


def test_two_sealed_files_may_share_a_key(places: tuple[Path, Path]) -> None:
    path, key = places
    SealedFile(path, key).set("a", "1")
    other = SealedFile(path.with_name("a2a.secrets.json"), key)
    other.set("b", "2")
    assert SealedFile(path, key).get("a") == "1"
    assert other.get("b") == "2"


def test_the_key_may_not_sit_beside_the_sealed_file(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="outside its folder"):
        SealedFile(tmp_path / "models.secrets.json", tmp_path / "seal.key")


def test_a_wrong_key_is_an_error_and_nothing_is_overwritten(
    places: tuple[Path, Path], tmp_path: Path
) -> None:
    path, key = places
    SealedFile(path, key).set("writer", SECRET)
    before = path.read_bytes()
    wrong = SealedFile(path, tmp_path / "other" / "key")
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "key").write_bytes(Fernet.generate_key())
    attempts: list[Callable[[], object]] = [
        lambda: wrong.get("writer"),
        lambda: wrong.set("writer", "new"),
        lambda: wrong.delete("writer"),
    ]
    for attempt in attempts:
        with pytest.raises(StoreError) as caught:
            attempt()
        assert str(path) in str(caught.value)
        assert "will not overwrite" in str(caught.value)
        assert caught.value.path == path
    assert path.read_bytes() == before
    assert SealedFile(path, key).get("writer") == SECRET


def test_a_missing_key_is_an_error_and_no_new_key_is_made(places: tuple[Path, Path]) -> None:
    path, key = places
    SealedFile(path, key).set("writer", SECRET)
    before = path.read_bytes()
    key.unlink()
    with pytest.raises(StoreError, match=r"key file .* is missing"):
        SealedFile(path, key).set("writer", "new")
    assert not key.exists()
    assert path.read_bytes() == before


def test_a_damaged_file_is_an_error_and_left_alone(places: tuple[Path, Path]) -> None:
    path, key = places
    SealedFile(path, key).set("writer", SECRET)
    damaged = bytearray(path.read_bytes())
    damaged[40] = ord("A") if damaged[40] != ord("A") else ord("B")
    path.write_bytes(bytes(damaged))
    with pytest.raises(StoreError, match="cannot be opened"):
        SealedFile(path, key).names()
    assert path.read_bytes() == bytes(damaged)


def test_plain_text_in_place_of_the_token_is_an_error(places: tuple[Path, Path]) -> None:
    path, key = places
    SealedFile(path, key).set("a", "1")
    path.write_text(json.dumps({"writer": SECRET}))
    with pytest.raises(StoreError) as caught:
        SealedFile(path, key).get("writer")
    assert SECRET not in str(caught.value)


def test_an_unexpected_shape_inside_does_not_echo_the_secret(places: tuple[Path, Path]) -> None:
    path, key = places
    SealedFile(path, key).set("a", "1")
    fernet = Fernet(key.read_bytes().strip())
    path.write_bytes(fernet.encrypt(json.dumps({"writer": [SECRET]}).encode()))
    with pytest.raises(StoreError, match="not a set of named secrets") as caught:
        SealedFile(path, key).get("writer")
    assert SECRET not in str(caught.value)
    assert caught.value.__cause__ is None
    assert caught.value.__context__ is None


def test_a_bad_key_file_is_named(places: tuple[Path, Path]) -> None:
    path, key = places
    key.parent.mkdir()
    key.write_text("not a key")
    with pytest.raises(StoreError) as caught:
        SealedFile(path, key).set("a", "1")
    assert str(key) in str(caught.value)
    assert key.read_text() == "not a key"


def test_repr_shows_no_secret(places: tuple[Path, Path]) -> None:
    path, key = places
    sealed = SealedFile(path, key)
    sealed.set("writer", SECRET)
    assert SECRET not in repr(sealed)
    assert SECRET not in str(vars(sealed))
