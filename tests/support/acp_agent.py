"""A scripted coding agent that speaks the real Agent Client Protocol over stdio, built on the
`agent-client-protocol` package: the stand-in for Claude Code, Codex or Goose, which cannot run
here. Run it as `python -m tests.support.acp_agent` (or by path) as an ACP agent's command.

What it does is read from the prompt: the last `acp:<what>` in it (the user's message is the
newest text a prompt holds) says what this turn does:

    acp:say <text>        stream <text> (to the end of its line) in three chunks: hand on with @Name
    acp:edit / acp:execute / acp:read / acp:fetch / acp:delete / acp:move / acp:search
                          ask permission for a tool call of that kind, then say what was answered
                          (`acp:execute <command>`: to run that command, titled "Run <command>")
    acp:act [<kind> <what>]
                          run a command without asking (as an agent whose own settings allow
                          it): report it started and done, then say "acted"; `rm -rf build`
                          unless a kind and what are named (`execute rg --pre ./x.sh foo`, a
                          command; `fetch <url>`; `other <title>`, titled and named so)
    acp:tool <server> <tool>
                          ask permission for an MCP tool call as Claude names it
                          (`mcp__<server>__<tool>`, kind `other`), then say what was answered;
                          <server> `offered` is the name of the server Conch offered
    acp:usage             report usage (tokens in the prompt's answer; in a usage update the
                          session's cumulative cost, $0.25 more each time)
    acp:spend <step> <n> [then]
                          report the session's cumulative cost <n> times, <step> dollars more
                          each time, a word streamed before each; it stops at `session/cancel`.
                          Then, if named: `crash`, `hang`, `flood`, `act` or `ignore-cancel`
                          (as those marks do), `fail` (answer the prompt with an error), else
                          end the turn
    acp:think             a thought, a plan, a read tool call that completes, then a line
    acp:ignore-cancel     stream a little, then go on for 30 s whatever `session/cancel` says
    acp:crash             stream a little, then exit (code 3) mid-reply
    acp:hang              say nothing, for good
    acp:flood <n>         stream <n> chunks of 1,000 characters
    acp:env               say which secrets it can see, and its working folder
    acp:count             say how many prompts this session has had, and whether history came
    acp:heard <word>      say whether <word> is in the prompt besides in this mark
    acp:pid               say its process id (one process holds every chat's session)
    acp:mcp <tool> <json> call the notebook's tools Conch offered over MCP (Streamable HTTP):
                          list them, call <tool> with the JSON arguments, say what came back
Anything else: "Hello from the coding agent." Its stderr gets a line per prompt (for the log).

Its cost figure is kept per opening of a session, as claude-agent-acp's is: a new, resumed or
loaded session starts at $0. With ACP_TEST_RESUME=1 it offers `session/resume` (any session id,
as an adapter that keeps its sessions on disk does), with ACP_TEST_LOAD=1 `session/load` (which
replays a word and an old total of $9.75 first). With ACP_TEST_REPORTS=<file> it appends a
line `<cumulative USD> <time.time()>` to that file as it sends each cost report.

With ACP_TEST_GARBAGE=initialize (or session/new) it answers that request with JSON that is not
ACP's answer, after starting a child in its own process group (a shell it left running); with
ACP_TEST_PIDS=<file> it writes its own and the child's process ids there first.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
import time
import urllib.request
from typing import Any

import acp
from acp import schema

MARK = re.compile(r"acp:([a-z-]+)(?: ([^\n]*))?")
NAME = os.environ.get("ACP_TEST_NAME", "the coding agent")


class ScriptedAgent:
    def __init__(self) -> None:
        self.conn: Any = None
        self.sessions = 0  # sessions opened on this process
        self.prompts: dict[str, int] = {}  # prompts each session has had
        self.cwd: dict[str, str] = {}
        self.mcp: dict[str, list[Any]] = {}
        self.closed: list[str] = []
        self.cost: dict[str, float] = {}  # each session's cumulative cost, in this opening
        self.cancelled: dict[str, asyncio.Event] = {}

    def on_connect(self, conn: Any) -> None:
        self.conn = conn

    async def initialize(self, protocol_version: int, **kwargs: Any) -> schema.InitializeResponse:
        mcp = schema.McpCapabilities(http=True)
        closing = schema.SessionCapabilities(close=schema.SessionCloseCapabilities())
        if os.environ.get("ACP_TEST_RESUME"):
            closing.resume = schema.SessionResumeCapabilities()
        capabilities = schema.AgentCapabilities(
            mcp_capabilities=mcp,
            session_capabilities=closing,
            load_session=bool(os.environ.get("ACP_TEST_LOAD")),
        )
        return schema.InitializeResponse(
            protocol_version=acp.PROTOCOL_VERSION, agent_capabilities=capabilities
        )

    async def new_session(self, cwd: str, **kwargs: Any) -> schema.NewSessionResponse:
        self.sessions += 1
        session_id = f"s-{os.getpid()}-{self.sessions}"
        self.cwd[session_id] = cwd
        self.mcp[session_id] = kwargs.get("mcp_servers") or []
        self.prompts[session_id] = 0
        self.cost[session_id] = 0.0
        return schema.NewSessionResponse(session_id=session_id)

    async def resume_session(
        self, cwd: str, session_id: str, **kwargs: Any
    ) -> schema.ResumeSessionResponse:
        """Taken up again, from "disk": its cost counter starts at $0, as claude-agent-acp's."""
        self.cwd[session_id] = cwd
        self.mcp[session_id] = kwargs.get("mcp_servers") or []
        self.prompts.setdefault(session_id, 0)
        self.cost[session_id] = 0.0
        print(f"scripted agent: resumed {session_id}", file=sys.stderr, flush=True)
        return schema.ResumeSessionResponse()

    async def close_session(self, session_id: str, **kwargs: Any) -> schema.CloseSessionResponse:
        print(f"scripted agent: closed {session_id}", file=sys.stderr, flush=True)
        self.closed.append(session_id)
        return schema.CloseSessionResponse()

    async def load_session(
        self, cwd: str, session_id: str, **kwargs: Any
    ) -> schema.LoadSessionResponse:
        """Loaded from "disk": it replays the old turn (its words and the old total, as a
        client may be sent them), then counts from $0, as claude-agent-acp does."""
        self.cwd[session_id] = cwd
        self.mcp[session_id] = kwargs.get("mcp_servers") or []
        self.prompts.setdefault(session_id, 0)
        await self._say(session_id)("replayed words")
        old = schema.Cost(amount=9.75, currency="USD")
        await self.conn.session_update(
            session_id,
            schema.UsageUpdate(session_update="usage_update", used=1, size=200_000, cost=old),
        )
        self.cost[session_id] = 0.0
        return schema.LoadSessionResponse()

    async def cancel(self, session_id: str, **kwargs: Any) -> None:
        self.cancelled.setdefault(session_id, asyncio.Event()).set()

    async def prompt(self, prompt: list[Any], session_id: str, **kwargs: Any) -> Any:
        self.prompts[session_id] = count = self.prompts.get(session_id, 0) + 1
        cancelled = self.cancelled[session_id] = asyncio.Event()
        text = "".join(getattr(block, "text", "") for block in prompt)
        print(f"scripted agent: prompt {count} of {session_id}", file=sys.stderr, flush=True)
        marks = MARK.findall(text)
        what, rest = marks[-1] if marks else ("", "")
        say = self._say(session_id)
        if what == "say":
            words = rest.strip()
            third = max(len(words) // 3, 1)
            for i in range(0, len(words), third):
                await say(words[i : i + third])
        elif what in ("edit", "execute", "read", "fetch", "delete", "move", "search"):
            answer = await self._ask(session_id, what, rest.strip())
            await say(f"{what}: {answer}")
        elif what == "act":
            kind, _, named = (rest.strip() or "execute rm -rf build").partition(" ")
            call_id = f"act-{sum(self.prompts.values())}"
            if kind == "execute":
                start = acp.start_tool_call(
                    call_id,
                    named,
                    kind="execute",
                    status="in_progress",
                    raw_input={"command": named},
                )
            elif kind == "fetch":
                start = acp.start_tool_call(
                    call_id,
                    f"Fetch {named}",
                    kind="fetch",
                    status="in_progress",
                    raw_input={"url": named},
                )
            else:
                start = acp.start_tool_call(call_id, named, kind=kind, status="in_progress")
                start.field_meta = {"claudeCode": {"toolName": named}}
            await self.conn.session_update(session_id, start)
            await self.conn.session_update(
                session_id, acp.update_tool_call(call_id, status="completed", raw_output="")
            )
            await asyncio.sleep(0.5)  # the watch ends the turn here
            await say("acted")
        elif what == "usage":
            await say("Counted.")
            await self._report(session_id, 0.25)
            usage = schema.Usage(total_tokens=1500, input_tokens=1200, output_tokens=300)
            return schema.PromptResponse(stop_reason="end_turn", usage=usage)
        elif what == "spend":
            step, count, *then = rest.split()
            for i in range(int(count)):
                if cancelled.is_set():
                    return schema.PromptResponse(stop_reason="cancelled")
                await say(f"step {i + 1}. ")
                await self._report(session_id, float(step))
                await asyncio.sleep(0.05)  # the pace of a working agent
            if then == ["fail"]:
                raise acp.RequestError(-32603, "the model refused")
            if then:
                return await self.prompt([acp.text_block(f"acp:{' '.join(then)}")], session_id)
        elif what == "think":
            await self.conn.session_update(session_id, acp.update_agent_thought_text("Hmm, A."))
            await self.conn.session_update(
                session_id,
                acp.update_plan(
                    [acp.plan_entry("read the data"), acp.plan_entry("write the analysis")]
                ),
            )
            await self.conn.session_update(
                session_id,
                acp.start_read_tool_call("r1", "Read data.csv", "data.csv"),
            )
            # Its output twice, as the adapters send a command's: fenced Markdown, and raw.
            fenced = [acp.tool_content(acp.text_block("```console\n3 rows\n```"))]
            done = acp.update_tool_call(
                "r1", status="completed", content=fenced, raw_output="3 rows"
            )
            await self.conn.session_update(session_id, done)
            await say("Read it.")
        elif what == "ignore-cancel":
            await say("Working on it")
            for _ in range(300):
                await asyncio.sleep(0.1)  # deaf to session/cancel
            await say(" — done.")
        elif what == "crash":
            await say("Starting")
            await asyncio.sleep(0.1)
            os._exit(3)
        elif what == "hang":
            await asyncio.sleep(3600)
        elif what == "flood":
            count = int(rest.strip() or "100")
            for i in range(count):
                if cancelled.is_set():
                    return schema.PromptResponse(stop_reason="cancelled")
                await say(f"{i % 10}" * 1000)
        elif what == "env":
            seen = sorted(k for k in ("CONCH_KERNEL_KEY", "JUPYTER_TOKEN") if k in os.environ)
            secret = os.environ.get("ACP_TEST_SECRET", "")
            await say(f"secrets seen: {seen or 'none'}; secret={secret}; cwd={os.getcwd()}")
            await say(f"; session cwd={self.cwd[session_id]}")
        elif what == "tool":
            server, _, tool = rest.strip().partition(" ")
            if server == "offered":
                offered = self.mcp[session_id]
                server = offered[0].name if offered else "none-offered"
            await say(f"tool: {await self._ask_tool(session_id, f'mcp__{server}__{tool}')}")
        elif what == "mcp":
            name, _, raw = rest.strip().partition(" ")
            servers = self.mcp[session_id]
            await say(await asyncio.to_thread(self._mcp, servers, name, json.loads(raw or "{}")))
        elif what == "pid":
            await say(f"pid {os.getpid()}, {len(self.prompts) - len(self.closed)} open")
        elif what == "heard":
            word = rest.strip()
            await say(f"{word}: {'yes' if text.count(word) > 1 else 'no'}")
        elif what == "count":
            history = "history" if "hello earlier" in text else "no history"
            await say(f"prompt {count}, {history}")
        else:
            await say("Hello from the coding agent.")
        if cancelled.is_set():
            return schema.PromptResponse(stop_reason="cancelled")
        return schema.PromptResponse(stop_reason="end_turn")

    def _mcp(self, servers: list[Any], name: str, arguments: dict[str, Any]) -> str:
        """Its MCP client, by hand over urllib: initialize, tools/list, tools/call."""
        if not servers:
            return "no MCP server offered"
        server = servers[0]
        headers = {h.name: h.value for h in server.headers}
        headers["Content-Type"] = "application/json"
        headers["Accept"] = "application/json, text/event-stream"

        def rpc(rid: int | None, method: str, params: dict[str, Any]) -> Any:
            body: dict[str, Any] = {"jsonrpc": "2.0", "method": method, "params": params}
            if rid is not None:
                body["id"] = rid
            request = urllib.request.Request(  # noqa: S310 (Conch's own http:// address)
                server.url, json.dumps(body).encode(), headers, method="POST"
            )
            with urllib.request.urlopen(request, timeout=120) as answer:  # noqa: S310
                text = answer.read().decode()
            return json.loads(text) if text else None

        rpc(1, "initialize", {"protocolVersion": "2025-06-18", "capabilities": {}})
        rpc(None, "notifications/initialized", {})
        listed = rpc(2, "tools/list", {})["result"]["tools"]
        called = rpc(3, "tools/call", {"name": name, "arguments": arguments})["result"]
        names = ",".join(t["name"] for t in listed)
        said = called["content"][0]["text"]
        return f"tools: {names}; {name} (error={called['isError']}): {said}"

    async def _report(self, session_id: str, more: float) -> None:
        """A usage update: the session's cumulative cost so far, `more` dollars up."""
        self.cost[session_id] = figure = round(self.cost.get(session_id, 0.0) + more, 6)
        reports = os.environ.get("ACP_TEST_REPORTS")
        if reports:
            with open(reports, "a") as out:
                out.write(f"{figure} {time.time()}\n")
        cost = schema.Cost(amount=figure, currency="USD")
        await self.conn.session_update(
            session_id,
            schema.UsageUpdate(session_update="usage_update", used=1200, size=200_000, cost=cost),
        )

    def _say(self, session_id: str) -> Any:
        async def say(text: str) -> None:
            await self.conn.session_update(session_id, acp.update_agent_message_text(text))

        return say

    async def _ask_tool(self, session_id: str, name: str) -> str:
        """Ask about an MCP tool call, named as Claude Code names it (its own `toolName`)."""
        call_id = f"tool-{sum(self.prompts.values())}"
        meta = {"claudeCode": {"toolName": name}}
        start = acp.start_tool_call(call_id, name, kind="other", status="pending")
        start.field_meta = meta
        await self.conn.session_update(session_id, start)
        update = schema.ToolCallUpdate(tool_call_id=call_id, title=name, kind="other")
        update.field_meta = meta
        return await self._permission(session_id, call_id, update)

    async def _permission(
        self, session_id: str, call_id: str, update: schema.ToolCallUpdate
    ) -> str:
        """Ask, report the call done (or failed) as answered, and say the answer."""
        options = [
            schema.PermissionOption(option_id="yes", name="Allow", kind="allow_once"),
            schema.PermissionOption(option_id="always", name="Always", kind="allow_always"),
            schema.PermissionOption(option_id="no", name="Reject", kind="reject_once"),
        ]
        answer = await self.conn.request_permission(
            session_id=session_id, tool_call=update, options=options
        )
        outcome = answer.outcome
        chosen = getattr(outcome, "option_id", None) or outcome.outcome
        status = "completed" if chosen in ("yes", "always") else "failed"
        await self.conn.session_update(
            session_id, acp.update_tool_call(call_id, status=status, raw_output=f"{chosen}")
        )
        return str(chosen)

    async def _ask(self, session_id: str, kind: str, command: str = "") -> str:
        call_id = f"{kind}-{sum(self.prompts.values())}"
        if kind == "edit":
            content = [acp.tool_diff_content("analysis.py", "x = 2\n", "x = 1\n")]
            start = acp.start_tool_call(
                call_id,
                "Edit analysis.py",
                kind="edit",
                status="pending",
                content=content,
                locations=[schema.ToolCallLocation(path="analysis.py")],
            )
            raw: Any = {"path": "analysis.py"}
        elif kind == "execute":
            raw = {"command": command or "rm -rf build && make"}
            title = f"Run {command}" if command else "Run make"
            start = acp.start_tool_call(
                call_id, title, kind="execute", status="pending", raw_input=raw
            )
        elif kind == "fetch":
            raw = {"url": "https://example.org/page"}
            start = acp.start_tool_call(
                call_id, "Fetch a page", kind="fetch", status="pending", raw_input=raw
            )
        else:
            raw = {"path": "data.csv"}
            start = acp.start_tool_call(
                call_id, f"{kind.title()} data.csv", kind=kind, status="pending", raw_input=raw
            )
        await self.conn.session_update(session_id, start)
        update = schema.ToolCallUpdate(tool_call_id=call_id, kind=kind, raw_input=raw)
        return await self._permission(session_id, call_id, update)


def garbage(method: str) -> None:
    """Answer `method` with JSON that is not its ACP answer (every other request as ACP would),
    having left a child running in the process group."""
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    pids = os.environ.get("ACP_TEST_PIDS")
    if pids:
        with open(pids, "w") as out:
            out.write(f"{os.getpid()} {child.pid}\n")
    bad = {
        "initialize": {"protocolVersion": "not a version", "agentCapabilities": 7},
        "session/new": {"sessionId": {"not": "an id"}, "modes": "all of them"},
    }
    good = {
        "initialize": {"protocolVersion": acp.PROTOCOL_VERSION, "agentCapabilities": {}},
        "session/new": {"sessionId": "s-1"},
    }
    for line in sys.stdin:
        try:
            request = json.loads(line)
        except ValueError:
            continue
        if "id" not in request:
            continue
        name = request.get("method", "")
        result = bad[name] if name == method else good.get(name, {})
        answer = {"jsonrpc": "2.0", "id": request["id"], "result": result}
        sys.stdout.write(json.dumps(answer) + "\n")
        sys.stdout.flush()


def main() -> None:
    broken = os.environ.get("ACP_TEST_GARBAGE")
    if broken:
        garbage(broken)
        return
    # `session/close` is in the SDK's unstable part (the real adapters offer it).
    asyncio.run(acp.run_agent(ScriptedAgent(), use_unstable_protocol=True))


if __name__ == "__main__":
    main()
