"""The reference A2A server for bench_door.py: a2a-sdk 1.3's own server, in a process of its own.

DefaultRequestHandler + create_jsonrpc_routes + create_agent_card_routes on Starlette under
uvicorn, an AgentExecutor that completes each task at once with a short artifact, and a pure ASGI
middleware that checks `Authorization: Bearer <key>` (the key's SHA-256 looked up in a set), so it
does auth as the door does. Its task store is either a2a-sdk's InMemoryTaskStore or its
DatabaseTaskStore on a SQLite file (SQLAlchemy + aiosqlite), set to what Conch's own store uses:
WAL and synchronous=FULL, so both persist each task with the same durability.
"""

from __future__ import annotations

import hashlib
import importlib.util
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx

REFERENCE_REPLY = "A conch is a sea snail with a spiral shell; blown into, it sounds a note."


def reference_app(key_hashes: frozenset[str], endpoint: str, database: Path | None) -> Any:
    """a2a-sdk's server for one agent that answers at once, behind a bearer check; its tasks in
    memory, or in the SQLite file `database`."""
    from a2a.helpers.proto_helpers import new_task_from_user_message
    from a2a.server.agent_execution import AgentExecutor, RequestContext
    from a2a.server.events import EventQueue
    from a2a.server.request_handlers import DefaultRequestHandler
    from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes
    from a2a.server.tasks import TaskUpdater
    from a2a.types import (
        AgentCapabilities,
        AgentCard,
        AgentInterface,
        AgentSkill,
        HTTPAuthSecurityScheme,
        Part,
        SecurityScheme,
    )
    from starlette.applications import Starlette
    from starlette.types import ASGIApp, Receive, Scope, Send

    class InstantExecutor(AgentExecutor):
        async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
            task = context.current_task
            if task is None:
                assert context.message is not None
                task = new_task_from_user_message(context.message)
                await event_queue.enqueue_event(task)
            updater = TaskUpdater(event_queue, task.id, task.context_id)
            await updater.add_artifact([Part(text=REFERENCE_REPLY)], name="reply")
            await updater.complete()

        async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
            raise NotImplementedError("tasks end at once here")

    class BearerCheck:
        """Pure ASGI: a request without a known key gets 401 and never reaches the app."""

        def __init__(self, app: ASGIApp) -> None:
            self.app = app

        async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
            if scope["type"] == "http":
                authorization = dict(scope["headers"]).get(b"authorization", b"")
                scheme, _, key = authorization.decode("latin-1").partition(" ")
                digest = hashlib.sha256(key.strip().encode()).hexdigest()
                if scheme.lower() != "bearer" or digest not in key_hashes:
                    body = b'{"error": "unauthorized"}'
                    await send(
                        {
                            "type": "http.response.start",
                            "status": 401,
                            "headers": [
                                (b"content-type", b"application/json"),
                                (b"content-length", str(len(body)).encode()),
                                (b"www-authenticate", b"Bearer"),
                            ],
                        }
                    )
                    await send({"type": "http.response.body", "body": body})
                    return
            await self.app(scope, receive, send)

    card = AgentCard(
        name="Reference",
        description="a2a-sdk's reference server, answering at once.",
        version="1",
        supported_interfaces=[
            AgentInterface(url=endpoint, protocol_binding="JSONRPC", protocol_version="1.0")
        ],
        capabilities=AgentCapabilities(),
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain"],
        skills=[AgentSkill(id="talk", name="Talk", description="Answers.", tags=["talk"])],
        security_schemes={
            "bearer": SecurityScheme(
                http_auth_security_scheme=HTTPAuthSecurityScheme(scheme="Bearer")
            )
        },
    )
    handler = DefaultRequestHandler(
        agent_executor=InstantExecutor(), task_store=task_store(database), agent_card=card
    )
    routes = [*create_agent_card_routes(card), *create_jsonrpc_routes(handler, "/a2a")]
    return BearerCheck(Starlette(routes=routes))


def task_store(database: Path | None) -> Any:
    from a2a.server.tasks import DatabaseTaskStore, InMemoryTaskStore

    if database is None:
        return InMemoryTaskStore()
    from sqlalchemy import event
    from sqlalchemy.ext.asyncio import create_async_engine

    engine = create_async_engine(f"sqlite+aiosqlite:///{database}")

    @event.listens_for(engine.sync_engine, "connect")
    def durable(connection: Any, _record: Any) -> None:
        cursor = connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA synchronous=FULL")
        cursor.close()

    return DatabaseTaskStore(engine)


def serve_reference(hashes_file: Path, database: Path | None) -> None:
    """Run the reference server until SIGTERM; its first line on stdout is `port <n> <stack>`."""
    import uvicorn

    hashes = frozenset(hashes_file.read_text().split())
    # IPPROTO_TCP spelled out: asyncio sets TCP_NODELAY only on sockets whose proto says TCP, and
    # a plain socket.socket() says 0. Without it every answer waited ~40 ms (Nagle against
    # delayed ACK: uvicorn writes the head and the body apart).
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    app = reference_app(hashes, f"http://127.0.0.1:{port}/a2a", database)
    # What uvicorn's "auto" picks: uvloop and httptools when installed, else asyncio and h11.
    loop = "uvloop" if importlib.util.find_spec("uvloop") else "asyncio"
    parser = "httptools" if importlib.util.find_spec("httptools") else "h11"
    config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="off")
    print(f"port {port} uvicorn {uvicorn.__version__} ({loop}, {parser})", flush=True)
    uvicorn.Server(config).run(sockets=[sock])


@contextmanager
def reference_server(
    folder: Path, keys: Sequence[str], *, database: bool
) -> Iterator[tuple[str, int, str]]:
    """The reference server in a subprocess; yields (its JSON-RPC URL, its pid, its stack)."""
    folder.mkdir(parents=True, exist_ok=True)
    hashes = folder / "reference-keys.txt"
    hashes.write_text("\n".join(hashlib.sha256(k.encode()).hexdigest() for k in keys))
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "benchmarks._reference",
            str(hashes),
            *([str(folder / "reference-tasks.sqlite3")] if database else []),
        ],
        stdout=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert process.stdout is not None
        first = process.stdout.readline().split(maxsplit=2)  # blocks until it has bound
        if len(first) < 2 or first[0] != "port":
            raise RuntimeError("the reference server did not start")
        url = f"http://127.0.0.1:{first[1]}/a2a"
        deadline = time.monotonic() + 30
        while True:  # bound is not yet listening: wait for uvicorn to answer
            try:
                httpx.get(url.replace("/a2a", "/.well-known/agent-card.json"), timeout=2)
                break
            except httpx.TransportError:
                if time.monotonic() > deadline or process.poll() is not None:
                    raise RuntimeError("the reference server did not answer") from None
                time.sleep(0.05)
        yield url, process.pid, first[2] if len(first) > 2 else ""
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(5)
        if process.stdout is not None:
            process.stdout.close()


if __name__ == "__main__":
    serve_reference(Path(sys.argv[1]), Path(sys.argv[2]) if len(sys.argv) > 2 else None)
