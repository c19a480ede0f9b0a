"""What Conch adds to one call of a tool of your MCP server, over the server's own time (goal
≤ 5 ms at the median on loopback).

Two callers drive the same real server (tests/support/mcp_servers.py: the `mcp` SDK's FastMCP,
run as a subprocess over stdio, and again over Streamable HTTP on loopback) through the same
calls of its read-only `lookup` tool, interleaved so the machine's load falls on both alike:

- **direct**: the SDK's own client (`mcp.Client`), one `tools/call`: the server's time plus the
  protocol's, the floor;
- **Conch**: `NotebookTools.call_outside` with the tool as a turn is offered it
  (`McpServerService.offer`), which is what a turn runs: the one rule (mode and taint read from
  the store), the call through Conch's connection, the result fenced as data, its `tool`
  message and `tool.ended` event stored in SQLite (WAL, synchronous=FULL) and published.

The overhead is Conch's median minus the direct median; the ratio of the medians beside it.
Prints; never asserts on speed.

    .venv/bin/python -m benchmarks.bench_mcp_call [--calls 200] [--warmup 20]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path

from mcp import Client, StdioServerParameters

from conch_jupyter.core.sealed import SealedFile
from conch_jupyter.mcp_servers.service import McpServerService, ServerIn
from conch_jupyter.notebook.service import Caller, NotebookTools, OutsideTool
from conch_jupyter.providers.base import ToolCall
from conch_jupyter.store.chats import Store
from conch_jupyter.store.hub import Hub
from tests.support.mcp_servers import SCRIPT

from ._machine import code_line, disk_line, load_line, machine_line, summarize


@contextlib.asynccontextmanager
async def http_server(marks: Path) -> AsyncIterator[str]:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    process = subprocess.Popen(  # noqa: ASYNC220 - started once, before anything is measured
        [sys.executable, str(SCRIPT), "http", str(port), str(marks)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        for _ in range(400):
            try:
                socket.create_connection(("127.0.0.1", port), 0.2).close()
                break
            except OSError:
                await asyncio.sleep(0.05)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.terminate()
        process.wait(10)


async def measure(transport: str, folder: Path, calls: int, warmup: int) -> None:
    marks = folder / "marks"
    store = Store(folder / f"{transport}.sqlite3", clock=time.time)
    hub = Hub()
    tools = NotebookTools(store=store, hub=hub, kernels=None)
    service = McpServerService(
        store=store, secrets=SealedFile(folder / "s" / "mcp.json", folder / "key"), clock=time.time
    )
    async with contextlib.AsyncExitStack() as stack:
        if transport == "stdio":
            given = ServerIn(
                "demo", "stdio", command=sys.executable, args=(str(SCRIPT), "stdio", str(marks))
            )
            direct_target: object = StdioServerParameters(
                command=sys.executable, args=[str(SCRIPT), "stdio", str(marks)]
            )
        else:
            url = await stack.enter_async_context(http_server(marks))
            given = ServerIn("demo", "http", url=url)
            direct_target = url
        row = await service.create(given)
        offer = await service.offer([row.id])
        chat = await store.create_conversation("bench")
        await store.set_mode(chat.id, "auto")
        caller = Caller("bench", "Bench")
        name = "demo__lookup"
        offered = offer.tools[name]

        async def run(arguments: dict[str, object]) -> tuple[str, str]:
            return await service.run(offer, name, dict(arguments))

        tool = OutsideTool(offered.server, offered.nature, run, service.shown)  # type: ignore[arg-type]
        direct = await stack.enter_async_context(
            Client(direct_target, mode="legacy", cache=None)  # type: ignore[arg-type]
        )
        conch_ns: list[int] = []
        direct_ns: list[int] = []
        for at in range(warmup + calls):
            began = time.perf_counter_ns()
            await direct.call_tool("lookup", {"key": "pi"})
            mid = time.perf_counter_ns()
            call = ToolCall(f"c{at}", name, {"key": "pi"})
            shown = await tools.call_outside(chat.id, caller, call, 0, tool)
            end = time.perf_counter_ns()
            assert "3.14159" in shown
            if at >= warmup:
                direct_ns.append(mid - began)
                conch_ns.append(end - mid)
        floor, ours = summarize(direct_ns), summarize(conch_ns)
        print(f"{transport:5} direct SDK call   {floor.ms()}")
        print(f"{transport:5} through Conch     {ours.ms()}")
        overhead = (ours.median - floor.median) / 1e6
        print(
            f"{transport:5} overhead {overhead:.3f} ms a call at the median"
            f" (x{ours.median / floor.median:.2f})\n"
        )
    await service.close()
    hub.close()
    store.close()


async def main(calls: int, warmup: int) -> None:
    with tempfile.TemporaryDirectory(prefix="conch-bench-mcp-") as name:
        folder = Path(name)
        print(machine_line())
        print(code_line())
        print(load_line())
        print(disk_line(folder))
        print(f"\n{calls} calls of each, after {warmup} warm-up calls; interleaved\n")
        for transport in ("stdio", "http"):
            await measure(transport, folder, calls, warmup)
        print("goal: overhead <= 5 ms a call at the median")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--warmup", type=int, default=20)
    options = parser.parse_args()
    asyncio.run(main(options.calls, options.warmup))
