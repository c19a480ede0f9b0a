"""The Server-Sent-Events reader against the WHATWG rules, one case per rule, each read both
ways (blocking and async), and the cases where httpx-sse 0.4.3 reads otherwise."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterable

import httpx
import pytest

from conch_jupyter.core.sse import (
    EventFolder,
    LineSplitter,
    SSEEvent,
    aevents_in,
    aiter_events,
    events_in,
    iter_events,
)


async def _items(values: Iterable[str]) -> AsyncIterator[str]:
    for value in values:
        yield value


def events_of(*chunks: str) -> list[SSEEvent]:
    """The events in a stream that arrives as these text chunks; both readers must agree."""

    async def collect() -> list[SSEEvent]:
        return [event async for event in aevents_in(_items(chunks))]

    blocking = list(events_in(chunks))
    assert asyncio.run(collect()) == blocking
    return blocking


def lines_of(*chunks: str) -> list[str]:
    splitter = LineSplitter()
    return [line for chunk in chunks for line in splitter.feed(chunk)]


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


def test_the_folder_reads_one_line_at_a_time() -> None:
    folder = EventFolder()
    assert [folder.feed(line) for line in ("data: a", "data: b", "")] == [
        None,
        None,
        SSEEvent(data="a\nb"),
    ]


def test_only_cr_and_lf_end_lines_not_unicode_separators() -> None:
    # httpx's aiter_lines() would split here; a model may stream these characters raw.
    text = 'data: {"t": "a\u2028b\u0085c"}\n\n'
    events = events_of(text)
    assert events[0].json() == {"t": "a\u2028b\u0085c"}

    async def from_response() -> list[SSEEvent]:
        response = httpx.Response(200, content=text.encode())
        return [event async for event in aiter_events(response)]

    assert asyncio.run(from_response()) == events
    assert list(iter_events(httpx.Response(200, content=text.encode()))) == events


# Where httpx-sse 0.4.3 reads a stream otherwise (why Conch keeps its own reader).


def test_an_event_type_or_id_without_data_is_not_an_event() -> None:
    assert events_of("event: ping\n\nid: 3\n\n") == []  # httpx-sse yields two events


def test_retry_takes_only_ascii_digits_and_is_kept() -> None:
    events = events_of("retry: -5\ndata: a\n\nretry:  7\ndata: b\n\nretry: 1_0\ndata: c\n\n")
    assert [e.retry for e in events] == [None, None, None]
    assert [e.retry for e in events_of("retry: 9\ndata: a\n\ndata: b\n\n")] == [9, 9]


def test_any_content_type_is_read() -> None:
    # An OpenAI-compatible server may label its stream otherwise; httpx-sse refuses it.
    response = httpx.Response(200, content=b"data: x\n\n", headers={"content-type": "text/plain"})
    assert list(iter_events(response)) == [SSEEvent(data="x")]


def test_json_must_be_an_object() -> None:
    assert SSEEvent(data='{"a": 1}').json() == {"a": 1}
    with pytest.raises(ValueError, match="not an object"):
        SSEEvent(data="[1]").json()
    with pytest.raises(ValueError, match="Expecting"):
        SSEEvent(data="{nope").json()
