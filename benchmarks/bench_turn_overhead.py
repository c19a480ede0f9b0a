"""What Conch itself adds between two turns of a round, with a model that answers instantly.

The gap measured: from the moment the scripted model server has sent the last byte of reply N
to the moment request N+1 has arrived at it, both stamped by the model server's own clock. In
between, all of it Conch's: reading the end of the stream, storing the reply and the next
turn's note (SQLite, WAL, synchronous=FULL), the engine's decision, publishing to the one
follower of the chat's event stream, building the next request (history, system prompt, the
agent's sealed key) and a new connection to the model (the scripted server closes each one
after its reply, as `connection: close` says; a hosted API would keep it alive).

Set-up: a real Jupyter server in a subprocess (the tests' JupyterProcess, see _jupyter.py) with
Conch enabled and its data in a temporary folder; three agents on a scripted OpenAI-compatible
server (tests/support/scripted_models.py) that hand on in a cycle, Ann "@Bob", Bob "@Cat", Cat
"@Ann", so every round is 8 replies and ends at the reply limit; rounds started one after another
over HTTP in one chat, while a second client follows the chat's server-sent events. Only gaps inside
a round count (7 per round): the time between rounds is this script's own HTTP round trip. The
first rounds are warm-up.

Side by side: the pure engine (rounds.Round) driven through the same rounds with no I/O, timing
`handle(ReplyEnded(...))` to the next Speak decision, so the ratio shows what storage, HTTP and
fan-out cost. Prints; never asserts on speed.

    .venv/bin/python -m benchmarks.bench_turn_overhead [--rounds 60] [--warmup 3] [--followers 1]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import json
import pstats
import re
import tempfile
import threading
import time
from asyncio import StreamReader, StreamWriter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from conch_jupyter.rounds.engine import ReplyEnded, Roster, Round, Speak
from tests.support.jupyter_process import JupyterProcess
from tests.support.scripted_models import RecordedRequest, Reply, ScriptedModels

from ._jupyter import (
    api_client,
    checked,
    conch_server,
    enable_floor,
    profile,
    server_code_line,
    sse_events,
)
from ._machine import code_line, cpu_split_ns, disk_line, load_line, machine_line, summarize

AGENTS = ("Ann", "Bob", "Cat")
# Short replies that hand on, a few words each: every word is a delta fanned out to the follower.
REPLIES = {
    "Ann": "Sources checked, three options found. @Bob",
    "Bob": "Draft written from those options. @Cat",
    "Cat": "Reviewed; one fix needed. @Ann",
}
REPLIES_PER_ROUND = 8
SPEAKER = re.compile(r"^You are (.+?)\.", re.M)


# --- the model server, with a clock ---------------------------------------------------------


@dataclass(frozen=True)
class Exchange:
    """One model request as the model server saw it, in perf_counter_ns."""

    round: int
    accepted: int  # the connection was accepted
    arrived: int  # the whole request (head and body) had been read
    finished: int  # the last byte of the streamed reply was handed to the socket


class TimedModels(ScriptedModels):
    """ScriptedModels that stamps every exchange; `round` tags them with the driver's round."""

    def __init__(self) -> None:
        super().__init__()
        self.round = -1
        self._exchanges: list[Exchange] = []
        self._accepted: dict[int, int] = {}
        self._lock = threading.Lock()

    # Both hooks override private methods of the test double: the benchmark needs the moments
    # it has no public hook for, and must not change tests/.
    async def _handle(self, reader: StreamReader, writer: StreamWriter) -> None:
        self._accepted[id(writer)] = time.perf_counter_ns()
        await super()._handle(reader, writer)

    async def _answer(
        self, request: RecordedRequest, reader: StreamReader, writer: StreamWriter
    ) -> None:
        arrived = time.perf_counter_ns()
        accepted = self._accepted.pop(id(writer), arrived)
        round_now = self.round
        await super()._answer(request, reader, writer)
        finished = time.perf_counter_ns()  # after the final chunk's drain()
        with self._lock:
            self._exchanges.append(Exchange(round_now, accepted, arrived, finished))

    def exchanges(self) -> list[Exchange]:
        """Every exchange so far, in the order the replies finished."""
        with self._lock:
            return list(self._exchanges)


def respond(body: Any) -> Reply:
    """Each agent's reply, picked by the name its system prompt gives it."""
    messages = body.get("messages", [])
    system = messages[0]["content"] if messages else ""
    found = SPEAKER.search(system)
    if not found:
        raise RuntimeError("a model request without the speaker's name in its system prompt")
    return Reply(text=REPLIES[found.group(1)])


# --- driving rounds over HTTP ---------------------------------------------------------------


async def make_agents(api: httpx.AsyncClient, models: ScriptedModels) -> None:
    """Replace the default agents with three on the scripted OpenAI-compatible server."""
    for default in ("researcher", "writer"):
        await api.delete(f"agents/{default}")
    for name in AGENTS:
        body = {
            "name": name,
            "persona": f"{name}, one of three agents taking turns",
            "provider": {
                "kind": "openai",
                "model": "scripted",
                "base_url": models.openai_url,
                "api_key": "sk-bench",
            },
        }
        await checked(await api.post("agents", json=body), 201)


class Follower:
    """A second client reading the chat's event stream; it reports each round's end."""

    def __init__(self, client: httpx.AsyncClient, chat_id: str) -> None:
        self.client = client
        self.chat_id = chat_id
        self.ready = asyncio.Event()
        self.ends: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self.items: dict[str, int] = {}

    async def run(self) -> None:
        async with self.client.stream("GET", f"conversations/{self.chat_id}/events") as response:
            if response.status_code != 200:
                raise RuntimeError(f"the event stream answered {response.status_code}")
            async for kind, raw in sse_events(response.aiter_lines()):
                self.items[kind] = self.items.get(kind, 0) + 1
                if kind == "snapshot":
                    self.ready.set()
                elif kind == "event":
                    event = json.loads(raw)["event"]
                    if event["type"] == "round.ended":
                        self.ends.put_nowait(event)


async def _round_end_without_follower(
    api: httpx.AsyncClient, chat_id: str, models: TimedModels, number: int
) -> dict[str, Any]:
    """With nobody following: wait for the round's last model request, then ask the chat."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        # Polled only once the last reply is out, so the measured gaps see no extra requests.
        done = sum(1 for e in models.exchanges() if e.round == number)
        if done >= REPLIES_PER_ROUND:
            chat = await checked(await api.get(f"conversations/{chat_id}"), 200)
            if not chat["busy"]:
                ends = [e for e in chat["events"] if e["type"] == "round.ended"]
                return dict(ends[-1])
        await asyncio.sleep(0.005)
    raise RuntimeError(f"round {number} did not end within 30 s")


@dataclass(frozen=True)
class ServerRun:
    gaps: list[int]  # ns, reply N's last byte sent → request N+1 read
    connects: list[int]  # ns, of each gap: request N+1's connection accepted → request read
    rounds: int
    followers: int
    follower_items: dict[str, int]  # what the first follower received, by kind
    seconds: float
    cpu: tuple[int, int]  # ns, the server's CPU time over the measured rounds: user, system


async def drive(
    server: JupyterProcess,
    models: TimedModels,
    rounds: int,
    warmup: int,
    followers: int = 1,
    profile_to: Path | None = None,
) -> ServerRun:
    follow = httpx.Timeout(30.0, read=None)  # an event stream is quiet between rounds
    async with contextlib.AsyncExitStack() as stack:
        api = await stack.enter_async_context(api_client(server))
        await make_agents(api, models)
        chat = await checked(await api.post("conversations", json={"title": "bench"}), 201)
        chat_id = chat["id"]
        watching: list[Follower] = []
        tasks: list[asyncio.Task[None]] = []
        for _ in range(followers):  # each its own client and connection, like a second tab
            client = await stack.enter_async_context(api_client(server, timeout=follow))
            watching.append(Follower(client, chat_id))
            tasks.append(asyncio.create_task(watching[-1].run()))
        await asyncio.wait_for(asyncio.gather(*(f.ready.wait() for f in watching)), 10)
        key = ""
        if profile_to is not None:  # the profiler switch wants a door key: any pairing's
            ann = next(
                a
                for a in (await checked(await api.get("agents"), 200))["agents"]
                if a["name"] == "Ann"
            )
            paired = await api.post("pairings", json={"agents": [ann["id"]]})
            key = (await checked(paired, 201))["key"]
        started, cpu_at_start = time.monotonic(), (0, 0)
        for number in range(warmup + rounds):
            models.round = number
            if number == warmup:
                assert server.process is not None
                cpu_at_start = cpu_split_ns(server.process.pid)
                if profile_to is not None:
                    profile(server, key, "start")
            text = {"text": "@Ann go round the table"}
            await checked(await api.post(f"conversations/{chat_id}/messages", json=text), 202)
            if watching:
                end = await asyncio.wait_for(watching[0].ends.get(), 30)
            else:
                end = await _round_end_without_follower(api, chat_id, models, number)
            if (end["turns"], end["reason"]) != (REPLIES_PER_ROUND, "replies"):
                raise RuntimeError(f"round {number} ended unexpectedly: {end}")
        seconds = time.monotonic() - started
        assert server.process is not None
        cpu_at_end = cpu_split_ns(server.process.pid)
        cpu = (cpu_at_end[0] - cpu_at_start[0], cpu_at_end[1] - cpu_at_start[1])
        if profile_to is not None:
            profile(server, key, "stop", profile_to)
        for task in tasks:
            task.cancel()
        for outcome in await asyncio.gather(*tasks, return_exceptions=True):
            if not isinstance(outcome, asyncio.CancelledError | None):
                raise RuntimeError("an event-stream follower failed") from outcome

    gaps, connects = [], []
    for before, after in itertools.pairwise(models.exchanges()):
        if before.round == after.round and before.round >= warmup:
            gaps.append(after.arrived - before.finished)
            connects.append(after.arrived - after.accepted)
    if len(gaps) != rounds * (REPLIES_PER_ROUND - 1):
        raise RuntimeError(f"expected {rounds * (REPLIES_PER_ROUND - 1)} gaps, got {len(gaps)}")
    items = watching[0].items if watching else {}
    return ServerRun(gaps, connects, rounds, followers, dict(items), seconds, cpu)


# --- the reference: the pure engine alone ---------------------------------------------------


def engine_gaps(rounds: int, warmup: int) -> list[int]:
    """The same rounds through rounds.Round alone: reply N in → Speak for N+1 out, in ns."""
    roster = Roster(ours=AGENTS)
    clock = time.perf_counter_ns
    gaps: list[int] = []
    for number in range(warmup + rounds):
        rnd = Round(named=["Ann"], roster=roster)
        decision = rnd.start()
        while isinstance(decision, Speak):
            speaker = decision.agent
            start = clock()
            decision = rnd.handle(ReplyEnded(speaker, REPLIES[speaker]))
            took = clock() - start
            if isinstance(decision, Speak) and number >= warmup:
                gaps.append(took)
        if rnd.replies != REPLIES_PER_ROUND:
            raise RuntimeError(f"the engine's round ended after {rnd.replies} replies")
    return gaps


# --- the report -----------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=60, help="measured rounds (7 gaps each)")
    parser.add_argument("--warmup", type=int, default=3, help="rounds run first, not measured")
    parser.add_argument(
        "--followers", type=int, default=1, help="clients following the chat's event stream"
    )
    parser.add_argument(
        "--profile", type=Path, help="cProfile the server over the measured rounds, to this file"
    )
    args = parser.parse_args()

    load_at_start = load_line()
    models = TimedModels()
    with contextlib.ExitStack() as stack:
        tmp = stack.enter_context(tempfile.TemporaryDirectory(prefix="conch-bench-"))
        if args.profile:
            enable_floor(Path(tmp))
        stack.enter_context(models)
        server = stack.enter_context(conch_server(Path(tmp)))
        models.responder = respond
        disk_before = disk_line(Path(tmp))
        profile_to = args.profile.resolve() if args.profile else None
        run = asyncio.run(
            drive(server, models, args.rounds, args.warmup, args.followers, profile_to)
        )
        disk_after = disk_line(Path(tmp))
    engine = engine_gaps(rounds=20_000, warmup=500)

    gap, alone = summarize(run.gaps), summarize(engine)
    connect = summarize(run.connects)
    print("Per-turn overhead, instant model: reply N's last byte → request N+1 at the model")
    print(f"machine: {machine_line()}")
    print(code_line())
    print(server_code_line())
    print(f"date: {time.strftime('%Y-%m-%d')}   {load_at_start}")
    print(f"{disk_before} (before the rounds); after them: {disk_after.split(') ')[1]}")
    print()
    print(
        f"Jupyter server + SQLite (synchronous=FULL) + {run.followers} event-stream follower(s): "
        f"{run.rounds} rounds of {REPLIES_PER_ROUND} replies in {run.seconds:.1f} s, "
        f"{gap.count} turns measured"
    )
    print(f"  gap                         {gap.ms()}")
    print(f"  of it, accepted → request   {connect.ms()}")
    replies = run.rounds * REPLIES_PER_ROUND
    user, system = run.cpu
    print(
        f"  server CPU per reply        {(user + system) / replies / 1e6:.2f} ms"
        f" (user {user / replies / 1e6:.2f}, system {system / replies / 1e6:.2f};"
        f" {replies} replies: the turn, its stream and fan-out)"
    )
    if run.follower_items:
        items = ", ".join(f"{k} {v}" for k, v in sorted(run.follower_items.items()))
        print(f"  a follower received: {items}")
    print(f"pure engine (rounds.Round, no I/O): {alone.count} turns measured")
    print(f"  gap                         {alone.ms()}")
    print()
    print(f"ratio of medians, server / engine alone: {gap.median / alone.median:,.0f}x")
    if args.profile:
        print(f"\nprofiled: the server over the measured rounds, {args.profile}")
        pstats.Stats(str(args.profile)).sort_stats("tottime").print_stats(30)


if __name__ == "__main__":
    main()
