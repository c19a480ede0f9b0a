"""The one Server-Sent-Events reader, shared by every streaming client in Conch: the model
providers (async) and the kernel-side clients (sync and async).

Owns turning a text stream into SSEEvent items by the WHATWG rules ("Interpreting an event
stream", HTML Living Standard §9.2.6); nothing here knows about a provider or the chat API.

Theory of operation: two pure decoders do the work and know nothing of I/O. `LineSplitter` cuts
text chunks into lines at CRLF, LF or CR only; `EventFolder` folds those lines into events. A
blank line dispatches the event being built; an event with no data lines is dropped; at the end
of the stream an event without its closing blank line is discarded, as the standard says. `id`
and `retry` persist across events. `events_in` / `aevents_in` drive them over blocking / async
chunks; `iter_events` / `aiter_events` over a streamed httpx response.

Why not httpx-sse (0.4.3, checked): it dispatches an event that has no data lines, lets `retry`
take any int() ("-5", " 7", "1_0") and forgets it after one event, keeps a leading byte-order
mark, and refuses a stream whose Content-Type is not text/event-stream (some OpenAI-compatible
servers label theirs otherwise). Each of those is a case in tests/unit/test_sse.py.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterable, AsyncIterator, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import httpx

# The standard ends lines at CRLF, LF or CR and nowhere else. httpx's iter_lines() uses
# str.splitlines(), which also splits at U+0085, U+2028 and U+2029 — characters that may appear
# raw inside a JSON string a model streams — so we split the text ourselves.
_LINE_END = re.compile(r"\r\n|\r|\n")


@dataclass(frozen=True)
class SSEEvent:
    event: str = "message"
    data: str = ""
    # The last event id seen so far (it persists until a later `id:` field changes it).
    id: str = ""
    # The last reconnection time in ms the server asked for, if any.
    retry: int | None = None

    def json(self) -> dict[str, Any]:
        """The data as a JSON object; raise ValueError if it is not one."""
        value = json.loads(self.data)
        if not isinstance(value, dict):
            raise ValueError("event data is JSON but not an object")
        return value


class LineSplitter:
    """Cuts decoded text chunks into lines (without their endings), as the standard does."""

    def __init__(self) -> None:
        self._buffer = ""
        self._after_cr = False

    def feed(self, chunk: str) -> list[str]:
        """The lines this chunk completes."""
        if self._after_cr and chunk.startswith("\n"):
            chunk = chunk[1:]  # the LF of a CRLF split across two chunks
            self._after_cr = False
        if not chunk:
            return []
        self._after_cr = chunk.endswith("\r")
        # What follows the last line ending waits for the next chunk; at the end of the stream
        # it is dropped, since a line without its ending cannot be the blank line that
        # dispatches an event.
        *lines, self._buffer = _LINE_END.split(self._buffer + chunk)
        return lines


class EventFolder:
    """Folds lines of an event stream into events."""

    def __init__(self) -> None:
        self._data: list[str] = []
        self._event = ""
        self._id = ""
        self._retry: int | None = None
        self._first = True

    def feed(self, line: str) -> SSEEvent | None:
        """The event this line dispatches, if it is the blank line that ends one."""
        if self._first:
            line = line.removeprefix("\ufeff")  # one leading byte-order mark is not content
            self._first = False
        if not line:
            data, self._data, event, self._event = self._data, [], self._event, ""
            if not data:
                return None
            return SSEEvent(event or "message", "\n".join(data), self._id, self._retry)
        if line.startswith(":"):
            return None  # a comment, often sent as a keep-alive
        name, colon, value = line.partition(":")
        if colon and value.startswith(" "):
            value = value[1:]
        if name == "data":
            self._data.append(value)
        elif name == "event":
            self._event = value
        elif name == "id" and "\0" not in value:
            self._id = value
        elif name == "retry" and value.isascii() and value.isdigit():
            self._retry = int(value)
        # Any other field name is ignored, as the standard requires.
        return None


def events_in(chunks: Iterable[str]) -> Iterator[SSEEvent]:
    """The events in a stream of decoded text chunks (blocking)."""
    lines, folder = LineSplitter(), EventFolder()
    for chunk in chunks:
        for line in lines.feed(chunk):
            if (event := folder.feed(line)) is not None:
                yield event


async def aevents_in(chunks: AsyncIterable[str]) -> AsyncIterator[SSEEvent]:
    """The events in a stream of decoded text chunks (async)."""
    lines, folder = LineSplitter(), EventFolder()
    async for chunk in chunks:
        for line in lines.feed(chunk):
            if (event := folder.feed(line)) is not None:
                yield event


def iter_events(response: httpx.Response) -> Iterator[SSEEvent]:
    """The events of a streamed httpx response (opened with `client.stream(...)`)."""
    return events_in(response.iter_text())


def aiter_events(response: httpx.Response) -> AsyncIterator[SSEEvent]:
    """The events of a streamed httpx response (opened with `async_client.stream(...)`)."""
    return aevents_in(response.aiter_text())
