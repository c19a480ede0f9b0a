"""AgentProcess: one coding agent's process and the ACP sessions it holds, one per chat.

Owns the connection side of a coding agent: starting its process (a process group of its own,
so an npm wrapper's native binary and the shells it runs end with it), `initialize`, opening a
chat's session (`session/resume` of the chat's earlier session when the agent offers it, else
`session/load`, else `session/new`, after which the turn gives it the chat's history), moving
it out of a mode that skips questions, closing a session (`session/close`) and ending the whole
group. What the agent sends reaches the turn (sessions.py) through `Dispatch`, by session id.

A ChatSession outlives the process: its id is how the chat's session is taken up again after
the least recently used was closed or the idle process ended.

May import: core, store, providers, agents, notebook (the rounds reach it through sessions.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
from collections.abc import Callable, Mapping
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from typing import Any, Protocol, cast

import acp
from acp import schema
from acp.client.connection import ClientSideConnection

from .. import __version__
from ..core.text import clean_text
from .mcp import McpBinding
from .meter import Meter
from .rules import AskingSetup, mode_to_leave
from .turn import CodingTurn

log = logging.getLogger(__name__)

STDERR_LINE = 2_000
_LINE_LIMIT = 64 * 1024 * 1024  # one JSON-RPC message per line: a long diff is one long line

# The MCP servers a session is offered (Conch offers its own notebook tools over HTTP).
McpServer = schema.HttpMcpServer | schema.SseMcpServer | schema.AcpMcpServer | schema.McpServerStdio

# What opening a session answers: resumed, loaded or new.
Opened = schema.ResumeSessionResponse | schema.LoadSessionResponse | schema.NewSessionResponse

# What an agent may send about a session (ACP's `session/update`), as the SDK parses it.
SessionUpdate = (
    schema.UserMessageChunk
    | schema.AgentMessageChunk
    | schema.AgentThoughtChunk
    | schema.ToolCallStart
    | schema.ToolCallProgress
    | schema.AgentPlanUpdate
    | schema.AgentPlanContentUpdate
    | schema.AgentPlanRemovedUpdate
    | schema.AvailableCommandsUpdate
    | schema.CurrentModeUpdate
    | schema.ConfigOptionUpdate
    | schema.SessionInfoUpdate
    | schema.UsageUpdate
)


@dataclass
class ChatSession:
    """One chat's ACP session on one agent. Kept while the server runs, across the process's
    end: `session_id` is what a new process resumes."""

    chat: str
    agent: str
    name: str
    session_id: str = ""
    open: bool = False  # live on the agent's current process
    prompted: bool = False  # a prompt of it was accepted: the next one needs only what came since
    last_given: str | None = None  # the id of the newest message an accepted prompt gave it
    turn: CodingTurn | None = None  # the running turn, if any
    ending: asyncio.Task[None] | None = None  # Stop's grace, then the kill
    stopped: bool = False  # a turn of it was stopped: what it still sends belongs to no turn
    meter: Meter = field(default_factory=Meter)  # its cumulative cost, in this opening
    mcp_key: str = ""  # its key to the notebook's tools (coding/mcp.py), if it was offered them
    mcp_name: str = ""  # the name they were offered under, unique to it (rules.offered_server)
    binding: McpBinding | None = None
    used: float = 0.0  # when its last turn began (the least recently used is closed first)


class Dispatch(Protocol):
    """What the turn side does with what an agent sends (sessions.py's CodingAgents)."""

    def on_update(self, session: ChatSession, update: SessionUpdate) -> None: ...

    async def on_permission(
        self,
        session: ChatSession,
        tool_call: schema.ToolCallUpdate,
        options: list[schema.PermissionOption],
    ) -> schema.RequestPermissionResponse: ...


def cancelled() -> schema.RequestPermissionResponse:
    return schema.RequestPermissionResponse(outcome=schema.DeniedOutcome(outcome="cancelled"))


class _Client:
    """The ACP client side: what the agent may call on Conch. Only updates and permission
    questions (no `fs/*` or `terminal/*`: none is declared), each for one of its sessions."""

    def __init__(self, process: AgentProcess) -> None:
        self.process = process

    def on_connect(self, conn: Any) -> None:
        pass

    async def session_update(self, session_id: str, update: SessionUpdate, **kwargs: Any) -> None:
        session = self.process.by_id(session_id)
        if session is not None:
            self.process.dispatch.on_update(session, update)

    async def request_permission(
        self,
        session_id: str,
        tool_call: schema.ToolCallUpdate,
        options: list[schema.PermissionOption],
        **kwargs: Any,
    ) -> schema.RequestPermissionResponse:
        session = self.process.by_id(session_id)
        if session is None:
            return cancelled()
        return await self.process.dispatch.on_permission(session, tool_call, options)


class AgentProcess:
    """One coding agent's process: its connection and the chats' sessions open on it."""

    def __init__(
        self,
        *,
        agent: str,
        name: str,
        command: str,
        args: tuple[str, ...],
        env: Mapping[str, str],
        cwd: str,
        setup: AskingSetup | None,
        dispatch: Dispatch,
        fingerprint: str,
    ) -> None:
        self.agent, self.name = agent, name
        self.command, self.args, self.env, self.cwd = command, args, env, cwd
        self.setup = setup
        self.dispatch = dispatch
        self.fingerprint = fingerprint  # its provider as started: a changed one starts anew
        self.stack = AsyncExitStack()
        self.conn: ClientSideConnection = cast("ClientSideConnection", None)  # made by start()
        self.process: asyncio.subprocess.Process | None = None
        self.hello: schema.InitializeResponse | None = None
        self.dead = False
        self.sessions: dict[str, ChatSession] = {}  # open on this process, by session id
        self.lock = asyncio.Lock()  # one open or close at a time
        self.idle: asyncio.TimerHandle | None = None

    # --- the process ---

    async def start(self) -> None:
        """Spawn it and `initialize`. Raises FileNotFoundError (and its kin) when the command
        cannot run, ConnectionError/acp.RequestError when it does not speak ACP."""
        self.process = await asyncio.create_subprocess_exec(
            self.command,
            *self.args,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=dict(self.env),
            cwd=self.cwd,
            start_new_session=True,
            limit=_LINE_LIMIT,
        )
        process = self.process
        if process.stdin is None or process.stdout is None:  # pragma: no cover (PIPE above)
            raise ConnectionError("no pipes to the agent")
        self.conn = acp.connect_to_agent(cast(Any, _Client(self)), process.stdin, process.stdout)
        self.stack.push_async_callback(_reap, process)  # last: after the connection's close
        self.stack.push_async_callback(_close_connection, self.conn)
        if process.stderr is not None:
            reading = asyncio.create_task(_log_stderr(self.name, process.stderr))
            self.stack.push_async_callback(_stop_task, reading)
        self.hello = await self.conn.initialize(
            protocol_version=acp.PROTOCOL_VERSION,
            client_capabilities=schema.ClientCapabilities(),
            client_info=schema.Implementation(name="conch-jupyter", version=__version__),
        )

    @property
    def alive(self) -> bool:
        return not self.dead and self.process is not None and self.process.returncode is None

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process is not None else None

    def end(self, forget: Callable[[ChatSession], None]) -> asyncio.Task[None]:
        """End the whole process group now; every session on it is closed (`forget` drops each
        one's MCP key). Returns the task that closes its pipes."""
        self.dead = True
        if self.idle is not None:
            self.idle.cancel()
        for session in self.sessions.values():
            session.open = False
            forget(session)
        self.sessions.clear()
        if self.process is not None:
            if self.process.returncode is None:
                with contextlib.suppress(ProcessLookupError):
                    self.process.kill()
            # Its whole group too (an npm wrapper's native binary, the shells it started), even
            # when the leader is already gone.
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.process.pid, signal.SIGKILL)
        return asyncio.ensure_future(_close_quietly(self.stack))

    # --- its sessions ---

    def by_id(self, session_id: str) -> ChatSession | None:
        return self.sessions.get(session_id)

    def capable(self, what: str) -> bool:
        """Whether it offers `resume`, `close` (session capabilities) or `load`."""
        capabilities = getattr(self.hello, "agent_capabilities", None)
        if what == "load":
            return bool(getattr(capabilities, "load_session", False))
        offered = getattr(capabilities, "session_capabilities", None)
        return getattr(offered, what, None) is not None

    def takes_http_mcp(self) -> bool:
        capabilities = getattr(self.hello, "agent_capabilities", None)
        return bool(getattr(getattr(capabilities, "mcp_capabilities", None), "http", False))

    async def open(self, session: ChatSession, cwd: str, mcp_servers: list[McpServer]) -> None:
        """Open the chat's session on this process: its earlier one taken up again where the
        agent can (`session/resume`, else `session/load`), else a new one (then `prompted` is
        reset: the turn gives it the chat's history)."""
        meta = self.setup.meta if self.setup is not None else {}
        session.meter.open()  # every opening's cost figure starts at 0 (meter.py)
        made: Opened | None = None
        if session.session_id and self.capable("resume"):
            with contextlib.suppress(acp.RequestError):
                made = await self.conn.resume_session(
                    session_id=session.session_id, cwd=cwd, mcp_servers=mcp_servers, **meta
                )
        if made is None and session.session_id and self.capable("load"):
            # Its replay of the old turns arrives while no turn runs: nothing of it is shown.
            self.sessions[session.session_id] = session
            try:
                made = await self.conn.load_session(
                    cwd=cwd, session_id=session.session_id, mcp_servers=mcp_servers, **meta
                )
            except acp.RequestError:
                self.sessions.pop(session.session_id, None)
        if made is None:
            made = await self.conn.new_session(cwd=cwd, mcp_servers=mcp_servers, **meta)
            session.session_id = str(made.session_id)
            session.prompted, session.last_given = False, None
        session.open = True
        self.sessions[session.session_id] = session
        await self._leave_skipping_mode(session, made)

    async def close(self, session: ChatSession) -> None:
        """Close one chat's session on it (`session/close` where offered): its memory is freed,
        its id kept so the chat's next turn takes it up again."""
        self.sessions.pop(session.session_id, None)
        session.open = False
        if self.alive and self.capable("close"):
            with contextlib.suppress(Exception):
                await self.conn.close_session(session_id=session.session_id)

    async def _leave_skipping_mode(self, session: ChatSession, made: Opened) -> None:
        """An agent that starts in a mode that skips questions (its user's `defaultMode`) is
        moved out of it, through its session modes or its `mode` config option."""
        modes = getattr(made, "modes", None)
        if modes is not None:
            offered = [str(m.id) for m in modes.available_modes]
            target = mode_to_leave(str(modes.current_mode_id), offered)
            if target is not None:
                await self.conn.set_session_mode(mode_id=target, session_id=session.session_id)
                return
        for option in getattr(made, "config_options", None) or ():
            inner = getattr(option, "root", option)
            if getattr(inner, "id", None) != "mode":
                continue
            values = [str(getattr(o, "value", "")) for o in getattr(inner, "options", ()) or ()]
            target = mode_to_leave(str(getattr(inner, "current_value", "")), values)
            if target is not None:
                await self.conn.set_config_option(
                    config_id="mode", session_id=session.session_id, value=target
                )


async def _log_stderr(name: str, stderr: asyncio.StreamReader) -> None:
    """The agent's stderr, line by line, to the server log (never the chat)."""
    while True:
        try:
            line = await stderr.readline()
        except (ValueError, asyncio.LimitOverrunError):
            continue  # an endless line: its pieces are dropped, the next ones read
        if not line:
            return
        text = clean_text(line.decode("utf-8", "replace").rstrip()[:STDERR_LINE])
        if text:
            log.info("Conch: coding agent %s: %s", name, text)


async def _stop_task(task: asyncio.Task[None]) -> None:
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError, Exception):
        await task


async def _reap(process: asyncio.subprocess.Process) -> None:
    """Its pipes closed and its exit seen (end() has ended its group), so nothing of it is left
    for the event loop to close later."""
    if process.stdin is not None:
        process.stdin.close()
    with contextlib.suppress(asyncio.TimeoutError, ProcessLookupError):
        await asyncio.wait_for(process.wait(), timeout=5.0)


async def _close_connection(conn: ClientSideConnection) -> None:
    with contextlib.suppress(Exception):
        await conn.close()


async def _close_quietly(stack: AsyncExitStack) -> None:
    try:
        await stack.aclose()
    except Exception:  # a process already gone: its pipes may fail to close, nothing to do
        log.debug("Conch: closing a coding agent's process", exc_info=True)
