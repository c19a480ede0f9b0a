"""CodingAgents: coding agents (Claude Code, Codex, OpenCode… over ACP) taking a turn in a chat.

Owns running a turn, and which process and session a turn runs on. The rooms it leans on, each
holding one job: connection.py the process and its sessions, turn.py the running turn (what it
heard, and the one event that ends it early), watch.py what ends it from outside its answer (a
change made unasked, the quiet clock), meter.py what the agent's cumulative cost reports come to
per opening of a session, rules.py the rules.

One process per coding agent, whatever the number of chats; one ACP session per chat on it, opened
on the chat's first turn; at most `live_sessions` open at once (the least recently used with no turn
running is closed, `session/close`, and taken up again when its chat speaks); a process none of
whose sessions has a turn running for `idle_seconds` ends, and the next turn starts it again and
resumes the chat's session. A turn is one `session/prompt`. While it runs, the agent's message
chunks stream as the reply (`on_text`), its thoughts are kept folded in one quiet line, and its tool
calls and plan become quiet `tool` messages (`tool: "acp"`, title, kind, state). Its permission
requests are answered under the chat's mode and taint (rules.py); those that ask wait for the user's
yes through NotebookTools, so they are listed, answered and skipped like a run of the notebook's. A
changing tool call it reports done without having asked, where the chat wanted a question, ends the
turn in words (rules.acted_unasked). Each cost the agent reports (`usage_update`) is metered
(meter.py) and told to the round (`on_cost`) as the turn's cost so far; at a spend bound the turn is
cancelled as by Stop. The round bills what it reported however the turn ends.

Stop (`stop`, called by the round before it skips what asks, and any cancellation of the turn)
sends `session/cancel`, answers the pending permissions `cancelled`, and ends the process group
if the prompt has not ended CANCEL_GRACE_SECONDS later; the stopped session is not used again
(the next turn opens a new one given the history). A process that exits mid-turn, or says
nothing for QUIET_SECONDS while no question of its turn waits for the user (its own, or one of
Conch's notebook tools it called), ends the turn with a ProviderError in words (the round ends
with `error`); so does an answer that does not parse as ACP, which ends its process group at
once. The newest message a session was given moves on only once its prompt was accepted.
stderr goes to the server log, never the chat.

It stays one room past 500 lines: starting a process and opening a session on it, answering its
questions and storing the lines a turn leaves all act on the chat's session and its running
turn together; the turn's own state lives in turn.py, the process in connection.py, the meter in
meter.py, the rules in rules.py.

May import: core, store, providers, agents, notebook (the rounds import this).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import secrets
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import acp
from acp import schema

from ..agents.agent_store import Agent
from ..core.text import clean_text
from ..notebook.rules import Ending
from ..notebook.service import Caller, NotebookTools
from ..providers.base import ProviderConfig, ProviderError, Usage
from ..store.chats import Store
from ..store.hub import Hub
from .connection import AgentProcess, ChatSession, McpServer, SessionUpdate, cancelled
from .launch import read_turn_disowned, said_status
from .mcp import McpEndpoint
from .meter import reported_usd
from .rules import (
    CANCEL_GRACE_SECONDS,
    IDLE_SECONDS,
    LIVE_SESSIONS,
    QUIET_SECONDS,
    REFUSED_WORDS,
    START_SECONDS,
    TOOL_LINES,
    asking_setup,
    child_env,
    chosen_option,
    command_refusal,
    no_read_turn,
    offered_server,
    permission,
    tool_state,
    unasked_words,
    workdir,
)
from .turn import (
    ASKED_LIMIT,
    REPLY_CHARS,
    CodingTurn,
    ReportedCall,
    question_title,
    what_it_ran,
)
from .watch import until_ended, watch_call

log = logging.getLogger(__name__)

ACP = "acp"  # the tool name of every line an ACP agent's work leaves in the chat
ASKED_TOO_MUCH = f"Not allowed: this turn asked more than {ASKED_LIMIT:,} questions."


@dataclass(frozen=True)
class CodingResult:
    """What an ACP turn leaves besides its text and its cost (given as it is reported, to
    `on_cost`): the tokens the agent reported, if any, and why its prompt ended."""

    usage: Usage | None = None
    stop_reason: str = ""


def _selected(option_id: str | None) -> schema.RequestPermissionResponse:
    if option_id is None:
        return cancelled()
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
        live_sessions: int = LIVE_SESSIONS,
        idle_seconds: float = IDLE_SECONDS,
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
        self.live_sessions = max(1, live_sessions)
        self.idle_seconds = idle_seconds
        self.clock = clock
        self.reply_chars = REPLY_CHARS
        self.start_seconds = START_SECONDS
        self._processes: dict[str, AgentProcess] = {}  # one per coding agent
        self._chats: dict[tuple[str, str], ChatSession] = {}  # one per chat and agent
        self._starting: dict[str, asyncio.Lock] = {}
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
        on_cost: Callable[[float], bool] = lambda usd: False,
    ) -> CodingResult:
        """One turn of `agent` in the chat: one `session/prompt`. `fresh_text(given)` gives the
        prompt's text and the newest message's id: the recent chat for a new session (None),
        else what came after the last message this session was given. `on_cost(usd)` hears
        what the turn has cost so far at each cost the agent reports (its own figure, grown
        since this opening of the session); once it says a bound is reached the turn is
        cancelled (Stop's path) and ends with stop reason `cancelled`.
        Raises ProviderError (words) when the agent cannot start, crashes or hangs, acts without
        asking where the chat wanted a question, or may not take a turn in a Read chat."""
        conversation = self.store.get_conversation(conversation_id)
        setup = asking_setup(provider.command, provider.args)
        if setup is None and conversation is not None and conversation.mode == "read":
            raise ProviderError(no_read_turn(agent.name))
        turn = CodingTurn(
            conversation_id,
            Caller(agent.id, agent.name, place),
            on_text,
            on_cost,
            self.clock(),
            asyncio.get_running_loop().create_future(),
            reply_chars=self.reply_chars,
        )
        process, session = await self._session(conversation_id, agent, provider, path, turn)
        disowned = read_turn_disowned(agent.name, setup.agent if setup else None, process.hello)
        if disowned is not None and conversation is not None and conversation.mode == "read":
            session.turn = None
            self._idle_later(process)
            raise ProviderError(disowned)
        if session.binding is not None:  # its MCP calls count in this turn, under this place
            session.binding.caller, session.binding.calls = turn.caller, 0
            session.binding.in_turn = True
        # Only the server Conch offered this very session is known as Conch's own.
        turn.server = session.mcp_name if session.binding is not None else None
        prompt_text, newest = fresh_text(session.last_given if session.prompted else None)
        turn.last_sent = self.clock()  # the quiet clock runs from the prompt (start has its own)
        prompt = asyncio.ensure_future(
            process.conn.prompt(session_id=session.session_id, prompt=[acp.text_block(prompt_text)])
        )
        try:
            why = await until_ended(
                turn,
                prompt,
                quiet_seconds=self.quiet_seconds,
                clock=self.clock,
                user_asked=lambda: self._asks_the_user(turn),
            )
            if why == "unasked":
                assert turn.unasked is not None
                self._end_turn(process, session, turn, prompt)
                self._mark_unasked(session.agent)
                raise ProviderError(unasked_words(agent.name, what_it_ran(turn.unasked)))
            if why == "flooded":
                self._end_turn(process, session, turn, prompt)
                raise ProviderError(
                    f"{agent.name} said more than {self.reply_chars:,} characters in one"
                    " reply;"
                    " Conch stopped it."
                )
            if why == "quiet":
                self._end_turn(process, session, turn, prompt, grace=0.0)
                raise ProviderError(
                    f"{agent.name} said nothing for {self.quiet_seconds:g} seconds mid-turn;"
                    " Conch ended its process (the next turn starts it again)."
                )
            if why == "bound":  # the caller says which bound, in words
                self._end_turn(process, session, turn, prompt)
                return CodingResult(None, "cancelled")
            try:
                response = prompt.result()
            except acp.RequestError as error:
                raise ProviderError(
                    f"{agent.name} answered with an error: {clean_text(str(error))[:300]}"
                ) from None
            except (ConnectionError, OSError, EOFError):
                code = await self._gone(process)
                raise ProviderError(
                    f"{agent.name}'s process ended mid-turn{code}; the next turn starts it again."
                ) from None
            except (ValueError, TypeError) as error:  # an answer that does not parse
                raise self._garbage(agent, process, "its prompt's answer", error) from None
            # Accepted: the next prompt of this session needs only what comes after it.
            session.prompted, session.last_given = True, newest
            usage = None
            if response.usage is not None:
                usage = Usage(response.usage.input_tokens, response.usage.output_tokens)
            return CodingResult(usage, str(response.stop_reason))
        except asyncio.CancelledError:
            self._end_turn(process, session, turn, prompt)
            raise
        finally:
            if session.binding is not None:
                session.binding.in_turn = False
            await self._flush(session, turn)
            if session.turn is turn:
                session.turn = None
            self._idle_later(process)

    def _asks_the_user(self, turn: CodingTurn) -> bool:
        """Whether one of Conch's own tools, called by this turn's agent, waits for the user."""
        return any(
            entry.get("agent") == turn.caller.agent
            for entry in self.tools.asking(turn.conversation_id)
        )

    def stop(self, conversation_id: str) -> None:
        """Stop pressed: every running ACP turn of the chat is cancelled (its questions answer
        `cancelled`, its process ends if it does not stop within the grace)."""
        for session in list(self._chats.values()):
            if session.chat == conversation_id and session.turn is not None:
                session.turn.stopping = True

    async def close(self) -> None:
        """The server stops: end every agent's process group."""
        for process in list(self._processes.values()):
            self._end(process)
        ending = list(self._ending)
        await asyncio.gather(*ending, return_exceptions=True)

    def card(self, agent_id: str) -> dict[str, Any] | None:
        """What the agent's card in Settings says of its last start (None: not started yet), and
        `acts_unasked` once it changed something without asking where a question was wanted."""
        return self.status.get(agent_id)

    def process_of(self, agent_id: str) -> AgentProcess | None:
        """The agent's process while it runs (for the tests and the benchmarks)."""
        process = self._processes.get(agent_id)
        return process if process is not None and process.alive else None

    def _mark_unasked(self, agent_id: str) -> None:
        self.status.setdefault(agent_id, {"started": True, "problem": None})
        self.status[agent_id]["acts_unasked"] = True

    # --- the process and the chat's session on it ---

    async def _session(
        self, chat: str, agent: Agent, provider: ProviderConfig, path: str | None, turn: CodingTurn
    ) -> tuple[AgentProcess, ChatSession]:
        """The agent's process (started when needed) and the chat's session open on it, with
        `turn` as its running turn."""
        key = (chat, agent.id)
        session = self._chats.get(key)
        if session is None:
            session = self._chats[key] = ChatSession(chat, agent.id, agent.name)
        if session.ending is not None:
            await asyncio.wait({session.ending})  # Stop's grace: it ends or is ended
        lock = self._starting.setdefault(agent.id, asyncio.Lock())
        async with lock:
            process = await self._process(agent, provider, path)
            session.used = self.clock()
            if session.stopped:
                # After Stop an adapter may still send the stopped turn's words, even as the
                # answer to the next prompt (claude-agent-acp does): that session is closed, and
                # the chat's next turn opens a new one given the history.
                if session.open:
                    await process.close(session)
                self._forget_key(session)
                session.session_id, session.prompted, session.stopped = "", False, False
            if not session.open:
                await self._make_room(process)
                cwd = workdir(self.root_dir, path)
                try:
                    await asyncio.wait_for(
                        process.open(session, cwd, self._mcp_servers(process, session)),
                        timeout=self.start_seconds,
                    )
                except (asyncio.TimeoutError, ConnectionError, OSError, acp.RequestError) as error:
                    raise self._not_opened(agent, process, error) from None
                except (ValueError, TypeError) as error:  # an answer that does not parse
                    raise self._garbage(agent, process, "its session/new answer", error) from None
            session.turn = turn
            if process.idle is not None:
                process.idle.cancel()
                process.idle = None
        return process, session

    def _garbage(
        self, agent: Agent, process: AgentProcess, what: str, error: BaseException
    ) -> ProviderError:
        """An answer that does not parse as ACP: the process group ends (nothing of it is left
        running), its card and the chat say so, and the next turn starts it afresh."""
        log.info("Conch: %s sent %s that does not parse: %s", agent.name, what, error)
        self._end(process)
        why = f"{what} did not parse as ACP ({type(error).__name__})"
        self.status[agent.id] = {
            **{k: v for k, v in self.status.get(agent.id, {}).items() if k == "acts_unasked"},
            "started": False,
            "problem": why,
        }
        return ProviderError(
            f"{agent.name} answered with something that is not ACP: {why}. Conch ended its"
            " process; the next turn starts it afresh."
        )

    def _not_opened(
        self, agent: Agent, process: AgentProcess, error: BaseException
    ) -> ProviderError:
        """The process ended, and its status and the error say it opened no session."""
        why = _why(error)
        self._end(process)
        self.status[agent.id] = {"started": False, "problem": why}
        return ProviderError(f"{agent.name} started but did not open a session ({why}).")

    async def _process(
        self, agent: Agent, provider: ProviderConfig, path: str | None
    ) -> AgentProcess:
        """The agent's one process: the running one unless it ended or its provider changed."""
        setup = asking_setup(provider.command, provider.args)
        args = (*provider.args, *(setup.args if setup else ()))
        base = os.environ if self.base_env is None else self.base_env
        own = {**(provider.env or {}), **(setup.env if setup else {})}
        env = child_env(base, own, self.secrets())
        fingerprint = json.dumps([provider.command, args, sorted(own.items())])
        process = self._processes.get(agent.id)
        if process is not None and process.alive and process.fingerprint == fingerprint:
            return process
        if process is not None:
            self._end(process)
        refusal = command_refusal(provider.command, provider.args)
        if refusal:
            raise ProviderError(f"{agent.name} cannot start: {refusal}")
        process = AgentProcess(
            agent=agent.id,
            name=agent.name,
            command=provider.command,
            args=args,
            env=env,
            cwd=workdir(self.root_dir, path),
            setup=setup,
            dispatch=self,
            fingerprint=fingerprint,
        )
        started = self.clock()
        try:
            await asyncio.wait_for(process.start(), timeout=self.start_seconds)
        except (FileNotFoundError, PermissionError, NotADirectoryError) as error:
            self._end(process)
            words = (
                f"the command “{provider.command}” was not found"
                if isinstance(error, FileNotFoundError)
                else f"the command “{provider.command}” could not be run ({error.strerror})"
            )
            self.status[agent.id] = {"started": False, "problem": words}
            raise ProviderError(f"{agent.name} could not start: {words}.") from None
        except (asyncio.TimeoutError, ConnectionError, OSError, acp.RequestError) as error:
            raise self._not_opened(agent, process, error) from None
        except (ValueError, TypeError) as error:  # an answer that does not parse
            raise self._garbage(agent, process, "its initialize answer", error) from None
        except asyncio.CancelledError:
            self._end(process)
            raise
        self._processes[agent.id] = process
        self.status[agent.id] = {
            **{k: v for k, v in self.status.get(agent.id, {}).items() if k == "acts_unasked"},
            "started": True,
            "problem": None,
            "seconds": round(self.clock() - started, 3),
            **said_status(setup.agent if setup else None, process.hello),
        }
        return process

    async def _make_room(self, process: AgentProcess) -> None:
        """Open sessions are bounded (`live_sessions`): the least recently used ones with no turn
        running are closed; their chats take them up again when they speak."""
        idle = sorted(
            (s for s in process.sessions.values() if s.turn is None), key=lambda s: s.used
        )
        while len(process.sessions) >= self.live_sessions and idle:
            oldest = idle.pop(0)
            self._forget_key(oldest)
            await process.close(oldest)

    def _idle_later(self, process: AgentProcess) -> None:
        """A process none of whose sessions has a turn running ends after `idle_seconds`; the
        chats' next turns start it again and take their sessions up again."""
        if process.dead or any(s.turn is not None for s in process.sessions.values()):
            return
        if process.idle is not None:
            process.idle.cancel()
        loop = asyncio.get_running_loop()
        process.idle = loop.call_later(self.idle_seconds, self._idle_end, process)

    def _idle_end(self, process: AgentProcess) -> None:
        process.idle = None
        if any(s.turn is not None for s in process.sessions.values()):
            return
        log.info("Conch: %s was idle for %g s; ending it", process.name, self.idle_seconds)
        self._end(process)

    def _mcp_servers(self, process: AgentProcess, session: ChatSession) -> list[McpServer]:
        """The notebook's tools for this session, when the agent takes MCP over HTTP and the
        server's address is known: one server, bound to this chat and agent by its own key."""
        url = self.mcp.url() if self.mcp is not None else None
        if self.mcp is None or not url or not process.takes_http_mcp():
            return []
        self._forget_key(session)
        session.mcp_key, session.binding = self.mcp.bind(
            session.chat, Caller(session.agent, session.name)
        )
        # A name of its own, new at each opening: a server of the user's or a project's that
        # calls itself `conch-notebook` is never taken for Conch's.
        session.mcp_name = offered_server(secrets.token_hex(6))
        auth = schema.HttpHeader(name="Authorization", value=f"Bearer {session.mcp_key}")
        server = schema.HttpMcpServer(type="http", name=session.mcp_name, url=url, headers=[auth])
        return [server]

    def _forget_key(self, session: ChatSession) -> None:
        """Its key to the notebook's tools opens nothing from now on."""
        if self.mcp is not None and session.mcp_key:
            self.mcp.unbind(session.mcp_key)
        session.mcp_key, session.mcp_name, session.binding = "", "", None

    async def _gone(self, process: AgentProcess) -> str:
        """The process ended (or its pipe closed): its exit code in words; its group ended."""
        # Its own exit code first (its pipe closes just before it is reaped), then the kill.
        if process.process is not None:
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(process.process.wait(), timeout=1.0)
        code = process.process.returncode if process.process is not None else None
        self._end(process)
        return f" (exit code {code})" if code is not None else ""

    def _end(self, process: AgentProcess) -> None:
        """End the agent's whole process group; its chats' sessions are taken up again later."""
        if self._processes.get(process.agent) is process:
            self._processes.pop(process.agent, None)
        task = process.end(self._forget_key)
        self._ending.add(task)
        task.add_done_callback(self._ending.discard)

    def _end_turn(
        self,
        process: AgentProcess,
        session: ChatSession,
        turn: CodingTurn,
        prompt: asyncio.Future[schema.PromptResponse],
        grace: float | None = None,
    ) -> None:
        """Stop's path (and a flood's, a hang's, a change made unasked): `session/cancel` now,
        the questions answered `cancelled` (they see `stopping`), the process group ended if the
        prompt has not ended after the grace."""
        turn.stopping = True
        session.stopped = True
        if process.dead:
            return
        wait = self.grace_seconds if grace is None else grace
        task = asyncio.ensure_future(self._cancel_then_kill(process, session, prompt, wait))
        session.ending = task
        self._ending.add(task)
        task.add_done_callback(self._ending.discard)

    async def _cancel_then_kill(
        self,
        process: AgentProcess,
        session: ChatSession,
        prompt: asyncio.Future[schema.PromptResponse],
        grace: float,
    ) -> None:
        try:
            if grace > 0:
                with contextlib.suppress(Exception):
                    await process.conn.cancel(session_id=session.session_id)
                await asyncio.wait({prompt}, timeout=grace)
            if not prompt.done():
                log.info("Conch: %s did not end its turn after cancel; ending it", process.name)
                self._end(process)
                await asyncio.wait({prompt}, timeout=1.0)
        finally:
            session.ending = None
            if prompt.done() and not prompt.cancelled():
                prompt.exception()  # seen: it ended one way or another
            elif not prompt.done():
                prompt.cancel()

    # --- what the agent sends (connection.py's Dispatch) ---

    def on_update(self, session: ChatSession, update: SessionUpdate) -> None:
        self._update(session, update)

    async def on_permission(
        self,
        session: ChatSession,
        tool_call: schema.ToolCallUpdate,
        options: list[schema.PermissionOption],
    ) -> schema.RequestPermissionResponse:
        return await self._permission(session, tool_call, options)

    def _update(self, session: ChatSession, update: SessionUpdate) -> None:
        if isinstance(update, schema.UsageUpdate):
            self._cost(session, update)
            return
        turn = session.turn
        if turn is None or turn.stopping:
            return  # between turns, or after Stop: nothing it says now goes in the chat
        turn.last_sent = self.clock()
        if isinstance(update, schema.AgentMessageChunk):
            turn.hear_words(getattr(update.content, "text", "") or "")
        elif isinstance(update, schema.AgentThoughtChunk):
            turn.hear_thought(getattr(update.content, "text", "") or "")
        elif isinstance(update, schema.ToolCallStart | schema.ToolCallProgress):
            conversation = self.store.get_conversation(turn.conversation_id)
            tainted = conversation is not None and conversation.tainted is not None
            call = turn.call_of(update, tainted=tainted)  # the taint from before a new call
            if call.kind == "fetch" and call.status != "failed":
                self._taint(session, turn)
            if conversation is not None:
                watch_call(turn, call, mode=conversation.mode, tainted=tainted)
            if call.status in ("completed", "failed") and not call.logged:
                self._line(turn, call, tool_state(call.status, stopped=False))
        elif isinstance(update, schema.AgentPlanUpdate):
            turn.hear_plan(update.entries)

    def _cost(self, session: ChatSession, update: schema.UsageUpdate) -> None:
        """The meter: a cost report of a running turn moves the session's figure on, and what it
        grew by is the turn's, which then hears what it has cost so far (and ends at a bound).
        A report while no turn runs (a loaded session's replay of its old total) moves nothing:
        each opening's base stays at 0, and growth reported between turns is billed to the
        next turn of the same opening, never lost."""
        turn = session.turn
        figure = reported_usd(update.cost)
        if figure is None or turn is None or turn.stopping:
            return
        turn.last_sent = self.clock()
        turn.add_cost(session.meter.grew(figure))

    def _taint(self, session: ChatSession, turn: CodingTurn) -> None:
        """A fetch brings someone else's words into the agent: the chat is tainted, as after an
        outside agent's answer (the first taint stays)."""
        if turn.tainted:
            return
        turn.tainted = True
        taint = {"kind": "fetch", "by": session.name}
        turn.writes.append(asyncio.ensure_future(self.store.set_taint(turn.conversation_id, taint)))

    async def _permission(
        self,
        session: ChatSession,
        tool_call: schema.ToolCallUpdate,
        options: list[schema.PermissionOption],
    ) -> schema.RequestPermissionResponse:
        turn = session.turn
        if turn is None or turn.stopping:
            return cancelled()
        turn.last_sent = self.clock()
        stored = self.store.get_conversation(turn.conversation_id)
        tool = turn.call_of(tool_call, tainted=stored is not None and stored.tainted is not None)
        if not turn.ask(tool):  # past the questions a turn may ask: refused, and the watch holds
            tool.ending = "refused"
            await self._log(turn, tool, "refused", ASKED_TOO_MUCH)
            return _selected(chosen_option(options, allow=False))
        if tool.conch is not None:
            # Conch's own notebook tool: its call is judged by the tool's own rule (the mode, the
            # user's yes) when it reaches Conch over MCP; asking here too would ask twice.
            return _selected(chosen_option(options, allow=True))
        if tool.kind == "fetch":
            self._taint(session, turn)
        await asyncio.gather(*turn.writes)  # the taint is stored before the mode is read
        conversation = self.store.get_conversation(turn.conversation_id)
        if conversation is None:
            return cancelled()
        # A fetch is judged by the taint from before it (its own taint came in as it asked).
        tainted = tool.tainted(conversation.tainted is not None)
        verdict = permission(mode=conversation.mode, tainted=tainted, kind=tool.kind)
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
            "title": question_title(tool),
            "detail": tool.detail,
        }
        turn.questions_waiting += 1
        try:
            yes = await self.tools.ask_permission(turn.conversation_id, entry)
        finally:
            turn.questions_waiting -= 1
            turn.last_sent = self.clock()
        if turn.stopping:
            return cancelled()
        if not yes:
            tool.ending = "skipped"
            await self._log(turn, tool, "skipped", "Not allowed: the user said no.")
            return _selected(chosen_option(options, allow=False))
        return _selected(chosen_option(options, allow=True))

    # --- the lines it leaves ---

    def _line(
        self, turn: CodingTurn, tool: ReportedCall, state: Ending, words: str | None = None
    ) -> None:
        tool.logged = True
        turn.writes.append(asyncio.ensure_future(self._log_now(turn, tool, state, words)))

    async def _log(self, turn: CodingTurn, tool: ReportedCall, state: Ending, words: str) -> None:
        tool.logged = True
        await self._log_now(turn, tool, state, words)

    async def _log_now(
        self, turn: CodingTurn, tool: ReportedCall, state: Ending, words: str | None
    ) -> None:
        if turn.lines >= TOOL_LINES:
            turn.lines_left_out += 1
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

    async def _flush(self, session: ChatSession, turn: CodingTurn) -> None:
        """The turn's end: its calls still open, its plan and its thoughts as quiet lines."""
        try:
            for tool in list(turn.calls.values()):
                if not tool.logged:
                    state = tool.ending or tool_state(tool.status, stopped=turn.stopping)
                    self._line(turn, tool, state)
            if turn.plan:
                plan = ReportedCall("plan", title="Plan", kind="plan", detail="\n".join(turn.plan))
                self._line(turn, plan, "ran")
            if turn.thoughts:
                thought = ReportedCall("thought", title="Thought", kind="think")
                thought.detail = "".join(turn.thoughts)
                self._line(turn, thought, "ran")
            await asyncio.gather(*turn.writes)
            if turn.lines_left_out:
                left_out = turn.lines_left_out
                more = ReportedCall("more", title=f"{left_out} more tool calls", kind="other")
                turn.lines = 0
                await self._log_now(turn, more, "ran", f"{left_out} more lines were not kept.")
        except Exception:
            log.exception("Conch: %s's tool lines could not be stored", session.name)


def _why(error: BaseException) -> str:
    if isinstance(error, asyncio.TimeoutError):
        return "it did not answer"
    return f"{type(error).__name__}: {clean_text(str(error))[:200]}"
