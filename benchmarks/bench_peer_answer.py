"""The door's SendMessage after the HTTP layer: `PeerService.answer` in-process, on a real Store
(a SQLite file in a temporary folder, WAL, synchronous=FULL) with the built-in offline agent
answering at once (offline_delay=0), as bench_door.py's Conch server runs it.

What it prints: the process's CPU time (all threads: the event loop and the store's writer) per
message, one caller and `--concurrency` at once, and the event loop's own thread time. The timed
part also makes each JSON-RPC body and reads it (calls.read_call), as the door does before
`answer`; HTTP is not in it (bench_door.py measures the whole door). The same
pattern as bench_door.py: each pairing sends 5 messages in one context (its first opens the peer
chat), then is not used again. `--profile FILE` runs cProfile over the concurrent part (the event
loop's thread only) and prints its top. Prints; never asserts.

    .venv/bin/python -m benchmarks.bench_peer_answer [--messages 800] [--concurrency 8]
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import json
import pstats
import secrets
import tempfile
import time
from pathlib import Path

import httpx

from conch_jupyter.a2a.door.calls import read_call
from conch_jupyter.agents.agent_store import AgentStore
from conch_jupyter.core.sealed import SealedFile
from conch_jupyter.door.pairing import Pairing
from conch_jupyter.door.service import PeerService
from conch_jupyter.providers.base import ProviderConfig
from conch_jupyter.rounds.turn import Turns
from conch_jupyter.store.chats import Store
from conch_jupyter.store.hub import Hub

# The checkout first, so its conch_jupyter is the one measured.
from ._machine import code_line, load_line, machine_line

PER_KEY = 5
QUESTION = "What would you look at first in a quarterly sales table?"


def body(context_id: str, n: int) -> bytes:
    return json.dumps(
        {
            "jsonrpc": "2.0",
            "id": n,
            "method": "SendMessage",
            "params": {
                "message": {
                    "messageId": secrets.token_hex(8),
                    "contextId": context_id,
                    "role": "ROLE_USER",
                    "parts": [{"text": QUESTION}],
                }
            },
        }
    ).encode()


async def run(folder: Path, messages: int, concurrency: int, profile: Path | None) -> None:
    sealed = SealedFile(folder / "data" / "models.secrets.json", folder / "seal.key")
    agents = AgentStore(folder / "data" / "agents" / "agents.json", sealed, time.time)
    agent = agents.ensure_defaults(ProviderConfig("offline", model="offline"))[0]
    http = httpx.AsyncClient()
    with Store(folder / "data" / "conch.sqlite3", time.time) as store:
        turns = Turns(store, agents, Hub(), http, offline_delay=0.0)
        peers = PeerService(store=store, agents=agents, turns=turns, clock=time.time)
        made = 0

        async def client(count: int) -> None:
            nonlocal made
            while count > 0:
                made += 1
                pairing = Pairing(f"p_{made:016x}", f"Peer {made}", (agent.id,), False, "", 0.0)
                context = secrets.token_hex(8)
                for n in range(min(PER_KEY, count)):
                    call = read_call(body(context, n), "application/json", "1.0")
                    done = await peers.answer(call, pairing, agent, "http://127.0.0.1/a2a")
                    assert done["task"]["status"]["state"] == "TASK_STATE_COMPLETED", done
                count -= PER_KEY

        async def measure(label: str, clients: int, total: int, prof: Path | None) -> None:
            profiler = cProfile.Profile() if prof is not None else None
            cpu, loop_cpu, wall = time.process_time(), time.thread_time(), time.perf_counter()
            if profiler is not None:
                profiler.enable()
            await asyncio.gather(*(client(total // clients) for _ in range(clients)))
            if profiler is not None:
                profiler.disable()
            cpu = time.process_time() - cpu
            loop_cpu = time.thread_time() - loop_cpu
            wall = time.perf_counter() - wall
            per = 1e6 / total
            print(
                f"  {label:<12} {total / wall:8.0f} msg/s   CPU {cpu * per:6.0f} µs/msg"
                f"   event loop {loop_cpu * per:6.0f} µs/msg   writer+rest"
                f" {(cpu - loop_cpu) * per:5.0f} µs/msg"
            )
            if profiler is not None and prof is not None:
                profiler.dump_stats(prof)
                stats = pstats.Stats(str(prof))
                stats.sort_stats("tottime").print_stats(25)

        await measure("warm-up", 1, 40, None)
        for _ in range(2):
            await measure("1 client", 1, messages // 4, None)
            await measure(f"{concurrency} at once", concurrency, messages, None)
        if profile is not None:
            await measure(f"{concurrency}, profiled", concurrency, messages, profile)
        await peers.close()
    await http.aclose()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--messages", type=int, default=800)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--profile", type=Path)
    args = parser.parse_args()
    print("PeerService.answer in-process, offline agent, delay 0")
    print(machine_line())
    print(code_line())
    print(load_line())
    with tempfile.TemporaryDirectory(prefix="conch-bench-peer-") as folder:
        asyncio.run(run(Path(folder), args.messages, args.concurrency, args.profile))


if __name__ == "__main__":
    main()
