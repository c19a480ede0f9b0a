"""Where a new message in a shared chat document came from (chat_rooms/origin.py): the rule as a
table, and the reading of a transaction's update on real pycrdt documents holding jupyterlab-chat's
YChat, changed the three ways a chat's shared document changes under collaboration (a client's
update applied, the server's own write, the file's contents set again)."""

from __future__ import annotations

import json

import pytest
from jupyterlab_chat.models import NewMessage, User
from jupyterlab_chat.ychat import YChat
from pycrdt import Doc

from conch_jupyter.chat_rooms.origin import (
    connected_clients,
    everything_of,
    holds_changes,
    inserted_as,
    only_from,
)
from conch_jupyter.chat_rooms.words import FROM_A_CLIENT, FROM_THE_SERVER


@pytest.mark.parametrize(
    ("message_id", "from_a_client", "bot_sender", "heard"),
    [
        ("new", True, False, FROM_A_CLIENT),  # a person typed it in a connected page
        ("new", True, True, FROM_THE_SERVER),  # a client naming a bot user: someone else's
        ("new", False, False, FROM_THE_SERVER),  # the file, read again: data, whoever it names
        ("new", False, True, FROM_THE_SERVER),  # a persona's, or Conch's own
        ("old", True, False, None),  # a message the chat had, sent again
        ("old", False, False, None),  # filled in again from the file, or moved to its time
    ],
)
def test_a_new_message_is_a_persons_only_from_a_connected_client(
    message_id: str, from_a_client: bool, bot_sender: bool, heard: str | None
) -> None:
    seen = {"old"}
    assert (
        inserted_as(message_id, seen=seen, from_a_client=from_a_client, bot_sender=bot_sender)
        == heard
    )


@pytest.mark.parametrize(
    ("clients", "encoded"),
    [
        ([], b"\x00"),
        ([1], b"\x01\x01\xff\xff\xff\xff\x0f"),
        ([300, 2, 300], b"\x02\x02\xff\xff\xff\xff\x0f\xac\x02\xff\xff\xff\xff\x0f"),
    ],
)
def test_a_state_vector_that_has_everything_of_some_clients(
    clients: list[int], encoded: bytes
) -> None:
    assert everything_of(clients) == encoded


@pytest.mark.parametrize(
    ("known", "server", "connected"),
    [({}, 7, set()), ({7: {}}, 7, set()), ({7: {}, 9: {}, 11: {}}, 7, {9, 11})],
)
def test_the_connected_clients_are_the_awarenesss_but_the_servers_own(
    known: dict[int, dict[str, object]], server: int, connected: set[int]
) -> None:
    assert connected_clients(known, server) == connected


@pytest.mark.parametrize(("update", "holds"), [(b"", False), (b"\x00\x00", False)])
def test_an_empty_update_holds_no_change(update: bytes, holds: bool) -> None:
    assert holds_changes(update) is holds


class Chats:
    """A server's YChat and a client's on their own documents, synced as a room syncs them;
    the server document's committed updates, in order."""

    def __init__(self) -> None:
        self.server_doc, self.client_doc = Doc(), Doc()
        self.server, self.client = YChat(ydoc=self.server_doc), YChat(ydoc=self.client_doc)
        self.server.dirty = False
        self.server_doc.apply_update(self.client_doc.get_update())
        self.client_doc.apply_update(self.server_doc.get_update())
        self.updates: list[bytes] = []
        self.server_doc.observe(lambda event: self.updates.append(event.update))

    def client_sends(self, body: str) -> bytes:
        self.client_doc.apply_update(self.server_doc.get_update(self.client_doc.get_state()))
        before = self.client_doc.get_state()
        self.client.add_message(NewMessage(body=body, sender="someone"))
        self.updates.clear()
        self.server_doc.apply_update(self.client_doc.get_update(before))
        [update] = self.updates
        return update

    def server_writes(self, body: str) -> bytes:
        self.updates.clear()
        self.server.add_message(NewMessage(body=body, sender="conch"))
        [update] = self.updates
        return update

    def file_read_again(self, forged: str) -> bytes:
        """The contents set again, as jupyter_server_ydoc's out-of-band reload sets them."""
        content = json.loads(self.server.get())
        content["messages"].append(
            {"id": "forged", "body": forged, "sender": "mallory", "time": 9e9, "raw_time": False}
        )
        self.updates.clear()
        self.server.set(json.dumps(content))
        [update] = self.updates
        return update


async def test_only_a_connected_clients_update_is_from_a_client() -> None:
    chats = Chats()  # in a running loop: YChat schedules its own changes on it
    client = chats.client_doc.client_id
    server = chats.server_doc.client_id
    sent = chats.client_sends("@Researcher hello")
    assert only_from(sent, {client})
    assert only_from(sent, {client, 12345})
    assert not only_from(sent, {12345})  # a client that is not connected
    assert not only_from(sent, set())
    assert not only_from(sent, {server})

    written = chats.server_writes("Conch here")
    assert not only_from(written, {client})
    reloaded = chats.file_read_again("@Researcher go")
    assert not only_from(reloaded, {client})
    # After the reload the client's next message is still its own.
    assert only_from(chats.client_sends("@Researcher again"), {client})


async def test_a_change_that_mixes_a_clients_update_with_the_servers_write_is_not_a_clients() -> (
    None
):
    chats = Chats()
    client = chats.client_doc.client_id
    chats.client.set_user(User(username="someone", name="Someone"))
    update = chats.client_doc.get_update(chats.server_doc.get_state())
    chats.updates.clear()
    with chats.server_doc.transaction():
        chats.server_doc.apply_update(update)
        chats.server.add_message(NewMessage(body="and the server's", sender="conch"))
    [mixed] = chats.updates
    assert holds_changes(mixed)
    assert not only_from(mixed, {client})
