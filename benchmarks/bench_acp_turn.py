"""What Conch adds to a coding agent's turn over ACP, over the agent's own time (goal ≤ 20 ms).

Two clients drive the same scripted ACP agent (tests/support/acp_agent.py, built on
`agent-client-protocol`, run as a subprocess) through the same turns, interleaved so the
machine's load falls on both alike:

- **bare**: the SDK's own client (`acp.spawn_agent_process`, a Client that only collects the
  chunks), one `session/prompt` per turn: the agent's own time plus the protocol's, the floor;
- **Conch**: `Turns.take` for an agent of kind `acp`, which is what a round runs: the history
  and room prompt, `CodingAgents` (the kept session, the chunks streamed to the Hub, the tool
  lines), the reply stored in SQLite (WAL, synchronous=FULL) and billed.

Each turn the agent streams three chunks of a short reply (`acp:say`) or asks and is allowed an
edit (`acp:edit`, in an Auto chat: a permission question answered by the rules, and its tool
line stored). The overhead is Conch's median minus the bare median, per kind of turn; the
ratio of the medians beside it. Prints; never asserts on speed.

    .venv/bin/python -m benchmarks.bench_acp_turn [--turns 60] [--warmup 5]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import acp
import httpx

from conch_jupyter.agents.agent_store import AgentStore
from conch_jupyter.coding.sessions import CodingAgents
from conch_jupyter.core.sealed import SealedFile
from conch_jupyter.notebook.service import NotebookTools
from conch_jupyter.rounds.history import Said
from conch_jupyter.rounds.turn import Reply, TurnInput, Turns
from conch_jupyter.store.chats import Store
from conch_jupyter.store.hub import Hub
from tests.support import acp_agent

from ._machine import code_line, disk_line, load_line, machine_line, summarize

AGENT = str(Path(acp_agent.__file__).resolve())
SCRIPTS = {"say": "acp:say a short reply in three chunks", "edit": "acp:edit"}


class _Bare:
    """The SDK's client doing nothing but collecting the text, allowing every question."""

    def __init__(self) -> None:
        self.text: list[str] = []

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        content = getattr(update, "content", None)
        if getattr(update, "session_update", "") == "agent_message_chunk" and content:
            self.text.append(content.text)

    async def request_permission(
        self, session_id: str, tool_call: Any, options: Any, **kw: Any
    ) -> Any:
        return acp.schema.RequestPermissionResponse(
            outcome=acp.schema.AllowedOutcome(outcome="selected", option_id="yes")
        )

    def on_connect(self, conn: Any) -> None:
        pass


async def run(turns: int, warmup: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        print(machine_line())
        print(code_line())
        print(load_line())
        print(disk_line(folder))
        store = Store(folder / "conch.sqlite3", clock=time.time)
        hub = Hub()
        tools = NotebookTools(store=store, hub=hub, kernels=None)
        coding = CodingAgents(store=store, hub=hub, tools=tools, root_dir=tmp)
        (folder / "data").mkdir()
        sealed = SealedFile(folder / "data" / "secrets.json", folder / "seal.key")
        agents = AgentStore(folder / "data" / "agents.json", sealed, clock=time.time)
        agent = agents.create(
            "Coder", provider={"kind": "acp", "command": sys.executable, "args": [AGENT]}
        )
        http = httpx.AsyncClient()
        runner = Turns(store, agents, hub, http, notebook=tools, coding=coding)
        chat = (await store.create_conversation("bench")).id
        await store.set_mode(chat, "auto")
        bare = _Bare()
        times: dict[tuple[str, str], list[int]] = {}
        async with acp.spawn_agent_process(bare, sys.executable, AGENT) as (conn, _):
            await conn.initialize(protocol_version=acp.PROTOCOL_VERSION)
            session = (await conn.new_session(cwd=tmp, mcp_servers=[])).session_id
            for i in range(warmup + turns):
                for kind, script in SCRIPTS.items():
                    said = [Said("user", script, id=f"m{i}-{kind}")]
                    began = time.perf_counter_ns()
                    await conn.prompt(session_id=session, prompt=[acp.text_block(script)])
                    bare_ns = time.perf_counter_ns() - began
                    turn = TurnInput(chat, agent, "You are Coder.", said, script, ("Coder",))
                    began = time.perf_counter_ns()
                    reply = await runner.take(turn, Reply())
                    conch_ns = time.perf_counter_ns() - began
                    assert reply.failure is None, reply.failure
                    if i >= warmup:
                        times.setdefault((kind, "bare"), []).append(bare_ns)
                        times.setdefault((kind, "conch"), []).append(conch_ns)
        await coding.close()
        await http.aclose()
        store.close()
        print(f"\n{turns} turns of each kind, after {warmup} warm-up turns; interleaved\n")
        for kind in SCRIPTS:
            floor = summarize(times[(kind, "bare")])
            ours = summarize(times[(kind, "conch")])
            print(f"{kind:5} bare ACP client  {floor.ms()}")
            print(f"{kind:5} Conch's turn     {ours.ms()}")
            overhead = (ours.median - floor.median) / 1e6
            ratio = ours.median / floor.median
            print(f"{kind:5} overhead {overhead:.3f} ms a turn at the median (x{ratio:.2f})\n")
        print("goal: overhead <= 20 ms a turn")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=60)
    parser.add_argument("--warmup", type=int, default=5)
    args = parser.parse_args()
    asyncio.run(run(args.turns, args.warmup))


if __name__ == "__main__":
    main()
