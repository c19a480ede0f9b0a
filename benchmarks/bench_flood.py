"""A user's chat API while the door takes a flood of junk: the latency of reading a running chat,
quiet and then during 20,000 junk requests at the door (2,000 with --quick).

The flood is tests/load/test_load.py's own (one way to flood): 30 kinds of junk (no key, wrong and
garbage keys, browsers, foreign Hosts, malformed, oversized and nested bodies, messages past the
bucket …) from a spawned child process, from three loopback addresses (127.x.y.z) where Linux
allows, 24 callers at once. The chat is that file's RunningChat: Dot, Eve and Fay on a scripted
model server hand on in rounds of 8 streamed replies, a new round whenever one ends, and the chat
is read (`GET conversations/{id}`, as the user's view does) every 20 ms. Prints; never asserts.

    .venv/bin/python -m benchmarks.bench_flood [--quick] [--requests 20000]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import pstats
import tempfile
import time
from pathlib import Path

from tests.load.test_load import (
    GUESSER,
    INSTANT,
    STREAMED,
    FloodPlan,
    RunningChat,
    flood_child,
    loopback_addresses,
    respond,
)
from tests.support.scripted_models import ScriptedModels

from ._jupyter import conch_server, enable_floor, profile, server_code_line
from ._machine import code_line, cpu_ns, disk_line, load_line, machine_line, summarize


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--requests", type=int, default=20_000, help="junk requests in all")
    parser.add_argument("--quick", action="store_true", help="2,000 requests")
    parser.add_argument(
        "--profile", type=Path, help="cProfile the server during the flood, to this file"
    )
    args = parser.parse_args()
    requests = 2_000 if args.quick else args.requests
    load_at_start = load_line()
    with (
        tempfile.TemporaryDirectory(prefix="conch-bench-flood-") as tmp,
        ScriptedModels() as models,
    ):
        folder = Path(tmp)
        disk = disk_line(folder)
        if args.profile:
            enable_floor(folder)
        models.responder = respond
        with conch_server(folder) as server, server.client(timeout=30) as http:
            assert server.process is not None
            pid = server.process.pid
            for name in (*INSTANT, *STREAMED):
                provider = {"kind": "openai", "model": "m", "base_url": models.openai_url}
                made = http.post(server.api("agents"), json={"name": name, "provider": provider})
                made.raise_for_status()
            paired = http.post(server.api("pairings"), json={"agents": ["researcher"]})
            paired.raise_for_status()
            addresses, shared = loopback_addresses(["anyone", GUESSER, "keyed"])
            plan = FloodPlan(
                door=server.url,
                port=server.port,
                key=paired.json()["key"],
                jupyter_token=server.token,
                requests=requests,
                seconds=1800,
                addresses=addresses,
                shared_address=shared,
            )
            chat = RunningChat(server, http)
            for _ in range(150):  # the chat's latency with the door quiet
                chat.look()
                time.sleep(0.02)
            quiet, chat.latencies = chat.latencies, []

            out = folder / "flood.json"
            cpu_before = cpu_ns(pid)
            if args.profile:
                profile(server, plan.key, "start")
            child = multiprocessing.get_context("spawn").Process(
                target=flood_child, args=(plan, str(out)), name="conch-flood"
            )
            child.start()
            try:
                while child.is_alive():
                    chat.look()
                    time.sleep(0.02)
            finally:
                if child.is_alive():
                    child.kill()
                child.join(10)
            cpu = cpu_ns(pid) - cpu_before
            if args.profile:
                profile(server, plan.key, "stop", args.profile.resolve())
            flooded = json.loads(out.read_text())
            chat.settle(timeout=60)

    print("A user's chat API during a junk flood at the door")
    print(f"machine: {machine_line()}")
    print(code_line())
    print(server_code_line())
    print(f"date: {time.strftime('%Y-%m-%d')}   {load_at_start} (start), {load_line()} (end)")
    print(disk)
    print(
        f"flood: {flooded['sent']:,} requests in {flooded['seconds']:.1f} s"
        f" ({flooded['per_second']:.0f}/s), from "
        f"{'127.0.0.1 only' if shared else 'three loopback addresses'}; server CPU "
        f"{cpu / max(1, flooded['sent']) / 1e3:.0f} µs per junk request"
    )
    p50, p99 = flooded["door_p50"] * 1e3, flooded["door_p99"] * 1e3
    print(
        f"door answers (not the guesser's, held back on purpose): p50 {p50:.1f}, p99 {p99:.1f} ms"
    )
    for name, samples in (("quiet", quiet), ("during the flood", chat.latencies)):
        s = summarize(samples)
        print(
            f"chat API, {name:<16} {s.median * 1e3:7.2f} ms median, {s.p90 * 1e3:7.2f} ms p90,"
            f" {s.p99 * 1e3:7.2f} ms p99, {max(samples) * 1e3:7.1f} ms max ({len(samples)} reads)"
        )
    print(f"rounds the chat ran meanwhile: {len(chat.sent)}")
    held = sum(n for said, n in flooded["by_kind"]["a wrong key"].items() if said.startswith("429"))
    print(f"wrong keys answered 429: {held} of {sum(flooded['by_kind']['a wrong key'].values())}")
    if args.profile:
        print(f"\nprofiled: the server during the flood, {args.profile}")
        pstats.Stats(str(args.profile)).sort_stats("tottime").print_stats(30)


if __name__ == "__main__":
    main()
