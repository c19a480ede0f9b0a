"""CodingAgents: coding agents (Claude Code, Codex, Goose… over ACP) taking a turn in a chat.

Owns the agents' processes and ACP sessions: one session per chat and agent, started (process,
`initialize`, `new_session` in the notebook's folder) on its first turn and kept while the server
runs; a turn is one `session/prompt`. While it runs, the agent's message chunks stream as the
reply (`on_text`), its thoughts are kept folded in one quiet line, and its tool calls and plan
become quiet `tool` messages (`tool: "acp"`, title, kind, state). Its permission requests are
answered under the chat's mode and taint (rules.py); those that ask wait for the user's yes
through NotebookTools, so they are listed, answered and skipped like a run of the notebook's.

Stop (`stop`, called by the round before it skips what asks, and any cancellation of the turn)
sends `session/cancel`, answers the pending permissions `cancelled`, and ends the process if
the prompt has not ended CANCEL_GRACE_SECONDS later; the next turn starts a new one. A process
that exits mid-turn, or says nothing for QUIET_SECONDS while no question waits for the user, ends
the turn with a ProviderError in words (the round ends with `error`). stderr goes to the server
log, never the chat.

May import: core, store, providers, agents, notebook (the rounds import this).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import time
import uuid
from collections.abc import Callable, Mapping
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from typing import Any, cast

import acp
from acp import schema

from ..agents.agent_store import Agent
from ..core.text import clean_text
from ..notebook.rules import Ending
from ..notebook.service import Caller, NotebookTools
from ..providers.base import ProviderConfig, ProviderError, Usage
from ..store.chats import Store
from ..store.hub import Hub
from .mcp import McpBinding, McpEndpoint
from .rules import (
    CANCEL_GRACE_SECONDS,
    QUIET_SECONDS,
    REFUSED_WORDS,
    SERVER_NAME,
    START_SECONDS,
    TOOL_LINES,
    AskingSetup,
    about_of,
    acted_unasked,
    asking_setup,
    child_env,
    chosen_option,
    command_of,
    command_refusal,
    conch_tool,
    detail_of,
    mode_to_leave,
    no_read_turn,
    permission,
    tool_state,
    unasked_words,
    workdir,
)

log = logging.getLogger(__name__)

ACP = "acp"  # the tool name of every line an ACP agent's work leaves in the chat
# All one reply may say (as a model's reply: providers' REPLY_CHARS); past it the turn ends.
REPLY_CHARS = 2_000_000
STDERR_LINE = 2_000
_LINE_LIMIT = 64 * 1024 * 1024  # one JSON-RPC message per line: a long diff is one long line
_TICK = 0.25  # how often a waiting turn looks whether the agent went quiet


@dataclass(frozen=True)
class CodingResult:
    """What an ACP turn leaves besides its text: the usage and cost the agent reported, if any
    (None: not metered by Conch)."""

    usage: Usage | None = None
    cost_usd: float | None = None
    stop_reason: str = ""


@dataclass
class _Tool:
    """One ACP tool call of the turn, as reported so far."""

    id: str
    title: str = ""
    kind: str | None = None
    status: str | None = None
    detail: str = ""
    output: str = ""
    logged: bool = False  # its line is in the chat (an ended call, refused or skipped)
    ending: Ending | None = None  # decided by Conch: refused / skipped
    asked: bool = False  # it came through a permission question
    about: str = ""  # the agent's own words about it (shown apart from the detail)
    command: str = ""  # the command it runs, if it runs one
    conch: str | None = None  # the notebook tool Conch offers over MCP that it is, if any


@dataclass
class _Turn:
    conversation_id: str
    caller: Caller
    on_text: Callable[[str], None]
    heard: float
    said: int = 0
    thoughts: list[str] = field(default_factory=list)
    tools: dict[str, _Tool] = field(default_factory=dict)
    plan: list[str] | None = None
    lines: int = 0
    more: int = 0
    asking: int = 0  # questions waiting for the user: the quiet clock does not run
    stopping: bool = False
    flooded: bool = False
    unasked: _Tool | None = (
        None  # a change it made without asking, where the chat wanted a question
    )
    tainted: bool = False
    cost_usd: float | None = None
    writes: list[asyncio.Task[Any]] = field(default_factory=list)


@dataclass
class _Session:
    chat: str
    agent: str
    name: str
    stack: AsyncExitStack
    conn: Any  # acp.ClientSideConnection
    process: asyncio.subprocess.Process
    session_id: str = ""
    spoke: bool = False  # it has had a prompt: the next one needs only what came since
    heard: str | None = None  # the id of the newest message it was given
    turn: _Turn | None = None
    ending: asyncio.Task[None] | None = None  # Stop's grace, then the kill
    dead: bool = False
    stopped: bool = False  # a turn of it was stopped: what it still sends belongs to no turn
    cost_seen: float = 0.0  # the session's cumulative cost as the agent last reported it
    mcp_key: str = ""  # its key to the notebook's tools (coding/mcp.py), if it was offered them
    binding: McpBinding | None = None


class _Client:
    """The ACP client side of one session: what the agent may call on Conch. Only updates and
    permission questions (no `fs/*` or `terminal/*`: none is declared)."""

    def __init__(self, owner: CodingAgents) -> None:
        self.owner = owner
        self.session: _Session | None = None

    def on_connect(self, conn: Any) -> None:
        pass

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        if self.session is not None:
            self.owner._update(self.session, update)

    async def request_permission(
        self, session_id: str, tool_call: Any, options: list[Any], **kwargs: Any
    ) -> schema.RequestPermissionResponse:
        if self.session is None:
            return _cancelled()
        return await self.owner._permission(self.session, tool_call, options)


def _cancelled() -> schema.RequestPermissionResponse:
    return schema.RequestPermissionResponse(outcome=schema.DeniedOutcome(outcome="cancelled"))


def _selected(option_id: str | None) -> schema.RequestPermissionResponse:
    if option_id is None:
        return _cancelled()
    return schema.RequestPermissionResponse(
        outcome=schema.AllowedOutcome(outcome="selected", option_id=option_id)
    )


class CodingAgents:
    def __init__(
        self,
        *,
        store: Store,
        hub: Hub,
        tools: NotebookTools,
        root_dir: str = "",
        base_env: Mapping[str, str] | None = None,
        secrets: Callable[[], set[str]] = set,
        quiet_seconds: float = QUIET_SECONDS,
        grace_seconds: float = CANCEL_GRACE_SECONDS,
        clock: Callable[[], float] = time.monotonic,
        mcp: McpEndpoint | None = None,
    ) -> None:
        self.store = store
        self.mcp = mcp  # the notebook's tools, offered to each session over MCP
        self.hub = hub
        self.tools = tools
        self.root_dir = root_dir or os.getcwd()
        self.base_env = base_env
        self.secrets = secrets  # the kernel key and the Jupyter token: never in an agent's env
        self.quiet_seconds = quiet_seconds
        self.grace_seconds = grace_seconds
        self.clock = clock
        self.reply_chars = REPLY_CHARS
        self.start_seconds = START_SECONDS
        self._sessions: dict[tuple[str, str], _Session] = {}
        self._starting: dict[tuple[str, str], asyncio.Lock] = {}
        self._ending: set[asyncio.Task[None]] = set()
        # What each agent's last start did, for its card in Settings.
        self.status: dict[str, dict[str, Any]] = {}

    # --- what the round calls ---

    async def take(
        self,
        conversation_id: str,
        agent: Agent,
        provider: ProviderConfig,
        *,
        fresh_text: Callable[[str | None], tuple[str, str | None]],
        path: str | None,
        place: dict[str, Any] | None,
        on_text: Callable[[str], None],
    ) -> CodingResult:
        """One turn of `agent` in the chat: one `session/prompt`. `fresh_text(heard)` gives the
        prompt's text and the newest message's id: the recent chat for a new session (None),
        else what came after the last message this session was given.
        Raises ProviderError (words) when the agent cannot start, crashes or hangs, acts without
        asking where the chat wanted a question, or may not take a turn in a Read chat."""
        conversation = self.store.get_conversation(conversation_id)
        setup = asking_setup(provider.command, provider.args)
        if setup is None and conversation is not None and conversation.mode == "read":
            raise ProviderError(no_read_turn(agent.name))
        session = await self._session(conversation_id, agent, provider, path)
        turn = _Turn(conversation_id, Caller(agent.id, agent.name, place), on_text, self.clock())
        session.turn = turn
        if session.binding is not None:  # its MCP calls count in this turn, under this place
            session.binding.caller, session.binding.calls = turn.caller, 0
            session.binding.in_turn = True
        prompt_text, session.heard = fresh_text(session.heard if session.spoke else None)
        session.spoke = True
        prompt = asyncio.ensure_future(
            session.conn.prompt(session_id=session.session_id, prompt=[acp.text_block(prompt_text)])
        )
        try:
            while True:
                done, _ = await asyncio.wait({prompt}, timeout=_TICK)
                if done and not turn.flooded and turn.unasked is None:
                    break
                if turn.unasked is not None:
                    self._end_turn(session, turn, prompt)
                    self._mark_unasked(session.agent)
                    what = _what_it_ran(turn.unasked)
                    raise ProviderError(unasked_words(agent.name, what))
                if turn.flooded:
                    self._end_turn(session, turn, prompt)
                    raise ProviderError(
                        f"{agent.name} said more than {self.reply_chars:,} characters in one"
                        " reply;"
                        " Conch stopped it."
                    )
                if turn.asking == 0 and self.clock() - turn.heard > self.quiet_seconds:
                    self._end_turn(session, turn, prompt, grace=0.0)
                    raise ProviderError(
                        f"{agent.name} said nothing for {self.quiet_seconds:g} seconds mid-turn;"
                        " Conch ended its process (the next turn starts it again)."
                    )
            try:
                response = prompt.result()
            except acp.RequestError as error:
                raise ProviderError(
                    f"{agent.name} answered with an error: {clean_text(str(error))[:300]}"
                ) from None
            except (ConnectionError, OSError, EOFError):
                code = await self._gone(session)
                raise ProviderError(
                    f"{agent.name}'s process ended mid-turn{code}; the next turn starts it again."
                ) from None
            usage = None
            if response.usage is not None:
                usage = Usage(response.usage.input_tokens, response.usage.output_tokens)
            # ACP reports the session's cumulative cost: this turn's is what it grew by.
            cost = None
            if turn.cost_usd is not None:
                cost = max(turn.cost_usd - session.cost_seen, 0.0)
                session.cost_seen = max(session.cost_seen, turn.cost_usd)
            return CodingResult(usage, cost, str(response.stop_reason))
        except asyncio.CancelledError:
            self._end_turn(session, turn, prompt)
            raise
        finally:
            if session.binding is not None:
                session.binding.in_turn = False
            await self._flush(session, turn)
            if session.turn is turn:
                session.turn = None

    def stop(self, conversation_id: str) -> None:
        """Stop pressed: every running ACP turn of the chat is cancelled (its questions answer
        `cancelled`, its process ends if it does not stop within the grace)."""
        for session in list(self._sessions.values()):
            if session.chat == conversation_id and session.turn is not None:
                session.turn.stopping = True

    async def close(self) -> None:
        """The server stops: end every agent's process."""
        for session in list(self._sessions.values()):
            self._kill(session)
        ending = list(self._ending)
        await asyncio.gather(*ending, return_exceptions=True)

    def card(self, agent_id: str) -> dict[str, Any] | None:
        """What the agent's card in Settings says of its last start (None: not started yet), and
        `acts_unasked` once it changed something without asking where a question was wanted."""
        return self.status.get(agent_id)

    def _mark_unasked(self, agent_id: str) -> None:
        self.status.setdefault(agent_id, {"started": True, "problem": None})
        self.status[agent_id]["acts_unasked"] = True

    # --- the session ---

    async def _session(
        self, chat: str, agent: Agent, provider: ProviderConfig, path: str | None
    ) -> _Session:
        key = (chat, agent.id)
        lock = self._starting.setdefault(key, asyncio.Lock())
        async with lock:
            session = self._sessions.get(key)
            if session is not None and session.ending is not None:
                await asyncio.wait({session.ending})  # Stop's grace: it ends or is ended
                session = self._sessions.get(key)
            if session is not None and session.stopped and not session.dead:
                # After Stop an adapter may still send the stopped turn's words, even as the
                # answer to the next prompt (claude-agent-acp does): that session is closed, and
                # the chat's next turn opens a new one given the history.
                self._kill(session)
                session = None
            if session is not None and not session.dead and session.process.returncode is None:
                return session
            if session is not None:
                self._sessions.pop(key, None)
            session = await self._start(chat, agent, provider, path)
            self._sessions[key] = session
            return session

    async def _start(
        self, chat: str, agent: Agent, provider: ProviderConfig, path: str | None
    ) -> _Session:
        refusal = command_refusal(provider.command, provider.args)
        if refusal:
            raise ProviderError(f"{agent.name} cannot start: {refusal}")
        cwd = workdir(self.root_dir, path)
        base = os.environ if self.base_env is None else self.base_env
        setup = asking_setup(provider.command, provider.args)
        env = child_env(
            base, {**(provider.env or {}), **(setup.env if setup else {})}, self.secrets()
        )
        client = _Client(self)
        stack = AsyncExitStack()
        started = self.clock()
        try:
            # A process group of its own: an npm wrapper's native binary (codex-acp) and every
            # child it starts end with it (_kill ends the group).
            process = await asyncio.create_subprocess_exec(
                provider.command,
                *provider.args,
                *(setup.args if setup else ()),
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                env=env,
                cwd=cwd,
                start_new_session=True,
                limit=_LINE_LIMIT,
            )
        except (FileNotFoundError, PermissionError, NotADirectoryError) as error:
            await stack.aclose()
            words = (
                f"the command “{provider.command}” was not found"
                if isinstance(error, FileNotFoundError)
                else f"the command “{provider.command}” could not be run ({error.strerror})"
            )
            self.status[agent.id] = {"started": False, "problem": words}
            raise ProviderError(f"{agent.name} could not start: {words}.") from None
        assert process.stdin is not None
        assert process.stdout is not None
        conn = acp.connect_to_agent(cast(Any, client), process.stdin, process.stdout)
        stack.push_async_callback(_reap, process)  # last: after the connection's close
        stack.push_async_callback(_close_connection, conn)
        session = _Session(chat, agent.id, agent.name, stack, conn, process)
        client.session = session
        if process.stderr is not None:
            reading = asyncio.create_task(_log_stderr(agent.name, process.stderr))
            stack.push_async_callback(_stop_task, reading)
        try:
            await asyncio.wait_for(
                self._open(session, cwd, Caller(agent.id, agent.name), setup),
                timeout=self.start_seconds,
            )
        except (asyncio.TimeoutError, ConnectionError, OSError, acp.RequestError) as error:
            why = (
                "it did not answer"
                if isinstance(error, asyncio.TimeoutError)
                else f"{type(error).__name__}: {clean_text(str(error))[:200]}"
            )
            self._kill(session)
            self.status[agent.id] = {"started": False, "problem": why}
            raise ProviderError(
                f"{agent.name} started but did not open a session ({why})."
            ) from None
        except asyncio.CancelledError:
            self._kill(session)
            raise
        self.status[agent.id] = {
            "started": True,
            "problem": None,
            "seconds": round(self.clock() - started, 3),
        }
        return session

    async def _open(
        self, session: _Session, cwd: str, caller: Caller, setup: AskingSetup | None
    ) -> None:
        hello = await session.conn.initialize(
            protocol_version=acp.PROTOCOL_VERSION,
            client_capabilities=schema.ClientCapabilities(),
            client_info=schema.Implementation(name="conch-jupyter", version="0.1.0"),
        )
        made = await session.conn.new_session(
            cwd=cwd,
            mcp_servers=self._mcp_servers(session, hello, caller),
            **(setup.meta if setup else {}),
        )
        session.session_id = made.session_id
        await self._leave_skipping_mode(session, made)

    async def _leave_skipping_mode(self, session: _Session, made: Any) -> None:
        """An agent that starts in a mode that skips questions (its user's `defaultMode`) is
        moved out of it, through its session modes or its `mode` config option."""
        modes = getattr(made, "modes", None)
        if modes is not None:
            offered = [str(m.id) for m in modes.available_modes]
            target = mode_to_leave(str(modes.current_mode_id), offered)
            if target is not None:
                await session.conn.set_session_mode(mode_id=target, session_id=session.session_id)
                return
        for option in getattr(made, "config_options", None) or ():
            inner = getattr(option, "root", option)
            if getattr(inner, "id", None) != "mode":
                continue
            values = [str(getattr(o, "value", "")) for o in getattr(inner, "options", ()) or ()]
            target = mode_to_leave(str(getattr(inner, "current_value", "")), values)
            if target is not None:
                await session.conn.set_config_option(
                    config_id="mode", session_id=session.session_id, value=target
                )

    def _mcp_servers(self, session: _Session, hello: Any, caller: Caller) -> list[Any]:
        """The notebook's tools for this session, when the agent takes MCP over HTTP and the
        server's address is known: one server, bound to this chat and agent by its own key."""
        capabilities = getattr(hello, "agent_capabilities", None)
        mcp = getattr(capabilities, "mcp_capabilities", None)
        url = self.mcp.url() if self.mcp is not None else None
        if self.mcp is None or not url or not getattr(mcp, "http", False):
            return []
        session.mcp_key, session.binding = self.mcp.bind(session.chat, caller)
        auth = schema.HttpHeader(name="Authorization", value=f"Bearer {session.mcp_key}")
        return [schema.HttpMcpServer(type="http", name=SERVER_NAME, url=url, headers=[auth])]

    async def _gone(self, session: _Session) -> str:
        """The process ended (or its pipe closed): forget the session; its exit code in words."""
        # Its own exit code first (its pipe closes just before it is reaped), then the kill.
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(session.process.wait(), timeout=1.0)
        code = session.process.returncode
        self._kill(session)
        return f" (exit code {code})" if code is not None else ""

    def _kill(self, session: _Session) -> None:
        session.dead = True
        if self.mcp is not None and session.mcp_key:
            self.mcp.unbind(session.mcp_key)  # its key opens nothing from now on
        key = (session.chat, session.agent)
        if self._sessions.get(key) is session:
            self._sessions.pop(key, None)
        if session.process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                session.process.kill()
        # Its whole group too (an npm wrapper's native binary, the shells it started), even when
        # the leader is already gone.
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(session.process.pid, signal.SIGKILL)
        task = asyncio.ensure_future(_close_quietly(session.stack))
        self._ending.add(task)
        task.add_done_callback(self._ending.discard)

    def _end_turn(
        self,
        session: _Session,
        turn: _Turn,
        prompt: asyncio.Future[Any],
        grace: float | None = None,
    ) -> None:
        """Stop's path (and a flood's, a hang's): `session/cancel` now, the questions answered
        `cancelled` (they see `stopping`), the process ended if the prompt has not ended after
        the grace."""
        turn.stopping = True
        session.stopped = True
        if session.dead:
            return
        wait = self.grace_seconds if grace is None else grace
        task = asyncio.ensure_future(self._cancel_then_kill(session, prompt, wait))
        session.ending = task
        self._ending.add(task)
        task.add_done_callback(self._ending.discard)

    async def _cancel_then_kill(
        self, session: _Session, prompt: asyncio.Future[Any], grace: float
    ) -> None:
        try:
            if grace > 0:
                with contextlib.suppress(Exception):
                    await session.conn.cancel(session_id=session.session_id)
                await asyncio.wait({prompt}, timeout=grace)
            if not prompt.done():
                log.info("Conch: %s did not end its turn after cancel; ending it", session.name)
                self._kill(session)
                await asyncio.wait({prompt}, timeout=1.0)
        finally:
            session.ending = None
            if prompt.done() and not prompt.cancelled():
                prompt.exception()  # seen: it ended one way or another
            elif not prompt.done():
                prompt.cancel()

    # --- what the agent sends ---

    def _update(self, session: _Session, update: Any) -> None:
        turn = session.turn
        if turn is None or turn.stopping:
            return  # between turns, or after Stop: nothing it says now goes in the chat
        turn.heard = self.clock()
        kind = getattr(update, "session_update", "")
        if kind == "agent_message_chunk":
            text = clean_text(getattr(update.content, "text", "") or "")
            if not text:
                return
            turn.said += len(text)
            if turn.said > self.reply_chars:
                turn.flooded = True
                return
            turn.on_text(text)
        elif kind == "agent_thought_chunk":
            text = clean_text(getattr(update.content, "text", "") or "")
            if text and sum(map(len, turn.thoughts)) < REPLY_CHARS // 10:
                turn.thoughts.append(text)
        elif kind in ("tool_call", "tool_call_update"):
            tool = self._tool(turn, update)
            if tool.kind == "fetch" and tool.status != "failed":
                self._taint(session, turn)
            self._watch(turn, tool)
            if tool.status in ("completed", "failed") and not tool.logged:
                self._line(turn, tool, tool_state(tool.status, stopped=False))
        elif kind == "plan":
            turn.plan = [
                f"[{'x' if e.status == 'completed' else ' '}] {clean_text(e.content)}"
                for e in update.entries[:50]
            ]
        elif kind == "usage_update":
            cost = getattr(update, "cost", None)
            if cost is not None and str(cost.currency).upper() == "USD" and cost.amount >= 0:
                turn.cost_usd = float(cost.amount)

    def _watch(self, turn: _Turn, tool: _Tool) -> None:
        """Trust, but watch: a changing call it runs without having asked, where the chat wanted
        a question, ends the turn (take() says so in words)."""
        if tool.conch is not None or turn.unasked is not None:
            return  # Conch's own tools judge themselves, each call
        conversation = self.store.get_conversation(turn.conversation_id)
        if conversation is None:
            return
        tainted = turn.tainted or conversation.tainted is not None
        if acted_unasked(
            mode=conversation.mode,
            tainted=tainted,
            kind=tool.kind,
            status=tool.status,
            asked=tool.asked,
        ):
            turn.unasked = tool

    def _tool(self, turn: _Turn, update: Any) -> _Tool:
        tool_id = clean_text(str(update.tool_call_id))[:100]
        tool = turn.tools.get(tool_id)
        if tool is None:
            tool = _Tool(tool_id)
            if len(turn.tools) < TOOL_LINES * 4:  # a flood of calls is counted, not kept
                turn.tools[tool_id] = tool
        if update.title:
            tool.title = clean_text(update.title)[:300]
        if update.kind:
            tool.kind = str(update.kind)
        if update.status:
            tool.status = str(update.status)
        detail = detail_of(update.raw_input, update.content, update.locations, tool.title)
        # A later update (the permission question's own copy) may carry less than the start
        # did: the diff stays unless the new one shows content of its own.
        # A command beats a bare path (OpenCode first reports only its folder).
        runs = detail.startswith("$ ") and not tool.detail.startswith("$ ")
        if detail and (not tool.detail or update.content or runs):
            tool.detail = clean_text(detail)
        command = command_of(update.raw_input)
        if command:
            tool.command = clean_text(command)[:2000]
        about = about_of(update.raw_input)
        if about:
            tool.about = clean_text(about)
        meta = getattr(update, "field_meta", None) or {}
        named = (meta.get("claudeCode") or {}).get("toolName") if isinstance(meta, dict) else None
        found = conch_tool(tool.title, named if isinstance(named, str) else None, update.raw_input)
        if found is not None:
            tool.conch = found
        output = getattr(update, "raw_output", None)
        if output is not None:
            tool.output = clean_text(str(output))[:8_000]
        return tool

    def _taint(self, session: _Session, turn: _Turn) -> None:
        """A fetch brings someone else's words into the agent: the chat is tainted, as after an
        outside agent's answer (the first taint stays)."""
        if turn.tainted:
            return
        turn.tainted = True
        taint = {"kind": "fetch", "by": session.name}
        turn.writes.append(asyncio.ensure_future(self.store.set_taint(turn.conversation_id, taint)))

    async def _permission(
        self, session: _Session, tool_call: Any, options: list[Any]
    ) -> schema.RequestPermissionResponse:
        turn = session.turn
        if turn is None or turn.stopping:
            return _cancelled()
        turn.heard = self.clock()
        tool = self._tool(turn, tool_call)
        tool.asked = True
        if tool.conch is not None:
            # Conch's own notebook tool: its call is judged by the tool's own rule (the mode, the
            # user's yes) when it reaches Conch over MCP; asking here too would ask twice.
            return _selected(chosen_option(options, allow=True))
        if tool.kind == "fetch":
            self._taint(session, turn)
        await asyncio.gather(*turn.writes)  # the taint is stored before the mode is read
        conversation = self.store.get_conversation(turn.conversation_id)
        if conversation is None:
            return _cancelled()
        verdict = permission(
            mode=conversation.mode, tainted=conversation.tainted is not None, kind=tool.kind
        )
        if verdict == "allow":
            return _selected(chosen_option(options, allow=True))
        if verdict == "refuse":
            tool.ending = "refused"
            await self._log(turn, tool, "refused", REFUSED_WORDS)
            return _selected(chosen_option(options, allow=False))
        entry = {
            "call_id": f"t_{uuid.uuid4().hex[:16]}",
            "agent": turn.caller.agent,
            "name": turn.caller.name,
            "tool": ACP,
            "kind": tool.kind or "other",
            "title": _question_title(tool),
            "detail": tool.detail,
        }
        turn.asking += 1
        try:
            yes = await self.tools.ask_permission(turn.conversation_id, entry)
        finally:
            turn.asking -= 1
            turn.heard = self.clock()
        if turn.stopping:
            return _cancelled()
        if not yes:
            tool.ending = "skipped"
            await self._log(turn, tool, "skipped", "Not allowed: the user said no.")
            return _selected(chosen_option(options, allow=False))
        return _selected(chosen_option(options, allow=True))

    # --- the lines it leaves ---

    def _line(self, turn: _Turn, tool: _Tool, state: Ending, words: str | None = None) -> None:
        tool.logged = True
        turn.writes.append(asyncio.ensure_future(self._log_now(turn, tool, state, words)))

    async def _log(self, turn: _Turn, tool: _Tool, state: Ending, words: str) -> None:
        tool.logged = True
        await self._log_now(turn, tool, state, words)

    async def _log_now(self, turn: _Turn, tool: _Tool, state: Ending, words: str | None) -> None:
        if turn.lines >= TOOL_LINES:
            turn.more += 1
            return
        turn.lines += 1
        text = words if words is not None else "\n".join(x for x in (tool.detail, tool.output) if x)
        entry = {
            "call_id": f"acp_{tool.id}"[:64],
            "agent": turn.caller.agent,
            "name": turn.caller.name,
            "tool": ACP,
            "title": tool.title or "a tool call",
            "kind": tool.kind or "other",
        }
        await self.tools.log_line(turn.conversation_id, turn.caller, entry, text, state)

    async def _flush(self, session: _Session, turn: _Turn) -> None:
        """The turn's end: its calls still open, its plan and its thoughts as quiet lines."""
        try:
            for tool in list(turn.tools.values()):
                if not tool.logged:
                    state = tool.ending or tool_state(tool.status, stopped=turn.stopping)
                    self._line(turn, tool, state)
            if turn.plan:
                plan = _Tool("plan", title="Plan", kind="plan", detail="\n".join(turn.plan))
                self._line(turn, plan, "ran")
            if turn.thoughts:
                thought = _Tool("thought", title="Thought", kind="think")
                thought.detail = "".join(turn.thoughts)
                self._line(turn, thought, "ran")
            await asyncio.gather(*turn.writes)
            if turn.more:
                more = _Tool("more", title=f"{turn.more} more tool calls", kind="other")
                turn.lines = 0
                await self._log_now(turn, more, "ran", f"{turn.more} more lines were not kept.")
        except Exception:
            log.exception("Conch: %s's tool lines could not be stored", session.name)


def _question_title(tool: _Tool) -> str:
    """The question's heading: the agent's own words about the call when its title only repeats
    the command (Claude's) or says nothing of it (a folder, OpenCode's); else its title."""
    title = tool.title.strip()
    command = tool.detail[2:].split("\n", 1)[0] if tool.detail.startswith("$ ") else ""
    if tool.about and (not title or title == command or title in tool.detail or "/" in title):
        return tool.about[:300]
    return title or "a tool call"


def _what_it_ran(tool: _Tool) -> str:
    """The tool line as words: `the command` or the call's title."""
    if tool.command:
        return f"`{tool.command[:300]}`"
    return f"“{(tool.title or tool.kind or 'a tool call')[:300]}”"


async def _reap(process: asyncio.subprocess.Process) -> None:
    """Its pipes closed and its exit seen (_kill has ended its group), so nothing of it is left
    for the event loop to close later."""
    if process.stdin is not None:
        process.stdin.close()
    with contextlib.suppress(asyncio.TimeoutError, ProcessLookupError):
        await asyncio.wait_for(process.wait(), timeout=5.0)


async def _close_connection(conn: Any) -> None:
    with contextlib.suppress(Exception):
        await conn.close()


async def _log_stderr(name: str, stderr: asyncio.StreamReader) -> None:
    """The agent's stderr, line by line, to the server log (never the chat)."""
    while True:
        try:
            line = await stderr.readline()
        except (ValueError, asyncio.LimitOverrunError):
            continue  # an endless line: its pieces are dropped, the next ones read
        if not line:
            return
        text = line.decode("utf-8", "replace").rstrip()[:STDERR_LINE]
        if text:
            log.info("Conch: coding agent %s: %s", name, text)


async def _stop_task(task: asyncio.Task[None]) -> None:
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError, Exception):
        await task


async def _close_quietly(stack: AsyncExitStack) -> None:
    try:
        await stack.aclose()
    except Exception:  # a process already gone: its pipes may fail to close, nothing to do
        log.debug("Conch: closing a coding agent's process", exc_info=True)
