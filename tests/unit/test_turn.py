"""rounds/turn.py: one turn against a scripted model server on loopback, a real SQLite store, a Hub.

Every way a turn can end — done, failed, past its deadline, cancelled — and what each leaves:
the reply kept, the live deltas, and the spend (billed, estimated, or nothing).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from conch_jupyter.agents.agent_store import Agent, AgentStore
from conch_jupyter.core.sealed import SealedFile
from conch_jupyter.providers.base import Usage
from conch_jupyter.rounds.history import Said
from conch_jupyter.rounds.turn import Reply, TurnInput, Turns
from conch_jupyter.store.chats import Store
from conch_jupyter.store.hub import Hub

from ..support.api import Clock
from ..support.scripted_models import Reply as Scripted
from ..support.scripted_models import ScriptedModels

pytestmark = pytest.mark.timeout(60)

PRICE = {"input_per_mtok": 1_000_000, "output_per_mtok": 2_000_000}  # $1 and $2 a token


@dataclass
class Room:
    turns: Turns
    store: Store
    agents: AgentStore
    chat: str


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    with Store(tmp_path / "conch.sqlite3", Clock()) as opened:
        yield opened


@pytest.fixture
def room(
    store: Store, tmp_path: Path, jp_asyncio_loop: asyncio.AbstractEventLoop
) -> Iterator[Room]:
    sealed = SealedFile(tmp_path / "data" / "models.secrets.json", tmp_path / "seal.key")
    agents = AgentStore(tmp_path / "data" / "agents" / "agents.json", sealed, Clock())
    opened = store.create_conversation("A chat")
    chat = jp_asyncio_loop.run_until_complete(asyncio.ensure_future(opened)).id
    http = httpx.AsyncClient()
    yield Room(Turns(store, agents, Hub(), http, retry_delay=0.01), store, agents, chat)
    jp_asyncio_loop.run_until_complete(http.aclose())


def on(models: ScriptedModels, room: Room, name: str = "Writer", *, priced: bool = True) -> Agent:
    provider = {"kind": "openai", "model": "m", "base_url": models.openai_url, "api_key": "k-1"}
    return room.agents.create(name, provider=provider, price=PRICE if priced else None)


def turn(room: Room, who: Agent, **kw: Any) -> TurnInput:
    said = [Said("user", "Write a haiku")]
    return TurnInput(room.chat, who, "You are Writer.", said, "Write a haiku", (who.name,), **kw)


async def cancelled_mid_reply(room: Room, taken: TurnInput) -> Reply:
    """The turn, cancelled once it has said something (what Stop and CancelTask do)."""
    reply = Reply()
    task = asyncio.create_task(room.turns.take(taken, reply))
    while not reply.said_something:
        await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    return reply


async def follow(room: Room, items: list[dict[str, Any]], ready: asyncio.Event) -> None:
    async with room.turns.hub.follow(room.chat) as queue:
        ready.set()
        while (item := await queue.get()) is not None:
            items.append(item)


async def test_a_reply_streams_live_is_kept_and_billed_from_the_providers_usage(
    room: Room, models: ScriptedModels
) -> None:
    models.script(Scripted(chunks=["Old ", "pond, ", "frog"], usage=(3, 2)))
    writer = on(models, room)
    items: list[dict[str, Any]] = []
    ready = asyncio.Event()
    follower = asyncio.create_task(follow(room, items, ready))
    await ready.wait()
    reply = await room.turns.take(turn(room, writer, place={"turn": 1}), Reply())
    await asyncio.sleep(0)
    follower.cancel()
    assert (reply.text, reply.usage, reply.failure, reply.timed_out) == (
        "Old pond, frog", Usage(3, 2), None, False,
    )  # fmt: skip
    assert [i["text"] for i in items if i["type"] == "delta"] == ["Old ", "pond, ", "frog"]
    assert {i["reply"] for i in items if i["type"] == "delta"} == {reply.id}
    stored = room.store.messages(room.chat)[-1]
    assert (stored.id, stored.text, stored.agent, stored.round) == (
        reply.id, "Old pond, frog", writer.id, {"turn": 1},
    )  # fmt: skip
    # The stored reply goes out with its tokens and cost, for its quiet line in the view, and
    # its seq beside it: where a stream that resumes stands.
    cost = {"usd": 7.0, "input_tokens": 3, "output_tokens": 2, "estimated": False}
    said = {**stored.to_json(), "name": "Writer", "cost": cost}
    assert items[-1] == {"type": "message", "message": said, "seq": stored.seq}
    assert room.store.get_conversation(room.chat).agent == writer.id  # type: ignore[union-attr]
    (entry,) = room.store.spend_entries(room.chat)
    assert (entry.usd, entry.estimated, entry.input_tokens) == (3 + 2 * 2, False, 3)
    assert entry.message_id == reply.id  # the ledger's row names the reply it paid for
    assert reply.cost == 7
    # The request carried the history and the system prompt the caller gave.
    sent = models.requests[-1].json
    assert sent["messages"][0] == {"role": "system", "content": "You are Writer."}
    assert sent["messages"][-1] == {"role": "user", "content": "Write a haiku"}


async def test_a_cancelled_reply_is_kept_and_billed_as_an_estimate(
    room: Room, models: ScriptedModels
) -> None:
    words = [f"word{i} " for i in range(100)]
    models.script(Scripted(chunks=words, delay_per_chunk=0.05))
    writer = on(models, room)
    reply = await cancelled_mid_reply(room, turn(room, writer))
    assert reply.text.startswith("word0 ")
    assert len(reply.text) < len("".join(words))
    assert room.store.messages(room.chat)[-1].text == reply.text
    (entry,) = room.store.spend_entries(room.chat)
    assert entry.estimated is True
    # About four characters a token, rounded up: the whole prompt in, what was said out.
    assert entry.input_tokens == -(-(len("You are Writer.") + len("Write a haiku")) // 4)
    assert entry.output_tokens == -(-len(reply.text) // 4)
    assert entry.usd == pytest.approx(entry.input_tokens + 2 * entry.output_tokens)
    assert models.wait_closed_early(1, timeout=2.0)  # the model's stream was closed


async def test_a_reply_past_its_deadline_is_cut_kept_and_estimated(
    room: Room, models: ScriptedModels
) -> None:
    models.script(Scripted(chunks=[f"w{i} " for i in range(100)], delay_per_chunk=0.05))
    writer = on(models, room)
    reply = await room.turns.take(turn(room, writer, seconds=0.5, payer="p_1"), Reply())
    assert reply.timed_out
    assert reply.failure is None
    assert reply.text.startswith("w0 ")
    (entry,) = room.store.spend_entries(room.chat)
    assert (entry.estimated, entry.payer) == (True, "p_1")
    assert room.store.spent_since(0, payer="p_1") == pytest.approx(reply.cost)
    assert reply.cost > 0


async def test_a_refusal_before_any_text_bills_nothing(room: Room, models: ScriptedModels) -> None:
    models.script(Scripted(status=404))
    writer = on(models, room)
    reply = await room.turns.take(turn(room, writer), Reply())
    assert reply.failure is not None
    assert "was not found" in reply.failure
    assert (reply.text, reply.cost) == ("", 0.0)
    assert room.store.spend_entries(room.chat) == []
    assert [m.role for m in room.store.messages(room.chat)] == []


async def test_a_stream_cut_mid_reply_keeps_its_words_and_is_estimated(
    room: Room, models: ScriptedModels
) -> None:
    models.script(Scripted(chunks=["One ", "two ", "three"], cut_after=2))
    writer = on(models, room)
    reply = await room.turns.take(turn(room, writer), Reply())
    assert reply.failure is not None
    assert reply.text == "One two "
    (entry,) = room.store.spend_entries(room.chat)
    assert entry.estimated


async def test_an_unpriced_agent_costs_nothing(room: Room, models: ScriptedModels) -> None:
    models.script(Scripted("Free words."))
    writer = on(models, room, priced=False)
    reply = await room.turns.take(turn(room, writer), Reply())
    assert (reply.text, reply.cost) == ("Free words.", 0.0)
    assert room.store.spend_entries(room.chat) == []


async def test_what_the_caller_ends_a_turn_with_shares_the_replys_commit(
    room: Room, models: ScriptedModels, monkeypatch: pytest.MonkeyPatch
) -> None:
    models.script(Scripted(chunks=["Old ", "pond"], usage=(3, 2)))
    writer = on(models, room)
    writer_thread = room.store._writer
    batches: list[int] = []
    commit = writer_thread._commit

    def counted(batch: list[Any]) -> Any:
        batches.append(len(batch))
        return commit(batch)

    monkeypatch.setattr(writer_thread, "_commit", counted)
    seen: list[str] = []

    def ends_with(reply: Reply) -> Any:
        seen.append(reply.text)
        return room.store.add_message(room.chat, "note", "The answer went out.")

    reply = await room.turns.take(turn(room, writer, ends_with=ends_with), Reply())
    assert seen == [reply.text] == ["Old pond"]
    # The reply, its spend and the caller's note: queued together, one commit.
    assert batches == [3]
    assert [(m.role, m.text) for m in room.store.messages(room.chat)] == [
        ("agent", "Old pond"),
        ("note", "The answer went out."),
    ]


async def test_a_cancelled_turn_is_not_ended_by_the_caller_s_ending(
    room: Room, models: ScriptedModels
) -> None:
    models.script(Scripted(chunks=[f"word{i} " for i in range(100)], delay_per_chunk=0.05))
    writer = on(models, room)
    seen: list[Reply] = []

    def ends_with(reply: Reply) -> Any:
        seen.append(reply)
        return room.store.add_message(room.chat, "note", "ended")

    await cancelled_mid_reply(room, turn(room, writer, ends_with=ends_with))
    assert seen == []  # the caller decides what a cancellation means (the door: CancelTask)
    assert [m.role for m in room.store.messages(room.chat)] == ["agent"]
