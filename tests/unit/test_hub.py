"""store/hub.py: live fan-out of a chat's happenings to its followers."""

from __future__ import annotations

from conch_jupyter.core.render import render_markdown
from conch_jupyter.store.hub import FOLLOWER_QUEUE_LIMIT, Hub
from conch_jupyter.store.rows import Message


async def test_each_follower_of_a_chat_gets_its_items_in_order() -> None:
    hub = Hub()
    async with hub.follow("c1") as one, hub.follow("c1") as two, hub.follow("c2") as other:
        assert hub.followers("c1") == 2
        hub.publish("c1", {"n": 1})
        hub.publish("c1", {"n": 2})
        hub.publish("c2", {"n": 3})
        assert [one.get_nowait(), one.get_nowait()] == [{"n": 1}, {"n": 2}]
        assert [two.get_nowait(), two.get_nowait()] == [{"n": 1}, {"n": 2}]
        assert other.get_nowait() == {"n": 3}
        assert one.empty()
    assert hub.followers("c1") == 0  # leaving unfollows
    hub.publish("c1", {"n": 4})  # nobody follows: nothing is kept


async def test_a_follower_that_cannot_keep_up_is_dropped_and_told() -> None:
    hub = Hub()
    async with hub.follow("c1") as slow, hub.follow("c1") as quick:
        for n in range(FOLLOWER_QUEUE_LIMIT):
            hub.publish("c1", {"n": n})
            quick.get_nowait()
        hub.publish("c1", {"n": "one too many"})
        assert hub.followers("c1") == 1  # only the slow one was dropped
        assert quick.get_nowait() == {"n": "one too many"}
        drained = [slow.get_nowait() for _ in range(slow.qsize())]
        assert drained[-1] is None  # the end marker: reconnect and start from a snapshot
        assert len(drained) == FOLLOWER_QUEUE_LIMIT
        hub.publish("c1", {"n": "after"})
        assert slow.empty()


async def test_closing_tells_every_follower() -> None:
    hub = Hub()
    async with hub.follow("c1") as one, hub.follow("c2") as two:
        for n in range(FOLLOWER_QUEUE_LIMIT):
            hub.publish("c1", {"n": n})  # full: the end marker still gets in
        hub.close()
        assert hub.followers("c1") == hub.followers("c2") == 0
        assert two.get_nowait() is None
        drained = [one.get_nowait() for _ in range(one.qsize())]
        assert drained[-1] is None


def test_the_words_of_a_reply_still_streaming_are_kept_for_the_next_snapshot() -> None:
    hub = Hub()
    assert hub.streaming("c1") == []
    for text in ("Hel", "lo, ", "world"):
        hub.publish("c1", {"type": "delta", "reply": "m1", "agent": "writer", "text": text})
    hub.publish("c1", {"type": "delta", "reply": "m2", "agent": "researcher", "text": "Hm"})
    hub.publish("c2", {"type": "delta", "reply": "m3", "agent": "writer", "text": "elsewhere"})
    assert hub.streaming("c1") == [
        {"reply": "m1", "agent": "writer", "text": "Hello, world"},
        {"reply": "m2", "agent": "researcher", "text": "Hm"},
    ]
    # Once a reply is stored (under its reply id) it is a message, no longer streaming.
    hub.publish("c1", {"type": "message", "message": {"id": "m1", "role": "agent"}})
    assert [r["reply"] for r in hub.streaming("c1")] == ["m2"]
    # The round (or lone reply) ended: whatever was left, a reply kept nowhere, is forgotten.
    hub.publish("c1", {"type": "round", "round": None})
    assert hub.streaming("c1") == []
    assert hub.streaming("c2") == [{"reply": "m3", "agent": "writer", "text": "elsewhere"}]


async def test_a_replys_pieces_are_kept_with_nobody_following_and_sent_to_who_follows() -> None:
    hub = Hub()
    hub.delta("c1", "m1", "writer", "Hel")  # nobody follows yet: kept for the next snapshot
    async with hub.follow("c1") as queue:
        assert hub.streaming("c1") == [{"reply": "m1", "agent": "writer", "text": "Hel"}]
        hub.delta("c1", "m1", "writer", "lo")
        assert queue.get_nowait() == {
            "type": "delta",
            "reply": "m1",
            "agent": "writer",
            "text": "lo",
        }
        assert queue.empty()
    assert hub.streaming("c1") == [{"reply": "m1", "agent": "writer", "text": "Hello"}]


def test_a_stored_reply_no_longer_streams_whether_or_not_anyone_follows() -> None:
    hub = Hub()
    hub.delta("c1", "m1", "writer", "Hello")
    hub.delta("c1", "m2", "writer", "Hm")
    stored = Message("m1", "c1", "agent", "Hello", 1.0, "writer")
    hub.message(stored)  # nobody follows: no item is made, but m1 is done streaming
    assert [r["reply"] for r in hub.streaming("c1")] == ["m2"]


async def test_a_message_is_drawn_ahead_only_for_a_chat_someone_follows() -> None:
    hub = Hub()
    render_markdown.cache_clear()
    hub.draw_ahead("nobody-follows", "**Not drawn**")
    assert render_markdown.cache_info().currsize == 0
    async with hub.follow("c1") as queue:
        hub.draw_ahead("c1", "**Drawn while it is stored**")
        drawn = render_markdown.cache_info()
        assert drawn.currsize == 1
        reply = Message("m1", "c1", "agent", "**Drawn while it is stored**", 1.0, agent="ann")
        hub.message(reply, "Ann")
        item = queue.get_nowait()
        assert item is not None
        assert item["message"]["html"] == render_markdown("**Drawn while it is stored**")
        # Published, it was found drawn, not drawn again.
        assert render_markdown.cache_info().hits > drawn.hits
        assert render_markdown.cache_info().misses == drawn.misses
