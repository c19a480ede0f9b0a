"""Sealed secrets: a small dict of name → secret kept on disk only as a Fernet token.

A SealedFile owns one file (e.g. `models.secrets.json`, `a2a.secrets.json`) and reads it through
a key kept in a separate 0600 key file. The key lives apart from the sealed file on purpose: a
backup or a copied data folder then holds only ciphertext. So the key file may not sit in the
sealed file's folder.

Nothing here keeps a secret in memory between calls, logs one, or shows one in a repr. A sealed
file that cannot be opened (wrong key, missing key, damaged token) is an error naming the file and
is never written over: a new key would lose every secret sealed with the old one.
"""

from __future__ import annotations

import contextlib
import json
from pathlib import Path

import pydantic
from cryptography.fernet import Fernet, InvalidToken

from .files import StoreError, atomic_write_bytes

_LEAVE_IT = "fix or move it away — Conch will not overwrite it"
_Secrets = pydantic.TypeAdapter(dict[str, str])


class SealedFile:
    """Secrets sealed with Fernet. One thread at a time; every call reads the file afresh."""

    def __init__(self, path: Path | str, key_path: Path | str) -> None:
        self.path = Path(path)
        self.key_path = Path(key_path)
        if self.key_path.absolute().parent == self.path.absolute().parent:
            raise ValueError(
                f"The key for {self.path} must be kept outside its folder "
                "(a copy of the folder would otherwise carry the key with the secrets)."
            )

    def __repr__(self) -> str:
        return f"SealedFile({str(self.path)!r}, key_path={str(self.key_path)!r})"

    def get(self, name: str) -> str | None:
        return self._load().get(name)

    def names(self) -> list[str]:
        return sorted(self._load())

    def set(self, name: str, value: str) -> None:
        if not isinstance(value, str):
            raise TypeError("A sealed secret must be a string.")
        secrets = self._load()
        if secrets.get(name) == value:
            return
        secrets[name] = value
        self._save(secrets)

    def delete(self, name: str) -> None:
        secrets = self._load()
        if name not in secrets:
            return  # Nothing to do, so nothing is written (and no key is made).
        del secrets[name]
        self._save(secrets)

    # -- the key ---------------------------------------------------------------------------

    def _fernet(self, *, create: bool) -> Fernet | None:
        try:
            key = self.key_path.read_bytes().strip()
        except FileNotFoundError:
            if not create:
                return None
            key = Fernet.generate_key()
            atomic_write_bytes(self.key_path, key + b"\n")
        except OSError as e:
            raise StoreError(
                f"Could not read the key file {self.key_path}: {e.strerror or e}.", self.key_path
            ) from e
        try:
            return Fernet(key)
        except ValueError as e:
            raise StoreError(
                f"{self.key_path} is not a Conch key file; {_LEAVE_IT}.", self.key_path
            ) from e

    # -- the sealed file -------------------------------------------------------------------

    def _load(self) -> dict[str, str]:
        try:
            token = self.path.read_bytes()
        except FileNotFoundError:
            return {}
        except OSError as e:
            raise StoreError(f"Could not read {self.path}: {e.strerror or e}.", self.path) from e
        fernet = self._fernet(create=False)
        if fernet is None:
            raise StoreError(
                f"{self.path} is sealed, but its key file {self.key_path} is missing, so the "
                f"secrets in it cannot be opened; restore the key file, or move {self.path} "
                "away — Conch will not overwrite it.",
                self.path,
            )
        try:
            plain = fernet.decrypt(token.strip())
        except InvalidToken as e:
            raise StoreError(
                f"{self.path} cannot be opened with the key in {self.key_path} (a different "
                f"key, or a damaged file); {_LEAVE_IT}.",
                self.path,
            ) from e
        secrets: dict[str, str] | None = None
        # The error is raised below, outside this block: a parse error quotes the secret text.
        with contextlib.suppress(ValueError, pydantic.ValidationError):
            secrets = _Secrets.validate_python(json.loads(plain.decode("utf-8")))
        if secrets is None:
            raise StoreError(
                f"{self.path} opened, but what is inside is not a set of named secrets; "
                f"{_LEAVE_IT}.",
                self.path,
            )
        return secrets

    def _save(self, secrets: dict[str, str]) -> None:
        fernet = self._fernet(create=True)
        assert fernet is not None  # create=True always yields a key or raises.
        plain = json.dumps(secrets, ensure_ascii=False, sort_keys=True).encode("utf-8")
        atomic_write_bytes(self.path, fernet.encrypt(plain) + b"\n")
