"""The memory of N chats with one coding agent (goal: flat in N, one process tree).

A real adapter from tests/support/acp_adapters (Codex's by default, `--agent claude` for Claude
Code's) against a scripted model on loopback. For N = 1 … `--chats`, one more chat gets a turn,
then the resident memory of every process the agent runs (its process group: the npm wrapper,
its native binary, Claude Code's CLI per session) is added up, from /proc:

- **Conch**: `CodingAgents` as a round runs it: one process for the agent, one ACP session per
  chat on it, at most `c.ConchApp.acp_live_sessions` (4) open;
- **reference**: what Conch did before issue 31, one process per chat and agent (each the SDK's
  bare client on a process of its own).

Prints the process count and megabytes for each N side by side, and the ratio; never asserts.

    .venv/bin/python -m benchmarks.bench_acp_memory [--chats 7] [--agent codex]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import tempfile
import time
from pathlib import Path

import acp
import httpx

from conch_jupyter.agents.agent_store import AgentStore
from conch_jupyter.coding.rules import LIVE_SESSIONS, asking_setup
from conch_jupyter.coding.sessions import CodingAgents
from conch_jupyter.core.sealed import SealedFile
from conch_jupyter.notebook.service import NotebookTools
from conch_jupyter.rounds.history import Said
from conch_jupyter.rounds.turn import Reply, TurnInput, Turns
from conch_jupyter.store.chats import Store
from conch_jupyter.store.hub import Hub
from tests.support import real_agents
from tests.support.scripted_models import ScriptedModels

from ._machine import code_line, load_line, machine_line
from .bench_acp_turn import _Bare, bare_agent


def group_memory(pgid: int) -> tuple[int, float]:
    """How many live processes the group holds, and their resident memory in MB."""
    count, kb = 0, 0
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            fields = stat.rsplit(")", 1)[1].split()
            if int(fields[2]) != pgid or fields[0] == "Z":
                continue
            status = (entry / "status").read_text()
        except (OSError, ValueError):
            continue
        for line in status.splitlines():
            if line.startswith("VmRSS:"):
                kb += int(line.split()[1])
                count += 1
    return count, kb / 1024


async def conch_side(name: str, chats: int, folder: Path, models: ScriptedModels) -> list[str]:
    provider = real_agents.provider(name, models, folder / "home-conch")
    store = Store(folder / "conch.sqlite3", clock=time.time)
    hub = Hub()
    tools = NotebookTools(store=store, hub=hub, kernels=None)
    coding = CodingAgents(store=store, hub=hub, tools=tools, root_dir=str(folder))
    (folder / "data").mkdir()
    sealed = SealedFile(folder / "data" / "secrets.json", folder / "seal.key")
    agents = AgentStore(folder / "data" / "agents.json", sealed, clock=time.time)
    shown = {k: v for k, v in provider.items() if k != "env"}
    agent = agents.create("Coder", provider=shown, acp_env=provider["env"])
    http = httpx.AsyncClient()
    runner = Turns(store, agents, hub, http, notebook=tools, coding=coding)
    lines = []
    try:
        for n in range(1, chats + 1):
            chat = (await store.create_conversation(f"chat {n}")).id
            said = [Said("user", "say something short", id=f"m{n}")]
            turn = TurnInput(chat, agent, "You are Coder.", said, "say something", ("Coder",))
            reply = await runner.take(turn, Reply())
            assert reply.failure is None, reply.failure
            process = coding.process_of(agent.id)
            assert process is not None
            assert process.pid is not None
            count, mb = group_memory(process.pid)
            lines.append(f"{count:3} processes {mb:8.0f} MB")
    finally:
        await coding.close()
        await http.aclose()
        store.close()
    return lines


async def reference_side(name: str, chats: int, folder: Path, models: ScriptedModels) -> list[str]:
    provider = real_agents.provider(name, models, folder / "home-reference")
    setup = asking_setup(provider["command"], provider["args"])
    args = [*provider["args"], *(setup.args if setup else ())]
    env = {**os.environ, **provider["env"], **(setup.env if setup else {})}
    meta = setup.meta if setup else {}
    lines = []
    async with contextlib.AsyncExitStack() as stack:
        groups: list[int] = []
        for _ in range(chats):
            bare = _Bare()
            conn, process = await stack.enter_async_context(
                bare_agent(bare, provider["command"], args, env, str(folder))
            )
            await conn.initialize(protocol_version=acp.PROTOCOL_VERSION)
            session = await conn.new_session(cwd=str(folder), mcp_servers=[], **meta)
            await conn.prompt(
                session_id=session.session_id, prompt=[acp.text_block("say something short")]
            )
            groups.append(process.pid)  # the leader of its own process group
            counted = [group_memory(g) for g in groups]
            count = sum(c for c, _ in counted)
            mb = sum(m for _, m in counted)
            lines.append(f"{count:3} processes {mb:8.0f} MB")
    return lines


async def run(chats: int, name: str) -> None:
    real_agents.ensure_adapters()
    print(machine_line())
    print(code_line())
    print(load_line())
    print(f"agent: the real {real_agents.COMMANDS[name]}; live sessions {LIVE_SESSIONS}\n")
    with tempfile.TemporaryDirectory() as tmp, ScriptedModels() as models:
        models.responder = real_agents.Script(text="A short reply.")
        (Path(tmp) / "conch").mkdir()
        (Path(tmp) / "reference").mkdir()
        ours = await conch_side(name, chats, Path(tmp) / "conch", models)
        theirs = await reference_side(name, chats, Path(tmp) / "reference", models)
    print(f"{'chats':>5}  {'Conch (one process)':>28}  {'reference (one per chat)':>28}")
    for n, (a, b) in enumerate(zip(ours, theirs, strict=True), 1):
        ratio = float(a.split()[2]) / max(float(b.split()[2]), 1.0)
        print(f"{n:5}  {a:>28}  {b:>28}  x{ratio:.2f}")
    print("\ngoal: flat in N, one process tree (Claude within 1.5 GB, Codex within 600 MB)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chats", type=int, default=7)
    parser.add_argument("--agent", choices=["claude", "codex"], default="codex")
    args = parser.parse_args()
    asyncio.run(run(args.chats, args.agent))


if __name__ == "__main__":
    main()
