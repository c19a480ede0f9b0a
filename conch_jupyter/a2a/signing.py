"""Signed agent cards (A2A 1.0 §4.4.7, §8.4), pure: what a card's signature covers, making one,
and checking one against a key already fetched. No I/O: the door's key is kept by door/signer.py,
and an outside agent's keys are fetched by a2a/outside/signatures.py.

What a signature covers is not the JSON as served but the card as a 1.0 reader parses it, which is
what a2a-sdk 1.3 signs and checks (its signer and verifier run on its parsed card): the 0.3 members
mapped onto 1.0's where 1.0 has none (`url` with `preferredTransport`, `protocolVersion` and
`additionalInterfaces` become `supportedInterfaces`, `security` becomes `securityRequirements`,
`supportsAuthenticatedExtendedCard` becomes `capabilities.extendedAgentCard`, a 0.3 security
scheme's `type` its 1.0 wrapper) and otherwise dropped, `signatures` removed, every empty string,
list and object removed, then RFC 8785's canonical JSON (JCS). A card signed over its JSON as
served (members and all, `signatures` and empties removed) is accepted too: that form covers
everything the card says. Whichever form a signature covers is the card Conch then reads, so
nothing a signature leaves out can decide where your words go.

A signature is a detached JWS: `protected` (base64url of the header, which must name `alg` and
`kid`; Conch's also names `typ: "JOSE"` and `jku`, where its key is) and `signature`. Only
public-key algorithms are accepted, so a public key can never be used as a shared secret.
"""

from __future__ import annotations

import base64
import binascii
import copy
import hashlib
import json
import math
from dataclasses import dataclass
from typing import Any

import jwt
from cryptography.hazmat.primitives.asymmetric import ec
from jwt import PyJWK
from jwt.exceptions import PyJWTError

from ..core.nesting import JSON_DEPTH, nests_deeper

# Public-key algorithms only: never HS* (a published key used as an HMAC secret) nor "none".
ALGORITHMS = frozenset(
    {"ES256", "ES384", "ES512", "RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "EdDSA"}
)
DOOR_ALGORITHM = "ES256"
MAX_DEPTH = JSON_DEPTH  # deeper than any card; a hostile card cannot exhaust the stack
MAX_SIGNATURES = 8  # more are not looked at
_SAFE_INT = 2**53 - 1
_SCHEME_TYPES = {
    "apiKey": "apiKeySecurityScheme",
    "http": "httpAuthSecurityScheme",
    "oauth2": "oauth2SecurityScheme",
    "openIdConnect": "openIdConnectSecurityScheme",
    "mutualTLS": "mtlsSecurityScheme",
}


class SignatureError(ValueError):
    """A card or signature Conch cannot check; the message finishes "its signature …".

    No ConchError: it becomes words in a card's check (a2a/outside/signatures.py), never an
    answer of its own."""


# --- RFC 8785: the canonical JSON ----------------------------------------------------------


def canonical_json(value: Any) -> bytes:
    """RFC 8785 (JCS): members sorted by their UTF-16 code units, no spaces, strings escaped only
    where JSON must be, numbers as ECMAScript writes them."""
    out: list[str] = []
    _write(value, out, 0)
    return "".join(out).encode("utf-8")


def _write(value: Any, out: list[str], depth: int) -> None:
    if depth > MAX_DEPTH:
        raise SignatureError("nests deeper than a card can")
    if value is None or isinstance(value, bool):
        out.append({None: "null", True: "true", False: "false"}[value])
    elif isinstance(value, int | float):
        out.append(_number(value))
    elif isinstance(value, str):
        out.append(_string(value))
    elif isinstance(value, list):
        out.append("[")
        for i, item in enumerate(value):
            if i:
                out.append(",")
            _write(item, out, depth + 1)
        out.append("]")
    elif isinstance(value, dict):
        out.append("{")
        keys = sorted(value, key=lambda k: str(k).encode("utf-16-be"))
        for i, key in enumerate(keys):
            if not isinstance(key, str):
                raise SignatureError("has a member whose name is not a string")
            if i:
                out.append(",")
            out.append(_string(key))
            out.append(":")
            _write(value[key], out, depth + 1)
        out.append("}")
    else:
        raise SignatureError(f"holds a value JSON has no form for ({type(value).__name__})")


def _string(text: str) -> str:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise SignatureError("holds text that is not Unicode (a lone surrogate)") from None
    # json.dumps without ensure_ascii escapes exactly what RFC 8785 asks: '"', '\\' and the
    # C0 controls (\b \f \n \r \t by name, the rest as \u00xx); all else is written as it is.
    return json.dumps(text, ensure_ascii=False)


def _number(number: float) -> str:
    if isinstance(number, int):
        if abs(number) > _SAFE_INT:
            raise SignatureError("holds a whole number too large for JSON to carry exactly")
        return str(number)
    if not math.isfinite(number):
        raise SignatureError("holds a number JSON cannot write")
    if number == 0:
        return "0"
    # ECMAScript's Number::toString from the shortest round-trip digits Python finds too.
    digits, exponent = _shortest(abs(number))
    sign = "-" if number < 0 else ""
    n = exponent + len(digits)  # the decimal point sits after n digits
    if len(digits) <= n <= 21:
        return sign + digits + "0" * (n - len(digits))
    if 0 < n <= 21:
        return sign + digits[:n] + "." + digits[n:]
    if -6 < n <= 0:
        return sign + "0." + "0" * -n + digits
    e = n - 1
    mantissa = digits[0] + ("." + digits[1:] if len(digits) > 1 else "")
    return f"{sign}{mantissa}e{'+' if e >= 0 else '-'}{abs(e)}"


def _shortest(number: float) -> tuple[str, int]:
    """The shortest digits that read back as `number`, and the power of ten after them."""
    mantissa, _, exp = repr(number).partition("e")
    whole, _, fraction = mantissa.partition(".")
    digits = (whole + fraction).lstrip("0")
    exponent = int(exp or 0) - len(fraction)
    stripped = digits.rstrip("0")
    return stripped, exponent + len(digits) - len(stripped)


# --- what a signature covers ---------------------------------------------------------------


def stripped(value: Any, depth: int = 0) -> Any:
    """`value` with every empty string, list and object removed, at every depth (None: nothing
    is left)."""
    if depth > MAX_DEPTH:
        raise SignatureError("nests deeper than a card can")
    if isinstance(value, dict):
        kept = {k: s for k, v in value.items() if (s := stripped(v, depth + 1)) is not None}
        return kept or None
    if isinstance(value, list):
        items = [s for v in value if (s := stripped(v, depth + 1)) is not None]
        return items or None
    if isinstance(value, str) and not value:
        return None
    return value


def as_v1(card: dict[str, Any]) -> dict[str, Any]:
    """The card as a 1.0 reader takes it: 0.3 members mapped onto 1.0's or dropped, without
    `signatures` (see the module's docstring). A card nested deeper than MAX_DEPTH is
    SignatureError, measured before anything walks it."""
    if nests_deeper(card, MAX_DEPTH):
        raise SignatureError("nests deeper than a card can")
    card = copy.deepcopy(card)
    card.pop("signatures", None)
    if card.pop("supportsAuthenticatedExtendedCard", None):
        capabilities = card.setdefault("capabilities", {})
        if isinstance(capabilities, dict):
            capabilities.setdefault("extendedAgentCard", True)
    url = card.pop("url", None)
    transport = card.pop("preferredTransport", "JSONRPC")
    version = card.pop("protocolVersion", "0.3.0")
    more = card.pop("additionalInterfaces", None) or []
    if "supportedInterfaces" not in card and url:
        interfaces = [{"url": url, "protocolBinding": transport, "protocolVersion": version}]
        for extra in more if isinstance(more, list) else []:
            if isinstance(extra, dict):
                interfaces.append(
                    {
                        "url": extra.get("url"),
                        "protocolBinding": extra.get("transport"),
                        "protocolVersion": version,
                    }
                )
        card["supportedInterfaces"] = interfaces
    security = card.pop("security", None)
    if "securityRequirements" not in card and isinstance(security, list):
        card["securityRequirements"] = _requirements(security)
    skills = card.get("skills")
    for skill in skills if isinstance(skills, list) else []:
        if isinstance(skill, dict):
            old = skill.pop("security", None)
            if "securityRequirements" not in skill and isinstance(old, list):
                skill["securityRequirements"] = _requirements(old)
    schemes = card.get("securitySchemes")
    if not isinstance(schemes, dict):
        return card
    for name, scheme in list(schemes.items()):
        if isinstance(scheme, dict) and str(scheme.get("type")) in _SCHEME_TYPES:
            scheme = dict(scheme)
            wrapper = _SCHEME_TYPES[scheme.pop("type")]
            if wrapper == "apiKeySecurityScheme" and "in" in scheme:
                scheme["location"] = scheme.pop("in")
            # A 1.0 wrapper already beside the 0.3 words is not a member of the wrapper.
            schemes[name] = {wrapper: {k: v for k, v in scheme.items() if k not in _WRAPPERS}}
    return card


_WRAPPERS = frozenset(_SCHEME_TYPES.values())


def _requirements(security: list[Any]) -> list[Any]:
    return [
        {"schemes": {name: {"list": scopes} for name, scopes in entry.items()}}
        if isinstance(entry, dict)
        else entry
        for entry in security
    ]


@dataclass(frozen=True)
class SignedForm:
    """A form of a card a signature may cover: the card Conch reads if it checks out, and the
    bytes signed."""

    card: dict[str, Any]
    payload: bytes


def signed_forms(card: dict[str, Any]) -> list[SignedForm]:
    """The forms a signature on `card` may cover, a 1.0 reader's first (the module's docstring)."""
    forms: list[SignedForm] = []
    served = {k: v for k, v in card.items() if k != "signatures"}
    for form in (as_v1(card), served):
        kept = stripped(form) or {}
        payload = canonical_json(kept)
        if all(f.payload != payload for f in forms):
            forms.append(SignedForm(kept, payload))
    return forms


# --- keys ------------------------------------------------------------------------------------

_THUMBPRINT_MEMBERS = {
    "EC": ("crv", "kty", "x", "y"),
    "RSA": ("e", "kty", "n"),
    "OKP": ("crv", "kty", "x"),
}
PUBLIC_MEMBERS = frozenset({"kty", "crv", "x", "y", "n", "e", "kid", "use", "alg", "key_ops"})


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def thumbprint(jwk: dict[str, Any]) -> str:
    """RFC 7638: the SHA-256 of the key's required public members, base64url. Names a key by
    what it is, whatever `kid` it is given."""
    members = _THUMBPRINT_MEMBERS.get(str(jwk.get("kty")))
    if members is None or not all(isinstance(jwk.get(m), str) for m in members):
        raise SignatureError("names a key of a kind Conch does not know")
    return _b64(hashlib.sha256(canonical_json({m: jwk[m] for m in members})).digest())


def public_jwk(key: ec.EllipticCurvePrivateKey) -> dict[str, Any]:
    """The public half of the door's P-256 key as a JWK, its `kid` its thumbprint: the same key
    keeps the same kid across restarts."""
    numbers = key.public_key().public_numbers()
    jwk: dict[str, Any] = {
        "kty": "EC",
        "crv": "P-256",
        "x": _b64(numbers.x.to_bytes(32, "big")),
        "y": _b64(numbers.y.to_bytes(32, "big")),
    }
    return {**jwk, "kid": thumbprint(jwk), "use": "sig", "alg": DOOR_ALGORITHM}


def sign(
    card: dict[str, Any], key: ec.EllipticCurvePrivateKey, kid: str, jku: str
) -> dict[str, str]:
    """An AgentCardSignature over `card` as a 1.0 reader parses it."""
    payload = canonical_json(stripped(as_v1(card)) or {})  # signed_forms' first
    header = {"typ": "JOSE", "kid": kid, "jku": jku}
    token = jwt.api_jws.encode(payload, key, algorithm=DOOR_ALGORITHM, headers=header)
    protected, _, signature = token.split(".")
    return {"protected": protected, "signature": signature}


# --- checking ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Signature:
    """One of a card's signatures, its protected header read (not yet checked)."""

    protected: str
    signature: str
    alg: str
    kid: str
    jku: str | None


def signatures_of(card: dict[str, Any]) -> list[Signature | SignatureError]:
    """The card's signatures, each read or the reason it cannot be (an empty list: unsigned)."""
    raw = card.get("signatures")
    if raw is None or raw == []:
        return []
    if not isinstance(raw, list):
        return [SignatureError("is not a list of signatures")]
    return [_read(entry) for entry in raw[:MAX_SIGNATURES]]


def _read(entry: Any) -> Signature | SignatureError:
    if not isinstance(entry, dict):
        return SignatureError("is not an object")
    protected, signature = entry.get("protected"), entry.get("signature")
    if not isinstance(protected, str) or not isinstance(signature, str) or len(protected) > 4096:
        return SignatureError("lacks its protected header or its signature")
    try:
        header = json.loads(_unb64(protected))
    except (binascii.Error, ValueError):
        return SignatureError("has a protected header that is not base64url JSON")
    if not isinstance(header, dict):
        return SignatureError("has a protected header that is not an object")
    alg, kid, jku = header.get("alg"), header.get("kid"), header.get("jku")
    if not isinstance(alg, str) or alg not in ALGORITHMS:
        return SignatureError(f"uses an algorithm Conch does not accept ({str(alg)[:20]})")
    if not isinstance(kid, str) or not kid:
        return SignatureError("names no key (no kid)")
    if "crit" in header:  # RFC 7515 §4.1.11: extensions it must understand, and Conch knows none
        return SignatureError("asks for header extensions Conch does not know")
    if jku is not None and not isinstance(jku, str):
        return SignatureError("has a jku that is not an address")
    return Signature(protected, signature, str(alg), kid[:200], jku)


def key_in(key_set: Any, kid: str) -> dict[str, Any]:
    """The public key `kid` names in a JWK Set (SignatureError: none, or not one to check with)."""
    keys = key_set.get("keys") if isinstance(key_set, dict) else None
    if not isinstance(keys, list):
        raise SignatureError("points to a key set that is not a JWK Set")
    for jwk in keys[:50]:
        if isinstance(jwk, dict) and jwk.get("kid") == kid:
            return {k: v for k, v in jwk.items() if k in PUBLIC_MEMBERS}
    raise SignatureError(f"names a key ({kid[:40]}) its key set does not hold")


def checks_out(signature: Signature, payload: bytes, jwk: dict[str, Any]) -> bool:
    """Whether `signature` over `payload` was made by the private half of `jwk`."""
    try:
        key = PyJWK(jwk, algorithm=signature.alg)
        token = f"{signature.protected}.{_b64(payload)}.{signature.signature}"
        jwt.api_jws.decode(token, key, algorithms=[signature.alg])
    except (PyJWTError, ValueError, TypeError):
        return False
    return True
