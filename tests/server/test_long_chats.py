"""Long chats on a real server (DESIGN.md "Long chats"): the paged snapshot, the paged list, and
a live stream that resumes from the last event it delivered without sending the chat again."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import pytest

from conch_jupyter.core.sse import SSEEvent, aiter_events
from conch_jupyter.server_ext.services import ConchServices

from ..support.api import Api, settled
from ..support.long_chats import fill_chat
from ..support.scripted_models import Reply, ScriptedModels

pytestmark = pytest.mark.timeout(90)


async def long_chat(services: ConchServices, exchanges: int) -> str:
    """A chat of `exchanges` exchanges (a user's message, an agent's answer, a round's start and
    end), written straight into the server's own store: quicker than rounds, the same rows."""
    chat = await services.store.create_conversation(title="long")
    await fill_chat(services.store, chat.id, exchanges)
    return chat.id


@pytest.fixture
def services(jp_serverapp: Any) -> ConchServices:
    found: ConchServices = jp_serverapp.web_app.settings["conch"]
    return found


async def test_a_paged_snapshot_walks_back_to_the_first_message(
    api: Api, services: ConchServices
) -> None:
    chat_id = await long_chat(services, 15)
    _, whole = await api("GET", f"conversations/{chat_id}")
    assert len(whole["messages"]) == 30
    assert len(whole["events"]) == 30
    assert whole["earlier"] is False

    pages: list[dict[str, Any]] = []
    params: dict[str, str] = {"limit": "7"}
    while True:
        status, page = await api("GET", f"conversations/{chat_id}", params=params)
        assert status == 200, page
        pages.append(page)
        assert len(page["messages"]) <= 7
        if not page["earlier"]:
            break
        params = {"limit": "7", "before": page["messages"][0]["id"]}
    assert [len(p["messages"]) for p in pages] == [7, 7, 7, 7, 2]
    # The live parts come with every page, as with the whole chat.
    for key in ("round", "busy", "asking", "roster", "streaming", "mode", "spent_usd"):
        assert pages[0][key] == whole[key]
    walked = [m for p in reversed(pages) for m in p["messages"]]
    assert walked == whole["messages"]
    # Every event is on one page, never two: the pages meet at a message's time.
    events = [e for p in reversed(pages) for e in p["events"]]
    assert sorted(e["seq"] for e in events) == [e["seq"] for e in whole["events"]]
    # The newest page holds the events since its first message, and nothing older.
    first = pages[0]["messages"][0]["created"]
    assert pages[0]["events"]
    assert all(e["created"] >= first for e in pages[0]["events"])

    _, empty = await api("GET", f"conversations/{chat_id}", params={"limit": "0"})
    assert (empty["messages"], empty["events"], empty["earlier"]) == ([], [], True)


@pytest.mark.parametrize(
    ("params", "code"),
    [
        ({"limit": "many"}, "invalid"),
        ({"limit": "-1"}, "invalid"),
        ({"limit": "1001"}, "invalid"),
        ({"before": "m_x"}, "invalid"),
        ({"limit": "5", "before": "m_not_here"}, "bad_cursor"),
    ],
)
async def test_bad_pages_are_refused_in_words(
    api: Api, services: ConchServices, params: dict[str, str], code: str
) -> None:
    chat_id = await long_chat(services, 1)
    status, body = await api("GET", f"conversations/{chat_id}", params=params)
    assert status == 400, body
    assert body["error"]["code"] == code
    assert body["error"]["message"]


async def test_a_page_from_another_chats_message_is_refused(
    api: Api, services: ConchServices
) -> None:
    mine, other = await long_chat(services, 2), await long_chat(services, 2)
    _, theirs = await api("GET", f"conversations/{other}")
    status, body = await api(
        "GET", f"conversations/{mine}", params={"limit": "5", "before": theirs["messages"][1]["id"]}
    )
    assert (status, body["error"]["code"]) == (400, "bad_cursor")


async def test_the_chat_list_pages_newest_first(api: Api) -> None:
    made = [(await api("POST", "conversations", {"title": f"c{n}"}))[1]["id"] for n in range(5)]
    status, whole = await api("GET", "conversations")
    assert status == 200
    assert whole["next"] is None
    assert [c["id"] for c in whole["conversations"]] == made[::-1]
    seen: list[str] = []
    params = {"limit": "2"}
    while True:
        status, page = await api("GET", "conversations", params=params)
        assert status == 200, page
        seen += [c["id"] for c in page["conversations"]]
        if page["next"] is None:
            break
        params = {"limit": "2", "before": page["next"]}
    assert seen == made[::-1]
    status, body = await api("GET", "conversations", params={"limit": "2", "before": "c_gone"})
    assert (status, body["error"]["code"]) == (400, "bad_cursor")


# --- the live stream ---


@asynccontextmanager
async def stream(
    jp_http_port: int, jp_base_url: str, jp_auth_header: Any, chat_id: str, **kw: Any
) -> AsyncIterator[AsyncIterator[SSEEvent]]:
    url = f"http://127.0.0.1:{jp_http_port}{jp_base_url}conch/api/conversations/{chat_id}/events"
    headers = {**jp_auth_header, **kw.pop("headers", {})}
    async with (
        httpx.AsyncClient(headers=headers, timeout=10) as http,
        http.stream("GET", url, params=kw.pop("params", None)) as response,
    ):
        assert response.status_code == 200, await response.aread()
        yield aiter_events(response)


async def read_until(
    events: AsyncIterator[SSEEvent], done: Any, into: list[SSEEvent]
) -> list[SSEEvent]:
    async for event in events:
        into.append(event)
        if done(event.json()):
            break
    return into


def ended(item: dict[str, Any]) -> bool:
    return item["type"] == "event" and item["event"]["type"] == "round.ended"


async def test_a_stream_resumes_from_its_last_event_without_the_chat_again(
    api: Api, services: ConchServices, jp_http_port: int, jp_base_url: str, jp_auth_header: Any
) -> None:
    chat_id = await long_chat(services, 20)
    where = (jp_http_port, jp_base_url, jp_auth_header, chat_id)
    got: list[SSEEvent] = []
    async with stream(*where, params={"limit": "5"}) as events:
        first = await anext(events)
        got.append(first)
        snapshot = first.json()
        assert snapshot["type"] == "snapshot"
        assert len(snapshot["conversation"]["messages"]) == 5
        assert snapshot["conversation"]["earlier"] is True
        assert first.id  # the stream's place, from the first item on
        await api("POST", f"conversations/{chat_id}/messages", {"text": "@Researcher one more"})
        await read_until(events, ended, got)
    last_id = got[-1].id
    assert last_id != first.id

    # While nobody follows: two more exchanges.
    for text in ("@Researcher while away", "@Writer and again"):
        await api("POST", f"conversations/{chat_id}/messages", {"text": text})
        await settled(api, chat_id)
    _, whole = await api("GET", f"conversations/{chat_id}")
    delivered = {i["message"]["id"] for e in got if (i := e.json())["type"] == "message"}
    delivered |= {m["id"] for m in snapshot["conversation"]["messages"]}
    ids = [m["id"] for m in whole["messages"]]
    missed = ids[max(ids.index(d) for d in delivered) + 1 :]
    assert len(missed) >= 4  # two messages of yours and their answers at least
    delivered_events = {i["event"]["seq"] for e in got if (i := e.json())["type"] == "event"}
    missed_events = [e["seq"] for e in whole["events"] if e["seq"] > max(delivered_events)]

    for how in ({"headers": {"Last-Event-ID": last_id}}, {"params": {"after": last_id}}):
        again: list[SSEEvent] = []
        async with stream(*where, **how) as events:
            await read_until(events, lambda item: item["type"] == "resumed", again)
        items = [e.json() for e in again]
        assert "snapshot" not in [i["type"] for i in items]
        assert [i["message"]["id"] for i in items if i["type"] == "message"] == missed
        assert [i["event"]["seq"] for i in items if i["type"] == "event"] == missed_events
        resumed = items[-1]["conversation"]
        assert "messages" not in resumed
        assert resumed["busy"] is False
        assert resumed["roster"]
        # Where it stands now: resuming from there brings nothing again.
        async with stream(*where, headers={"Last-Event-ID": again[-1].id}) as events:
            [only] = await read_until(events, lambda item: item["type"] == "resumed", [])
        assert only.id == again[-1].id


async def test_a_stream_that_drops_mid_reply_resumes_with_no_word_lost_or_doubled(
    api: Api, models: ScriptedModels, jp_http_port: int, jp_base_url: str, jp_auth_header: Any
) -> None:
    chunks = [f"w{n} " for n in range(40)]
    models.script(Reply(chunks=chunks, delay_per_chunk=0.03))
    status, agent = await api(
        "POST",
        "agents",
        {
            "name": "Bot",
            "provider": {
                "kind": "openai",
                "model": "m",
                "base_url": models.openai_url,
                "api_key": "k",
            },
        },
    )
    assert status == 201, agent
    _, chat = await api("POST", "conversations", {})
    where = (jp_http_port, jp_base_url, jp_auth_header, chat["id"])
    words = ""
    got: list[SSEEvent] = []
    async with stream(*where, params={"limit": "50"}) as events:
        await anext(events)
        await api("POST", f"conversations/{chat['id']}/messages", {"text": "@Bot go"})
        async for event in events:
            got.append(event)
            item = event.json()
            if item["type"] == "delta":
                words += item["text"]
                if len(words) > 20:
                    break  # the connection drops mid-reply
    await asyncio.sleep(0.2)  # more words stream while nobody follows
    again: list[dict[str, Any]] = []
    async with stream(*where, headers={"Last-Event-ID": got[-1].id}) as events:
        async for event in events:
            again.append(event.json())
            if again[-1]["type"] == "message" and again[-1]["message"]["role"] == "agent":
                break
    kinds = [i["type"] for i in again]
    assert kinds[0] == "resumed", kinds  # the user's message was delivered before the drop
    [streaming] = again[0]["conversation"]["streaming"]
    later = "".join(i["text"] for i in again if i["type"] == "delta")
    # The view keeps the text so far from `resumed` and adds what streams after it.
    assert streaming["text"].startswith(words)
    assert streaming["text"] + later == "".join(chunks)
    assert again[-1]["message"]["text"] == "".join(chunks)


async def test_a_stream_that_missed_too_much_opens_with_a_snapshot_and_bad_places_are_refused(
    api: Api, services: ConchServices, jp_http_port: int, jp_base_url: str, jp_auth_header: Any
) -> None:
    chat_id = await long_chat(services, 260)  # 520 messages after the place "0-0"
    where = (jp_http_port, jp_base_url, jp_auth_header, chat_id)
    async with stream(*where, params={"limit": "3", "after": "0-0"}) as events:
        first = (await anext(events)).json()
    assert first["type"] == "snapshot"
    assert len(first["conversation"]["messages"]) == 3
    url = f"http://127.0.0.1:{jp_http_port}{jp_base_url}conch/api/conversations/{chat_id}/events"
    async with httpx.AsyncClient(headers=jp_auth_header, timeout=10) as http:
        for bad in ({"after": "yesterday"}, {"limit": "x"}):
            answer = await http.get(url, params=bad)
            assert answer.status_code == 400, answer.text
            assert json.loads(answer.text)["error"]["message"]


async def test_the_python_client_reads_a_long_chat_whole_page_by_page(
    api: Api, services: ConchServices, jp_http_port: int, jp_base_url: str, jp_auth_header: Any
) -> None:
    from conch_jupyter.client import AsyncConchClient, StreamPlace

    chat_id = await long_chat(services, 9)
    await services.store.add_spend(0.25, conversation_id=chat_id, agent="researcher")
    _, whole = await api("GET", f"conversations/{chat_id}")
    token = jp_auth_header["Authorization"].split()[-1]
    url = f"http://127.0.0.1:{jp_http_port}{jp_base_url}"
    async with AsyncConchClient(url, token=token) as client:
        pages = [page async for page in client.pages(chat_id, size=4)]
        assert [len(p["messages"]) for p in pages] == [4, 4, 4, 4, 2]
        read = await client.conversation(chat_id)
        for key in ("messages", "events", "spend"):
            assert read[key] == whole[key], key
        assert read["earlier"] is False
        one = await client.conversation(chat_id, limit=2)
        assert [m["id"] for m in one["messages"]] == [m["id"] for m in whole["messages"][-2:]]
        assert next(c["id"] for c in await client.conversations()) == chat_id

        # Following with a place: the second follow resumes where the first stood.
        place = StreamPlace()
        async for item in client.follow(chat_id, 3, place):
            assert item["type"] == "snapshot"
            assert len(item["conversation"]["messages"]) == 3
            break
        assert place.id
        async for item in client.follow(chat_id, 3, place):
            assert item["type"] == "resumed"
            break


async def test_a_whole_snapshot_built_in_chunks_loses_and_doubles_nothing_said_meanwhile(
    api: Api,
    services: ConchServices,
    models: ScriptedModels,
    jp_http_port: int,
    jp_base_url: str,
    jp_auth_header: Any,
) -> None:
    """The plain stream of a long chat: its snapshot is built a chunk at a time, handing the
    loop back, while a reply streams; what came meanwhile comes once, after the snapshot."""
    chunks = [f"w{n} " for n in range(40)]
    models.script(Reply(chunks=chunks, delay_per_chunk=0.01))
    provider = {"kind": "openai", "model": "m", "base_url": models.openai_url, "api_key": "k"}
    status, agent = await api("POST", "agents", {"name": "Bot", "provider": provider})
    assert status == 201, agent
    chat_id = await long_chat(services, 300)  # 600 messages: 24 chunks
    where = (jp_http_port, jp_base_url, jp_auth_header, chat_id)
    await api("POST", f"conversations/{chat_id}/messages", {"text": "@Bot go"})
    items: list[dict[str, Any]] = []
    async with stream(*where) as events:
        async for event in events:
            items.append(event.json())
            if items[-1]["type"] == "message" and items[-1]["message"]["role"] == "agent":
                break
    snapshot = items[0]["conversation"]
    assert items[0]["type"] == "snapshot"
    said = [m["id"] for m in snapshot["messages"]]
    said += [i["message"]["id"] for i in items[1:] if i["type"] == "message"]
    assert len(said) == len(set(said))  # nothing doubled
    words = "".join(r["text"] for r in snapshot["streaming"])
    words += "".join(i["text"] for i in items if i["type"] == "delta")
    assert words == "".join(chunks)  # nothing lost, nothing doubled
    _, whole = await api("GET", f"conversations/{chat_id}")
    assert said == [m["id"] for m in whole["messages"]][: len(said)]
