"""The A2A door against the reference a2a-sdk server and against its own stack's floor, side by
side in one run on one machine; then the door again once its data has grown.

Four servers, in three kinds of process, so no two processes share a GIL:
- Conch's door: a real Jupyter server with Conch (the tests' JupyterProcess, offline_delay=0, so
  the built-in offline agent answers at once), one pairing per key;
- the floor: a bare bearer-checked tornado handler in that same Jupyter server (_floor.py), the
  least any handler of this stack costs;
- the reference, twice: a2a-sdk 1.3's own server (_reference.py), with its InMemoryTaskStore, and
  with its DatabaseTaskStore on SQLite (WAL, synchronous=FULL, as Conch's store);
- the load generator (_door_load.py), started afresh for every measurement, which also reads the
  servers' CPU time from /proc.

Cases: GetTask on one task, the agent card with the key (each for a fixed time, one client and
`--concurrency` at once), and SendMessage (a fixed number of messages). Conch's door bounds every
key (one message at a time, 5 at once then 20 a minute), so SendMessage is spread over many
pairings: each key sends its 5 in a row and is not used again. Every case runs in `--rounds`
rounds that alternate which server goes first, so a burst of load from elsewhere falls on all.

Growth: then the door is given 1,000 pairings (made through the API, each timed) and 10,000 door
chats (written into its SQLite file as the door writes them), and every case runs again on the
door and on the floor (the floor as the control for the machine's mood).

`--profile FILE` profiles the Jupyter server (cProfile) during one more round of
`--profile-case` (SendMessage) at `--concurrency`, writes the pstats to FILE and prints the top
of it. `--server-code DIR` runs the Jupyter server on the conch_jupyter of the checkout DIR (as
CONCH_BENCH_SERVER_CODE does, see _jupyter.py): how the "before" columns were made.
Prints; never asserts.

    .venv/bin/python -m benchmarks.bench_door [--quick] [--seconds 2] [--rounds 3]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import pstats
import secrets
import sqlite3
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import httpx

from conch_jupyter.store.rows import ordered_uuid, row_id
from tests.support.jupyter_process import JupyterProcess

from ._door_load import PER_KEY, QUESTION, Load, Plan, run_load
from ._jupyter import conch_server, enable_floor, profile, server_code_line
from ._machine import code_line, disk_line, load_line, machine_line, summarize
from ._reference import reference_server

AGENT = "researcher"  # a default agent: the built-in offline one when no model is configured


@dataclass
class Side:
    """One server as the load generator sees it."""

    label: str
    url: str  # its JSON-RPC endpoint
    card: str  # its agent card's URL
    pid: int
    keys: list[str]  # [0] owns the GetTask task; the rest are handed out for SendMessage
    task_id: str = ""
    used: int = 1  # keys handed out so far

    def take(self, count: int) -> list[str]:
        if self.used + count > len(self.keys):
            raise RuntimeError(f"{self.label} has run out of keys")
        taken = self.keys[self.used : self.used + count]
        self.used += count
        return taken


@dataclass
class Case:
    label: str
    method: str
    concurrency: int
    loads: dict[str, list[Load]] = dataclasses.field(default_factory=dict)


def measure(case: Case, sides: Sequence[Side], rounds: int, seconds: float, keys: int) -> None:
    """`rounds` rounds of the case on every side, the order turning each round."""
    for number in range(rounds):
        turn = number % len(sides)
        for side in [*sides[turn:], *sides[:turn]]:
            plan = Plan(
                url=side.card if case.method == "card" else side.url,
                method=case.method,
                keys=side.take(keys) if case.method == "SendMessage" else [side.keys[0]],
                concurrency=case.concurrency,
                server_pid=side.pid,
                task_id=side.task_id,
                seconds=seconds,
                warmup=20 * case.concurrency,
                label=side.label,
            )
            case.loads.setdefault(side.label, []).append(run_load(plan))


def first_task(url: str, key: str) -> str:
    """Send one message; the id of the task it made (the one GetTask asks for)."""
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "SendMessage",
        "params": {
            "message": {"messageId": "m-first", "role": "ROLE_USER", "parts": [{"text": QUESTION}]}
        },
    }
    headers = {"Authorization": f"Bearer {key}", "A2A-Version": "1.0"}
    answer = httpx.post(url, json=body, headers=headers, timeout=30, trust_env=False).json()
    task = answer["result"]["task"]
    if task["status"]["state"] != "TASK_STATE_COMPLETED":
        raise RuntimeError(f"the first message was not answered: {answer}")
    return str(task["id"])


def pair(server: JupyterProcess, count: int, took: list[float] | None = None) -> list[str]:
    """`count` new pairings for the agent on Conch's door; their keys. Each one's time (as its
    client saw it) goes into `took`."""
    keys = []
    with server.client() as api:
        for n in range(count):
            started = time.perf_counter()
            made = api.post(server.api("pairings"), json={"agents": [AGENT], "label": f"Bench {n}"})
            if took is not None:
                took.append(time.perf_counter() - started)
            if made.status_code != 201:
                raise RuntimeError(f"pairing failed: {made.status_code} {made.text}")
            keys.append(made.json()["key"])
    return keys


def offline_agent(server: JupyterProcess) -> None:
    """Make sure the agent is the built-in offline one (an Ollama on loopback would be found)."""
    with server.client() as api:
        agent = api.get(server.api(f"agents/{AGENT}")).json()
        if agent["provider"]["kind"] != "offline":
            offline = {"provider": {"kind": "offline", "model": "offline"}}
            patched = api.patch(server.api(f"agents/{AGENT}"), json=offline)
            if patched.status_code != 200:
                raise RuntimeError(f"could not make {AGENT} offline: {patched.text}")


def door_chats(database: Path, pairing_ids: Sequence[str], count: int) -> None:
    """`count` door chats spread over the pairings, as the door stores one answered message: the
    peer chat, the caller's words and the reply, and the ended task, with ids made as the store
    makes them. Written beside the running server (WAL lets a second writer wait its turn), in
    one transaction."""
    now = time.time()
    chats, messages, tasks = [], [], []
    for n in range(count):
        pairing = pairing_ids[n % len(pairing_ids)]
        chat, context = row_id("c"), f"ctx-grown-{n}"
        tainted = json.dumps({"kind": "person", "by": "Bench"})
        chats.append((chat, f"Researcher with Bench {n}", now, "peer", AGENT, tainted, pairing,
                      f"{AGENT}/{context}"))  # fmt: skip
        for role, text in (("outside", QUESTION), ("agent", "A sea snail.")):
            messages.append((row_id("m"), chat, role, text, now))
        tasks.append((str(ordered_uuid()), pairing, AGENT, context, chat, "TASK_STATE_COMPLETED",
                      QUESTION, f"m-{n}", "A sea snail.", None, now, now))  # fmt: skip
    db = sqlite3.connect(database, timeout=30, isolation_level=None)
    try:
        db.execute("BEGIN IMMEDIATE")
        db.executemany(
            "INSERT INTO conversations (id, title, created, origin, agent, tainted, pairing_id,"
            " context_key) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            chats,
        )
        db.executemany(
            "INSERT INTO messages (id, conversation_id, role, text, created)"
            " VALUES (?, ?, ?, ?, ?)",
            messages,
        )
        db.executemany(
            "INSERT INTO door_tasks (id, pairing_id, agent, context_id, conversation_id, state,"
            " asked, asked_id, reply, words, created, updated)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            tasks,
        )
        db.execute("COMMIT")
        # Into the database file, as a long-used server's store is (SQLite checkpoints its
        # write-ahead log every 1,000 pages): not left for the server's next commit to copy.
        db.execute("PRAGMA wal_checkpoint(PASSIVE)")
    finally:
        db.close()


# --- the report -----------------------------------------------------------------------------

HEADER = (
    f"  {'':<14} {'req/s':>8} {'p50 ms':>8} {'p90 ms':>8} {'p99 ms':>8}"
    f" {'CPU µs/req':>10} {'server':>7} {'client':>7} {'calls':>6}"
)


@dataclass(frozen=True)
class Row:
    rate: float
    p50: float
    p90: float
    p99: float
    cpu: float  # server CPU ns per request


def row(loads: list[Load]) -> Row:
    pooled = summarize([t for load in loads for t in load.latencies])
    rate = sorted(load.per_second for load in loads)[len(loads) // 2]
    requests = sum(len(load.latencies) for load in loads)
    cpu = sum(load.server_cpu_ns for load in loads) / requests
    return Row(rate, pooled.median, pooled.p90, pooled.p99, cpu)


def report(case: Case, labels: Sequence[str], against: Sequence[str]) -> dict[str, Row]:
    rows = {}
    for label in labels:
        loads = case.loads[label]
        r = rows[label] = row(loads)
        requests = sum(len(load.latencies) for load in loads)
        elapsed = sum(load.elapsed_ns for load in loads)
        server = sum(load.server_cpu_ns for load in loads) / elapsed
        client = sum(load.client_cpu_ns for load in loads) / elapsed
        print(
            f"  {label:<14} {r.rate:8.0f} {r.p50 / 1e6:8.2f} {r.p90 / 1e6:8.2f}"
            f" {r.p99 / 1e6:8.2f} {r.cpu / 1e3:10.0f} {server:7.0%} {client:7.0%} {requests:6d}"
        )
    ours = rows[labels[0]]
    for label in against:
        ref = rows[label]
        print(
            f"  {'Conch/' + label:<14} {ours.rate / ref.rate:7.2f}x {ours.p50 / ref.p50:7.2f}x"
            f" {ours.p90 / ref.p90:7.2f}x {ours.p99 / ref.p99:7.2f}x {cpu_ratio(ours, ref)}"
        )
    return rows


def cpu_ratio(ours: Row, ref: Row) -> str:
    # The CPU time is read in clock ticks: a short run of a light server can read 0.
    return f"{ours.cpu / ref.cpu:9.2f}x" if ref.cpu else f"{'-':>10}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=2.0, help="per GetTask or card round")
    parser.add_argument("--rounds", type=int, default=3, help="measurements per case and server")
    parser.add_argument("--concurrency", type=int, default=8, help="connections at once")
    parser.add_argument("--sequential-keys", type=int, default=12, help="keys per round, 1 client")
    parser.add_argument("--pairings", type=int, default=1000, help="pairings once grown")
    parser.add_argument("--chats", type=int, default=10_000, help="door chats once grown")
    parser.add_argument("--quick", action="store_true", help="1 s, 2 rounds, 200 pairings")
    parser.add_argument("--profile", type=Path, help="write a cProfile of the server here")
    parser.add_argument(
        "--profile-case", choices=["GetTask", "card", "SendMessage"], default="SendMessage"
    )
    parser.add_argument("--server-code", type=Path, help="a checkout whose conch_jupyter to run")
    args = parser.parse_args()
    if args.quick:
        args.seconds, args.rounds, args.pairings, args.chats = 1.0, 2, 200, 2000
    # The Jupyter server finds _floor.py (and, when asked, an older conch_jupyter) this way.
    if args.server_code:
        os.environ["CONCH_BENCH_SERVER_CODE"] = str(args.server_code)

    rounds, conc = args.rounds, args.concurrency
    per_round = {1: args.sequential_keys, conc: 4 * conc}  # SendMessage keys per round
    warm_keys = 2
    sends_keys = rounds * sum(per_round.values())
    keys_needed = 1 + warm_keys + 2 * sends_keys + (per_round[conc] if args.profile else 0)
    load_at_start = load_line()
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="conch-bench-door-") as tmp:
        folder = Path(tmp)
        disk_at_start = disk_line(folder)
        ref_keys = [f"conch_a2a_{secrets.token_urlsafe(32)}" for _ in range(keys_needed)]
        enable_floor(folder)
        with (
            conch_server(folder) as server,
            reference_server(folder / "memory", ref_keys, database=False) as memory,
            reference_server(folder / "sqlite", ref_keys, database=True) as on_disk,
        ):
            assert server.process is not None
            offline_agent(server)
            fresh_took: list[float] = []
            keys = pair(server, 1 + warm_keys + sends_keys, fresh_took)
            conch = Side(
                "Conch",
                f"{server.url}a2a/{AGENT}",
                f"{server.url}a2a/{AGENT}/.well-known/agent-card.json",
                server.process.pid,
                keys,
            )
            floor = Side(
                "floor",
                f"{server.url}bench-floor/a2a",
                f"{server.url}bench-floor/card",
                server.process.pid,
                list(keys),
            )
            references = [
                Side(
                    "ref memory",
                    memory[0],
                    memory[0][: -len("/a2a")] + "/.well-known/agent-card.json",
                    memory[1],
                    ref_keys,
                ),
                Side(
                    "ref SQLite",
                    on_disk[0],
                    on_disk[0][: -len("/a2a")] + "/.well-known/agent-card.json",
                    on_disk[1],
                    list(ref_keys),
                ),
            ]
            sides = [conch, floor, *references]
            for side in sides:
                side.task_id = first_task(side.url, side.keys[0]) if side is not floor else "t"
            cases = [
                Case("GetTask, 1 client", "GetTask", 1),
                Case(f"GetTask, {conc} at once", "GetTask", conc),
                Case("the card, 1 client", "card", 1),
                Case(f"the card, {conc} at once", "card", conc),
                Case("SendMessage, 1 client", "SendMessage", 1),
                Case(f"SendMessage, {conc} at once", "SendMessage", conc),
            ]
            measure(Case("warm-up", "SendMessage", 1), sides, 1, 0, warm_keys)
            for case in cases:
                measure(case, sides, rounds, args.seconds, per_round[case.concurrency])

            # Growth: the door's data as a long-used server's, then every case again.
            grown_took: list[float] = []
            more = max(args.pairings - len(keys), sends_keys + 1 + per_round[conc])
            all_keys = keys + pair(server, more, grown_took)
            conch.keys = floor.keys = all_keys[:1] + all_keys[-(sends_keys + 1 + per_round[conc]) :]
            conch.used = floor.used = 1
            with server.client() as api:
                ids = [p["id"] for p in api.get(server.api("pairings")).json()["pairings"]]
            door_chats(server.data_dir / "conch.sqlite3", ids, args.chats)
            grown = [dataclasses.replace(c, label=c.label, loads={}) for c in cases]
            for case in grown:
                measure(case, [conch, floor], rounds, args.seconds, per_round[case.concurrency])

            profile_text = ""
            if args.profile:
                hottest = Case("profile", args.profile_case, conc)
                profile(server, keys[0], "start")
                measure(hottest, [conch], 1, args.seconds, per_round[conc])
                profile(server, keys[0], "stop", args.profile.resolve())
                profile_text = f"profiled: {args.profile_case}, {conc} at once, {args.profile}"
        disk_at_end = disk_line(folder)
    took = time.monotonic() - started

    print("The A2A door against the reference a2a-sdk server and the stack's floor")
    print(f"machine: {machine_line()}")
    print(code_line())
    print(server_code_line())
    print(f"date: {time.strftime('%Y-%m-%d')}   {load_at_start} (start), {load_line()} (end)")
    print(f"{disk_at_start} (at the start); at the end: {disk_at_end.split(') ')[1]}")
    print(f"reference: a2a-sdk on Starlette, {memory[2]}")
    print(
        f"{rounds} rounds per case and server, taking turns; GetTask and the card "
        f"{args.seconds:g} s each; SendMessage {PER_KEY} per key; {took:.0f} s in all"
    )
    print()
    labels = [s.label for s in sides]
    fresh_rows = {}
    for case in cases:
        print(case.label)
        print(HEADER)
        fresh_rows[case.label] = report(case, labels, labels[1:])
    print()
    print(f"Grown: {len(all_keys)} pairings, {args.chats:,} more door chats; Conch and the floor")
    for case in grown:
        print(case.label)
        print(HEADER)
        rows = report(case, ["Conch", "floor"], ["floor"])
        for label in ("Conch", "floor"):
            before, after = fresh_rows[case.label][label], rows[label]
            print(
                f"  {label + ' grown/fresh':<14} {after.rate / before.rate:7.2f}x"
                f" {after.p50 / before.p50:7.2f}x {after.p90 / before.p90:7.2f}x"
                f" {after.p99 / before.p99:7.2f}x {cpu_ratio(after, before)}"
            )
    for name, times in (("fresh", fresh_took), ("grown", grown_took)):
        if len(times) > 1:
            t = summarize(times)
            print(
                f"making a pairing ({name}, {len(times)} made): median {t.median * 1e3:.1f} ms,"
                f" p90 {t.p90 * 1e3:.1f} ms, p99 {t.p99 * 1e3:.1f} ms,"
                f" max {max(times) * 1e3:.1f} ms"
            )
    print()
    print("req/s: median of the rounds; latencies: all rounds pooled, as the client saw them;")
    print("CPU µs/req: the server process's CPU time (all threads) per measured call; server,")
    print("client: each process's CPU time over the wall time (100% = one core busy all along).")
    print("Conch/x: ratios; req/s above 1 and times below 1 mean Conch's door is faster.")
    print("The floor runs in Conch's Jupyter server process: its CPU column is that process's.")
    if profile_text:
        print()
        print(profile_text)
        pstats.Stats(str(args.profile)).sort_stats("tottime").print_stats(30)


if __name__ == "__main__":
    main()
