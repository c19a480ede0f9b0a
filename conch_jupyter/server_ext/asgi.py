"""One tornado request handed to an ASGI app, and its answer written back: Jupyter's server is
tornado, and the `mcp` SDK's Streamable HTTP transport (Conch's MCP endpoint, coding/mcp.py) is
ASGI. Owns only the translation, with no rule of its own.

The body tornado has already read is given whole, in one `http.request`; after it, `receive`
waits for the client to go (`http.disconnect`), as a server's would. A body the app sends in
parts is flushed part by part, so a stream would reach the client as it is written.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from tornado import web
from tornado.iostream import StreamClosedError

Message = MutableMapping[str, Any]
App = Callable[
    [
        MutableMapping[str, Any],
        Callable[[], Awaitable[Message]],
        Callable[[Message], Awaitable[None]],
    ],
    Awaitable[None],
]
# Tornado says these itself (it counts the body, and chunks a flushed one).
LEFT_TO_TORNADO = {"content-length", "transfer-encoding", "connection"}


async def serve(handler: web.RequestHandler, app: App, gone: asyncio.Event) -> None:
    """Answer `handler`'s request with `app`; `gone` is set once its client has disconnected."""
    request = handler.request
    host, _, port = (request.host or "").rpartition(":")
    scope: dict[str, Any] = {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.3"},
        "http_version": request.version.removeprefix("HTTP/") or "1.1",
        "method": request.method,
        "scheme": request.protocol,
        "path": request.path,
        "raw_path": request.path.encode("latin-1", "replace"),
        "root_path": "",
        "query_string": (request.query or "").encode("latin-1", "replace"),
        "headers": [
            (name.lower().encode("latin-1"), value.encode("latin-1", "replace"))
            for name, value in request.headers.get_all()
        ],
        "client": (request.remote_ip or "", 0),
        "server": (host or request.host, int(port) if port.isdigit() else 0),
        "state": {},
    }
    given = False

    async def receive() -> Message:
        nonlocal given
        if not given:
            given = True
            return {"type": "http.request", "body": request.body or b"", "more_body": False}
        await gone.wait()
        return {"type": "http.disconnect"}

    async def send(message: Message) -> None:
        if message["type"] == "http.response.start":
            handler.set_status(int(message["status"]))
            handler.clear_header("Content-Type")
            for name, value in message.get("headers", []):
                named = bytes(name).decode("latin-1")
                if named.lower() not in LEFT_TO_TORNADO:
                    handler.add_header(named, bytes(value).decode("latin-1"))
        elif message["type"] == "http.response.body":
            handler.write(bytes(message.get("body", b"")))
            if message.get("more_body") and not gone.is_set():
                try:
                    await handler.flush()
                except StreamClosedError:
                    gone.set()

    await app(scope, receive, send)
    if not gone.is_set():
        handler.finish()
