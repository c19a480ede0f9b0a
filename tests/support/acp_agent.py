"""A scripted coding agent that speaks the real Agent Client Protocol over stdio, built on the
`agent-client-protocol` package: the stand-in for Claude Code, Codex or Goose, which cannot run
here. Run it as `python -m tests.support.acp_agent` (or by path) as an ACP agent's command.

What it does is read from the prompt: the last `acp:<what>` in it (the user's message is the
newest text a prompt holds) says what this turn does:

    acp:say <text>        stream <text> (to the end of its line) in three chunks: hand on with @Name
    acp:edit / acp:execute / acp:read / acp:fetch / acp:delete / acp:move / acp:search
                          ask permission for a tool call of that kind, then say what was answered
    acp:usage             report usage (tokens in the prompt's answer; in a usage update the
                          session's cumulative cost, $0.25 more each time)
    acp:think             a thought, a plan, a read tool call that completes, then a line
    acp:ignore-cancel     stream a little, then go on for 30 s whatever `session/cancel` says
    acp:crash             stream a little, then exit (code 3) mid-reply
    acp:hang              say nothing, for good
    acp:flood <n>         stream <n> chunks of 1,000 characters
    acp:env               say which secrets it can see, and its working folder
    acp:count             say how many prompts this session has had, and whether history came
    acp:mcp <tool> <json> call the notebook's tools Conch offered over MCP (Streamable HTTP):
                          list them, call <tool> with the JSON arguments, say what came back
Anything else: "Hello from the coding agent." Its stderr gets a line per prompt (for the log).
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import sys
import urllib.request
from typing import Any

import acp
from acp import schema

MARK = re.compile(r"acp:([a-z-]+)(?: ([^\n]*))?")
NAME = os.environ.get("ACP_TEST_NAME", "the coding agent")


class ScriptedAgent:
    def __init__(self) -> None:
        self.conn: Any = None
        self.prompts = 0
        self.counted = 0  # prompts that reported usage: its cumulative cost is $0.25 each
        self.cancelled: dict[str, asyncio.Event] = {}

    def on_connect(self, conn: Any) -> None:
        self.conn = conn

    async def initialize(self, protocol_version: int, **kwargs: Any) -> schema.InitializeResponse:
        mcp = schema.McpCapabilities(http=True)
        capabilities = schema.AgentCapabilities(mcp_capabilities=mcp)
        return schema.InitializeResponse(
            protocol_version=acp.PROTOCOL_VERSION, agent_capabilities=capabilities
        )

    async def new_session(self, cwd: str, **kwargs: Any) -> schema.NewSessionResponse:
        self.cwd = cwd
        self.mcp = kwargs.get("mcp_servers") or []
        return schema.NewSessionResponse(session_id=f"s-{os.getpid()}")

    async def cancel(self, session_id: str, **kwargs: Any) -> None:
        self.cancelled.setdefault(session_id, asyncio.Event()).set()

    async def prompt(self, prompt: list[Any], session_id: str, **kwargs: Any) -> Any:
        self.prompts += 1
        cancelled = self.cancelled[session_id] = asyncio.Event()
        text = "".join(getattr(block, "text", "") for block in prompt)
        print(f"scripted agent: prompt {self.prompts}", file=sys.stderr, flush=True)
        marks = MARK.findall(text)
        what, rest = marks[-1] if marks else ("", "")
        say = self._say(session_id)
        if what == "say":
            words = rest.strip()
            third = max(len(words) // 3, 1)
            for i in range(0, len(words), third):
                await say(words[i : i + third])
        elif what in ("edit", "execute", "read", "fetch", "delete", "move", "search"):
            answer = await self._ask(session_id, what)
            await say(f"{what}: {answer}")
        elif what == "usage":
            await say("Counted.")
            self.counted += 1
            await self.conn.session_update(
                session_id,
                schema.UsageUpdate(
                    session_update="usage_update",
                    used=1200,
                    size=200_000,
                    cost=schema.Cost(amount=0.25 * self.counted, currency="USD"),
                ),
            )
            usage = schema.Usage(total_tokens=1500, input_tokens=1200, output_tokens=300)
            return schema.PromptResponse(stop_reason="end_turn", usage=usage)
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
            await say(f"; session cwd={self.cwd}")
        elif what == "mcp":
            name, _, raw = rest.strip().partition(" ")
            await say(await asyncio.to_thread(self._mcp, name, json.loads(raw or "{}")))
        elif what == "count":
            history = "history" if "hello earlier" in text else "no history"
            await say(f"prompt {self.prompts}, {history}")
        else:
            await say("Hello from the coding agent.")
        if cancelled.is_set():
            return schema.PromptResponse(stop_reason="cancelled")
        return schema.PromptResponse(stop_reason="end_turn")

    def _mcp(self, name: str, arguments: dict[str, Any]) -> str:
        """Its MCP client, by hand over urllib: initialize, tools/list, tools/call."""
        if not self.mcp:
            return "no MCP server offered"
        server = self.mcp[0]
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

    def _say(self, session_id: str) -> Any:
        async def say(text: str) -> None:
            await self.conn.session_update(session_id, acp.update_agent_message_text(text))

        return say

    async def _ask(self, session_id: str, kind: str) -> str:
        call_id = f"{kind}-{self.prompts}"
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
            raw = {"command": "rm -rf build && make"}
            start = acp.start_tool_call(
                call_id, "Run make", kind="execute", status="pending", raw_input=raw
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
        options = [
            schema.PermissionOption(option_id="yes", name="Allow", kind="allow_once"),
            schema.PermissionOption(option_id="always", name="Always", kind="allow_always"),
            schema.PermissionOption(option_id="no", name="Reject", kind="reject_once"),
        ]
        update = schema.ToolCallUpdate(tool_call_id=call_id, kind=kind, raw_input=raw)
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


def main() -> None:
    asyncio.run(acp.run_agent(ScriptedAgent()))


if __name__ == "__main__":
    main()
