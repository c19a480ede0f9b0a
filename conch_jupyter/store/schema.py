"""The chat store's schema, as migrations: migration n takes a database at user_version n to
n + 1, inside one transaction (store/chats.py runs them)."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable

SCHEMA_VERSION = 10

_V1 = """
CREATE TABLE conversations (
    id TEXT PRIMARY KEY,
    title TEXT NOT NULL DEFAULT '',
    created REAL NOT NULL,
    origin TEXT NOT NULL CHECK (origin IN ('user', 'peer')),
    agent TEXT,
    tainted TEXT,
    pairing_id TEXT,
    context_key TEXT
);
CREATE INDEX conversations_by_origin ON conversations (origin, created);
CREATE UNIQUE INDEX conversations_by_peer ON conversations (pairing_id, context_key)
    WHERE pairing_id IS NOT NULL AND context_key IS NOT NULL;
CREATE TABLE messages (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    id TEXT NOT NULL UNIQUE,
    conversation_id TEXT NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
    role TEXT NOT NULL CHECK (role IN ('user', 'agent', 'outside', 'note')),
    agent TEXT,
    text TEXT NOT NULL,
    created REAL NOT NULL,
    round TEXT
);
CREATE INDEX messages_by_conversation ON messages (conversation_id, seq);
CREATE TABLE events (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    conversation_id TEXT NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
    type TEXT NOT NULL,
    data TEXT NOT NULL,
    created REAL NOT NULL
);
CREATE INDEX events_by_conversation ON events (conversation_id, seq);
CREATE TABLE spend (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    conversation_id TEXT REFERENCES conversations (id) ON DELETE SET NULL,
    agent TEXT,
    payer TEXT,
    usd REAL NOT NULL CHECK (usd >= 0),
    input_tokens INTEGER NOT NULL DEFAULT 0,
    output_tokens INTEGER NOT NULL DEFAULT 0,
    created REAL NOT NULL
);
CREATE INDEX spend_by_created ON spend (created);
CREATE INDEX spend_by_conversation ON spend (conversation_id);
CREATE TABLE contexts (
    conversation_id TEXT NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
    outside_id TEXT NOT NULL,
    context_id TEXT NOT NULL,
    PRIMARY KEY (conversation_id, outside_id)
) WITHOUT ROWID;
"""


def _to_v1(db: sqlite3.Connection) -> None:
    # Statement by statement: executescript() would commit, and a migration is one transaction.
    for statement in _V1.split(";"):
        if statement.strip():
            db.execute(statement)


# The door's tasks (door/service.py): what a paired agent asked and how it ended, so GetTask and
# ListTasks answer after the reply, scoped to the pairing and the agent it was sent to.
_V2 = """
CREATE TABLE door_tasks (
    id TEXT PRIMARY KEY,
    pairing_id TEXT NOT NULL,
    agent TEXT NOT NULL,
    context_id TEXT NOT NULL,
    conversation_id TEXT REFERENCES conversations (id) ON DELETE SET NULL,
    state TEXT NOT NULL,
    asked TEXT NOT NULL,
    asked_id TEXT NOT NULL,
    reply TEXT,
    words TEXT,
    created REAL NOT NULL,
    updated REAL NOT NULL
);
CREATE INDEX door_tasks_by_pairing ON door_tasks (pairing_id, agent, created)
"""


def _to_v2(db: sqlite3.Connection) -> None:
    for statement in _V2.split(";"):
        if statement.strip():
            db.execute(statement)


def _to_v3(db: sqlite3.Connection) -> None:
    # Spend Conch counted itself (a reply cut off by Stop or a deadline, a server that reports
    # no usage), so the ledger tells an estimate from what the provider billed.
    db.execute("ALTER TABLE spend ADD COLUMN estimated INTEGER NOT NULL DEFAULT 0")


# Agents that work in the notebook: a chat's notebook (`path`) and its `mode`, and `tool` messages
# (what a tool call ran and what came back, with `tool` holding the call: name, id, code, state).
# The messages table is rebuilt because SQLite cannot change a CHECK constraint in place.
_V4 = """
ALTER TABLE conversations ADD COLUMN path TEXT;
ALTER TABLE conversations ADD COLUMN mode TEXT NOT NULL DEFAULT 'ask'
    CHECK (mode IN ('ask', 'auto', 'read'));
CREATE TABLE messages_v4 (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    id TEXT NOT NULL UNIQUE,
    conversation_id TEXT NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
    role TEXT NOT NULL CHECK (role IN ('user', 'agent', 'outside', 'note', 'tool')),
    agent TEXT,
    text TEXT NOT NULL,
    created REAL NOT NULL,
    round TEXT,
    tool TEXT
);
INSERT INTO messages_v4 (seq, id, conversation_id, role, agent, text, created, round)
    SELECT seq, id, conversation_id, role, agent, text, created, round FROM messages;
DROP TABLE messages;
ALTER TABLE messages_v4 RENAME TO messages;
CREATE INDEX messages_by_conversation ON messages (conversation_id, seq);
CREATE INDEX conversations_by_path ON conversations (path) WHERE path IS NOT NULL
"""


def _to_v4(db: sqlite3.Connection) -> None:
    for statement in _V4.split(";"):
        if statement.strip():
            db.execute(statement)


def _to_v5(db: sqlite3.Connection) -> None:
    # The door bounds what a key spends a day (spent_since(day, payer)), for every message: by
    # this index that reads the key's own rows of the day, not every chat's of the day.
    db.execute("CREATE INDEX spend_by_payer ON spend (payer, created)")


def _to_v6(db: sqlite3.Connection) -> None:
    # Where a user's message came from when not from the user's own page ("kernel": the kernel
    # key, which code an agent runs holds too), so the chat can say so and ask before it goes out.
    db.execute("ALTER TABLE messages ADD COLUMN via TEXT")


def _to_v7(db: sqlite3.Connection) -> None:
    # Long chats read by the page (store/pages.py): a page of messages brings the events and the
    # ledger rows of its own time, found by these indexes rather than by reading the whole chat.
    db.execute("CREATE INDEX events_by_time ON events (conversation_id, created)")
    db.execute("CREATE INDEX spend_by_conversation_time ON spend (conversation_id, created)")


# Cost in sight (issue 23): which reply a ledger row paid for (`message_id`, so each reply shows its
# tokens and cost), a chat's own spending limit set in its header (`limit_usd`; NULL: the server's
# c.ConchApp.chat_limit_usd), and the month's budget set in Settings (`limits`, name "month"; no
# row: c.ConchApp.monthly_budget_usd). A page of a long chat finds its replies' rows by message.
_V8 = """
ALTER TABLE spend ADD COLUMN message_id TEXT;
CREATE INDEX spend_by_message ON spend (message_id);
ALTER TABLE conversations ADD COLUMN limit_usd REAL CHECK (limit_usd >= 0);
CREATE TABLE limits (
    name TEXT PRIMARY KEY,
    usd REAL NOT NULL CHECK (usd >= 0)
) WITHOUT ROWID
"""


def _to_v8(db: sqlite3.Connection) -> None:
    for statement in _V8.split(";"):
        if statement.strip():
            db.execute(statement)


# Rooms in Jupyter Chat (issue 33): a chat kept for a `.chat` file, found again by the file's own
# id (`chat_id`, its `metadata.id`, which a rename keeps) and named by its path now (`chat_file`).
_V9 = """
ALTER TABLE conversations ADD COLUMN chat_file TEXT;
ALTER TABLE conversations ADD COLUMN chat_id TEXT;
CREATE UNIQUE INDEX conversations_by_chat_id ON conversations (chat_id) WHERE chat_id IS NOT NULL
"""


def _to_v9(db: sqlite3.Connection) -> None:
    for statement in _V9.split(";"):
        if statement.strip():
            db.execute(statement)


# Your MCP servers (issue 39): each server you add, its tools as it last listed them and its last
# problem. The values of its environment and headers are sealed apart (mcp.secrets.json); only
# their names are here.
_V10 = """
CREATE TABLE mcp_servers (
    id TEXT PRIMARY KEY,
    name TEXT NOT NULL UNIQUE COLLATE NOCASE,
    transport TEXT NOT NULL CHECK (transport IN ('stdio', 'http')),
    command TEXT,
    args TEXT NOT NULL DEFAULT '[]',
    url TEXT,
    env_names TEXT NOT NULL DEFAULT '[]',
    header_names TEXT NOT NULL DEFAULT '[]',
    tools TEXT NOT NULL DEFAULT '[]',
    started REAL,
    problem TEXT,
    created REAL NOT NULL
)
"""


def _to_v10(db: sqlite3.Connection) -> None:
    db.execute(_V10)


# Migration n takes a database at user_version n to n + 1, inside one transaction.
_MIGRATIONS: tuple[Callable[[sqlite3.Connection], None], ...] = (
    _to_v1,
    _to_v2,
    _to_v3,
    _to_v4,
    _to_v5,
    _to_v6,
    _to_v7,
    _to_v8,
    _to_v9,
    _to_v10,
)
