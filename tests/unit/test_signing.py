"""a2a/signing.py against a2a-sdk 1.3's own signer and verifier: the same canonical bytes (its
RFC 8785 code, its parsed card), signatures each side accepts from the other, and the refusals."""

from __future__ import annotations

import contextlib
import copy
import json
from typing import Any

import pytest
from a2a.client.card_resolver import parse_agent_card
from a2a.types import AgentCard
from a2a.utils._jcs import canonicalize
from a2a.utils.signing import (
    _canonicalize_agent_card,
    create_agent_card_signer,
    create_signature_verifier,
)
from cryptography.hazmat.primitives.asymmetric import ec
from google.protobuf import json_format
from hypothesis import example, given, settings
from hypothesis import strategies as st
from jwt import PyJWK

from conch_jupyter.a2a import signing
from conch_jupyter.a2a.door.card import agent_card, agent_card_v03, agent_card_v1
from conch_jupyter.a2a.outside.client import CallFailed, json_of
from conch_jupyter.a2a.reading import parse_card
from conch_jupyter.a2a.wire import WireError
from conch_jupyter.core.nesting import JSON_DEPTH, nests_deeper

CARD_SHAPES = (agent_card, agent_card_v1, agent_card_v03)
ENDPOINT = "https://door.example/a%40b/a2a/ada"

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**53) + 1, max_value=2**53 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)


@given(json_values)
def test_the_canonical_json_is_the_reference_sdks(value: Any) -> None:
    assert signing.canonical_json(value) == canonicalize(value).encode()


@pytest.mark.parametrize("shape", CARD_SHAPES)
def test_what_the_door_signs_is_what_the_reference_sdk_checks(shape: Any) -> None:
    card = shape(name="Ada é 😀", persona="Finds things.\nSafely.", endpoint=ENDPOINT)
    sdk = _canonicalize_agent_card(parse_agent_card(copy.deepcopy(card))).encode()
    assert signing.signed_forms(card)[0].payload == sdk


def peer_card() -> dict[str, Any]:
    """A 0.3 card as an agent that predates 1.0 serves it (members 1.0 maps and drops)."""
    return {
        "name": "Old",
        "description": "",
        "url": "https://old.example/a2a",
        "preferredTransport": "JSONRPC",
        "protocolVersion": "0.3.0",
        "additionalInterfaces": [{"url": "https://old.example/rest", "transport": "HTTP+JSON"}],
        "version": "1",
        "capabilities": {},
        "security": [{"key": []}],
        "securitySchemes": {"key": {"type": "apiKey", "in": "header", "name": "X-Key"}},
        "defaultInputModes": ["text/plain"],
        "defaultOutputModes": ["text/plain"],
        "skills": [{"id": "s", "name": "S", "description": "S.", "tags": [], "security": []}],
        "supportsAuthenticatedExtendedCard": True,
    }


def test_a_0_3_card_is_read_as_the_reference_sdk_reads_it() -> None:
    card = peer_card()
    sdk = _canonicalize_agent_card(parse_agent_card(copy.deepcopy(card))).encode()
    assert signing.signed_forms(card)[0].payload == sdk


def keys() -> tuple[ec.EllipticCurvePrivateKey, dict[str, Any]]:
    key = ec.generate_private_key(ec.SECP256R1())
    return key, signing.public_jwk(key)


def test_the_reference_verifier_accepts_conchs_signature_and_refuses_a_change() -> None:
    key, jwk = keys()
    card = agent_card(name="Ada", persona="Finds things.", endpoint=ENDPOINT)
    signed = {**card, "signatures": [signing.sign(card, key, jwk["kid"], "https://k.example/j")]}
    verify = create_signature_verifier(lambda kid, jku: PyJWK(jwk), ["ES256"])
    verify(parse_agent_card(copy.deepcopy(signed)))
    with pytest.raises(Exception, match="No valid signature"):
        verify(parse_agent_card({**copy.deepcopy(signed), "name": "Eve"}))


def test_conch_accepts_the_reference_signers_signature_and_refuses_a_change() -> None:
    key, jwk = keys()
    proto = json_format.ParseDict(peer_card(), AgentCard(), ignore_unknown_fields=True)
    header = {"alg": "ES256", "kid": jwk["kid"], "jku": "https://old.example/jwks", "typ": "JOSE"}
    create_agent_card_signer(key, header)(proto)  # type: ignore[arg-type]
    served = json_format.MessageToDict(proto)
    [signature] = signing.signatures_of(served)
    assert isinstance(signature, signing.Signature)
    assert (signature.kid, signature.jku) == (jwk["kid"], "https://old.example/jwks")
    forms = signing.signed_forms(served)
    assert signing.checks_out(signature, forms[0].payload, jwk)
    changed = signing.signed_forms({**served, "name": "Eve"})
    assert not any(signing.checks_out(signature, f.payload, jwk) for f in changed)
    _, other = keys()
    assert not signing.checks_out(signature, forms[0].payload, {**other, "kid": jwk["kid"]})


def test_what_is_refused_before_any_key_is_fetched() -> None:
    def protected(header: dict[str, Any]) -> str:
        return signing._b64(json.dumps(header).encode())

    cases = {
        "none": {"alg": "none", "kid": "k"},
        "HS256": {"alg": "HS256", "kid": "k"},  # a public key used as a shared secret
        "no kid": {"alg": "ES256"},
        "extensions": {"alg": "ES256", "kid": "k", "crit": ["b64"], "b64": False},
    }
    for words, header in cases.items():
        [read] = signing.signatures_of(
            {"signatures": [{"protected": protected(header), "signature": "x"}]}
        )
        assert isinstance(read, signing.SignatureError), words
    assert signing.signatures_of({"name": "unsigned"}) == []
    [bad] = signing.signatures_of({"signatures": [{"protected": "!!", "signature": "x"}]})
    assert isinstance(bad, signing.SignatureError)


def test_the_thumbprint_is_rfc_7638s() -> None:
    # RFC 7638 §3.1's example key and thumbprint.
    rsa = {
        "kty": "RSA",
        "n": (
            "0vx7agoebGcQSuuPiLJXZptN9nndrQmbXEps2aiAFbWhM78LhWx4cbbfAAtVT86zwu1RK7aPFFxuhDR1"
            "L6tSoc_BJECPebWKRXjBZCiFV4n3oknjhMstn64tZ_2W-5JsGY4Hc5n9yBXArwl93lqt7_RN5w6Cf0h4"
            "QyQ5v-65YGjQR0_FDW2QvzqY368QQMicAtaSqzs8KJZgnYb9c7d0zgdAZHzu6qMQvRL5hajrn1n91CbO"
            "pbISD08qNLyrdkt-bFTWhAI4vMQFh6WeZu0fM4lFd2NcRwr3XPksINHaQ-G_xBniIqbw0Ls1jF44-csF"
            "Cur-kEgU8awapJzKnqDKgw"
        ),
        "e": "AQAB",
        "alg": "RS256",
        "kid": "2011-04-29",
    }
    assert signing.thumbprint(rsa) == "NzbLsXh8uDCcd-6MNwXF4W_7noWXFZAfHkxZsRGC9Xs"
    _, jwk = keys()
    assert jwk["kid"] == signing.thumbprint(jwk)
    assert "d" not in jwk


@given(
    st.dictionaries(
        st.sampled_from(
            [
                "signatures",
                "url",
                "security",
                "name",
                "skills",
                "securitySchemes",
                "supportsAuthenticatedExtendedCard",
                "additionalInterfaces",
                "capabilities",
            ]
        ),
        json_values,
    )
)
@example({"skills": 5})
@example({"capabilities": 5, "supportsAuthenticatedExtendedCard": True})
@example({"url": 5, "additionalInterfaces": [5, {"url": None}]})
@example({"securitySchemes": {"a": {"type": "apiKey", "in": 5}, "b": 5}, "security": [5, {}]})
@example({"signatures": [5, {"protected": 5}, {"protected": "e30", "signature": ""}]})
@example({"name": 2**60, "securitySchemes": {"a": {"type": []}}})
@example({"signatures": [{"protected": "eyJhbGciOltdLCJraWQiOiJrIn0", "signature": "x"}]})
def test_any_card_is_read_or_refused_in_words(card: dict[str, Any]) -> None:
    """Whatever a card holds, reading its signatures and its signed forms ends in a result or a
    SignatureError, never another exception."""
    for read in signing.signatures_of(card):
        assert isinstance(read, signing.Signature | signing.SignatureError)
    try:
        forms = signing.signed_forms(card)
    except signing.SignatureError:
        return
    assert forms
    assert all(isinstance(f.payload, bytes) for f in forms)


WORDS_OF_BAD_JSON = ("sent JSON nested too deeply to read", "sent something that is not valid JSON")


def _read_or_refusal(data: bytes) -> Any:
    try:
        return json_of(data)
    except CallFailed as refused:
        return refused


def _nested_text(shapes: list[bool], leaf: str, card: bool) -> bytes:
    """JSON text nested once per shape (True: a list, False: an object), written without
    recursion, optionally as a card's member (one object around it)."""
    opening = "".join("[" if is_list else '{"a":' for is_list in shapes)
    closing = "".join("]" if is_list else "}" for is_list in reversed(shapes))
    text = opening + leaf + closing
    if card:
        text = '{"name": "Deep", "signatures": [], "capabilities": {"x": ' + text + "}}"
    return text.encode()


@settings(max_examples=300, deadline=None)
@given(
    shapes=st.lists(st.booleans(), max_size=3000),
    leaf=st.sampled_from(["1", '"x"', "null", "[]", "{}", '"' + "y" * 5000 + '"']),
    card=st.booleans(),
    garbage=st.binary(max_size=40),
)
@example(shapes=[False, True] * 300, leaf='"deep"', card=True, garbage=b"")
def test_json_of_any_nesting_or_size_is_read_or_refused_in_words(
    shapes: list[bool], leaf: str, card: bool, garbage: bytes
) -> None:
    """Hostile JSON from an outside agent, of any nesting, size or shape: read within
    JSON_DEPTH or refused as `bad_json` in words; whatever is read, signatures, signed forms and
    the card's reading end in a result or their own words, never another exception."""
    for data in (_nested_text(shapes, leaf, card), garbage):
        value = _read_or_refusal(data)
        if isinstance(value, CallFailed):
            assert value.code == "bad_json"
            assert value.words in WORDS_OF_BAD_JSON
            continue
        assert not nests_deeper(value, JSON_DEPTH)
        if not isinstance(value, dict):
            continue
        for read in signing.signatures_of(value):
            assert isinstance(read, signing.Signature | signing.SignatureError)
        with contextlib.suppress(signing.SignatureError):
            assert signing.signed_forms(value)
        with contextlib.suppress(WireError):
            parse_card(value)


def test_a_card_nested_past_what_conch_reads_is_refused_in_words() -> None:
    """Not through the client (its own bound comes first): the signed forms measure the card
    before anything copies or walks it."""
    deep: Any = "deep"
    for _ in range(600):
        deep = {"a": [deep]}
    card = {"name": "Deep", "capabilities": {"extensions": [{"params": deep}]}}
    with pytest.raises(signing.SignatureError, match="nests deeper than a card can"):
        signing.signed_forms(card)
    assert nests_deeper(deep, 1199)
    assert not nests_deeper(deep, 1200)
    assert not nests_deeper("x", 0)
    assert nests_deeper([], 0)
