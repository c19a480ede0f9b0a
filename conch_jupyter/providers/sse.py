"""The one Server-Sent-Events reader, shared by every streaming client in Conch.

Owns turning a text stream into SSEEvent items by the WHATWG rules ("Interpreting an event
stream", HTML Living Standard §9.2.6). Both model providers use it, and so will the A2A and
event-stream clients; nothing here knows about any provider.

Theory of operation: `sse_lines` cuts decoded text into lines at CRLF, LF or CR only;
`sse_events` folds those lines into events. A blank line dispatches the event being built; an
event with no data lines is dropped; at the end of the stream an event without its closing
blank line is discarded, as the standard says. `id` and `retry` persist across events.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import httpx

# The standard ends lines at CRLF, LF or CR and nowhere else. httpx's aiter_lines() uses
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


async def sse_lines(chunks: AsyncIterator[str]) -> AsyncIterator[str]:
    """Cut decoded text chunks into lines (without their endings), as the standard does."""
    buffer = ""
    after_cr = False
    async for chunk in chunks:
        if after_cr and chunk.startswith("\n"):
            chunk = chunk[1:]  # the LF of a CRLF split across two chunks
            after_cr = False
        if not chunk:
            continue
        after_cr = chunk.endswith("\r")
        buffer += chunk
        *lines, buffer = _LINE_END.split(buffer)
        for line in lines:
            yield line
    if buffer:
        yield buffer


def _strip_line_end(line: str) -> str:
    if line.endswith("\r\n"):
        return line[:-2]
    if line.endswith(("\n", "\r")):
        return line[:-1]
    return line


async def sse_events(lines: AsyncIterator[str]) -> AsyncIterator[SSEEvent]:
    """Fold lines of an event stream into events. A line may still carry its line ending."""
    data: list[str] = []
    event_type = ""
    last_id = ""
    retry: int | None = None
    first = True
    async for raw in lines:
        line = _strip_line_end(raw)
        if first:
            line = line.removeprefix("\ufeff")  # one leading byte-order mark is not content
            first = False
        if not line:
            if data:
                yield SSEEvent(event_type or "message", "\n".join(data), last_id, retry)
            data, event_type = [], ""
            continue
        if line.startswith(":"):
            continue  # a comment, often sent as a keep-alive
        name, colon, value = line.partition(":")
        if colon and value.startswith(" "):
            value = value[1:]
        if name == "data":
            data.append(value)
        elif name == "event":
            event_type = value
        elif name == "id" and "\0" not in value:
            last_id = value
        elif name == "retry" and value.isascii() and value.isdigit():
            retry = int(value)
        # Any other field name is ignored, as the standard requires.


def response_events(response: httpx.Response) -> AsyncIterator[SSEEvent]:
    """The events of a streamed httpx response (opened with `client.stream(...)`)."""
    return sse_events(sse_lines(response.aiter_text()))
