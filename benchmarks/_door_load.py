"""The load generator of bench_door.py, run in a fresh process for every measurement.

`concurrency` keep-alive connections, each an asyncio stream that writes a request's bytes and
reads its answer (the status line, the headers' Content-Length or chunks, the body): HTTP/1.1 by
hand, so the load generator costs ~40 µs a call where httpx cost ~250 µs, and with 8 connections
no longer is the bottleneck on a two-core machine (the issue measured with wrk, which is not
installed here). It checks every answer (an error, or a task not COMPLETED, stops the run:
nothing refused is timed), and reads both its own CPU time and the server's (/proc/<pid>/stat)
around the measured part.

    GetTask      one task made first, with its owner's key, for `seconds` after a warm-up
    card         GET the agent card with the key, for `seconds` after a warm-up
    SendMessage  PER_KEY short questions per key, blocking until each task ends
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import json
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from ._machine import cpu_ns

QUESTION = "What is a conch? Say it in one line."
PER_KEY = 5  # messages each key sends: the door's burst, so none is refused


@dataclass(frozen=True)
class Plan:
    """One measurement: which server, which method, how hard, for how long."""

    url: str  # JSON-RPC endpoint, or the card's URL for "card"
    method: str  # "GetTask", "card" or "SendMessage"
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


class Connection:
    """One keep-alive HTTP/1.1 connection, opened again if the server closes it."""

    def __init__(self, url: str) -> None:
        parts = urlsplit(url)
        self.host, self.port = parts.hostname or "127.0.0.1", parts.port or 80
        self.path = parts.path + (f"?{parts.query}" if parts.query else "")
        self.streams: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None

    async def request(self, method: str, headers: str, body: bytes) -> tuple[int, bytes]:
        head = (
            f"{method} {self.path} HTTP/1.1\r\nHost: {self.host}:{self.port}\r\n{headers}"
            f"Content-Length: {len(body)}\r\n\r\n"
        )
        if self.streams is None:
            self.streams = await asyncio.open_connection(self.host, self.port)
        reader, writer = self.streams
        writer.write(head.encode() + body)
        status_and_headers = await reader.readuntil(b"\r\n\r\n")
        status = int(status_and_headers[9:12])
        fields = status_and_headers.lower()
        if b"transfer-encoding: chunked" in fields:
            answer = bytearray()
            while size := int((await reader.readuntil(b"\r\n"))[:-2], 16):
                answer += (await reader.readexactly(size + 2))[:-2]
            await reader.readuntil(b"\r\n")
        else:
            at = fields.index(b"content-length:") + 15
            answer = bytearray(await reader.readexactly(int(fields[at : fields.index(b"\r", at)])))
        if b"connection: close" in fields:
            writer.close()
            self.streams = None
        return status, bytes(answer)

    def close(self) -> None:
        if self.streams is not None:
            self.streams[1].close()


async def generate(plan: Plan) -> Load:
    common = "Content-Type: application/json\r\nA2A-Version: 1.0\r\n"
    latencies: list[int] = []
    errors: list[str] = []
    clock = time.perf_counter_ns
    method = "GET" if plan.method == "card" else "POST"
    connections = [Connection(plan.url) for _ in range(plan.concurrency)]

    async def call(connection: Connection, key_index: int, n: int, record: bool) -> None:
        key = plan.keys[key_index]
        content = b"" if plan.method == "card" else _body(plan, key, n)
        headers = f"{common}Authorization: Bearer {key}\r\n"
        start = clock()
        status, raw = await connection.request(method, headers, content)
        took = clock() - start
        answer = json.loads(raw) if status == 200 else {}
        result = answer if plan.method == "card" and answer.get("name") else answer.get("result")
        if plan.method == "SendMessage" and isinstance(result, dict):
            state = result.get("task", {}).get("status", {}).get("state")
            result = result if state == "TASK_STATE_COMPLETED" else None
        if not result:
            errors.append(f"{status} {raw[:300]!r}")
        elif record:
            latencies.append(took)

    async def warm(worker: int) -> None:
        for n in range(worker, plan.warmup, plan.concurrency):
            await call(connections[worker], 0, n, record=False)

    async def for_a_while(worker: int, deadline: int) -> None:
        n = 0
        while clock() < deadline:
            await call(connections[worker], 0, n, record=True)
            n += 1

    async def through_keys(worker: int) -> None:
        for key_index in range(worker, len(plan.keys), plan.concurrency):
            for n in range(PER_KEY):
                await call(connections[worker], key_index, n, record=True)

    workers = range(plan.concurrency)
    try:
        if plan.method != "SendMessage":
            await asyncio.gather(*(warm(w) for w in workers))
        server_before, client_before = cpu_ns(plan.server_pid), time.process_time_ns()
        start = clock()
        if plan.method != "SendMessage":
            deadline = start + int(plan.seconds * 1e9)
            await asyncio.gather(*(for_a_while(w, deadline) for w in workers))
        else:
            await asyncio.gather(*(through_keys(w) for w in workers))
        elapsed = clock() - start
        server_cpu = cpu_ns(plan.server_pid) - server_before
        client_cpu = time.process_time_ns() - client_before
    finally:
        for connection in connections:
            connection.close()
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
        [sys.executable, "-m", "benchmarks._door_load"],
        cwd=Path(__file__).resolve().parent.parent,
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


if __name__ == "__main__":
    load_main()
