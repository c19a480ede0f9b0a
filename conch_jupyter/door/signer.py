"""The door's signing key: one P-256 key pair, made the first time a card is signed and kept
sealed with Conch's other A2A secrets (`a2a.secrets.json`, core/sealed.py), never in plain form in
the data folder. Its `kid` is its public key's RFC 7638 thumbprint, so it stays the same across
restarts. What it signs is a2a/signing.py's; where the key set is served is door/http.py's
(`{base_url}.well-known/jwks.json`, behind the same bearer key as the cards).
"""

from __future__ import annotations

import json
from typing import Any

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from ..a2a.signing import public_jwk, sign
from ..core.files import StoreError
from ..core.sealed import SealedFile

SECRET_NAME = "door:signing-key"  # noqa: S105 (the name it is sealed under)


class DoorSigner:
    """Signs the door's cards. The key is unsealed once and kept in memory, as a server keeps its
    TLS key: every card it serves is signed with it."""

    def __init__(self, secrets: SealedFile) -> None:
        self._secrets = secrets
        self._key: ec.EllipticCurvePrivateKey | None = None
        self._jwk: dict[str, Any] | None = None

    def __repr__(self) -> str:  # never the key
        return f"DoorSigner({str(self._secrets.path)!r})"

    def _load(self) -> tuple[ec.EllipticCurvePrivateKey, dict[str, Any]]:
        if self._key is None or self._jwk is None:
            pem = self._secrets.get(SECRET_NAME)
            if pem is None:
                made = ec.generate_private_key(ec.SECP256R1())
                pem = made.private_bytes(
                    serialization.Encoding.PEM,
                    serialization.PrivateFormat.PKCS8,
                    serialization.NoEncryption(),
                ).decode("ascii")
                self._secrets.set(SECRET_NAME, pem)
            key = serialization.load_pem_private_key(pem.encode("ascii"), password=None)
            if not isinstance(key, ec.EllipticCurvePrivateKey):
                raise StoreError(
                    f"The door's signing key in {self._secrets.path} is not a P-256 key.",
                    self._secrets.path,
                )
            self._key, self._jwk = key, public_jwk(key)
        return self._key, self._jwk

    @property
    def kid(self) -> str:
        return str(self._load()[1]["kid"])

    def key_set(self) -> bytes:
        """The JWK Set the cards' `jku` names: the public key's members only."""
        return json.dumps({"keys": [self._load()[1]]}).encode()

    def signed(self, card: dict[str, Any], jku: str) -> dict[str, Any]:
        """`card` with its signature (A2A 1.0 §8.4), `jku` naming where the key set is."""
        key, jwk = self._load()
        return {**card, "signatures": [sign(card, key, str(jwk["kid"]), jku)]}
