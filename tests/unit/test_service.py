"""rounds/driver.py: the round driver on its own — a real SQLite store, agents file and Hub, the
offline model (no network, no Jupyter server). The HTTP side is
tests/server/test_rounds_server.py's."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from conch_jupyter.agents.agent_store import AgentStore
from conch_jupyter.core.sealed import SealedFile
from conch_jupyter.providers.base import ProviderConfig
from conch_jupyter.rounds.driver import ChatNotFound, RoundService
from conch_jupyter.rounds.spend import Budget
from conch_jupyter.rounds.turn import Turns
from conch_jupyter.store.chats import Store
from conch_jupyter.store.hub import Hub

from ..support.api import Clock

pytestmark = pytest.mark.timeout(60)


@dataclass
class Driver:
    rounds: RoundService
    store: Store
    agents: AgentStore
    hub: Hub


@pytest.fixture
def driver(tmp_path: Path, jp_asyncio_loop: asyncio.AbstractEventLoop) -> Iterator[Driver]:
    clock = Clock()
    sealed = SealedFile(tmp_path / "data" / "models.secrets.json", tmp_path / "seal.key")
    agents = AgentStore(tmp_path / "data" / "agents" / "agents.json", sealed, clock)
    agents.ensure_defaults(ProviderConfig("offline", model="offline"))
    hub, http = Hub(), httpx.AsyncClient()
    with Store(tmp_path / "data" / "conch.sqlite3", clock) as store:
        turns = Turns(store, agents, hub, http, offline_delay=0.0)
        rounds = RoundService(
            store=store, agents=agents, hub=hub, turns=turns, budget=Budget(), clock=clock
        )
        yield Driver(rounds, store, agents, hub)
        jp_asyncio_loop.run_until_complete(rounds.close())
        jp_asyncio_loop.run_until_complete(http.aclose())


async def settled(rounds: RoundService, chat_id: str) -> dict[str, Any]:
    for _ in range(500):
        if not rounds.busy(chat_id):
            return rounds.conversation_json(chat_id)
        await asyncio.sleep(0.01)
    raise AssertionError("the chat never settled")


async def test_a_plain_message_is_answered_by_the_chats_agent_alone(driver: Driver) -> None:
    chat = (await driver.store.create_conversation()).id
    message = await driver.rounds.post(chat, "Hello there")
    assert driver.rounds.busy(chat)
    done = await settled(driver.rounds, chat)
    assert [m["role"] for m in done["messages"]] == ["user", "agent"]
    assert done["messages"][0]["id"] == message.id
    reply = done["messages"][1]
    assert (reply["agent"], reply["name"]) == ("researcher", "Researcher")
    assert "**Researcher** on “Hello there”:" in reply["text"]
    assert done["events"] == []  # no round: nobody was mentioned
    assert done["round"] is None


async def test_mentions_start_a_round_that_takes_turns_in_order(driver: Driver) -> None:
    chat = (await driver.store.create_conversation()).id
    items: list[dict[str, Any]] = []
    async with driver.hub.follow(chat) as queue:
        await driver.rounds.post(chat, "@Writer then @Researcher, plan a picnic")
        done = await settled(driver.rounds, chat)
        while not queue.empty():
            items.append(queue.get_nowait())
    agents = [m["agent"] for m in done["messages"] if m["role"] == "agent"]
    assert agents == ["writer", "researcher"]
    notes = [m["text"] for m in done["messages"] if m["role"] == "note"]
    assert notes == ["Writer's turn", "Researcher's turn"]
    kinds = [e["type"] for e in done["events"]]
    assert kinds == ["round.started", "round.ended"]
    assert done["events"][0]["named"] == ["writer", "researcher"]
    assert done["events"][1]["reason"] == "done"
    assert done["events"][1]["words"] == "Writer and Researcher took turns · 2 replies"
    # Live: the round's state, the deltas of each reply, then the stored reply.
    assert {i["type"] for i in items} >= {"round", "delta", "message", "event"}
    assert items[-1]["type"] == "event"
    assert items[-1]["event"]["type"] == "round.ended"
    assert [i for i in items if i["type"] == "round"][-1] == {"type": "round", "round": None}


async def test_stop_ends_the_running_reply_and_keeps_its_words(driver: Driver) -> None:
    driver.rounds.turns.offline_delay = 0.05
    chat = (await driver.store.create_conversation()).id
    assert driver.rounds.stop(chat) is False  # nothing running
    await driver.rounds.post(chat, "@Writer go, @Researcher next")
    while (driver.rounds.round_state(chat) or {}).get("speaker") != "writer":
        await asyncio.sleep(0.01)
    await asyncio.sleep(0.3)  # a few words are out
    assert driver.rounds.stop(chat) is True
    done = await settled(driver.rounds, chat)
    kept = [m for m in done["messages"] if m["role"] == "agent"]
    assert len(kept) == 1
    assert kept[0]["agent"] == "writer"
    assert done["events"][-1]["reason"] == "stopped"
    assert done["events"][-1]["turns"] == 1  # the words kept count as Writer's reply
    assert driver.rounds.stop(chat) is False


async def test_no_agents_is_said_in_a_note(driver: Driver) -> None:
    for agent in driver.agents.list():
        driver.agents.delete(agent.id)
    chat = (await driver.store.create_conversation()).id
    await driver.rounds.post(chat, "Anyone?")
    done = await settled(driver.rounds, chat)
    assert [m["role"] for m in done["messages"]] == ["user", "note"]
    assert "You have no agents yet" in done["messages"][1]["text"]


async def test_unknown_and_door_chats_cannot_be_written_to(driver: Driver) -> None:
    with pytest.raises(ChatNotFound):
        await driver.rounds.post("c_nope", "hi")
    door = await driver.store.create_conversation(
        origin="peer", pairing_id="p_1", context_key="w/c"
    )
    with pytest.raises(ChatNotFound):
        await driver.rounds.post(door.id, "hi")
    with pytest.raises(ChatNotFound):
        driver.rounds.stop(door.id)
    assert driver.rounds.conversation_json(door.id)["origin"] == "peer"  # readable


async def test_close_ends_every_runner(driver: Driver) -> None:
    driver.rounds.turns.offline_delay = 0.05
    chat = (await driver.store.create_conversation()).id
    await driver.rounds.post(chat, "A long answer, please")
    await asyncio.sleep(0.2)
    assert driver.rounds.busy(chat)
    await driver.rounds.close()
    assert not driver.rounds.busy(chat)
    # What was said before the server stopped is kept, like a Stop.
    assert [m.role for m in driver.store.messages(chat)] == ["user", "agent"]


async def test_a_reply_and_the_next_turns_note_are_stored_in_one_commit(
    driver: Driver, monkeypatch: pytest.MonkeyPatch
) -> None:
    chat = (await driver.store.create_conversation()).id
    writer = driver.store._writer
    commit = writer._commit
    stored_after: list[list[str]] = []  # the chat's messages as each commit left them

    def counted(batch: list[Any]) -> Any:
        done = commit(batch)
        with sqlite3.connect(driver.store.path) as db:
            rows = db.execute(
                "SELECT role, text FROM messages WHERE conversation_id = ? ORDER BY seq", (chat,)
            ).fetchall()
        stored_after.append([f"{role}: {text[:20]}" for role, text in rows])
        return done

    monkeypatch.setattr(writer, "_commit", counted)
    await driver.rounds.post(chat, "@Writer then @Researcher, plan a picnic")
    done = await settled(driver.rounds, chat)
    said = [f"{m['role']}: {m['text'][:20]}" for m in done["messages"]]
    assert [s.split(":")[0] for s in said] == ["user", "note", "agent", "note", "agent"]
    # The Writer's reply and the note of the Researcher's turn came in the same commit: no
    # commit left the Writer's reply stored without the note that follows it.
    assert said[:4] in stored_after
    assert said[:3] not in stored_after
    # The Researcher's reply ends the round: nothing is queued with it.
    assert said in stored_after
