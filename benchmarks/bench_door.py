"""The A2A door against the reference a2a-sdk server, side by side in one run on one machine.

Three kinds of process, so no two share a GIL:
- Conch's door: a real Jupyter server with Conch (the tests' JupyterProcess, offline_delay=0, so
  the built-in offline agent answers at once), one pairing per key;
- the reference: a2a-sdk 1.3's own server, DefaultRequestHandler + create_jsonrpc_routes +
  create_agent_card_routes on Starlette under uvicorn, with an AgentExecutor that completes each
  task at once with a short artifact, an InMemoryTaskStore, and a pure ASGI middleware that checks
  `Authorization: Bearer <key>` (SHA-256 of the key looked up in a set), so both do auth;
- the load generator: an asyncio pool of `--concurrency` keep-alive connections (one
  httpx.AsyncClient), started afresh for every measurement, which also reads both servers' CPU
  time from /proc.

Measured: `GetTask` on one task made first, for a fixed time; `SendMessage`, a fixed number of
messages. Conch's door bounds every key (one message at a time, 5 at once then 20 a minute), so
SendMessage is spread over many pairings: each key sends its 5 in a row and is not used again,
and C clients each work through their own keys. The reference has no bounds; it is sent the same
messages in the same pattern. Many pairings cost the door on every request, so GetTask is
measured twice: with one pairing, and again after the SendMessage keys were made.

Every case runs in `--rounds` rounds that alternate which server goes first, so a burst of load
from elsewhere on a shared machine falls on both. Prints; never asserts on speed.

    .venv/bin/python benchmarks/bench_door.py [--seconds 2] [--rounds 3] [--concurrency 8]
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import hashlib
import importlib.util
import json
import secrets
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

# benchmarks/ is on sys.path: it is the running script's folder.
from _jupyter import conch_server
from _machine import code_line, cpu_ns, disk_line, load_line, machine_line, summarize

from tests.jupyter_process import JupyterProcess

REFERENCE_REPLY = "A conch is a sea snail with a spiral shell; blown into, it sounds a note."
QUESTION = "What is a conch? Say it in one line."
PER_KEY = 5  # messages each key sends: the door's burst, so none is refused
AGENT = "researcher"  # a default agent: the built-in offline one when no model is configured


# --- the reference server, in its own process -----------------------------------------------


def reference_app(key_hashes: frozenset[str], endpoint: str) -> Any:
    """a2a-sdk's server for one agent that answers at once, behind a bearer check."""
    from a2a.helpers.proto_helpers import new_task_from_user_message
    from a2a.server.agent_execution import AgentExecutor, RequestContext
    from a2a.server.events import EventQueue
    from a2a.server.request_handlers import DefaultRequestHandler
    from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes
    from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
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
        agent_executor=InstantExecutor(), task_store=InMemoryTaskStore(), agent_card=card
    )
    routes = [*create_agent_card_routes(card), *create_jsonrpc_routes(handler, "/a2a")]
    return BearerCheck(Starlette(routes=routes))


def serve_reference(hashes_file: Path) -> None:
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
    app = reference_app(hashes, f"http://127.0.0.1:{port}/a2a")
    # What uvicorn's "auto" picks: uvloop and httptools when installed, else asyncio and h11.
    loop = "uvloop" if importlib.util.find_spec("uvloop") else "asyncio"
    parser = "httptools" if importlib.util.find_spec("httptools") else "h11"
    config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="off")
    print(f"port {port} uvicorn {uvicorn.__version__} ({loop}, {parser})", flush=True)
    uvicorn.Server(config).run(sockets=[sock])


@contextmanager
def reference_server(folder: Path, keys: Sequence[str]) -> Iterator[tuple[str, int, str]]:
    """The reference server in a subprocess; yields (its JSON-RPC URL, its pid, its stack)."""
    hashes = folder / "reference-keys.txt"
    hashes.write_text("\n".join(hashlib.sha256(k.encode()).hexdigest() for k in keys))
    process = subprocess.Popen(
        [sys.executable, __file__, "--serve-reference", str(hashes)],
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


# --- the load generator, in its own process -------------------------------------------------


@dataclass(frozen=True)
class Plan:
    """One measurement: which server, which method, how hard, for how long."""

    url: str
    method: str  # "GetTask" or "SendMessage"
    keys: list[str]  # GetTask: the one key that owns the task; SendMessage: PER_KEY each
    concurrency: int
    server_pid: int
    task_id: str = ""
    seconds: float = 0.0  # GetTask: the measured time
    warmup: int = 0  # GetTask: calls sent first, not measured
    label: str = ""  # which server, for the report


@dataclass(frozen=True)
class Load:
    """What one Plan measured; latencies in ns."""

    label: str
    latencies: list[int]
    elapsed_ns: int
    server_cpu_ns: int
    client_cpu_ns: int
    errors: int
    first_error: str

    @property
    def per_second(self) -> float:
        return len(self.latencies) / (self.elapsed_ns / 1e9)


def _body(plan: Plan, key: str, n: int) -> bytes:
    if plan.method == "GetTask":
        return json.dumps(
            {"jsonrpc": "2.0", "id": n, "method": "GetTask", "params": {"id": plan.task_id}}
        ).encode()
    message = {
        "messageId": f"m-{uuid.uuid4().hex}",
        "role": "ROLE_USER",
        "parts": [{"text": QUESTION}],
        "contextId": "ctx-" + hashlib.sha256(key.encode()).hexdigest()[:16],  # one per key
    }
    return json.dumps(
        {"jsonrpc": "2.0", "id": n, "method": "SendMessage", "params": {"message": message}}
    ).encode()


async def generate(plan: Plan) -> Load:
    headers = {"Content-Type": "application/json", "A2A-Version": "1.0"}
    limits = httpx.Limits(
        max_connections=plan.concurrency, max_keepalive_connections=plan.concurrency
    )
    latencies: list[int] = []
    errors: list[str] = []
    clock = time.perf_counter_ns

    async with httpx.AsyncClient(
        headers=headers, limits=limits, timeout=60, trust_env=False
    ) as http:

        async def call(key_index: int, n: int, record: bool) -> None:
            key = plan.keys[key_index]
            content = _body(plan, key, n)
            start = clock()
            response = await http.post(
                plan.url, content=content, headers={"Authorization": f"Bearer {key}"}
            )
            took = clock() - start
            answer = response.json() if response.status_code == 200 else {}
            result = answer.get("result")
            if plan.method == "SendMessage" and isinstance(result, dict):
                state = result.get("task", {}).get("status", {}).get("state")
                result = result if state == "TASK_STATE_COMPLETED" else None
            if not result:
                errors.append(f"{response.status_code} {response.text[:300]}")
            elif record:
                latencies.append(took)

        async def warm(worker: int) -> None:
            for n in range(worker, plan.warmup, plan.concurrency):
                await call(0, n, record=False)

        async def for_a_while(deadline: int) -> None:
            n = 0
            while clock() < deadline:
                await call(0, n, record=True)
                n += 1

        async def through_keys(worker: int) -> None:
            for key_index in range(worker, len(plan.keys), plan.concurrency):
                for n in range(PER_KEY):
                    await call(key_index, n, record=True)

        workers = range(plan.concurrency)
        if plan.method == "GetTask":
            await asyncio.gather(*(warm(w) for w in workers))
        server_before, client_before = cpu_ns(plan.server_pid), time.process_time_ns()
        start = clock()
        if plan.method == "GetTask":
            deadline = start + int(plan.seconds * 1e9)
            await asyncio.gather(*(for_a_while(deadline) for _ in workers))
        else:
            await asyncio.gather(*(through_keys(w) for w in workers))
        elapsed = clock() - start
        server_cpu = cpu_ns(plan.server_pid) - server_before
        client_cpu = time.process_time_ns() - client_before
    return Load(
        plan.label,
        latencies,
        elapsed,
        server_cpu,
        client_cpu,
        len(errors),
        errors[0] if errors else "",
    )


def run_load(plan: Plan) -> Load:
    """Run one Plan in a fresh load-generator process."""
    done = subprocess.run(
        [sys.executable, __file__, "--load"],
        input=json.dumps(dataclasses.asdict(plan)),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"the load generator failed:\n{done.stderr[-3000:]}")
    load = Load(**json.loads(done.stdout))
    if load.errors:
        raise RuntimeError(f"{plan.label} {plan.method}: {load.errors} errors, {load.first_error}")
    return load


def load_main() -> None:
    plan = Plan(**json.loads(sys.stdin.read()))
    load = asyncio.run(generate(plan))
    json.dump(dataclasses.asdict(load), sys.stdout)


# --- the two servers, side by side ----------------------------------------------------------


@dataclass
class Side:
    """One server as the load generator sees it."""

    label: str
    url: str
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
                url=side.url,
                method=case.method,
                keys=[side.keys[0]] if case.method == "GetTask" else side.take(keys),
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


def pair(server: JupyterProcess, count: int) -> list[str]:
    """`count` new pairings for the agent on Conch's door; their keys."""
    keys = []
    with server.client() as api:
        for n in range(count):
            made = api.post(server.api("pairings"), json={"agents": [AGENT], "label": f"Bench {n}"})
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


# --- the report -----------------------------------------------------------------------------


def report(case: Case, labels: Sequence[str]) -> None:
    rows = {}
    for label in labels:
        loads = case.loads[label]
        pooled = summarize([t for load in loads for t in load.latencies])
        rate = sorted(load.per_second for load in loads)[len(loads) // 2]
        requests = sum(len(load.latencies) for load in loads)
        elapsed = sum(load.elapsed_ns for load in loads)
        server_cpu = sum(load.server_cpu_ns for load in loads)
        client_cpu = sum(load.client_cpu_ns for load in loads)
        rows[label] = (rate, pooled, server_cpu / requests)
        print(
            f"  {label:<10} {rate:9.0f} {pooled.median / 1e6:9.2f} {pooled.p90 / 1e6:9.2f}"
            f" {pooled.p99 / 1e6:9.2f} {server_cpu / requests / 1e3:10.0f}"
            f" {server_cpu / elapsed:7.0%} {client_cpu / elapsed:7.0%} {requests:7d}"
        )
    ours, ref = (rows[label] for label in labels)
    print(
        f"  {'Conch/ref':<10} {ours[0] / ref[0]:8.2f}x {ours[1].median / ref[1].median:8.2f}x"
        f" {ours[1].p90 / ref[1].p90:8.2f}x {ours[1].p99 / ref[1].p99:8.2f}x"
        f" {ours[2] / ref[2]:9.2f}x"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=2.0, help="per GetTask measurement")
    parser.add_argument("--rounds", type=int, default=3, help="measurements per case and server")
    parser.add_argument("--concurrency", type=int, default=8, help="connections at once")
    parser.add_argument("--sequential-keys", type=int, default=6, help="keys per round, 1 client")
    parser.add_argument("--serve-reference", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--load", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve_reference:
        serve_reference(args.serve_reference)
        return
    if args.load:
        load_main()
        return

    rounds, conc = args.rounds, args.concurrency
    per_round = {1: args.sequential_keys, conc: 2 * conc}  # SendMessage keys per round
    warm_keys = 2
    keys_needed = 1 + warm_keys + rounds * sum(per_round.values())
    load_at_start = load_line()
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="conch-bench-door-") as tmp:
        folder = Path(tmp)
        disk_at_start = disk_line(folder)
        reference_keys = [f"conch_a2a_{secrets.token_urlsafe(32)}" for _ in range(keys_needed)]
        with (
            conch_server(folder) as server,
            reference_server(folder, reference_keys) as (ref_url, ref_pid, ref_stack),
        ):
            assert server.process is not None
            offline_agent(server)
            conch = Side("Conch", f"{server.url}a2a/{AGENT}", server.process.pid, pair(server, 1))
            reference = Side("reference", ref_url, ref_pid, reference_keys)
            sides = [conch, reference]
            for side in sides:
                side.task_id = first_task(side.url, side.keys[0])

            gets = [
                Case("GetTask, 1 client", "GetTask", 1),
                Case(f"GetTask, {conc} at once", "GetTask", conc),
            ]
            for case in gets:
                measure(case, sides, rounds, args.seconds, 0)
            conch.keys += pair(server, keys_needed - 1)
            pairings = len(conch.keys)
            gets_many = [
                Case(f"GetTask, 1 client, Conch with {pairings} pairings", "GetTask", 1),
                Case(f"GetTask, {conc} at once, Conch with {pairings} pairings", "GetTask", conc),
            ]
            for case in gets_many:
                measure(case, sides, rounds, args.seconds, 0)
            warm = Case("warm-up", "SendMessage", 1)
            measure(warm, sides, 1, 0, warm_keys)
            sends = [
                Case(f"SendMessage, 1 client, Conch with {pairings} pairings", "SendMessage", 1),
                Case(
                    f"SendMessage, {conc} at once, Conch with {pairings} pairings",
                    "SendMessage",
                    conc,
                ),
            ]
            for case in sends:
                measure(case, sides, rounds, 0, per_round[case.concurrency])
        disk_at_end = disk_line(folder)
    took = time.monotonic() - started

    print("The A2A door against the reference a2a-sdk server, JSON-RPC over loopback HTTP/1.1")
    print(f"machine: {machine_line()}")
    print(code_line())
    print(
        f"date: {time.strftime('%Y-%m-%d')}   {load_at_start} (at the start), {load_line()} (end)"
    )
    print(f"{disk_at_start} (at the start); at the end: {disk_at_end.split(') ')[1]}")
    print(f"Conch: jupyter_server + tornado; reference: a2a-sdk on Starlette, {ref_stack}")
    print(
        f"{rounds} rounds per case and server, taking turns; GetTask {args.seconds:g} s each; "
        f"SendMessage {PER_KEY} per key; {took:.0f} s in all"
    )
    print()
    header = (
        f"  {'':<10} {'req/s':>9} {'p50 ms':>9} {'p90 ms':>9} {'p99 ms':>9}"
        f" {'CPU µs/req':>10} {'server':>7} {'client':>7} {'calls':>7}"
    )
    for case in [*gets, *gets_many, *sends]:
        print(case.label)
        print(header)
        report(case, ["Conch", "reference"])
    print()
    print("req/s: median of the rounds; latencies: all rounds pooled, as the client saw them;")
    print("CPU µs/req: the server process's CPU time (all threads) per measured call; server,")
    print("client: each process's CPU time over the wall time (100% = one core busy all along).")
    print("Conch/ref: ratios; req/s below 1 and times above 1 mean Conch's door is slower.")


if __name__ == "__main__":
    main()
