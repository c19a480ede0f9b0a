"""What Conch adds to a coding agent's turn over ACP, over the agent's own time (goal ≤ 20 ms).

Two clients drive the same scripted ACP agent (tests/support/acp_agent.py, built on
`agent-client-protocol`, run as a subprocess) through the same turns, interleaved so the
machine's load falls on both alike:

- **bare**: the SDK's own client (`acp.connect_to_agent`, a Client that only collects the
  chunks), one `session/prompt` per turn: the agent's own time plus the protocol's, the floor;
- **Conch**: `Turns.take` for an agent of kind `acp`, which is what a round runs: the history
  and room prompt, `CodingAgents` (the kept session, the chunks streamed to the Hub, the tool
  lines), the reply stored in SQLite (WAL, synchronous=FULL) and billed.

Each turn the agent streams three chunks of a short reply (`acp:say`), asks and is allowed an
edit (`acp:edit`, in an Auto chat: a permission question answered by the rules, and its tool
line stored), or reports its cost five times as it works (`acp:spend`: the meter, issue 37).
The meter watches every one of Conch's turns, as a round's do: each cost reported is checked
against the round's $1, the chat's limit and the month's budget (spend.py's `running_refusal`,
on the real ledger) and becomes the reply's bill. The overhead is Conch's median minus the bare
median, per kind of turn; the ratio of the medians beside it. Prints; never asserts on speed.

`--agent codex` (or `claude`) runs the real adapter from tests/support/acp_adapters (installed
with `npm ci` when missing) against a scripted model on loopback instead: a short reply, and a
shell command it asks about and is allowed (issue 31); `--release today` (the default) is the
release npm serves today, `--release pinned` last month's pin (issue 37).

    .venv/bin/python -m benchmarks.bench_acp_turn [--turns 60] [--warmup 5] [--agent codex]
        [--release today|pinned]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import signal
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import acp
import httpx

from conch_jupyter.agents.agent_store import AgentStore
from conch_jupyter.coding.rules import asking_setup, mode_to_leave
from conch_jupyter.coding.sessions import CodingAgents
from conch_jupyter.core.sealed import SealedFile
from conch_jupyter.notebook.service import NotebookTools
from conch_jupyter.rounds.engine import Roster, Round
from conch_jupyter.rounds.history import Said
from conch_jupyter.rounds.spend import Budget, running_refusal
from conch_jupyter.rounds.turn import Reply, TurnInput, Turns
from conch_jupyter.store.chats import Store
from conch_jupyter.store.hub import Hub
from tests.support import acp_agent, real_agents
from tests.support.scripted_models import ScriptedModels

from ._machine import code_line, disk_line, load_line, machine_line, summarize

AGENT = str(Path(acp_agent.__file__).resolve())
SCRIPTS = {
    "say": "acp:say a short reply in three chunks",
    "edit": "acp:edit",
    "cost": "acp:spend 0.001 5",
}


class _Bare:
    """The SDK's client doing nothing but collecting the text, allowing every question once."""

    def __init__(self) -> None:
        self.text: list[str] = []

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        content = getattr(update, "content", None)
        if getattr(update, "session_update", "") == "agent_message_chunk" and content:
            self.text.append(content.text)

    async def request_permission(
        self, session_id: str, tool_call: Any, options: Any, **kw: Any
    ) -> Any:
        chosen = next((o.option_id for o in options if o.kind == "allow_once"), "yes")
        return acp.schema.RequestPermissionResponse(
            outcome=acp.schema.AllowedOutcome(outcome="selected", option_id=chosen)
        )

    def on_connect(self, conn: Any) -> None:
        pass


@contextlib.asynccontextmanager
async def bare_agent(
    client: Any, command: str, args: list[str], env: dict[str, str], cwd: str
) -> AsyncIterator[tuple[Any, asyncio.subprocess.Process]]:
    """The SDK's client on the agent's process, in a process group of its own that is ended
    whole afterwards (an npm wrapper's native binary would outlive the wrapper otherwise)."""
    process = await asyncio.create_subprocess_exec(
        command, *args, stdin=-1, stdout=-1, env=env, cwd=cwd, start_new_session=True
    )
    assert process.stdin is not None
    assert process.stdout is not None
    conn = acp.connect_to_agent(client, process.stdin, process.stdout)
    try:
        yield conn, process
    finally:
        await conn.close()
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        await process.wait()


async def leave_skipping_mode(conn: Any, made: Any) -> None:
    """The bare client moves the agent out of a mode that skips questions as Conch does
    (`mode_to_leave`): today's Codex starts in `agent`, whose approvals a side call to the model
    answers, which would time a different turn."""
    modes = getattr(made, "modes", None)
    if modes is None:
        return
    offered = [str(m.id) for m in modes.available_modes]
    target = mode_to_leave(str(modes.current_mode_id), offered)
    if target is not None:
        await conn.set_session_mode(mode_id=target, session_id=made.session_id)


def real_setup(name: str, release: str, folder: Path) -> tuple[Any, dict[str, Any], dict[str, str]]:
    """The scripted model, the provider for the real adapter's `release` (npm's today, or last
    month's pin), and this benchmark's scripts."""
    run = real_agents.run_call(name, release)
    script = real_agents.Script(calls={"RUNIT": run}, after="Ran it.", text="A short reply.")
    models = ScriptedModels().__enter__()
    models.responder = script
    provider = real_agents.provider(name, models, folder / "home", release=release)
    return models, provider, {"say": "say something short", "run": "RUNIT now"}


async def run(turns: int, warmup: int, name: str | None, release: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        print(machine_line())
        print(code_line())
        print(load_line())
        print(disk_line(folder))
        models = None
        scripts = SCRIPTS
        provider: dict[str, Any] = {"kind": "acp", "command": sys.executable, "args": [AGENT]}
        if name is not None:
            models, provider, scripts = real_setup(name, release, folder)
            package = real_agents.package_of(name, release)
            version = real_agents.version_of(name, release)
            print(f"agent: the real {package} {version} ({release}; tests/support/acp_adapters)")
        store = Store(folder / "conch.sqlite3", clock=time.time)
        hub = Hub()
        tools = NotebookTools(store=store, hub=hub, kernels=None)
        coding = CodingAgents(store=store, hub=hub, tools=tools, root_dir=tmp)
        (folder / "data").mkdir()
        sealed = SealedFile(folder / "data" / "secrets.json", folder / "seal.key")
        agents = AgentStore(folder / "data" / "agents.json", sealed, clock=time.time)
        sealed_env = {k: v for k, v in provider.items() if k == "env"}
        shown = {k: v for k, v in provider.items() if k != "env"}
        agent = agents.create("Coder", provider=shown, acp_env=sealed_env.get("env"))
        http = httpx.AsyncClient()
        runner = Turns(store, agents, hub, http, notebook=tools, coding=coding)
        chat = (await store.create_conversation("bench")).id
        await store.set_mode(chat, "auto")
        bare = _Bare()
        times: dict[tuple[str, str], list[int]] = {}
        # The meter watching, as in a round: its $1, the chat's limit, the month's budget.
        rnd = Round(named=["Coder"], roster=Roster(ours=("Coder",)))
        rnd.start()
        budget = Budget()
        metered: dict[str, int] = {}

        def check(cost: float) -> Any:
            return running_refusal(store, budget, agent, chat, time.time(), rnd, cost)

        # The bare client runs the same program with the same arguments and environment.
        setup = asking_setup(provider["command"], provider["args"])
        args = [*provider["args"], *(setup.args if setup else ())]
        env = {**os.environ, **provider.get("env", {}), **(setup.env if setup else {})}
        async with bare_agent(bare, provider["command"], args, env, tmp) as (conn, _):
            await conn.initialize(protocol_version=acp.PROTOCOL_VERSION)
            meta = setup.meta if setup else {}
            made = await conn.new_session(cwd=tmp, mcp_servers=[], **meta)
            session = made.session_id
            await leave_skipping_mode(conn, made)
            for i in range(warmup + turns):
                for kind, script in scripts.items():
                    said = [Said("user", script, id=f"m{i}-{kind}")]
                    began = time.perf_counter_ns()
                    await conn.prompt(session_id=session, prompt=[acp.text_block(script)])
                    bare_ns = time.perf_counter_ns() - began
                    turn = TurnInput(
                        chat, agent, "You are Coder.", said, script, ("Coder",), spend_check=check
                    )
                    began = time.perf_counter_ns()
                    reply = await runner.take(turn, Reply())
                    conch_ns = time.perf_counter_ns() - began
                    assert reply.failure is None, reply.failure
                    assert reply.refusal is None, reply.refusal
                    if reply.reported_usd is not None:
                        metered[kind] = metered.get(kind, 0) + 1
                    if i >= warmup:
                        times.setdefault((kind, "bare"), []).append(bare_ns)
                        times.setdefault((kind, "conch"), []).append(conch_ns)
        await coding.close()
        await http.aclose()
        store.close()
        if models is not None:
            models.__exit__(None, None, None)
        print(f"\n{turns} turns of each kind, after {warmup} warm-up turns; interleaved")
        reported = ", ".join(f"{k} {metered.get(k, 0)}" for k in scripts)
        print(f"turns that reported a cost (the meter billed them): {reported}\n")
        for kind in scripts:
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
    parser.add_argument("--agent", choices=sorted(real_agents.COMMANDS), default=None)
    parser.add_argument(
        "--release",
        choices=["today", "pinned"],
        default="today",
        help="with --agent: the release npm serves today, or last month's pin",
    )
    args = parser.parse_args()
    asyncio.run(run(args.turns, args.warmup, args.agent, args.release))


if __name__ == "__main__":
    main()
