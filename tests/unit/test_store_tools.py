"""The store's part in agents that work in the notebook: a chat's path and mode, tool messages,
and the migration that brings an older file up to them."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from conch_jupyter.store.chats import SCHEMA_VERSION, NotFound, Store

from .test_store import Clock


async def test_a_chat_has_a_path_and_asks_by_default(tmp_path: Path) -> None:
    with Store(tmp_path / "c.sqlite3", Clock()) as store:
        chat = await store.create_conversation("nb", path="work/analysis.ipynb")
        assert (chat.path, chat.mode) == ("work/analysis.ipynb", "ask")
        assert store.get_conversation(chat.id) == chat
        assert chat.to_json()["path"] == "work/analysis.ipynb"
        assert chat.to_json()["mode"] == "ask"
        await store.set_mode(chat.id, "read")
        again = store.get_conversation(chat.id)
        assert again is not None
        assert again.mode == "read"
        with pytest.raises(ValueError, match="mode"):
            await store.set_mode(chat.id, "everything")  # type: ignore[arg-type]
        with pytest.raises(NotFound):
            await store.set_mode("c_nobody", "auto")
        # A chat made without a notebook has none.
        assert (await store.create_conversation()).path is None


async def test_a_tool_message_keeps_its_call(tmp_path: Path) -> None:
    with Store(tmp_path / "c.sqlite3", Clock()) as store:
        chat = await store.create_conversation()
        call = {"tool": "run_code", "call_id": "t_1", "code": "x = 1", "state": "ran"}
        said = await store.add_message(chat.id, "tool", "(no output)", agent="analyst", tool=call)
        [kept] = store.messages(chat.id)
        assert kept == said
        assert kept.to_json() == {
            "id": said.id,
            "role": "tool",
            "agent": "analyst",
            "text": "(no output)",
            "created": said.created,
            "tool": "run_code",
            "call_id": "t_1",
            "code": "x = 1",
            "state": "ran",
            "output": "(no output)",
        }
        with pytest.raises(ValueError, match="tool call"):
            await store.add_message(chat.id, "tool", "no call")
        with pytest.raises(ValueError, match="tool call"):
            await store.add_message(chat.id, "agent", "hi", tool=call)


async def test_a_v3_file_is_upgraded_in_place(tmp_path: Path) -> None:
    from conch_jupyter.store.schema import _MIGRATIONS

    path = tmp_path / "c.sqlite3"
    db = sqlite3.connect(path)
    for migrate in _MIGRATIONS[:3]:
        migrate(db)
    db.execute(
        "INSERT INTO conversations (id, title, created, origin)"
        " VALUES ('c_old', 'Old', 1.0, 'user')"
    )
    for seq in (1, 2):
        db.execute(
            "INSERT INTO messages (id, conversation_id, role, text, created)"
            " VALUES (?, 'c_old', 'user', ?, ?)",
            (f"m_{seq}", f"kept {seq}", float(seq)),
        )
    db.execute("PRAGMA user_version = 3")
    db.commit()
    db.close()
    with Store(path, Clock()) as store:
        assert store._db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
        old = store.get_conversation("c_old")
        assert old is not None
        assert (old.path, old.mode) == (None, "ask")
        assert [m.text for m in store.messages("c_old")] == ["kept 1", "kept 2"]
        # Sequence numbers go on from where they were: order stays the order of writing.
        added = await store.add_message("c_old", "tool", "out", tool={"tool": "read_notebook"})
        assert added.seq == 3
        yolo = "UPDATE conversations SET mode = 'yolo'"
        with pytest.raises(sqlite3.IntegrityError):
            await store._writer.change(lambda db: db.execute(yolo))
        # A deleted chat still takes its messages with it (the foreign key survived the rebuild).
        await store.delete_conversation("c_old")
        assert store._db.execute("SELECT count(*) FROM messages").fetchone()[0] == 0
