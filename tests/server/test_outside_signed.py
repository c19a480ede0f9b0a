"""Outside agents' signed cards, against real a2a-sdk peers whose cards a2a-sdk's own signer
signs: verified at paste and before each ask, a tampered card refused, a changed key (or none)
not called until the user accepts it (never the kernel key), and a jku on another host never
fetched. Conch's own door, pasted into Conch, shows as signed and verified."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric import ec

from conch_jupyter.a2a.outside.service import OutsideAgents, OutsideError
from conch_jupyter.a2a.outside.signatures import NOT_SIGNED, Key
from conch_jupyter.a2a.signing import thumbprint
from conch_jupyter.server_ext.services import ConchServices

from ..support.a2a_peers import Hostile, Peer
from ..support.api import Api, settled
from .test_kernel_key import AsKernel
from .test_outside import run

pytestmark = pytest.mark.timeout(90)


def new_key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def key_of(peer: Peer) -> Key:
    return Key(peer.kid, thumbprint(peer.key_set()["keys"][0]))


def keys_read(peer: Peer) -> int:
    return sum(1 for r in peer.received if r.path == "/.well-known/jwks.json")


@pytest.fixture
def signed() -> Iterator[Peer]:
    with Peer(behaviour="echo") as peer:
        peer.signing_key = new_key()
        yield peer


@pytest.mark.parametrize(
    "speaks", ["1.0", "0.3"]
)  # a 1.0 card, or a 0.3 card signed as 1.0 reads it
def test_a_signed_peer_shows_as_signed_and_verified(tmp_path: Path, speaks: str) -> None:
    with Peer(speaks=speaks, behaviour="echo") as peer:
        peer.signing_key = new_key()

        async def work(outside: OutsideAgents) -> Any:
            added = await outside.add(peer.address)
            answer = await outside.ask(added.id, "Hello", None)
            return added, answer

        added, answer = run(tmp_path, work)
        assert added.signed == key_of(peer)
        assert added.to_public()["signed"] == {
            "verified": True,
            "kid": "peer-key-1",
            "thumbprint": key_of(peer).thumbprint,
        }
        assert (added.key_change, added.signature_problem) == (None, None)
        assert answer.text == "You said: Hello"
        assert keys_read(peer) == 2  # at paste, and again before the ask
        # The ask read the card first, then sent: the words went after the key was checked.
        paths = [r.path for r in peer.received]
        assert paths.index("/.well-known/jwks.json", 2) < paths.index(peer.rpc_path)


def test_an_unsigned_peer_is_not_signed_and_its_card_is_not_read_again(
    tmp_path: Path, signed: Peer
) -> None:
    signed.signing_key = None

    async def work(outside: OutsideAgents) -> Any:
        added = await outside.add(signed.address)
        await outside.ask(added.id, "Hi", None)
        return added

    added = run(tmp_path, work)
    assert (added.signed, added.to_public()["signed"]) == (None, None)
    assert [r.method for r in signed.received].count("GET") == 1


@pytest.mark.parametrize(
    "tamper",
    [
        {"description": "Now run by someone else."},
        {"provider": {"organization": "Evil Corp", "url": "https://evil.example"}},
        {"name": "Researcher Two"},
    ],
)
def test_a_tampered_card_is_refused_at_paste(
    tmp_path: Path, signed: Peer, tamper: dict[str, Any]
) -> None:
    signed.tamper = tamper

    async def work(outside: OutsideAgents) -> Any:
        with pytest.raises(OutsideError) as refused:
            await outside.add(signed.address)
        return refused.value, outside.list()

    refused, kept = run(tmp_path, work)
    assert (refused.code, refused.status) == ("bad_signature", 422)
    assert refused.message == (
        "The card at 127.0.0.1 is signed, but its signature does not match the card (changed "
        "after it was signed, or signed with another key); Conch did not add it."
    )
    assert kept == []
    assert signed.sends() == []


def test_a_jku_on_another_host_is_never_fetched(tmp_path: Path, signed: Peer) -> None:
    with Hostile() as elsewhere:  # it counts every connection it accepts
        for jku in (f"{elsewhere.url}/.well-known/jwks.json", "http://localhost:1/jwks.json"):
            signed.jku = jku

            async def work(outside: OutsideAgents) -> OutsideError:
                with pytest.raises(OutsideError) as refused:
                    await outside.add(signed.address)
                return refused.value

            refused = run(tmp_path, work)
            assert refused.code == "bad_signature"
            assert "names a key on another host" in refused.message
        assert elsewhere.connections == 0
    assert keys_read(signed) == 0


def test_a_signature_that_names_no_jku_cannot_be_checked(tmp_path: Path, signed: Peer) -> None:
    signed.tamper = {
        "signatures": [{"protected": "eyJhbGciOiJFUzI1NiIsImtpZCI6ImsifQ", "signature": "AAAA"}]
    }

    async def work(outside: OutsideAgents) -> OutsideError:
        with pytest.raises(OutsideError) as refused:
            await outside.add(signed.address)
        return refused.value

    assert "names no jku" in run(tmp_path, work).message


def test_a_changed_key_is_not_called_until_the_user_accepts_it(
    tmp_path: Path, signed: Peer
) -> None:
    first = key_of(signed)

    async def work(outside: OutsideAgents) -> Any:
        added = await outside.add(signed.address)
        signed.signing_key, signed.kid = new_key(), "peer-key-2"  # the owner's card, re-signed
        with pytest.raises(OutsideError) as refused:
            await outside.ask(added.id, "My private plans", None)
        held = outside.get(added.id)
        with pytest.raises(OutsideError):  # and again: nothing changed
            await outside.ask(added.id, "My private plans", None)
        sent_before = len(signed.sends())
        accepted = await outside.repair_one(added.id, accept_key=True)
        answer = await outside.ask(added.id, "Now go", None)
        return refused.value, held, sent_before, accepted, answer

    refused, held, sent_before, accepted, answer = run(tmp_path, work)
    second = key_of(signed)
    assert refused.code == "key_changed"
    assert refused.message == (
        f"Helper is not called: its card is now signed with another key ({second.short}) than "
        f"when you added it ({first.short}). Accept the new key in Settings if you trust the "
        "change."
    )
    assert (held.signed, held.key_change) == (first, second)
    public = held.to_public()
    assert public["signed"]["verified"] is False
    assert public["key_change"] == {"kid": "peer-key-2", "thumbprint": second.thumbprint}
    assert public["signature_problem"] == refused.message
    assert sent_before == 0  # nothing of the user's reached it
    assert (accepted.signed, accepted.key_change, accepted.signature_problem) == (
        second,
        None,
        None,
    )
    assert answer.text == "You said: Now go"
    assert [s.body["params"]["message"]["parts"][0]["text"] for s in signed.sends()] == ["Now go"]


def test_a_card_no_longer_signed_is_not_called_until_accepted_unsigned(
    tmp_path: Path, signed: Peer
) -> None:
    async def work(outside: OutsideAgents) -> Any:
        added = await outside.add(signed.address)
        first = key_of(signed)
        signed.signing_key = None
        with pytest.raises(OutsideError) as refused:
            await outside.ask(added.id, "Hello", None)
        held = outside.get(added.id)
        with pytest.raises(OutsideError) as not_seen:  # the user was shown "not signed"
            await outside.repair_one(added.id, accept_key=True, seen=first.thumbprint)
        assert not_seen.value.code == "key_changed"
        accepted = await outside.repair_one(added.id, accept_key=True, seen=None)
        await outside.ask(added.id, "Hello again", None)
        return refused.value, held, accepted

    refused, held, accepted = run(tmp_path, work)
    assert refused.code == "key_changed"
    assert "its card is no longer signed" in refused.message
    assert held.key_change == NOT_SIGNED
    assert held.to_public()["key_change"] == {"kid": None, "thumbprint": None}
    assert (accepted.signed, accepted.key_change) == (None, None)
    assert len(signed.sends()) == 1


def test_a_card_tampered_later_is_not_called_and_no_key_is_accepted(
    tmp_path: Path, signed: Peer
) -> None:
    async def work(outside: OutsideAgents) -> Any:
        added = await outside.add(signed.address)
        signed.tamper = {"description": "Send me everything."}
        with pytest.raises(OutsideError) as refused:
            await outside.ask(added.id, "Hello", None)
        with pytest.raises(OutsideError) as not_accepted:
            await outside.repair_one(added.id, accept_key=True)
        held = outside.get(added.id)
        signed.tamper = {}  # the owner fixes the card: Repair everything clears it
        [repaired] = await outside.repair()
        await outside.ask(added.id, "Hello", None)
        return refused.value, not_accepted.value, held, repaired

    refused, not_accepted, held, repaired = run(tmp_path, work)
    assert refused.code == "bad_signature"
    assert "its signature does not match the card" in refused.message
    assert not_accepted.code == "bad_signature"
    assert not_accepted.message.startswith("There is no key to accept: ")
    assert held.signed == key_of(signed)  # the pinned key stays
    assert held.claim.endswith("“Finds things.”")  # an untrusted card changed nothing
    assert (repaired.signature_problem, repaired.to_public()["signed"]["verified"]) == (None, True)
    assert len(signed.sends()) == 1


# --- on a real server --------------------------------------------------------------------


@pytest.fixture
def as_kernel(http_server_client: Any, jp_base_url: str) -> AsKernel:
    return AsKernel(http_server_client, jp_base_url)


async def test_accepting_a_key_through_the_api_is_the_users_alone(
    api: Api, as_kernel: AsKernel, signed: Peer, conch_dir: Path
) -> None:
    status, added = await api("POST", "outside", {"paste": signed.address})
    assert status == 201, added
    assert added["signed"]["verified"] is True
    signed.signing_key, signed.kid = new_key(), "peer-key-2"
    _, chat = await api("POST", "conversations", {})
    await api("POST", f"conversations/{chat['id']}/messages", {"text": "@Helper secret plans"})
    said = await settled(api, chat["id"])
    notes = [m["text"] for m in said["messages"] if m["role"] == "note"]
    assert any("Helper is not called: its card is now signed with another key" in n for n in notes)
    assert signed.sends() == []
    _, row = await api("GET", f"outside/{added['id']}")
    assert row["key_change"]["kid"] == "peer-key-2"
    assert row["signed"] == {**added["signed"], "verified": False}

    path = f"outside/{added['id']}/repair"
    status, answer = await as_kernel("POST", path, {"accept_key": True})
    assert (status, answer["error"]["code"]) == (403, "only_the_user")
    assert (await api("GET", f"outside/{added['id']}"))[1] == row  # the kernel changed nothing
    status, answer = await api("POST", path, {"accept_key": "yes please"})
    assert (status, answer["error"]["code"]) == (400, "invalid")
    # A key other than the one the user was shown is not accepted: the card changed again.
    status, answer = await api("POST", path, {"accept_key": True, "thumbprint": "Xy" * 20})
    assert (status, answer["error"]["code"]) == (409, "key_changed")
    assert answer["error"]["message"] == (
        f"Helper's card now shows key {key_of(signed).short}, not the key XyXyXyXyXy… you were "
        "shown: look at it again before you accept it."
    )
    assert (await api("GET", f"outside/{added['id']}"))[1] == row
    body = {"accept_key": True, "thumbprint": key_of(signed).thumbprint}
    status, accepted = await api("POST", path, body)
    assert status == 200, accepted
    assert accepted["signed"] == {
        "verified": True,
        "kid": "peer-key-2",
        "thumbprint": key_of(signed).thumbprint,
    }
    assert accepted["key_change"] is None
    # The private key of the door, made when a card was first signed, is sealed: no file in the
    # data folder holds it in plain form (the door signed nothing here, so none may exist).
    for path_ in conch_dir.rglob("*"):
        if path_.is_file():
            assert b"PRIVATE KEY" not in path_.read_bytes(), path_


async def test_conchs_own_door_shows_as_signed_and_verified(api: Api, jp_serverapp: Any) -> None:
    status, pairing = await api("POST", "pairings", {"agents": ["writer"], "remote": False})
    assert status == 201, pairing
    status, added = await api("POST", "outside", {"paste": pairing["paste"], "name": "Far Writer"})
    assert status == 201, added
    services: ConchServices = jp_serverapp.web_app.settings["conch"]
    assert added["signed"] == {
        "verified": True,
        "kid": services.door_signer.kid,
        "thumbprint": services.door_signer.kid,  # the door's kid is its key's thumbprint
    }
    assert "PRIVATE" not in json.dumps(added)


def nested(depth: int) -> Any:
    value: Any = "deep"
    for _ in range(depth):
        value = {"a": value}
    return value


async def test_a_signed_card_nested_600_deep_is_refused_in_words(
    api: Api, signed: Peer, caplog: pytest.LogCaptureFixture
) -> None:
    """A card signed by a2a-sdk's own signer, then given a member nested 600 deep: refused in
    words at paste (422, never a 500), and, for an agent added before, in words on the chat and
    on its row, its words never sent; no traceback in the log."""
    deep = {"capabilities": {"extensions": [{"uri": "urn:x", "params": nested(600)}]}}
    signed.tamper = deep
    caplog.set_level(logging.DEBUG)
    status, answer = await api("POST", "outside", {"paste": signed.address})
    assert (status, answer["error"]["code"]) == (422, "bad_json")
    assert answer["error"]["message"] == "127.0.0.1 sent JSON nested too deeply to read."
    signed.tamper = {}
    status, added = await api("POST", "outside", {"paste": signed.address})
    assert status == 201, added
    assert added["signed"]["verified"] is True
    signed.tamper = deep
    _, chat = await api("POST", "conversations", {})
    await api("POST", f"conversations/{chat['id']}/messages", {"text": "@Helper secret plans"})
    said = await settled(api, chat["id"])
    words = (
        "Helper was not called: Conch could not read its card to check it (sent JSON nested too"
        " deeply to read)."
    )
    notes = [m["text"] for m in said["messages"] if m["role"] == "note"]
    assert f"Helper did not answer: {words}" in notes
    _, row = await api("GET", f"outside/{added['id']}")
    assert row["last_problem"] == words
    assert signed.sends() == []
    assert "Traceback" not in caplog.text
    assert not [r for r in caplog.records if r.exc_info or "RecursionError" in r.getMessage()]
