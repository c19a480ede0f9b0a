"""Your MCP servers: the ones you add (kept in the chat store, their environment's and headers'
values sealed like keys, never returned), their running connections, and what one turn of an
agent is offered of them.

Theory of operation
-------------------
- **Servers** are rows in the store (`store.mcp_servers`); `env` and `headers` values are sealed
  in `mcp.secrets.json` under `<id>:env` / `<id>:headers`, and only their names are in the row
  and in the JSON. The administrator's policy (`mcp`) is checked when a server is added or
  changed, and again before each start: a server the policy now refuses is not started, and its
  row says so.
- **Connections** are started on first use (a turn that is offered the server's tools, or the
  user's Test), kept while they work, and ended on DELETE, on a change, on a crash and when the
  server stops (connection.py ends a stdio server's whole process group).
- **A turn's offer** (`offer`): for each server the agent has, its tools named
  `<server>__<tool>`, each with its nature for the one rule (notebook/rules.py). A server that
  will not start, hangs or answers garbage loses its tools for that turn: the offer carries the
  words, and the row keeps the `problem`. A server that breaks during a call loses its tools for
  the rest of the turn. `tools/list_changed` marks the server's list stale; the next offer lists
  it again.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from ..core.errors import ConchError
from ..core.policy import NO_POLICY, Policy, PolicyRefused, check_mcp_server
from ..core.sealed import SealedFile
from ..notebook.rules import Ending, Nature
from ..providers.base import ToolSpec
from ..store.chats import Store
from ..store.mcp_servers import McpServerRow, Transport
from .connection import START_SECONDS, Connection, ServerProblem, Target
from .rules import (
    arguments_text,
    content_text,
    listed_tool,
    name_refusal,
    offered_spec,
    result_for_model,
    split_offered,
    tool_nature,
)

log = logging.getLogger(__name__)

CALL_SECONDS = 60.0
ENV_MAX = 64
VALUE_MAX = 10_000


class McpServerError(ConchError):
    """A request about your MCP servers that cannot be done, in words: 400 `invalid`, 404
    `not_found`, 409 `name_taken`."""

    statuses = {"not_found": 404, "name_taken": 409}  # noqa: RUF012


@dataclass(frozen=True)
class ServerIn:
    """A server as a request gives it (POST, or the fields a PATCH changes)."""

    name: str
    transport: Transport
    command: str | None = None
    args: tuple[str, ...] = ()
    url: str | None = None
    env: Mapping[str, str] | None = None  # None: keep (PATCH); {} clears
    headers: Mapping[str, str] | None = None


@dataclass(frozen=True)
class OfferedTool:
    server_id: str
    server: str
    tool: str
    nature: Nature


@dataclass
class Offer:
    """What one turn is offered of an agent's servers: the specs a model sees, which server
    each offered name belongs to, and words for servers that lost their tools this turn."""

    specs: tuple[ToolSpec, ...] = ()
    tools: dict[str, OfferedTool] = field(default_factory=dict)
    words: list[str] = field(default_factory=list)
    lost: set[str] = field(default_factory=set)  # servers that broke during this turn

    def owns(self, name: str) -> bool:
        return name in self.tools or (split_offered(name) or ("", ""))[0] in self._servers()

    def _servers(self) -> set[str]:
        return {t.server for t in self.tools.values()}

    def live_specs(self) -> tuple[ToolSpec, ...]:
        """The specs still offered: a server lost mid-turn is offered no more."""
        return tuple(s for s in self.specs if self.tools[s.name].server not in self.lost)


def env_secret(server_id: str) -> str:
    return f"{server_id}:env"


def headers_secret(server_id: str) -> str:
    return f"{server_id}:headers"


class McpServerService:
    def __init__(
        self,
        *,
        store: Store,
        secrets: SealedFile,
        policy: Policy = NO_POLICY,
        clock: Callable[[], float],
        hidden: Callable[[], set[str]] = set,
        version: str = "",
    ) -> None:
        self.store = store
        self._secrets = secrets
        self.policy = policy
        self.clock = clock
        self._hidden = hidden  # the kernel key and the Jupyter token: never in an environment
        self._version = version
        self.call_seconds = CALL_SECONDS
        self.start_seconds = START_SECONDS
        self._live: dict[str, Connection] = {}
        self._stale: set[str] = set()
        self._locks: dict[str, asyncio.Lock] = {}
        self._closed = False

    # --- the servers you add (through the handlers) ---

    def list_json(self) -> list[dict[str, Any]]:
        return [self.to_json(row) for row in self.store.mcp_servers.list()]

    def get(self, server_id: str) -> McpServerRow:
        row = self.store.mcp_servers.get(server_id)
        if row is None:
            raise McpServerError("not_found", f"There is no MCP server with the id “{server_id}”.")
        return row

    def to_json(self, row: McpServerRow) -> dict[str, Any]:
        data: dict[str, Any] = {
            "id": row.id,
            "name": row.name,
            "transport": row.transport,
            "env_names": list(row.env_names),
            "header_names": list(row.header_names),
            "tools": [
                {k: t.get(k) for k in ("name", "title", "description", "annotations")}
                for t in row.tools
            ],
            "started": row.started,
            "problem": self._policy_problem(row) or row.problem,
            "running": self._alive(row.id),
            "created": row.created,
        }
        if row.transport == "stdio":
            data["command"], data["args"] = row.command, list(row.args)
        else:
            data["url"] = row.url
        return data

    def check_ids(self, ids: Sequence[str]) -> None:
        """400 in words for an agent given a server that does not exist."""
        for server_id in ids:
            if self.store.mcp_servers.get(server_id) is None:
                raise McpServerError(
                    "invalid", f"There is no MCP server with the id “{server_id[:100]}”."
                )

    async def create(self, given: ServerIn) -> McpServerRow:
        self._check(given, keep=None)
        env, headers = _values(given.env, "env"), _values(given.headers, "headers")
        row = await self.store.mcp_servers.create(
            name=given.name,
            transport=given.transport,
            command=given.command if given.transport == "stdio" else None,
            args=given.args if given.transport == "stdio" else (),
            url=given.url if given.transport == "http" else None,
            env_names=tuple(sorted(env)) if given.transport == "stdio" else (),
            header_names=tuple(sorted(headers)) if given.transport == "http" else (),
        )
        self._seal(row.id, env if given.transport == "stdio" else {}, headers)
        return row

    async def update(self, server_id: str, changes: Mapping[str, Any]) -> McpServerRow:
        old = self.get(server_id)
        transport = changes.get("transport") or old.transport
        moved = transport != old.transport or any(
            k in changes and changes[k] != getattr(old, k) for k in ("command", "url")
        )
        given = ServerIn(
            name=changes.get("name") or old.name,
            transport=transport,
            command=changes.get("command", old.command),
            args=tuple(changes["args"]) if changes.get("args") is not None else old.args,
            url=changes.get("url", old.url),
            env=changes.get("env"),
            headers=changes.get("headers"),
        )
        self._check(given, keep=server_id)
        # Like a key, an environment or headers must not follow a server to another program
        # or address: they are dropped unless new ones come with the change.
        env = _values(given.env, "env") if given.env is not None else None
        headers = _values(given.headers, "headers") if given.headers is not None else None
        if moved:
            env = {} if env is None else env
            headers = {} if headers is None else headers
        if transport == "http":
            env = {}
        else:
            headers = {}
        row = replace(
            old,
            name=given.name,
            transport=transport,
            command=given.command if transport == "stdio" else None,
            args=given.args if transport == "stdio" else (),
            url=given.url if transport == "http" else None,
            env_names=tuple(sorted(env)) if env is not None else old.env_names,
            header_names=tuple(sorted(headers)) if headers is not None else old.header_names,
            tools=() if moved else old.tools,
            problem=None,
        )
        await self._end(server_id)  # it starts again, changed, on its next use
        saved = await self.store.mcp_servers.save(row)
        self._seal(server_id, env, headers)
        return saved

    async def delete(self, server_id: str) -> None:
        self.get(server_id)
        await self._end(server_id)  # its process group ends before the row goes
        await self.store.mcp_servers.delete(server_id)
        self._secrets.delete(env_secret(server_id))
        self._secrets.delete(headers_secret(server_id))
        self._locks.pop(server_id, None)

    async def test(self, server_id: str) -> McpServerRow:
        """The user's Test: start it afresh and list its tools; the row says how it went."""
        row = self.get(server_id)
        await self._end(server_id)
        with contextlib.suppress(ServerProblem, PolicyRefused):
            await self._connection(row)
        return self.get(server_id)

    async def close(self) -> None:
        """The server stops: every connection ends, each stdio server with its process group."""
        self._closed = True
        await asyncio.gather(*(self._end(i) for i in list(self._live)), return_exceptions=True)

    def connection(self, server_id: str) -> Connection | None:
        """The server's connection while it runs (for the tests and the benchmarks)."""
        return self._live.get(server_id)

    # --- what a turn is offered ---

    async def offer(self, server_ids: Sequence[str]) -> Offer:
        """The tools of these servers for one turn, started where needed (all at once)."""
        offer = Offer()
        rows = [r for r in map(self.store.mcp_servers.get, server_ids) if r is not None]
        started = await asyncio.gather(
            *(self._connection(row) for row in rows), return_exceptions=True
        )
        specs: list[ToolSpec] = []
        for row, outcome in zip(rows, started, strict=True):
            if isinstance(outcome, (ServerProblem, PolicyRefused)):
                offer.words.append(_problem_words(outcome, row.name))
                continue
            if isinstance(outcome, BaseException):
                raise outcome
            for tool in self.get(row.id).tools:
                spec = offered_spec(row.name, tool)
                if spec is None or spec.name in offer.tools:
                    continue
                specs.append(spec)
                offer.tools[spec.name] = OfferedTool(
                    row.id, row.name, str(tool["name"]), tool_nature(tool)
                )
        offer.specs = tuple(specs)
        return offer

    async def run(self, offer: Offer, name: str, arguments: dict[str, Any]) -> tuple[str, Ending]:
        """Call one offered tool; the text the model is shown (fenced as data) and how it
        ended. A server that breaks loses its tools for the rest of the turn, in words."""
        offered = offer.tools[name]
        if offered.server in offer.lost:
            return _lost_words(offered.server), "refused"
        connection = self._live.get(offered.server_id)
        if connection is None or not connection.alive:
            offer.lost.add(offered.server)
            return _lost_words(offered.server), "failed"
        try:
            result = await connection.call(offered.tool, arguments)
        except ServerProblem as problem:
            if connection.broken is not None:
                offer.lost.add(offered.server)
                await self._broke(offered.server_id, problem.words)
                return f"{problem.words} Its tools are gone for this turn.", "failed"
            return problem.words, "failed"
        except asyncio.CancelledError:
            raise
        failed = bool(getattr(result, "is_error", False))
        text = content_text(getattr(result, "content", []) or [])
        if not text and getattr(result, "structured_content", None) is not None:
            text = json.dumps(result.structured_content, ensure_ascii=False)[:20_000]
        shown = result_for_model(offered.server, offered.tool, text, failed=failed)
        return shown, "failed" if failed else "ran"

    def shown(self, arguments: dict[str, Any]) -> str:
        return arguments_text(arguments)

    # --- inside ---

    def _check(self, given: ServerIn, keep: str | None) -> None:
        refusal = name_refusal(given.name)
        if refusal:
            raise McpServerError("invalid", refusal)
        taken = self.store.mcp_servers.by_name(given.name)
        if taken is not None and taken.id != keep:
            raise McpServerError(
                "name_taken", f"An MCP server named “{taken.name}” exists already (case aside)."
            )
        if given.transport == "stdio":
            command = (given.command or "").strip()
            if not command or "\0" in command or "\n" in command or len(command) > 1_000:
                raise McpServerError(
                    "invalid", "A stdio server needs its command: one program's name or path."
                )
            if any("\0" in a or len(a) > 1_000 for a in given.args) or len(given.args) > 64:
                raise McpServerError("invalid", "At most 64 arguments, each one line of text.")
            check_mcp_server(self.policy, command=command)
        else:
            url = (given.url or "").strip()
            if not url.startswith(("http://", "https://")) or len(url) > 2_000:
                raise McpServerError(
                    "invalid", "A Streamable HTTP server needs its url, http:// or https://."
                )
            check_mcp_server(self.policy, url=url)

    def _policy_problem(self, row: McpServerRow) -> str | None:
        try:
            self._check_policy(row)
        except PolicyRefused as refused:
            return f"Not started: {refused.message}"
        return None

    def _check_policy(self, row: McpServerRow) -> None:
        if row.transport == "stdio":
            check_mcp_server(self.policy, command=row.command or "")
        else:
            check_mcp_server(self.policy, url=row.url or "")

    def _seal(
        self, server_id: str, env: Mapping[str, str] | None, headers: Mapping[str, str] | None
    ) -> None:
        for name, values in ((env_secret(server_id), env), (headers_secret(server_id), headers)):
            if values is None:
                continue
            if values:
                self._secrets.set(name, json.dumps(dict(values)))
            else:
                self._secrets.delete(name)

    def _unsealed(self, name: str) -> dict[str, str]:
        raw = self._secrets.get(name)
        try:
            loaded = json.loads(raw) if raw else {}
        except ValueError:
            return {}
        return {str(k): str(v) for k, v in loaded.items()} if isinstance(loaded, dict) else {}

    def _alive(self, server_id: str) -> bool:
        connection = self._live.get(server_id)
        return connection is not None and connection.alive

    async def _connection(self, row: McpServerRow) -> Connection:
        """The server's live connection, started (and its tools listed) where needed."""
        self._check_policy(row)  # a server made before the policy is not started
        lock = self._locks.setdefault(row.id, asyncio.Lock())
        async with lock:
            connection = self._live.get(row.id)
            if connection is not None and not connection.alive:
                await self._end(row.id)
                connection = None
            if connection is not None and row.id not in self._stale:
                return connection
            if self._closed:
                raise ServerProblem("The Jupyter server is stopping.")
            if connection is None:
                target = Target(
                    row,
                    self._unsealed(env_secret(row.id)),
                    self._unsealed(headers_secret(row.id)),
                )
                connection = Connection(
                    target,
                    secrets=self._hidden(),
                    on_tools_changed=lambda: self._stale.add(row.id),
                    client_version=self._version,
                )
                try:
                    tools = await connection.start(self.start_seconds)
                except ServerProblem as problem:
                    await self.store.mcp_servers.note(row.id, problem=problem.words)
                    raise
                self._live[row.id] = connection
            else:
                self._stale.discard(row.id)
                try:
                    tools = await connection.list_tools(self.start_seconds)
                except ServerProblem as problem:
                    await self._broke(row.id, problem.words)
                    raise
            listed = tuple(listed_tool(t) for t in tools)
            await self.store.mcp_servers.note(
                row.id, tools=listed, started=self.clock(), problem=None
            )
            return connection

    async def _broke(self, server_id: str, words: str) -> None:
        await self._end(server_id)
        await self.store.mcp_servers.note(server_id, problem=words)

    async def _end(self, server_id: str) -> None:
        self._stale.discard(server_id)
        connection = self._live.pop(server_id, None)
        if connection is not None:
            try:
                await connection.close()
            except Exception:  # the group is ended whatever the SDK did
                log.warning("Conch: the MCP server %s did not close cleanly", connection.name)


def _values(given: Mapping[str, str] | None, what: str) -> dict[str, str]:
    if given is None:
        return {}
    if len(given) > ENV_MAX:
        raise McpServerError("invalid", f"{what} holds at most {ENV_MAX} names.")
    out: dict[str, str] = {}
    for name, value in given.items():
        if not isinstance(name, str) or not name or "=" in name or "\0" in name or len(name) > 200:
            raise McpServerError("invalid", f"Each {what} name must be one word without “=”.")
        if not isinstance(value, str) or "\0" in value or len(value) > VALUE_MAX:
            raise McpServerError("invalid", f"The value of {name} must be text (at most 10,000).")
        if what == "headers" and ("\n" in value or "\r" in value or not name.isascii()):
            raise McpServerError("invalid", f"The header {name} must be one line.")
        out[name] = value
    return out


def _problem_words(problem: Exception, name: str) -> str:
    words = problem.words if isinstance(problem, ServerProblem) else str(problem)
    if isinstance(problem, PolicyRefused):
        words = problem.message
    return f"The tools of the MCP server {name} are not offered this turn: {words}"


def _lost_words(server: str) -> str:
    return f"Not run: the MCP server {server} broke during this turn, so its tools are gone."
