"""How long a model's streamed chunk takes to reach a Jupyter Chat panel's connection (a `.chat`
room, jupyterlab-chat's WebSocket model), next to the same chunk on Conch's own event stream.

The model is bench_stream_latency's StampedModels (the tests' scripted OpenAI-compatible server,
stamping each text chunk just before writing it; every chunk's text unique). A real Jupyter
server with Conch and jupyterlab-chat runs in a subprocess; in this process a person
(tests/support/chat_client.py, the chat panel's own protocol) says "@Streamer go on" in
`bench.chat`, and, for the same replies, a client follows the room's conversation on Conch's
event stream (`GET …/events`, what the notebook's view reads). Each chunk is stamped when the
chat first shows a body holding it, and when its `delta` is read from the event stream: one
clock, this process's.

What it measures is the room's translation: the hub → the chat's message in steps (about ten a
second, `chat_rooms.words.STREAM_STEP_SECONDS`: the WebSocket model rewrites the whole .chat file at
each update) → the panel's WebSocket. The panel's drawing is not in it (JupyterLab's Markdown
renderer, a few ms a message). Goal: median ≤ 150 ms. Prints; never asserts on speed.

    .venv/bin/python -m benchmarks.bench_chat_stream [--replies 6] [--chunks 200] [--delay 0.005]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import tempfile
import time
from pathlib import Path

import httpx
from tornado.httpclient import HTTPRequest
from tornado.websocket import websocket_connect

from tests.support.chat_client import ChatClient
from tests.support.jupyter_process import JupyterProcess

from ._jupyter import api_client, checked, conch_server, server_code_line
from ._machine import code_line, load_line, machine_line, summarize
from .bench_stream_latency import Follower, Measured, StampedModels, collect, script

FILE = "bench.chat"


async def open_chat(server: JupyterProcess) -> ChatClient:
    url = f"ws://127.0.0.1:{server.port}{server.base_url}api/chat/ws/{FILE}"
    request = HTTPRequest(url, headers={"Authorization": f"token {server.token}"})
    return await ChatClient.open(await websocket_connect(request))


def shown_at(chat: ChatClient, message_id: str, texts: list[str]) -> dict[str, int]:
    """When the chat first showed a body holding each chunk (perf_counter ns)."""
    bodies, times = chat.bodies[message_id], chat.seen_at[message_id]
    found: dict[str, int] = {}
    at = 0
    for text in texts:
        while at < len(bodies) and text not in bodies[at]:
            at += 1
        if at == len(bodies):
            break
        found[text] = int(times[at] * 1e9)
    return found


async def one_reply(chat: ChatClient, streamer: str, ends: int) -> str:
    """Ask for one reply in the chat; its chat message's id, once the round's end is shown."""
    before = len(chat.by(streamer))
    await chat.send("@Streamer go on")
    await chat.until(lambda c: len([m for m in c.by("conch") if "answered" in m["body"]]) > ends)
    assert len(chat.by(streamer)) == before + 1, chat.transcript()
    return str(chat.by(streamer)[-1]["id"])


async def run(
    server: JupyterProcess, models: StampedModels, replies: int, chunks: int, delay: float
) -> tuple[Measured, Measured, list[int]]:
    in_chat, on_stream = Measured("in the chat (its WebSocket)"), Measured("Conch's event stream")
    updates: list[int] = []  # chat frames per reply
    async with contextlib.AsyncExitStack() as stack:
        api = await stack.enter_async_context(api_client(server))
        for default in ("researcher", "writer"):
            await api.delete(f"agents/{default}")
        provider = {"kind": "openai", "model": "s", "base_url": models.openai_url, "api_key": "k"}
        made = await checked(
            await api.post("agents", json={"name": "Streamer", "provider": provider}), 201
        )
        streamer = f"conch-{made['id']}"
        body = {"type": "file", "format": "text", "content": "{}"}
        await checked(await api.put(f"{server.url}api/contents/{FILE}", json=body), 201)
        chat = await open_chat(server)
        await chat.until(lambda c: streamer in c.users)
        script(models, 999, 3, 0.0)  # the warm-up, which makes the room
        await one_reply(chat, streamer, 0)
        listed = await checked(await api.get("conversations"), 200)
        [room] = [c["id"] for c in listed["conversations"] if c.get("chat_file") == FILE]
        watcher = await stack.enter_async_context(
            api_client(server, timeout=httpx.Timeout(30.0, read=None))
        )
        follower = Follower(watcher, room)
        following = asyncio.create_task(follower.run())
        await asyncio.wait_for(follower.ready.wait(), 10)
        for number in range(replies):
            texts = script(models, number, chunks, delay)
            message_id = await one_reply(chat, streamer, number + 1)
            collect(in_chat, texts, models.written, shown_at(chat, message_id, texts))
            collect(on_stream, texts, models.written, follower.arrived)
            updates.append(len(chat.bodies[message_id]))
        following.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await following
        chat.ws.close()
    return in_chat, on_stream, updates


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--replies", type=int, default=6)
    parser.add_argument("--chunks", type=int, default=200)
    parser.add_argument("--delay", type=float, default=0.005)
    args = parser.parse_args()
    print(machine_line())
    print(code_line())
    print(server_code_line())
    with (
        tempfile.TemporaryDirectory() as folder,
        StampedModels() as models,
        conch_server(Path(folder)) as server,
    ):
        print(load_line())
        started = time.monotonic()
        chat, stream, updates = asyncio.run(
            run(server, models, args.replies, args.chunks, args.delay)
        )
        took = time.monotonic() - started
    apart = f"{args.delay * 1e3:g} ms apart" if args.delay else "back to back"
    print(f"{args.replies} replies of {args.chunks} chunks {apart} ({took:.0f} s)")
    summaries = []
    for path in (chat, stream):
        stats = summarize(path.latencies)
        summaries.append(stats)
        print(f"  {path.label:<30} {stats.ms()}   missing: {path.missing} of {path.sent}")
    ours, reference = summaries
    print(
        f"  chat / event stream: median {ours.median / reference.median:.1f}x "
        f"(+{(ours.median - reference.median) / 1e6:.1f} ms); goal: the chat's median ≤ 150 ms"
    )
    print(f"  chat updates per reply (median): {sorted(updates)[len(updates) // 2]}")


if __name__ == "__main__":
    main()
