"""Where a new message in a shared chat document came from, as pure functions: a person's only
when a client connected to the chat's room sent it through the chat's own transport.

Under collaboration a `.chat` is a shared document (jupyterlab-chat's YChat on a pycrdt `Doc`)
that changes in several ways: a client's update arrives through the room's WebSocket and is
applied to the server's document; the server writes into it itself (Conch, a Jupyter AI persona);
and jupyter_server_ydoc fills it again from the file when the file changes on disk (its
out-of-band reload, the server's own write too). Neither the sender a message names nor the
transaction's origin (None in all three) tells them apart. What does is who authored the change:
every piece of a shared document carries the Y client id of the document that made it. What
the server writes carries its own document's id; what a client sent carries the client's, the
same id the client announces in the room's awareness while it is connected. So a change came
from clients when it holds something and everything in it was made by a connected client, none
by the server.

A transaction's update (`TransactionEvent.update`, Yjs' v1 encoding) is read with pycrdt's own
`get_update(update, state)`, which drops what a state vector says is had already: given a state
vector that has every connected client at the highest clock, nothing of the update is left
exactly when all of it came from those clients.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable

from pycrdt import get_update

from .words import FROM_A_CLIENT, FROM_THE_SERVER

# A state vector's clocks are 32-bit (yrs): this one says "everything of that client".
_EVERYTHING = 2**32 - 1


def _var_uint(number: int) -> bytes:
    """lib0's unsigned variable-length integer, as Yjs encodes state vectors."""
    out = bytearray()
    while True:
        low, number = number & 0x7F, number >> 7
        if not number:
            out.append(low)
            return bytes(out)
        out.append(low | 0x80)


def everything_of(clients: Iterable[int]) -> bytes:
    """A state vector (Yjs' v1 encoding) that has all of each client's changes."""
    ids = sorted(set(clients))
    return _var_uint(len(ids)) + b"".join(_var_uint(c) + _var_uint(_EVERYTHING) for c in ids)


def holds_changes(update: bytes) -> bool:
    """Whether an update adds anything (a v1 update starts with its count of clients' groups)."""
    return bool(update) and update[0] != 0


def only_from(update: bytes, clients: Collection[int]) -> bool:
    """Whether a transaction's update adds something, all of it made by `clients`."""
    if not clients or not holds_changes(update):
        return False
    return not holds_changes(get_update(update, everything_of(clients)))


def connected_clients(awareness_clients: Iterable[int], server: int) -> frozenset[int]:
    """The clients connected to a room: those its awareness knows, the server's own document
    (which has its slot in the awareness too) not among them."""
    return frozenset(awareness_clients) - {server}


def inserted_as(
    message_id: str, *, seen: Collection[str], from_a_client: bool, bot_sender: bool
) -> str | None:
    """How a message inserted into a shared chat document is heard, in the chat's action names:
    a person's (`FROM_A_CLIENT`) only when a connected client sent it and names no bot user
    as its sender; any other new one is someone else's words (`FROM_THE_SERVER`: data); a
    message the chat had already (filled in again from the file, moved to its server time) is
    no new message (None)."""
    if message_id in seen:
        return None
    if from_a_client and not bot_sender:
        return FROM_A_CLIENT
    return FROM_THE_SERVER
