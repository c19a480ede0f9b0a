"""hub.py: live fan-out of a chat's happenings to its followers."""

from __future__ import annotations

from conch_jupyter.hub import FOLLOWER_QUEUE_LIMIT, Hub


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
