"""How long a model's streamed chunk takes to reach a client of Conch's event stream, next to the
same stream read straight from the model.

The model is a scripted OpenAI-compatible server (tests/support/scripted_models.py) in this process
that stamps each text chunk (time.perf_counter_ns) just before writing it to the socket. Each
chunk's text is unique ("r03c117 "), so wherever it arrives it can be matched to its stamp.

- Through Conch: a real Jupyter server in a subprocess (the tests' JupyterProcess) with one agent
  on the scripted server; a message in a chat starts one reply; a client in this process follows
  the chat's event stream (`GET conch/api/conversations/{id}/events`, server-sent events) and
  stamps each `delta` as it is read. In between: Conch's HTTP client and SSE reader, the reply
  loop, the hub's queue, tornado writing and flushing each event.
- Straight: an httpx client in this process posts to the scripted server itself and stamps each
  chunk's `data:` event as it is read, with the same line reader.

Both stamps come from this process's clock. The model server runs in its own thread, so on both
paths it shares the GIL with the client that reads. Replies alternate between the two paths, and
the first of each is a warm-up. Prints; never asserts on speed.

    .venv/bin/python -m benchmarks.bench_stream_latency [--replies 8] [--chunks 200] [--delay 0.005]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import statistics
import tempfile
import time
from asyncio import StreamReader, StreamWriter
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from tests.support.jupyter_process import JupyterProcess
from tests.support.scripted_models import (
    RecordedRequest,
    Reply,
    ScriptedModels,
    _chunk,
    _openai_events,
)

from ._jupyter import api_client, checked, conch_server, server_code_line, sse_events
from ._machine import code_line, disk_line, load_line, machine_line, summarize

_HEAD = (
    b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
    b"cache-control: no-cache\r\ntransfer-encoding: chunked\r\nconnection: close\r\n\r\n"
)


class StampedModels(ScriptedModels):
    """ScriptedModels whose OpenAI stream stamps every text chunk just before writing it."""

    def __init__(self) -> None:
        super().__init__()
        self.written: dict[str, int] = {}  # chunk text → perf_counter_ns

    # Overrides a private method of the test double: the benchmark needs the moment each chunk
    # is written, which it has no public hook for, and must not change tests/. The wire format
    # is the double's own (_openai_events); what is left out is only its fault injection.
    async def _stream(
        self, reply: Reply, request: RecordedRequest, reader: StreamReader, writer: StreamWriter
    ) -> None:
        writer.write(_HEAD)
        pieces = reply.pieces()
        text: str | None = None  # the piece the next event carries, if it carries one
        for step in _openai_events(reply, str((request.json or {}).get("model", ""))):
            if isinstance(step, int):  # a marker: the next event is piece `step`, if any
                text = pieces[step] if step < len(pieces) else None
                if step and reply.delay_per_chunk:
                    await asyncio.sleep(reply.delay_per_chunk)
                continue
            if text is not None:
                self.written[text] = time.perf_counter_ns()
                text = None
            await _chunk(writer, step)
        writer.write(b"0\r\n\r\n")
        await writer.drain()


def script(models: StampedModels, number: int, chunks: int, delay: float) -> list[str]:
    """Queue reply `number`; its chunks' texts."""
    texts = [f"r{number:02d}c{i:03d} " for i in range(chunks)]
    models.script(Reply(chunks=texts, delay_per_chunk=delay))
    return texts


# --- through Conch ----------------------------------------------------------------------------


class Follower:
    """A client of the chat's event stream: stamps each delta, reports each reply's end."""

    def __init__(self, client: httpx.AsyncClient, chat_id: str) -> None:
        self.client = client
        self.chat_id = chat_id
        self.ready = asyncio.Event()
        self.ends: asyncio.Queue[None] = asyncio.Queue()
        self.arrived: dict[str, int] = {}

    async def run(self) -> None:
        async with self.client.stream("GET", f"conversations/{self.chat_id}/events") as response:
            if response.status_code != 200:
                raise RuntimeError(f"the event stream answered {response.status_code}")
            async for kind, data in sse_events(response.aiter_lines()):
                now = time.perf_counter_ns()
                if kind == "delta":
                    self.arrived[json.loads(data)["text"]] = now
                elif kind == "snapshot":
                    self.ready.set()
                elif kind == "message" and json.loads(data)["message"]["role"] == "agent":
                    self.ends.put_nowait(None)  # the reply, stored: it is over


async def make_agent(api: httpx.AsyncClient, models: ScriptedModels) -> str:
    """One agent on the scripted server, alone in the room; a chat for it. The chat's id."""
    for default in ("researcher", "writer"):
        await api.delete(f"agents/{default}")
    provider = {
        "kind": "openai",
        "model": "scripted",
        "base_url": models.openai_url,
        "api_key": "sk-bench",
    }
    await checked(await api.post("agents", json={"name": "Streamer", "provider": provider}), 201)
    chat = await checked(await api.post("conversations", json={"title": "bench"}), 201)
    return str(chat["id"])


async def through_conch(api: httpx.AsyncClient, chat_id: str, follower: Follower) -> None:
    """One reply through Conch, until the event stream says it is over."""
    body = {"text": "Go on, please."}
    await checked(await api.post(f"conversations/{chat_id}/messages", json=body), 202)
    await asyncio.wait_for(follower.ends.get(), 60)


# --- straight from the model ------------------------------------------------------------------


async def straight(
    http: httpx.AsyncClient, models: ScriptedModels, arrived: dict[str, int]
) -> None:
    """One reply read by a client of the model itself, as Conch's provider would ask for it."""
    body = {
        "model": "scripted",
        "messages": [{"role": "user", "content": "Go on, please."}],
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    url = f"{models.openai_url}/chat/completions"
    headers = {"authorization": "Bearer sk-bench", "accept": "text/event-stream"}
    async with http.stream("POST", url, json=body, headers=headers) as response:
        async for _, data in sse_events(response.aiter_lines()):
            now = time.perf_counter_ns()
            if data == "[DONE]":
                break
            choices = json.loads(data).get("choices") or [{}]
            text = choices[0].get("delta", {}).get("content")
            if text:
                arrived[text] = now


# --- the run ----------------------------------------------------------------------------------


@dataclass
class Measured:
    """One path in one case: chunk written → chunk read, in ns, and what went missing."""

    label: str
    latencies: list[int] = field(default_factory=list)
    spans: list[int] = field(default_factory=list)  # per reply: first written → last read
    sent: int = 0
    missing: int = 0


@dataclass(frozen=True)
class Case:
    label: str
    replies: int
    delay: float


def collect(
    path: Measured, texts: list[str], written: dict[str, int], arrived: dict[str, int]
) -> None:
    path.sent += len(texts)
    for text in texts:
        if text in arrived and text in written:
            path.latencies.append(arrived[text] - written[text])
        else:
            path.missing += 1
    if texts[0] in written and texts[-1] in arrived:
        path.spans.append(arrived[texts[-1]] - written[texts[0]])


async def run(
    server: JupyterProcess, models: StampedModels, cases: list[Case], chunks: int
) -> list[tuple[Measured, Measured]]:
    results = []
    follow = httpx.Timeout(30.0, read=None)
    async with contextlib.AsyncExitStack() as stack:
        api = await stack.enter_async_context(api_client(server))
        chat_id = await make_agent(api, models)
        watcher = await stack.enter_async_context(api_client(server, timeout=follow))
        follower = Follower(watcher, chat_id)
        following = asyncio.create_task(follower.run())
        http = await stack.enter_async_context(httpx.AsyncClient(timeout=60, trust_env=False))
        await asyncio.wait_for(follower.ready.wait(), 10)
        number = 0
        for case in cases:
            conch, ref = Measured("through Conch"), Measured("straight from the model")
            for round_ in range(case.replies + 1):  # round 0 is the warm-up of each path
                order = ["conch", "ref"] if round_ % 2 == 0 else ["ref", "conch"]
                for which in order:
                    texts = script(models, number, chunks, case.delay)
                    number += 1
                    if which == "conch":
                        await through_conch(api, chat_id, follower)
                        arrived = follower.arrived
                    else:
                        arrived = {}
                        await straight(http, models, arrived)
                    if round_ > 0:
                        path = conch if which == "conch" else ref
                        collect(path, texts, models.written, arrived)
            results.append((conch, ref))
        following.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await following
    return results


def report(case: Case, chunks: int, conch: Measured, ref: Measured) -> None:
    apart = f"{case.delay * 1e3:g} ms apart" if case.delay else "written back to back"
    print(f"{case.label}: {case.replies} replies per path, {chunks} chunks each, {apart}")
    summaries = []
    for path in (conch, ref):
        stats = summarize(path.latencies)
        summaries.append(stats)
        slow = sum(1 for t in path.latencies if t > 10_000_000)
        print(
            f"  {path.label:<24} {stats.ms()}   max {max(path.latencies) / 1e6:7.2f} ms"
            f"   >10 ms: {slow}   missing: {path.missing} of {path.sent}"
        )
    for path in (conch, ref):
        span = statistics.median(path.spans) / 1e6
        print(f"  {path.label:<24} whole reply, first chunk written → last read: {span:.1f} ms")
    ours, theirs = summaries
    print(
        f"  Conch / straight: median {ours.median / theirs.median:.1f}x, p90 "
        f"{ours.p90 / theirs.p90:.1f}x, p99 {ours.p99 / theirs.p99:.1f}x; Conch adds "
        f"{(ours.median - theirs.median) / 1e6:.3f} ms at the median"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--replies", type=int, default=8, help="measured replies per path")
    parser.add_argument("--chunks", type=int, default=200, help="text chunks per reply")
    parser.add_argument("--delay", type=float, default=0.005, help="seconds between chunks")
    parser.add_argument(
        "--burst-replies", type=int, default=4, help="replies written with no delay (0: none)"
    )
    args = parser.parse_args()
    cases = [Case("paced", args.replies, args.delay)]
    if args.burst_replies:
        cases.append(Case("burst", args.burst_replies, 0.0))

    load_at_start = load_line()
    started = time.monotonic()
    models = StampedModels()
    with (
        tempfile.TemporaryDirectory(prefix="conch-bench-stream-") as tmp,
        models,
        conch_server(Path(tmp)) as server,
    ):
        disk = disk_line(Path(tmp))
        results = asyncio.run(run(server, models, cases, args.chunks))
    took = time.monotonic() - started

    print("Chunk → client: a model's streamed chunk, written → read by a client")
    print(f"machine: {machine_line()}")
    print(code_line())
    print(server_code_line())
    print(
        f"date: {time.strftime('%Y-%m-%d')}   {load_at_start} (at the start), {load_line()} (end)"
    )
    print(f"{disk}; {took:.0f} s in all, each path's first reply of a case a warm-up")
    for case, (conch, ref) in zip(cases, results, strict=True):
        print()
        report(case, args.chunks, conch, ref)


if __name__ == "__main__":
    main()
