"""store/chats.py: the chat store on a real SQLite file."""

from __future__ import annotations

import os
import re
import sqlite3
import stat
import time
import uuid
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path

import pytest

from conch_jupyter.core.files import StoreError
from conch_jupyter.store.chats import SCHEMA_VERSION, NotFound, Store, month_start
from conch_jupyter.store.rows import ordered_uuid, row_id

from ..support.api import Clock


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / "conch" / "conch.sqlite3"


@pytest.fixture
def store(path: Path) -> Iterator[Store]:
    with Store(path, Clock()) as opened:
        yield opened


def utc(year: int, month: int, day: int, hour: int = 0, minute: int = 0, second: int = 0) -> float:
    return datetime(year, month, day, hour, minute, second, tzinfo=timezone.utc).timestamp()


# -- the file -------------------------------------------------------------------------------------


@pytest.mark.skipif(os.name == "nt", reason="POSIX permissions")
async def test_files_are_private(store: Store, path: Path) -> None:
    await store.create_conversation()
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    for name in (path.name, path.name + "-wal", path.name + "-shm"):
        assert stat.S_IMODE((path.parent / name).stat().st_mode) == 0o600, name


async def test_wal_full_sync_foreign_keys_and_schema_version(store: Store, path: Path) -> None:
    other = sqlite3.connect(path)
    try:
        assert other.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert other.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    finally:
        other.close()

    def settings(db: sqlite3.Connection) -> tuple[int, int]:  # the writer's own connection
        return (
            db.execute("PRAGMA synchronous").fetchone()[0],
            db.execute("PRAGMA foreign_keys").fetchone()[0],
        )

    assert await store._writer.change(settings) == (2, 1)  # FULL, on
    # The reading connection cannot write: every change goes through the writer.
    with pytest.raises(sqlite3.OperationalError, match="readonly"):
        store._db.execute("DELETE FROM conversations")


async def test_reopen_after_close_keeps_everything(path: Path) -> None:
    first = Store(path, Clock())
    chat = await first.create_conversation("kept")
    await first.set_taint(chat.id, {"kind": "person", "by": "Outside"})
    message = await first.add_message(chat.id, "user", "hello")
    event = await first.add_event(chat.id, "round.started", {"named": ["writer"]})
    await first.add_spend(0.25, conversation_id=chat.id)
    await first.set_context_id(chat.id, "o_1", "ctx-1")
    stored = first.get_conversation(chat.id)
    first.close()
    first.close()  # closing twice is harmless
    with Store(path, Clock()) as again:
        assert again.get_conversation(chat.id) == stored
        assert stored is not None
        assert stored.tainted == {"kind": "person", "by": "Outside"}
        assert again.messages(chat.id) == [message]
        assert again.events(chat.id) == [event]
        assert again.spent(chat.id) == 0.25
        assert again.context_id(chat.id, "o_1") == "ctx-1"


def test_a_file_that_is_not_sqlite_is_an_error_and_untouched(path: Path) -> None:
    path.parent.mkdir(parents=True)
    text = b"these are my notes, not a database\n" * 200
    path.write_bytes(text)
    with pytest.raises(StoreError) as caught:
        Store(path, Clock())
    assert str(path) in str(caught.value)
    assert "will not overwrite" in str(caught.value)
    assert caught.value.path == path
    assert path.read_bytes() == text


def test_someone_elses_sqlite_database_is_refused(path: Path) -> None:
    path.parent.mkdir(parents=True)
    other = sqlite3.connect(path)
    other.execute("CREATE TABLE recipes (name TEXT)")
    other.commit()
    other.close()
    before = path.read_bytes()
    with pytest.raises(StoreError, match="not Conch's"):
        Store(path, Clock())
    assert path.read_bytes() == before


def test_a_newer_schema_is_refused(store: Store, path: Path) -> None:
    store._writer.change_now(lambda db: db.execute("PRAGMA user_version = 99"))
    store.close()
    with pytest.raises(StoreError, match="newer Conch"):
        Store(path, Clock())


async def test_a_damaged_database_is_an_error_and_left_alone(path: Path) -> None:
    with Store(path, Clock()) as store:
        chat = await store.create_conversation()
        for n in range(400):
            await store.add_message(chat.id, "user", f"message {n} " + "x" * 500)
    data = bytearray(path.read_bytes())
    for at in range(4096 * 2, len(data), 4096):  # scribble over every page but the first
        data[at : at + 64] = b"\xa5" * 64
    path.write_bytes(bytes(data))

    def open_and_read() -> None:
        with Store(path, Clock()) as damaged:
            damaged.messages(chat.id)

    with pytest.raises(StoreError, match="damaged") as caught:
        open_and_read()
    assert str(path) in str(caught.value)
    assert path.read_bytes() == bytes(data)


async def test_a_full_disk_fails_in_words_and_keeps_what_was_stored(store: Store) -> None:
    chat = await store.create_conversation()
    kept = await store.add_message(chat.id, "user", "before")
    pages = store._db.execute("PRAGMA page_count").fetchone()[0]
    # SQLite's own "disk is full", on the writer's connection.
    await store._writer.change(lambda db: db.execute(f"PRAGMA max_page_count = {pages}"))
    with pytest.raises(StoreError, match="is full"):
        await store.add_message(chat.id, "agent", "x" * 200_000, agent="writer")
    assert store.messages(chat.id) == [kept]
    assert (await store.add_message(chat.id, "note", "small")).text == "small"  # still usable


# -- conversations --------------------------------------------------------------------------------


def test_row_ids_are_uuids_of_version_7_that_sort_by_time(monkeypatch: pytest.MonkeyPatch) -> None:
    """Ordered, so the store adds each row at the end of its index; random after the time."""
    made = ordered_uuid()
    assert (made.version, made.variant) == (7, uuid.RFC_4122)
    assert abs((made.int >> 80) - time.time() * 1000) < 60_000
    message_id = row_id("m")
    assert message_id == f"m_{uuid.UUID(message_id[2:]).hex}"
    assert uuid.UUID(message_id[2:]).version == 7
    ids = []
    for ms in (1_700_000_000_000, 1_700_000_000_001, 1_800_000_000_000):
        monkeypatch.setattr(time, "time_ns", lambda ms=ms: ms * 1_000_000)
        ids += [row_id("c") for _ in range(3)]
        assert {int(i[2:], 16) >> 80 for i in ids[-3:]} == {ms}
    assert [i[:14] for i in ids] == sorted(i[:14] for i in ids)
    assert len(set(ids)) == len(ids)
    assert len({ordered_uuid() for _ in range(10_000)}) == 10_000


async def test_conversations_round_trip_and_order(store: Store) -> None:
    first = await store.create_conversation("first")
    second = await store.create_conversation("second")
    assert re.fullmatch(r"c_[0-9a-f]{32}", first.id)
    assert store.get_conversation(first.id) == first
    assert store.get_conversation("c_nothing") is None
    assert first.to_json() == {
        "id": first.id,
        "title": "first",
        "created": first.created,
        "origin": "user",
        "agent": None,
        "tainted": None,
        "path": None,
        "mode": "ask",
        "chat_file": None,
    }
    assert [c.id for c in store.list_conversations()] == [second.id, first.id]


async def test_a_chat_room_is_found_again_by_its_files_id_after_a_rename_and_a_restart(
    path: Path,
) -> None:
    with Store(path, Clock()) as store:
        made = await store.chat_room("id-1", "work/Plans.chat")
        assert (made.title, made.chat_file, made.path, made.mode) == (
            "Plans",
            "work/Plans.chat",
            None,
            "ask",
        )
        assert made.to_json()["chat_file"] == "work/Plans.chat"
        assert await store.chat_room("id-1", "work/Plans.chat") == made
        moved = await store.chat_room("id-1", "done/Plans 2.chat")
        assert (moved.id, moved.chat_file) == (made.id, "done/Plans 2.chat")
        other = await store.chat_room("id-2", "work/Plans.chat")  # a new file where it was
        assert other.id != made.id
        with pytest.raises(ValueError, match="file's id and path"):
            store.chat_room("", "x.chat")
    with Store(path, Clock()) as again:
        found = again.find_chat_room("id-1")
        assert found is not None
        assert (found.id, found.chat_file) == (made.id, "done/Plans 2.chat")
        assert again.find_chat_room("id-3") is None


async def test_same_instant_conversations_list_newest_first(path: Path) -> None:
    with Store(path, Clock(step=0.0)) as store:
        ids = [(await store.create_conversation()).id for _ in range(3)]
        assert [c.id for c in store.list_conversations()] == ids[::-1]


async def test_peer_chats_are_kept_apart(store: Store) -> None:
    mine = await store.create_conversation("mine")
    door = await store.create_conversation(
        origin="peer", pairing_id="p_1", context_key="ctx", tainted={"kind": "person", "by": "x"}
    )
    await store.create_conversation(origin="peer", pairing_id="p_2", context_key="ctx")
    assert [c.id for c in store.list_conversations()] == [mine.id]
    assert [c.id for c in store.peer_chats("p_1")] == [door.id]
    assert store.find_peer_chat("p_1", "ctx") == door
    assert store.find_peer_chat("p_1", "other") is None
    assert door.tainted == {"kind": "person", "by": "x"}
    with pytest.raises(ValueError, match="origin"):
        await store.create_conversation(origin="robot")  # type: ignore[arg-type]


async def test_agent_and_taint(store: Store) -> None:
    chat = await store.create_conversation()
    await store.set_agent(chat.id, "writer")
    await store.set_taint(chat.id, {"kind": "person", "by": "Outside One"})
    await store.set_taint(chat.id, {"kind": "person", "by": "Someone Later"})
    again = store.get_conversation(chat.id)
    assert again is not None
    assert again.agent == "writer"
    assert again.tainted == {"kind": "person", "by": "Outside One"}
    with pytest.raises(NotFound):
        await store.set_agent("c_x", "w")
    with pytest.raises(NotFound):
        await store.set_taint("c_x", {})


async def test_delete_cascades_but_spend_stays_counted(store: Store) -> None:
    chat = await store.create_conversation()
    keep = await store.create_conversation()
    await store.add_message(chat.id, "user", "gone")
    await store.add_event(chat.id, "round.started", {"named": []})
    await store.set_context_id(chat.id, "o_1", "ctx")
    await store.add_message(keep.id, "user", "kept")
    await store.add_spend(0.5, conversation_id=chat.id)
    assert await store.delete_conversation(chat.id) is True
    assert await store.delete_conversation(chat.id) is False
    assert store.get_conversation(chat.id) is None
    assert store.messages(chat.id) == []
    assert store.events(chat.id) == []
    assert store.context_id(chat.id, "o_1") is None
    assert store.spent_since(0) == 0.5  # deleting a chat gives no budget back
    assert [m.text for m in store.messages(keep.id)] == ["kept"]


# -- messages and events --------------------------------------------------------------------------


async def test_messages_round_trip_order_and_limit(store: Store) -> None:
    chat = await store.create_conversation()
    turn_one = {"turn": 1, "handed_by": None}
    said = [
        await store.add_message(chat.id, "user", "one"),
        await store.add_message(chat.id, "agent", "two", agent="writer", round=turn_one),
        await store.add_message(chat.id, "outside", "three", agent="o_1"),
        await store.add_message(chat.id, "note", "four", round={"turn": 2, "handed_by": "writer"}),
    ]
    assert re.fullmatch(r"m_[0-9a-f]{32}", said[0].id)
    assert store.messages(chat.id) == said
    assert store.messages(chat.id, limit=2) == said[2:]
    assert store.messages(chat.id, limit=0) == []
    assert store.messages(chat.id, limit=99) == said
    assert store.last_agent_message(chat.id) == said[1]
    assert said[0].to_json() == {
        "id": said[0].id,
        "role": "user",
        "text": "one",
        "html": "<p>one</p>\n",  # drawn sealed, for the view to insert as it is
        "created": said[0].created,
    }
    assert said[1].to_json() == {
        "id": said[1].id,
        "role": "agent",
        "agent": "writer",
        "text": "two",
        "html": "<p>two</p>\n",
        "created": said[1].created,
        "round": {"turn": 1, "handed_by": None},
    }


async def test_a_message_may_keep_the_id_it_was_streamed_with(store: Store) -> None:
    chat = await store.create_conversation()
    said = await store.add_message(chat.id, "agent", "hi", agent="w", id="m_streamed")
    assert said.id == "m_streamed"
    assert store.messages(chat.id)[0].id == "m_streamed"


async def test_message_mistakes(store: Store) -> None:
    chat = await store.create_conversation()
    assert store.last_agent_message(chat.id) is None
    with pytest.raises(NotFound, match="There is no chat"):
        await store.add_message("c_nothing", "user", "x")
    with pytest.raises(ValueError, match="role"):
        await store.add_message(chat.id, "system", "x")  # type: ignore[arg-type]


async def test_events_round_trip(store: Store) -> None:
    chat = await store.create_conversation()
    started = await store.add_event(chat.id, "round.started", {"named": ["researcher", "writer"]})
    asking = await store.add_event(chat.id, "round.asking", {"agent": "writer"})
    ended = await store.add_event(chat.id, "round.ended", {"turns": 2, "reason": "done"})
    assert store.events(chat.id) == [started, asking, ended]
    assert store.events(chat.id, after_seq=started.seq) == [asking, ended]
    assert ended.to_json() == {
        "seq": ended.seq,
        "type": "round.ended",
        "created": ended.created,
        "turns": 2,
        "reason": "done",
    }
    with pytest.raises(ValueError, match="may not use"):
        await store.add_event(chat.id, "x", {"seq": 1})
    with pytest.raises(NotFound):
        await store.add_event("c_nothing", "x", {})


async def test_context_ids(store: Store) -> None:
    chat = await store.create_conversation()
    assert store.context_id(chat.id, "o_1") is None
    await store.set_context_id(chat.id, "o_1", "first")
    await store.set_context_id(chat.id, "o_1", "second")
    await store.set_context_id(chat.id, "o_2", "other")
    assert store.context_id(chat.id, "o_1") == "second"
    assert store.context_id(chat.id, "o_2") == "other"


# -- spend ----------------------------------------------------------------------------------------


async def test_spend_sums(path: Path) -> None:
    clock = Clock(now=utc(2024, 2, 29, 23, 59, 57))
    with Store(path, clock) as store:
        chat = await store.create_conversation()  # 23:59:58
        await store.add_spend(0.25, conversation_id=chat.id, agent="writer", input_tokens=10)  # :59
        await store.add_spend(0.5, conversation_id=chat.id, payer="p_1", output_tokens=3)  # March
        await store.add_spend(0.125, payer="p_1")
        await store.add_spend(1.0, payer="p_2")
        assert store.spent(chat.id) == 0.75
        assert store.spent("c_other") == 0.0
        march = month_start(clock.now)
        assert march == utc(2024, 3, 1)
        assert store.spent_since(march) == 1.625
        assert store.spent_since(march, payer="p_1") == 0.625
        assert store.spent_since(0) == 1.875
        for bad in (-0.01, float("nan"), float("inf")):
            with pytest.raises(ValueError, match="spend"):
                await store.add_spend(bad)


@pytest.mark.parametrize(
    ("moment", "start"),
    [
        (utc(2024, 3, 15, 12, 30), utc(2024, 3, 1)),
        (utc(2024, 3, 1), utc(2024, 3, 1)),
        (utc(2024, 2, 29, 23, 59, 59), utc(2024, 2, 1)),
        (utc(2023, 12, 31, 23, 0), utc(2023, 12, 1)),
        (utc(2025, 1, 1, 0, 0, 1), utc(2025, 1, 1)),
    ],
)
def test_month_start_is_utc(moment: float, start: float) -> None:
    assert month_start(moment) == start


async def test_the_ledger_marks_estimates_and_an_old_ledger_is_all_billed(path: Path) -> None:
    from conch_jupyter.store.schema import _V1

    path.parent.mkdir(mode=0o700, parents=True)
    db = sqlite3.connect(path)
    db.executescript(_V1)
    db.execute("INSERT INTO conversations (id, created, origin) VALUES ('c_old', 1.0, 'user')")
    db.execute("INSERT INTO spend (usd, conversation_id, created) VALUES (0.5, 'c_old', 3.0)")
    db.execute("PRAGMA user_version = 1")
    db.commit()
    db.close()
    with Store(path, Clock()) as store:
        await store.add_spend(0.25, conversation_id="c_old", input_tokens=7, estimated=True)
        entries = store.spend_entries("c_old")
        assert [(e.usd, e.estimated) for e in entries] == [(0.5, False), (0.25, True)]
        assert entries[1].to_json()["estimated"] is True
        assert entries[1].input_tokens == 7
        assert store.spent("c_old") == 0.75  # an estimate counts like any other spend


# -- schema v2: the door's tasks ------------------------------------------------------------------


async def test_a_v1_file_is_upgraded_in_place(path: Path) -> None:
    from conch_jupyter.store.schema import _V1

    path.parent.mkdir(mode=0o700, parents=True)
    db = sqlite3.connect(path)
    db.executescript(_V1)
    db.execute(
        "INSERT INTO conversations (id, title, created, origin)"
        " VALUES ('c_old', 'Old', 1.0, 'user')"
    )
    db.execute(
        "INSERT INTO messages (id, conversation_id, role, text, created)"
        " VALUES ('m_old', 'c_old', 'user', 'kept', 2.0)"
    )
    db.execute("INSERT INTO spend (usd, payer, created) VALUES (0.5, 'p_1', 3.0)")
    db.execute("PRAGMA user_version = 1")
    db.commit()
    db.close()
    with Store(path, Clock()) as store:
        assert store._db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
        assert [m.text for m in store.messages("c_old")] == ["kept"]
        assert store.spent_since(0, payer="p_1") == 0.5
        task = await store.door_tasks.create(
            pairing_id="p_1", agent="writer", context_id="x", conversation_id="c_old",
            asked="hi", asked_id="m1",
        )  # fmt: skip
        assert store.door_tasks.get(task.id, "p_1", "writer") == task
    with Store(path, Clock()) as again:  # opening an upgraded file changes nothing
        assert again.door_tasks.get(task.id, "p_1", "writer") == task


async def test_door_tasks_are_scoped_to_their_pairing_and_agent(store: Store) -> None:
    chat = await store.create_conversation(origin="peer", pairing_id="p_1", context_key="writer/c")
    made = [
        await store.door_tasks.create(
            pairing_id="p_1",
            agent="writer",
            context_id=f"c{n % 2}",
            conversation_id=chat.id,
            asked=f"ask {n}",
            asked_id=f"m{n}",
        )
        for n in range(5)
    ]
    other = await store.door_tasks.create(
        pairing_id="p_2", agent="writer", context_id="c0", conversation_id=None,
        asked="theirs", asked_id="m9", state="TASK_STATE_REJECTED", words="No.",
    )  # fmt: skip
    first = made[0]
    assert first.state == "TASK_STATE_WORKING"
    assert first.reply is None
    assert store.door_tasks.get(first.id, "p_2", "writer") is None  # another key's: not found
    assert store.door_tasks.get(first.id, "p_1", "researcher") is None  # another agent's too
    assert store.door_tasks.get(other.id, "p_1", "writer") is None

    ended = await store.door_tasks.finish(first.id, "TASK_STATE_COMPLETED", reply="Done.")
    done = store.door_tasks.get(first.id, "p_1", "writer")
    assert done is not None
    assert ended == done  # the task as it was stored, given back by the change itself
    assert await store.door_tasks.finish("gone", "TASK_STATE_FAILED") is None
    assert (done.state, done.reply) == ("TASK_STATE_COMPLETED", "Done.")
    assert done.updated > first.updated

    page, total = store.door_tasks.page("p_1", "writer", limit=2)
    assert total == 5
    assert [t.id for t in page] == [made[4].id, made[3].id]
    page, total = store.door_tasks.page("p_1", "writer", limit=2, offset=4)
    assert total == 5
    assert [t.id for t in page] == [first.id]
    assert store.door_tasks.page("p_1", "writer", context_id="c1")[1] == 2
    assert store.door_tasks.page("p_1", "writer", state="TASK_STATE_COMPLETED")[1] == 1
    assert store.door_tasks.page("p_1", "writer", updated_after=done.updated)[1] == 1
    assert store.door_tasks.page("p_1", "researcher")[1] == 0

    assert store.door_tasks.fail_unfinished("The server stopped.") == 4
    left = store.door_tasks.get(made[1].id, "p_1", "writer")
    assert left is not None
    assert (left.state, left.words) == (
        "TASK_STATE_FAILED",
        "The server stopped.",
    )
    again = store.door_tasks.get(other.id, "p_2", "writer")
    assert again is not None
    assert again.state == "TASK_STATE_REJECTED"

    await store.add_spend(0.25, conversation_id=chat.id, payer="p_1")
    await store.door_tasks.forget_pairing("p_1")
    assert store.door_tasks.page("p_1", "writer")[1] == 0
    assert store.get_conversation(chat.id) is None
    assert store.door_tasks.get(other.id, "p_2", "writer") is not None
    assert store.spent_since(0, payer="p_1") == 0.25  # a revoked key's spend stays counted


async def test_what_the_door_and_a_reply_store_together(store: Store) -> None:
    # A door chat is made with its agent, in one change.
    chat = await store.create_conversation(
        origin="peer", pairing_id="p_1", context_key="writer/c", agent="writer"
    )
    assert chat.agent == "writer"
    assert store.get_conversation(chat.id) == chat
    # A reply becomes the chat's agent's in the same change as the message.
    mine = await store.create_conversation()
    reply = await store.add_message(mine.id, "agent", "Hi", agent="ann", chat_agent=True)
    stored = store.get_conversation(mine.id)
    assert stored is not None
    assert (stored.agent, store.messages(mine.id)) == ("ann", [reply])
    with pytest.raises(NotFound):
        await store.add_message("c_gone", "agent", "Hi", agent="ann", chat_agent=True)


async def test_data_version_moves_with_each_commit_and_only_then(store: Store) -> None:
    before = store.data_version()
    assert store.data_version() == before  # reading changes nothing
    chat = await store.create_conversation("A chat")
    after_one = store.data_version()
    assert after_one != before
    store.messages(chat.id)
    assert store.data_version() == after_one
    await store.add_message(chat.id, "user", "Hello")
    assert store.data_version() != after_one


async def test_a_payers_spend_of_the_day_is_read_by_its_index(store: Store) -> None:
    chat = await store.create_conversation("A chat")
    for payer in ("pairing-a", "pairing-b", None):
        for _ in range(3):
            await store.add_spend(0.01, conversation_id=chat.id, agent="researcher", payer=payer)
    assert store.spent_since(0.0, payer="pairing-a") == pytest.approx(0.03)
    plan = store._db.execute(
        "EXPLAIN QUERY PLAN SELECT COALESCE(SUM(usd), 0.0) FROM spend"
        " WHERE created >= ? AND payer = ?",
        (0.0, "pairing-a"),
    ).fetchall()
    assert any("spend_by_payer" in str(tuple(row)) for row in plan), [tuple(r) for r in plan]
