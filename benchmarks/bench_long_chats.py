"""A long chat against a short one, on a real Jupyter server: the chat's snapshot whole (what
every client got before the paged forms, and what the plain GET still answers) next to a page
of it, the live stream opening with each, a stream that resumes, and how long the server's
event loop stalls while the chat is read (DESIGN.md "Long chats"; issue 24).

Set-up: the chats are written into the server's store before it starts
(tests/support/long_chats.py: each exchange a user's message, the round's start, a reply of a
few hundred characters of Markdown, the round's end): 100 messages, and 10,000. The server is
`_jupyter.conch_server` (the tests' JupyterProcess), on loopback.

- snapshot: `GET conversations/{id}` (whole) and `?limit=100` (a page): bytes, median and p90;
- stream opens: from the request to the snapshot parsed, `…/events` and `…/events?limit=100`;
- stream resumes: from the request with `Last-Event-ID` to `resumed` parsed;
- event-loop stall: while one client reads the chat, another asks the server something small
  (`?limit=0` of another chat) every 10 ms; the slowest of those answers is how long the loop
  was held (Tornado runs every handler on one loop: every chat, stream and kernel message waits).

Prints; never asserts on speed.

    .venv/bin/python -m benchmarks.bench_long_chats [--quick]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from ._jupyter import REPO, api_client, checked, conch_server, server_code, server_code_line
from ._machine import code_line, load_line, machine_line, summarize

PAGE = 100
HELPER = REPO / "tests" / "support" / "long_chats.py"


async def timed_get(http: httpx.AsyncClient, path: str, **params: Any) -> tuple[float, int]:
    start = time.perf_counter_ns()
    answer = await http.get(path, params=params)
    answer.raise_for_status()
    answer.json()
    return time.perf_counter_ns() - start, len(answer.content)


async def stream_open(
    http: httpx.AsyncClient,
    path: str,
    wanted: str,
    headers: dict[str, str] | None = None,
    **params: Any,
) -> tuple[float, str]:
    """From the request to the first `wanted` item parsed; and the stream's place then."""
    start = time.perf_counter_ns()
    place, data = "", ""
    async with http.stream("GET", path, params=params, headers=headers or {}) as answer:
        async for line in answer.aiter_lines():
            if line.startswith("id:"):
                place = line[3:].strip()
            elif line.startswith("data:"):
                data = line[5:]
            elif not line and data:
                if json.loads(data)["type"] == wanted:
                    return time.perf_counter_ns() - start, place
                data = ""
    raise RuntimeError(f"{path} ended before {wanted}")


async def first_deltas(http: httpx.AsyncClient, chat_id: str, reps: int) -> list[float]:
    """From a message's POST to its reply's first delta on the chat's stream, `reps` times
    (each round ends before the next message)."""
    taken: list[float] = []
    path = f"conversations/{chat_id}"
    async with http.stream("GET", f"{path}/events", params={"limit": 1}) as answer:
        lines = answer.aiter_lines()
        sent = 0
        waiting = False
        async for line in lines:
            if not line.startswith("data:"):
                continue
            item = json.loads(line[5:])
            kind = item["type"]
            if kind == "snapshot" or (kind == "event" and item["event"]["type"] == "round.ended"):
                if sent == reps:
                    return taken
                sent += 1
                waiting = True
                start = time.perf_counter_ns()
                await http.post(f"{path}/messages", json={"text": "@Researcher one more?"})
            elif kind == "delta" and waiting:
                taken.append(time.perf_counter_ns() - start)
                waiting = False
    return taken


# The prober, a process of its own: in this one, parsing a 6 MB answer would hold it too.
PROBER = """
import json, os, sys, time, httpx
url, token, stop = sys.argv[1:4]
samples = []
with httpx.Client(headers={"Authorization": f"token {token}"}, trust_env=False, timeout=120) as h:
    while not os.path.exists(stop):
        start = time.perf_counter_ns()
        h.get(url, params={"limit": 0}).raise_for_status()
        samples.append(time.perf_counter_ns() - start)
        time.sleep(0.01)
print(json.dumps(samples))
"""


async def stall_while(server: Any, probe: str, work: Any) -> tuple[float, float]:
    """(slowest, median) answer of a small request made every 10 ms, by another process, while
    `work` runs."""
    with tempfile.TemporaryDirectory(prefix="conch-probe-") as tmp:
        stop = Path(tmp) / "stop"
        prober = await asyncio.create_subprocess_exec(
            sys.executable,
            "-c",
            PROBER,
            f"{server.url}conch/api/{probe}",
            server.token,
            str(stop),
            stdout=asyncio.subprocess.PIPE,
        )
        await asyncio.sleep(1.0)  # it has started and asks already
        await work()
        stop.touch()
        out, _ = await prober.communicate()
    samples = sorted(json.loads(out))
    return samples[-1], samples[len(samples) // 2]


async def measure(server: Any, chats: dict[str, str], quick: bool) -> None:
    async with api_client(server, timeout=httpx.Timeout(120.0)) as http:
        probe = f"conversations/{chats['probe']}"
        firsts: dict[str, float] = {}
        for label in ("100 messages", "10,000 messages"):
            path = f"conversations/{chats[label]}"  # the last one read: the long chat
            reps_whole = 3 if quick else (20 if label.startswith("100 ") else 7)
            reps_page = 10 if quick else 30
            print(f"\n{label}")
            # The page first: the whole chat's garbage would be collected in the page's time.
            paged = [await timed_get(http, path, limit=PAGE) for _ in range(reps_page)]
            whole = [await timed_get(http, path) for _ in range(reps_whole)]
            w, p = summarize([t for t, _ in whole]), summarize([t for t, _ in paged])
            print(f"  GET whole (plain GET)   {whole[0][1] / 1e6:7.2f} MB   {w.ms()}")
            print(f"  GET ?limit={PAGE}          {paged[0][1] / 1e6:7.2f} MB   {p.ms()}")
            print(
                f"    page / whole: {paged[0][1] / whole[0][1]:.3f}× the bytes, "
                f"{p.median / w.median:.3f}× the time (medians)"
            )
            events = f"{path}/events"
            opened = [(await stream_open(http, events, "snapshot"))[0] for _ in range(reps_whole)]
            opened_page = [
                await stream_open(http, events, "snapshot", limit=PAGE) for _ in range(reps_page)
            ]
            place = opened_page[-1][1]
            resumed = [
                (await stream_open(http, events, "resumed", {"Last-Event-ID": place}))[0]
                for _ in range(reps_page)
            ]
            o, op, r = summarize(opened), summarize([t for t, _ in opened_page]), summarize(resumed)
            print(f"  stream opens, whole     {o.ms()}")
            print(f"  stream opens, ?limit={PAGE} {op.ms()}   ({op.median / o.median:.3f}× whole)")
            print(f"  stream resumes          {r.ms()}")

            async def read_whole(path: str = path) -> None:
                for _ in range(3):
                    await timed_get(http, path)

            async def read_pages(path: str = path) -> None:
                for _ in range(20):
                    await timed_get(http, path, limit=PAGE)

            slow_w, med_w = await stall_while(server, probe, read_whole)
            slow_p, med_p = await stall_while(server, probe, read_pages)
            deltas = summarize(await first_deltas(http, chats[label], 5 if quick else 20))
            print(f"  first reply delta       {deltas.ms()}")
            firsts[label] = deltas.median
            for how, slow, med in (("whole", slow_w, med_w), ("pages", slow_p, med_p)):
                print(
                    f"  loop stall reading {how}  slowest {slow / 1e6:8.1f} ms"
                    f" (median probe {med / 1e6:.1f} ms)"
                )

        print(
            "\nfirst reply delta, 10,000 messages / 100 (medians):"
            f" {firsts['10,000 messages'] / firsts['100 messages']:.3f}×"
        )
        # 20 rounds at once, in 20 chats, while the long chat is read by pages.
        made = [
            (await checked(await http.post("conversations", json={"title": f"r{n}"}), 201))["id"]
            for n in range(20)
        ]
        busy = True

        async def still_busy(chats: list[str]) -> bool:
            for c in chats:
                if (await http.get(f"conversations/{c}", params={"limit": 0})).json()["busy"]:
                    return True
            return False

        async def rounds() -> None:
            nonlocal busy
            for _ in range(3 if quick else 10):
                await asyncio.gather(
                    *(
                        http.post(
                            f"conversations/{c}/messages",
                            json={"text": "@Researcher find it, @Writer write it"},
                        )
                        for c in made
                    )
                )
                while await still_busy(made):  # noqa: ASYNC110 (the server's state, polled)
                    await asyncio.sleep(0.05)
            busy = False

        async def reads() -> list[float]:
            taken = []
            while busy:
                taken.append((await timed_get(http, path, limit=PAGE))[0])
            return taken

        _, during = await asyncio.gather(rounds(), reads())
        print(f"\n20 rounds at once: the long chat's page ({len(during)} reads)")
        print(f"  {summarize(during).ms()}")
        # The chat list, a page at a time, next to whole.
        listed = [await timed_get(http, "conversations") for _ in range(10)]
        page = [await timed_get(http, "conversations", limit=50) for _ in range(10)]
        print(
            f"\nchat list ({len(chats) + 20} chats): whole {summarize([t for t, _ in listed]).ms()}"
        )
        print(f"                   ?limit=50 {summarize([t for t, _ in page]).ms()}")


def written(data_dir: Path, exchanges: int, title: str) -> str:
    """A chat written by the store of the code the server runs (CONCH_BENCH_SERVER_CODE: an
    older commit's, whose schema may be older), through tests/support/long_chats.py."""
    # The helper by its file (the other checkout's `tests` package may not hold it), over the
    # server code's store.
    code = (
        "import importlib.util, sys; from pathlib import Path\n"
        "spec = importlib.util.spec_from_file_location('long_chats', sys.argv[4])\n"
        "chats = importlib.util.module_from_spec(spec); spec.loader.exec_module(chats)\n"
        "print(chats.long_chat_file(Path(sys.argv[1]), int(sys.argv[2]), title=sys.argv[3]))"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(server_code()), str(REPO)])}
    done = subprocess.run(
        [sys.executable, "-c", code, str(data_dir), str(exchanges), title, str(HELPER)],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    )
    return done.stdout.strip().splitlines()[-1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repetitions")
    args = parser.parse_args()
    print(machine_line())
    print(code_line())
    with tempfile.TemporaryDirectory(prefix="conch-bench-long-") as tmp:
        folder = Path(tmp)
        (folder / "conch").mkdir(mode=0o700)
        start = time.monotonic()
        chats = {
            "probe": written(folder / "conch", 1, "probe"),
            "100 messages": written(folder / "conch", 50, "short"),
            "10,000 messages": written(folder / "conch", 5_000, "long"),
        }
        print(f"chats written in {time.monotonic() - start:.1f} s")
        with conch_server(folder) as server:
            print(server_code_line())
            print(load_line())
            asyncio.run(measure(server, chats, args.quick))
            print(load_line())


if __name__ == "__main__":
    main()
