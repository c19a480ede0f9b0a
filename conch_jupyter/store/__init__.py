"""The chat store: chats, messages, events, the spend ledger and the door's tasks in one SQLite
file, written by one writer thread, and the live side of a chat (`hub`).

Owns the rows (`rows`), the schema and its migrations (`schema`), the database connections
(`db`), the writer (`writer`), the chats (`chats`, whose `Store` is this package's face) and the
door's tasks (`door_tasks`, a part the store holds). May import: `core`; nothing else of
conch_jupyter.
"""

from .chats import NotFound, Store
from .rows import Conversation, DoorTask, Event, Message, Mode, Spend

__all__ = ["Conversation", "DoorTask", "Event", "Message", "Mode", "NotFound", "Spend", "Store"]
