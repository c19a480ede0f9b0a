"""The Server-Sent-Events reader against the WHATWG rules, one case per rule."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterable

import httpx
import pytest

from conch_jupyter.providers.sse import SSEEvent, response_events, sse_events, sse_lines


async def _items(values: Iterable[str]) -> AsyncIterator[str]:
    for value in values:
        yield value


def events_of(*chunks: str) -> list[SSEEvent]:
    """The events in a stream that arrives as these text chunks."""

    async def collect() -> list[SSEEvent]:
        return [event async for event in sse_events(sse_lines(_items(chunks)))]

    return asyncio.run(collect())


def lines_of(*chunks: str) -> list[str]:
    async def collect() -> list[str]:
        return [line async for line in sse_lines(_items(chunks))]

    return asyncio.run(collect())


def test_one_event_with_defaults() -> None:
    assert events_of("data: hello\n\n") == [SSEEvent("message", "hello", "", None)]


def test_multi_line_data_is_joined_with_newlines() -> None:
    assert [e.data for e in events_of("data: one\ndata:  two\ndata\ndata:three\n\n")] == [
        "one\n two\n\nthree"
    ]


def test_comments_and_unknown_fields_are_ignored() -> None:
    stream = ": keep-alive\ndata: a\nfoo: bar\n: another\n\n:ping\n\n"
    assert [e.data for e in events_of(stream)] == ["a"]


def test_event_type_applies_to_one_event_only() -> None:
    events = events_of("event: ping\ndata: 1\n\ndata: 2\n\n")
    assert [(e.event, e.data) for e in events] == [("ping", "1"), ("message", "2")]


def test_id_and_retry_persist_and_an_id_with_nul_is_ignored() -> None:
    events = events_of("id: 7\nretry: 1500\ndata: a\n\ndata: b\n\nid: 8\0\nretry: x\ndata: c\n\n")
    assert [(e.id, e.retry) for e in events] == [("7", 1500), ("7", 1500), ("7", 1500)]
    assert events_of("id\ndata: d\n\n")[0].id == ""  # a bare `id` resets it


def test_an_event_without_data_is_not_dispatched() -> None:
    assert events_of("event: lonely\n\nid: 1\n\ndata: x\n\n") == [SSEEvent("message", "x", "1")]


@pytest.mark.parametrize("ending", ["\r\n", "\r", "\n"])
def test_every_line_ending(ending: str) -> None:
    stream = f"event: e{ending}data: a{ending}data: b{ending}{ending}"
    assert events_of(stream) == [SSEEvent("e", "a\nb")]


def test_crlf_split_across_chunks_is_one_line_ending() -> None:
    assert lines_of("data: a\r", "\ndata: b\r", "", "\n\r\n") == ["data: a", "data: b", ""]
    assert events_of("data: a\r", "\n", "\r", "\n") == [SSEEvent(data="a")]


def test_lines_split_anywhere_in_chunks() -> None:
    assert events_of("da", "ta: he", "llo\n", "\n") == [SSEEvent(data="hello")]


def test_no_trailing_blank_line_discards_the_unfinished_event() -> None:
    assert [e.data for e in events_of("data: done\n\ndata: unfinished\n")] == ["done"]
    assert [e.data for e in events_of("data: done\n\ndata: no newline")] == ["done"]


def test_a_leading_byte_order_mark_is_dropped() -> None:
    assert events_of("\ufeffdata: x\n\n") == [SSEEvent(data="x")]


def test_whole_lines_may_still_carry_their_endings() -> None:
    async def collect() -> list[SSEEvent]:
        lines = _items(["data: a\r\n", "data: b\n", "\r\n"])
        return [event async for event in sse_events(lines)]

    assert asyncio.run(collect()) == [SSEEvent(data="a\nb")]


def test_only_cr_and_lf_end_lines_not_unicode_separators() -> None:
    # httpx's aiter_lines() would split here; a model may stream these characters raw.
    text = 'data: {"t": "a\u2028b\u0085c"}\n\n'
    events = events_of(text)
    assert events[0].json() == {"t": "a\u2028b\u0085c"}

    async def from_response() -> list[SSEEvent]:
        response = httpx.Response(200, content=text.encode())
        return [event async for event in response_events(response)]

    assert asyncio.run(from_response()) == events


def test_json_must_be_an_object() -> None:
    assert SSEEvent(data='{"a": 1}').json() == {"a": 1}
    with pytest.raises(ValueError, match="not an object"):
        SSEEvent(data="[1]").json()
    with pytest.raises(ValueError, match="Expecting"):
        SSEEvent(data="{nope").json()
