"""Load: many rounds at once while the door takes traffic, and a flood of junk at the door.

Against a real `jupyter server` with Conch on loopback (jupyter_process.py), with agents on a
scripted model server (scripted_models.py): Ann, Bob and Cat answer at once and hand on in a
cycle, so every round runs to its bound of 8 replies; Dot, Eve and Fay do the same, each reply
streamed over about half a second, to keep one chat running through the flood.

Each test has two sizes with one body: the short one runs by default (well under a minute and a
half together, on two cores); the full one is marked slow and runs with `--run-slow` or
CONCH_SLOW=1 (conftest.py). Numbers (latency, memory, requests a second) are printed and
recorded as properties; only generous sanity bounds are asserted, since test machines are shared.

The flood is sent from a child process, so the latency the chat's API shows is the server's and
not this process's own work; and from three loopback addresses (127.x.y.z), because the door's
failure throttle is per address (and key prefix): wrong keys hold back their own address and no
other caller's (and a right key is never held back).
"""

from __future__ import annotations

import asyncio
import json
import math
import multiprocessing
import os
import random
import re
import secrets
import socket
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from conch_jupyter.a2a.door.rules import DOOR_BOUNDS
from conch_jupyter.door.http import MAX_BODY_BYTES

from ..support.jupyter_process import JupyterProcess
from ..support.scripted_models import Reply, ScriptedModels

pytestmark = pytest.mark.timeout(300)
FULL = [pytest.mark.slow, pytest.mark.timeout(1800)]

INSTANT = {"Ann": "Bob", "Bob": "Cat", "Cat": "Ann"}  # who hands on to whom
STREAMED = {"Dot": "Eve", "Eve": "Fay", "Fay": "Dot"}
ROUND_REPLIES = 8
SPEAKER = re.compile(r"^You are (.+?)\.", re.M)
MB = 1024 * 1024


# --- the server ------------------------------------------------------------------------------


def speaker_of(body: Any) -> str:
    """Which agent a model request is for: its system prompt says who it is."""
    messages = body.get("messages", [])
    found = SPEAKER.search(messages[0]["content"] if messages else "")
    assert found, body
    return found.group(1)


def respond(body: Any) -> Reply:
    name = speaker_of(body)
    if name in STREAMED:
        words = [f"thinking{i} " for i in range(10)] + [f"@{STREAMED[name]}"]
        return Reply(chunks=words, delay_per_chunk=0.05)
    return Reply(text=f"Over to @{INSTANT[name]}")


@pytest.fixture(scope="module")
def models() -> Iterator[ScriptedModels]:
    with ScriptedModels() as scripted:
        scripted.responder = respond
        yield scripted


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[JupyterProcess]:
    root = tmp_path_factory.mktemp("load")
    process = JupyterProcess(root / "conch-data", root / "root")
    process.start()
    try:
        yield process
    finally:
        process.stop()


@pytest.fixture(scope="module")
def agents(server: JupyterProcess, models: ScriptedModels) -> dict[str, str]:
    """The six scripted agents, name → id; the offline Researcher and Writer stay for the door."""
    ids = {}
    with server.client() as http:
        for name in (*INSTANT, *STREAMED):
            provider = {"kind": "openai", "model": "m", "base_url": models.openai_url}
            r = http.post(server.api("agents"), json={"name": name, "provider": provider})
            assert r.status_code == 201, r.text
            ids[name] = r.json()["id"]
    return ids


def new_log(server: JupyterProcess, start: int) -> str:
    return server.log()[start:]


def rpc(method: str, params: Any, request_id: int = 1) -> bytes:
    return json.dumps(
        {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}
    ).encode()


def text_message(text: str, context_id: str) -> dict[str, Any]:
    message_id = f"m-{secrets.token_hex(8)}"
    parts = [{"text": text}]
    return {
        "message": {
            "messageId": message_id,
            "role": "ROLE_USER",
            "parts": parts,
            "contextId": context_id,
        }
    }


def door_headers(key: str) -> dict[str, str]:
    return {
        "Authorization": f"Bearer {key}",
        "Content-Type": "application/json",
        "A2A-Version": "1.0",
    }


def percentile(values: list[float], q: float) -> float:
    """Nearest rank: the smallest value with at least q of the values at or below it."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]


# --- 1. rounds under load ----------------------------------------------------------------------


@dataclass(frozen=True)
class RoundsLoad:
    chats: int
    keys: int
    seconds: float  # everything must have settled by then


@dataclass
class KeyTraffic:
    """What one door key sent and got back."""

    answers: list[dict[str, Any]]
    fetched: list[dict[str, Any]]
    listed: dict[str, Any]
    seconds: float  # from its first message sent to its last one answered


def door_verdict(answer: dict[str, Any]) -> str:
    """A SendMessage answer: a completed task, or a documented refusal in words; else it fails."""
    assert answer.get("jsonrpc") == "2.0", answer
    if "result" in answer:
        state = answer["result"]["task"]["status"]["state"]
        assert state == "TASK_STATE_COMPLETED", answer
        return "completed"
    error = answer["error"]
    assert error["code"] == -32000, answer
    assert len(error["message"]) > 20, answer  # words, not a code
    reason = str(error["data"][0]["reason"])
    assert reason in ("BUSY", "RATE_LIMITED"), answer
    return reason


async def knock(http: httpx.AsyncClient, url: str, key: str, context: str) -> KeyTraffic:
    """Three messages at once (one at a time: the others are refused), then more one after
    another than the bucket holds, then every answered task read back, then the list."""

    async def call(method: str, params: Any) -> dict[str, Any]:
        r = await http.post(url, content=rpc(method, params), headers=door_headers(key))
        assert r.status_code == 200, r.text
        answer: dict[str, Any] = r.json()
        return answer

    started = time.monotonic()
    at_once = [call("SendMessage", text_message(f"At once {n}.", context)) for n in range(3)]
    answers = list(await asyncio.gather(*at_once))
    for n in range(DOOR_BOUNDS.burst + 3):
        answers.append(await call("SendMessage", text_message(f"In turn {n}.", context)))
    seconds = time.monotonic() - started
    done = [a["result"]["task"] for a in answers if "result" in a]
    fetched = [await call("GetTask", {"id": task["id"]}) for task in done]
    listed = await call("ListTasks", {"contextId": context})
    return KeyTraffic(answers, fetched, listed, seconds)


async def rounds_under_load(
    server: JupyterProcess, load: RoundsLoad, statuses: Counter[int]
) -> tuple[list[tuple[str, str, str, dict[str, Any]]], list[tuple[dict[str, Any], KeyTraffic]]]:
    """Start a round in every chat and send the door's traffic, all at once; wait until settled.

    Returns (chat id, acknowledged message id, its text, the settled chat) for each chat, and
    (pairing, what its key got) for each key.
    """

    async def seen(response: httpx.Response) -> None:
        statuses[response.status_code] += 1

    limits = httpx.Limits(max_connections=load.chats + 3 * load.keys + 10)
    async with (
        httpx.AsyncClient(
            headers={"Authorization": f"token {server.token}"},
            timeout=30,
            limits=limits,
            trust_env=False,
            event_hooks={"response": [seen]},
        ) as api,
        httpx.AsyncClient(
            timeout=30, limits=limits, trust_env=False, event_hooks={"response": [seen]}
        ) as door,
    ):
        pairings = []
        for _ in range(load.keys):
            r = await api.post(
                server.api("pairings"), json={"agents": ["researcher"], "remote": False}
            )
            assert r.status_code == 201, r.text
            pairings.append(r.json())
        made = await asyncio.gather(
            *(
                api.post(server.api("conversations"), json={"title": f"Load {n}"})
                for n in range(load.chats)
            )
        )
        assert all(r.status_code == 201 for r in made), [r.text for r in made]
        chat_ids = [r.json()["id"] for r in made]

        async def start_round(n: int, chat_id: str) -> tuple[str, str]:
            text = f"@Ann go round, chat {n}"
            r = await api.post(server.api(f"conversations/{chat_id}/messages"), json={"text": text})
            assert r.status_code == 202, r.text
            return r.json()["message_id"], text

        url = f"{server.url}a2a/researcher"
        acknowledged, traffic = await asyncio.gather(
            asyncio.gather(*(start_round(n, chat_id) for n, chat_id in enumerate(chat_ids))),
            asyncio.gather(
                *(knock(door, url, p["key"], f"load-{n}") for n, p in enumerate(pairings))
            ),
        )

        deadline = time.monotonic() + load.seconds
        waiting, final = set(chat_ids), {}
        while waiting:
            assert time.monotonic() < deadline, f"{len(waiting)} chats still busy"
            for chat_id in sorted(waiting):
                r = await api.get(server.api(f"conversations/{chat_id}"))
                assert r.status_code == 200, r.text
                if not r.json()["busy"]:
                    final[chat_id] = r.json()
                    waiting.discard(chat_id)
            await asyncio.sleep(0.1)

        # What each key's context became on this side ("What it said").
        for pairing in pairings:
            r = await api.get(server.api(f"pairings/{pairing['id']}/chats"))
            assert r.status_code == 200, r.text
            pairing["chats"] = []
            for chat in r.json()["chats"]:
                r = await api.get(server.api(f"conversations/{chat['id']}"))
                assert r.status_code == 200, r.text
                pairing["chats"].append(r.json())

    chats = [(c, m, t, final[c]) for c, (m, t) in zip(chat_ids, acknowledged, strict=True)]
    return chats, list(zip(pairings, traffic, strict=True))


def check_round(chat: dict[str, Any], message_id: str, text: str, ids: dict[str, str]) -> None:
    """One round, run to its bound: 8 replies in the cycle's order, each with its turn."""
    assert (chat["busy"], chat["round"]) == (False, None), chat["id"]
    users = [m for m in chat["messages"] if m["role"] == "user"]
    assert [(m["id"], m["text"]) for m in users] == [(message_id, text)]
    assert [e["type"] for e in chat["events"]] == ["round.started", "round.ended"], chat["events"]
    ended = chat["events"][-1]
    assert (ended["turns"], ended["reason"]) == (ROUND_REPLIES, "replies"), ended
    replies = [m for m in chat["messages"] if m["role"] == "agent"]
    cycle = [ids["Ann"], ids["Bob"], ids["Cat"]]
    assert [m["agent"] for m in replies] == (cycle * 3)[:ROUND_REPLIES]
    assert max(Counter(m["agent"] for m in replies).values()) <= 3
    turns = [m["round"] for m in replies]
    assert [t["turn"] for t in turns] == list(range(1, ROUND_REPLIES + 1))
    handed = [None] + [m["agent"] for m in replies[:-1]]
    assert [t["handed_by"] for t in turns] == handed
    assert all(m["text"].startswith("Over to @") for m in replies)


def check_key(pairing: dict[str, Any], traffic: KeyTraffic) -> Counter[str]:
    """The door answered every message in words, kept its bounds, and lost nothing."""
    verdicts = Counter(door_verdict(a) for a in traffic.answers)
    done = [a["result"]["task"] for a in traffic.answers if "result" in a]
    assert verdicts["completed"] == len(done) >= 1
    # Five at once, then 20 a minute: no more than the bucket could have given in that time.
    refill = DOOR_BOUNDS.per_minute / 60 * traffic.seconds
    assert len(done) <= DOOR_BOUNDS.burst + math.floor(refill), (verdicts, traffic.seconds)
    # Every answered task reads back as it was answered, and the list has exactly those.
    for task, got in zip(done, traffic.fetched, strict=True):
        assert got["result"]["id"] == task["id"], got
        assert got["result"]["status"]["state"] == "TASK_STATE_COMPLETED"
        assert got["result"]["artifacts"] == task["artifacts"]
    listed = traffic.listed["result"]
    assert listed["totalSize"] == len(done), listed
    assert {t["id"] for t in listed["tasks"]} == {t["id"] for t in done}
    # One context, one chat: each answered message and its answer, in turn (one at a time);
    # nothing of a refused message kept.
    assert len(pairing["chats"]) == 1, pairing["chats"]
    said = pairing["chats"][0]["messages"]
    assert [m["role"] for m in said] == ["outside", "agent"] * len(done)
    asked = {t["history"][0]["parts"][0]["text"] for t in done}
    assert {m["text"] for m in said if m["role"] == "outside"} == asked
    return verdicts


@pytest.mark.parametrize(
    "load",
    [
        pytest.param(RoundsLoad(chats=10, keys=5, seconds=60), id="short"),
        pytest.param(RoundsLoad(chats=50, keys=20, seconds=300), id="full", marks=FULL),
    ],
)
def test_rounds_run_to_their_bounds_under_load(
    server: JupyterProcess,
    models: ScriptedModels,
    agents: dict[str, str],
    load: RoundsLoad,
    record_property: Callable[[str, object], None],
) -> None:
    log_start = len(server.log())
    asked_before = len(models.requests)
    statuses: Counter[int] = Counter()
    started = time.monotonic()
    chats, keys = asyncio.run(rounds_under_load(server, load, statuses))
    seconds = time.monotonic() - started

    for _chat_id, message_id, text, chat in chats:
        check_round(chat, message_id, text, agents)
    # Each reply asked its model once: no turn lost, none run twice.
    assert len(models.requests) - asked_before == load.chats * ROUND_REPLIES
    door = Counter[str]()
    for pairing, traffic in keys:
        door += check_key(pairing, traffic)
    assert door["RATE_LIMITED"] >= 1, door  # the bucket was reached, and held
    assert not [s for s in statuses if s >= 500], statuses
    log = new_log(server, log_start)
    assert "Traceback" not in log, log[-5000:]

    print(
        f"\n[load] rounds: {load.chats} chats × {ROUND_REPLIES} replies and {load.keys} door keys "
        f"in {seconds:.1f} s; door answers {dict(door)}; HTTP statuses {dict(statuses)}"
    )
    record_property("rounds_seconds", round(seconds, 2))
    record_property("door_answers", dict(door))


# --- 2. a flood at the door --------------------------------------------------------------------


@dataclass(frozen=True)
class FloodSize:
    requests: int
    seconds: float  # the flood must be over by then: nothing hangs
    p99_bound: float  # a sanity bound on the chat API's latency during the flood
    memory_margin: int = 50 * MB


@dataclass(frozen=True)
class FloodPlan:
    """What the child process sends; plain data, so it crosses to a spawned process."""

    door: str  # the server's base URL
    port: int
    key: str  # a real door key, for the junk that gets past the gate
    jupyter_token: str
    requests: int
    seconds: float
    addresses: dict[str, str]  # group → loopback source address
    shared_address: bool  # no loopback aliases here: every group knocks from 127.0.0.1
    workers: int = 24


Request = tuple[str, str, dict[str, str], bytes | None]  # method, URL, headers, body
ANYONE, GUESSER, KEYED = "anyone", "guesser", "keyed"  # who knocks: no key, wrong keys, a real key


@dataclass(frozen=True)
class Junk:
    """One kind of request in the flood, and what the door may answer to it."""

    name: str
    group: str
    build: Callable[[], Request]
    allowed: frozenset[str]
    refused_early: bool  # turned away before its body is read: the door closes the connection


def junk_kinds(plan: FloodPlan) -> list[Junk]:
    door = plan.door
    card, rpc_url = f"{door}.well-known/agent-card.json", f"{door}a2a/researcher"
    typed = {"Content-Type": "application/json", "A2A-Version": "1.0"}
    key = {"Authorization": f"Bearer {plan.key}"}
    keyed = {**key, **typed}
    ask = rpc("GetTask", {"id": "x"})
    full = ask + b" " * (MAX_BODY_BYTES - len(ask))  # exactly the door's limit
    nested = b"[" * 50_000 + b"]" * 50_000
    too_long = rpc("SendMessage", text_message("x" * (DOOR_BOUNDS.message_chars + 1), "flood"))
    evil = {"Origin": "https://evil.example", **typed}
    here = {"Origin": f"http://127.0.0.1:{plan.port}"}
    jupyter = {"Authorization": f"Bearer {plan.jupyter_token}"}
    no_version = {**key, "Content-Type": "application/json"}
    plain = {**key, "Content-Type": "text/plain"}
    old_rpc, unknown = ask.replace(b"2.0", b"1.0"), rpc("tasks/destroy", {})
    listing = rpc("ListTasks", {"pageSize": 1})
    nobody, bad_path, writer = (f"{door}a2a/{a}" for a in ("nobody", "%FF%FE", "writer"))
    throttled = ("401 bad_key", "429 too_many_failures")
    # Refused from its Content-Length, unread: 413, or cut off while it is still being sent.
    cut = tuple(f"cut off ({e})" for e in ("WriteError", "ReadError", "RemoteProtocolError"))
    over = ("413 too_large", *cut)
    sent = ("200 TASK_STATE_COMPLETED", "200 -32000 RATE_LIMITED", "200 -32000 BUSY")

    def get(url: str, headers: dict[str, str] | None = None) -> Callable[[], Request]:
        return lambda: ("GET", url, headers or {}, None)

    def post(url: str, headers: dict[str, str], body: bytes) -> Callable[[], Request]:
        return lambda: ("POST", url, headers, body)

    def wrong_key() -> Request:
        return "GET", card, {"Authorization": f"Bearer conch_a2a_{secrets.token_urlsafe(32)}"}, None

    def garbage_key() -> Request:
        garbage = secrets.token_urlsafe(random.randint(1, 3000))
        return "POST", rpc_url, {"Authorization": f"Bearer {garbage}", **typed}, ask

    def message() -> Request:
        return "POST", rpc_url, keyed, rpc("SendMessage", text_message("Flood.", "flood"))

    # name, who knocks, the request, what may come back, refused before its body is read
    rows: list[tuple[str, str, Callable[[], Request], str | tuple[str, ...], bool]] = [
        ("no key, card", ANYONE, get(card), "401 no_key", True),
        ("no key, rpc", ANYONE, post(rpc_url, typed, ask), "401 no_key", True),
        ("basic auth", ANYONE, get(card, {"Authorization": "Basic YTpi"}), "401 no_key", True),
        ("no key, unknown agent", ANYONE, post(nobody, typed, ask), "401 no_key", True),
        ("bad UTF-8 path", ANYONE, post(bad_path, typed, ask), "400 bad_request", True),
        ("browser", ANYONE, get(card, {"Sec-Fetch-Site": "cross-site"}), "403 browser", True),
        ("browser, this origin", ANYONE, get(card, here), "403 browser", True),
        ("browser, another origin", ANYONE, post(rpc_url, evil, ask), "404 not_found", True),
        ("a foreign Host", ANYONE, get(card, {"Host": "evil.example"}), "403 forbidden", True),
        ("a wrong key", GUESSER, wrong_key, throttled, True),
        ("a garbage key", GUESSER, garbage_key, throttled, True),
        ("the Jupyter token as a key", GUESSER, get(card, jupyter), throttled, True),
        ("malformed JSON", KEYED, post(rpc_url, keyed, b"{nope"), "200 -32700", False),
        ("not UTF-8", KEYED, post(rpc_url, keyed, b'{"method": "\xff"}'), "200 -32700", False),
        ("deep nesting", KEYED, post(rpc_url, keyed, nested), "200 -32700", False),
        ("text/plain", KEYED, post(rpc_url, plain, ask), "200 -32005", False),
        ("a batch", KEYED, post(rpc_url, keyed, b"[" + ask + b"]"), "200 -32600", False),
        ("JSON-RPC 1.0", KEYED, post(rpc_url, keyed, old_rpc), "200 -32600", False),
        ("an unknown method", KEYED, post(rpc_url, keyed, unknown), "200 -32601", False),
        ("no A2A-Version", KEYED, post(rpc_url, no_version, ask), "200 -32009", False),
        ("no such task", KEYED, post(rpc_url, keyed, ask), "200 -32001", False),
        ("a body at the limit", KEYED, post(rpc_url, keyed, full), "200 -32001", False),
        ("a body over the limit", KEYED, post(rpc_url, keyed, full + b" "), over, True),
        ("a message too long", KEYED, post(rpc_url, keyed, too_long), "200 -32602", False),
        ("GET on the endpoint", KEYED, get(rpc_url, key), "405 method_not_allowed", False),
        ("an agent not given", KEYED, post(writer, keyed, ask), "404 not_found", False),
        ("a browser with the key", KEYED, get(card, {**key, **here}), "403 browser", True),
        ("messages past the bucket", KEYED, message, sent, False),
        ("listing", KEYED, post(rpc_url, keyed, listing), "200 result", False),
    ]
    kinds = []
    for name, group, build, allowed, early in rows:
        answers = {allowed} if isinstance(allowed, str) else set(allowed)
        if plan.shared_address:  # the wrong keys lock everyone out of 127.0.0.1
            answers.add("429 too_many_failures")
        kinds.append(Junk(name, group, build, frozenset(answers), early))
    return kinds


def outcome(response: httpx.Response) -> str:
    """What the door answered, in a few words: "401 no_key", "200 -32700", "200 result" …"""
    status = response.status_code
    try:
        body = response.json()
    except ValueError:
        return f"{status} not JSON"
    if status != 200:
        error = body.get("error") if isinstance(body, dict) else None
        if not isinstance(error, dict) or not error.get("message"):
            return f"{status} without words"
        if status == 401 and not response.headers.get("WWW-Authenticate", "").startswith("Bearer"):
            return "401 without WWW-Authenticate"
        if status == 429 and not response.headers.get("Retry-After", "").isdigit():
            return "429 without Retry-After"
        return f"{status} {error.get('code')}"
    if not isinstance(body, dict) or body.get("jsonrpc") != "2.0":
        return "200 not JSON-RPC"
    if "error" in body:
        error = body["error"]
        if not error.get("message"):
            return "200 without words"
        if error["code"] == -32000:
            return f"200 -32000 {error['data'][0]['reason']}"
        return f"200 {error['code']}"
    task = body["result"].get("task")
    return f"200 {task['status']['state']}" if task else "200 result"


async def flood(plan: FloodPlan) -> dict[str, Any]:
    """Send the plan's junk from `workers` concurrent callers; count what came back."""
    kinds = junk_kinds(plan)
    by_kind: dict[str, Counter[str]] = {k.name: Counter() for k in kinds}
    unexpected: list[str] = []
    latencies: dict[str, list[float]] = {group: [] for group in plan.addresses}
    indices = iter(range(plan.requests))
    clients = {
        group: httpx.AsyncClient(
            transport=httpx.AsyncHTTPTransport(local_address=address),
            timeout=15,
            trust_env=False,
        )
        for group, address in plan.addresses.items()
    }

    async def worker() -> None:
        for index in indices:
            kind = kinds[index % len(kinds)]
            method, url, headers, body = kind.build()
            if kind.refused_early:
                # The door closes the connection after these; say so, or a reused connection
                # may be reset (see test_a_refused_request_says_it_closes_the_connection).
                headers = {**headers, "Connection": "close"}
            started = time.perf_counter()
            try:
                response = await clients[kind.group].request(
                    method, url, headers=headers, content=body
                )
                said = outcome(response)
            except httpx.TimeoutException:
                said = "no answer in 15 s"
            except httpx.TransportError as error:
                said = f"cut off ({type(error).__name__})"
            latencies[kind.group].append(time.perf_counter() - started)
            by_kind[kind.name][said] += 1
            if said not in kind.allowed and len(unexpected) < 20:
                unexpected.append(f"{kind.name}: {said}")

    started = time.monotonic()
    finished = True
    try:
        await asyncio.wait_for(
            asyncio.gather(*(worker() for _ in range(plan.workers))), plan.seconds
        )
    except asyncio.TimeoutError:
        finished = False
    finally:
        for client in clients.values():
            await client.aclose()
    seconds = time.monotonic() - started
    allowed = {k.name: k.allowed for k in kinds}
    wrong = sum(
        n for name, seen in by_kind.items() for said, n in seen.items() if said not in allowed[name]
    )
    sent = sum(len(times) for times in latencies.values())
    # The guesser's answers are held back on purpose (up to a second each): not counted here.
    answered = [t for group, times in latencies.items() if group != GUESSER for t in times]
    return {
        "finished": finished,
        "sent": sent,
        "seconds": seconds,
        "per_second": sent / seconds,
        "door_p50": percentile(answered, 0.5) if answered else 0.0,
        "door_p99": percentile(answered, 0.99) if answered else 0.0,
        "by_kind": {name: dict(seen) for name, seen in by_kind.items()},
        "unexpected": unexpected,
        "unexpected_count": wrong,
    }


def flood_child(plan: FloodPlan, out: str) -> None:
    """The child process: flood, then leave the counts in `out` for the test."""
    result = asyncio.run(flood(plan))
    Path(out).write_text(json.dumps(result))


def loopback_addresses(groups: list[str]) -> tuple[dict[str, str], bool]:
    """A fresh 127.x.y.z for each group (a fresh throttle count each run), or 127.0.0.1 for all
    where only that one can be used (not Linux)."""
    chosen: dict[str, str] = {}
    for group in groups:
        address = f"127.{random.randint(1, 254)}.{random.randint(1, 254)}.{random.randint(2, 254)}"
        try:
            with socket.socket() as probe:
                probe.bind((address, 0))
        except OSError:
            return {g: "127.0.0.1" for g in groups}, True
        chosen[group] = address
    return chosen, False


def rss(pid: int) -> int:
    """The process's resident memory, in bytes (Linux)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


def cpu_seconds(pid: int) -> float:
    """The CPU time the process has used, user and system (Linux)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class RunningChat:
    """A user's chat kept running (a new round of Dot, Eve and Fay whenever one ends), and the
    latency of reading it, as the user's view does."""

    def __init__(self, server: JupyterProcess, http: httpx.Client) -> None:
        self.server = server
        self.http = http
        r = http.post(server.api("conversations"), json={"title": "Running through the flood"})
        assert r.status_code == 201, r.text
        self.id = r.json()["id"]
        self.sent: list[tuple[str, str]] = []  # acknowledged (message id, text)
        self.latencies: list[float] = []
        self.chat: dict[str, Any] = {}

    def look(self, keep_running: bool = True) -> dict[str, Any]:
        started = time.perf_counter()
        r = self.http.get(self.server.api(f"conversations/{self.id}"))
        self.latencies.append(time.perf_counter() - started)
        assert r.status_code == 200, r.text
        self.chat = r.json()
        if keep_running and not self.chat["busy"]:
            text = f"@Dot think aloud, round {len(self.sent) + 1}"
            r = self.http.post(
                self.server.api(f"conversations/{self.id}/messages"), json={"text": text}
            )
            assert r.status_code == 202, r.text
            self.sent.append((r.json()["message_id"], text))
        return self.chat

    def settle(self, timeout: float) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while self.look(keep_running=False)["busy"]:
            assert time.monotonic() < deadline, "the chat did not finish its round"
            time.sleep(0.05)
        return self.chat


@pytest.mark.parametrize(
    "size",
    [
        pytest.param(FloodSize(requests=2_000, seconds=120, p99_bound=2.0), id="short"),
        pytest.param(FloodSize(requests=20_000, seconds=900, p99_bound=2.0), id="full", marks=FULL),
    ],
)
def test_a_flood_at_the_door_leaves_a_running_chat_responsive(
    server: JupyterProcess,
    agents: dict[str, str],
    size: FloodSize,
    tmp_path: Path,
    record_property: Callable[[str, object], None],
) -> None:
    assert server.process is not None
    pid = server.process.pid
    if not Path(f"/proc/{pid}/status").exists():
        pytest.skip("reading the server's memory needs Linux's /proc")
    log_start = len(server.log())
    addresses, shared = loopback_addresses([ANYONE, GUESSER, KEYED])
    with server.client(timeout=30) as http:
        r = http.post(server.api("pairings"), json={"agents": ["researcher"], "remote": False})
        assert r.status_code == 201, r.text
        plan = FloodPlan(
            door=server.url,
            port=server.port,
            key=r.json()["key"],
            jupyter_token=server.token,
            requests=size.requests,
            seconds=size.seconds,
            addresses=addresses,
            shared_address=shared,
        )
        chat = RunningChat(server, http)
        for _ in range(40):  # the chat's latency with the door quiet
            chat.look()
            time.sleep(0.02)
        quiet, chat.latencies = chat.latencies, []
        before = peak = rss(pid)
        cpu_before = cpu_seconds(pid)

        out = tmp_path / "flood.json"
        spawn = multiprocessing.get_context("spawn")
        child = spawn.Process(target=flood_child, args=(plan, str(out)), name="conch-flood")
        child.start()
        try:
            deadline = time.monotonic() + size.seconds + 60
            while child.is_alive() and time.monotonic() < deadline:
                chat.look()
                peak = max(peak, rss(pid))
                time.sleep(0.02)
        finally:
            if child.is_alive():
                child.kill()
            child.join(10)
        cpu = cpu_seconds(pid) - cpu_before
        assert child.exitcode == 0, f"the flood process ended with {child.exitcode}"
        flooded = json.loads(out.read_text())

        ended = chat.settle(timeout=30)
        after = rss(pid)
        deadline = time.monotonic() + 15
        while after > before + size.memory_margin and time.monotonic() < deadline:
            time.sleep(0.5)  # the server's own gc, and tornado letting go of closed connections
            after = rss(pid)

    timings = {
        "chat_p50_ms": percentile(chat.latencies, 0.5),
        "chat_p99_ms": percentile(chat.latencies, 0.99),
        "quiet_p50_ms": percentile(quiet, 0.5),
        "quiet_p99_ms": percentile(quiet, 0.99),
        "door_p50_ms": flooded["door_p50"],
        "door_p99_ms": flooded["door_p99"],
        "server_cpu_ms_per_request": cpu / max(1, flooded["sent"]),
    }
    ms = {name: round(value * 1000, 1) for name, value in timings.items()}
    numbers = {
        "flood_requests": flooded["sent"],
        "flood_seconds": round(flooded["seconds"], 1),
        "flood_per_second": round(flooded["per_second"]),
        **ms,
        "rss_before_mb": round(before / MB, 1),
        "rss_peak_mb": round(peak / MB, 1),
        "rss_after_mb": round(after / MB, 1),
        "chat_reads": len(chat.latencies),
        "chat_rounds": len(chat.sent),
    }
    print(f"\n[load] flood: {json.dumps(numbers)}")
    print(f"[load] flood answers by kind: {json.dumps(flooded['by_kind'], sort_keys=True)}")
    for name, value in numbers.items():
        record_property(name, value)

    assert flooded["finished"], f"the flood did not end within {size.seconds} s"
    assert flooded["sent"] == size.requests
    assert flooded["unexpected_count"] == 0, flooded["unexpected"]
    # The throttle did its work: a wrong key sent again and again (per address and key prefix)
    # ended in 429s. Fresh random keys are held back per address only after ten times as many.
    assert flooded["by_kind"]["the Jupyter token as a key"].get("429 too_many_failures", 0) > 0
    assert ms["chat_p99_ms"] < size.p99_bound * 1000, numbers
    assert after <= before + size.memory_margin, numbers
    # The chat went on: every round it started ran to its bound, and every message is kept.
    rounds = len(chat.sent)
    assert rounds >= 1
    reasons = [(e["turns"], e["reason"]) for e in ended["events"] if e["type"] == "round.ended"]
    assert reasons == [(ROUND_REPLIES, "replies")] * rounds, reasons
    assert [(m["id"], m["text"]) for m in ended["messages"] if m["role"] == "user"] == chat.sent
    replies = [m for m in ended["messages"] if m["role"] == "agent"]
    assert len(replies) == ROUND_REPLIES * rounds
    log = new_log(server, log_start)
    assert "Traceback" not in log, log[-5000:]


# --- found under load --------------------------------------------------------------------------


def read_response(sock: socket.socket) -> bytes:
    """One whole HTTP/1.1 response with a Content-Length, or what came before the socket closed."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        if not chunk:
            return data
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = re.search(rb"(?im)^content-length:\s*(\d+)", head)
    while length and len(body) < int(length.group(1)):
        chunk = sock.recv(65536)
        if not chunk:
            break
        body += chunk
    return head + b"\r\n\r\n" + body


def test_a_refused_request_says_it_closes_the_connection(server: JupyterProcess) -> None:
    request = (
        f"GET {server.base_url}.well-known/agent-card.json HTTP/1.1\r\n"
        f"Host: 127.0.0.1:{server.port}\r\n\r\n"
    ).encode()
    with socket.create_connection(("127.0.0.1", server.port), timeout=5) as sock:
        sock.sendall(request)
        first = read_response(sock)
        assert first.startswith(b"HTTP/1.1 401 "), first
        if re.search(rb"(?im)^connection:\s*close", first):
            return  # said so: a client opens a new connection and sees every answer
        time.sleep(0.2)
        try:
            sock.sendall(request)
            second = read_response(sock)
        except ConnectionError as error:
            second = repr(error).encode()
    assert second.startswith(b"HTTP/1.1 401 "), second
