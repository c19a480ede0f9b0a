"""The notebook's tools for coding agents: an MCP server that each ACP session is offered in
`new_session`'s `mcp_servers` (Streamable HTTP at `{base_url}conch/mcp`), bound to that chat and
agent by a bearer key of its own.

Owns the MCP side and the key: which key opens which chat's tools, and the `mcp` SDK's server
that answers. No MCP framing is Conch's own: the SDK's lowlevel `Server` answers `initialize`,
`ping`, `tools/list` and `tools/call` (either protocol era), and its `StreamableHTTPSessionManager`
(stateless, JSON answers: no stream is opened, as a call's answer comes in its POST's response)
speaks the transport. Conch gives it two handlers. The tools are the very registry the model
agents are offered (`notebook.rules.NOTEBOOK_TOOLS`: whatever is added there comes through here,
with no second list), and each call goes through the same NotebookTools.call as a model agent's:
the chat's mode and taint, the user's yes, the bound of calls a turn, the log (the rule itself is
notebook/rules.py's table). A call is taken only while that agent's turn runs in that chat:
between turns (or after Stop) it is refused in words.

Theory of operation: `McpEndpoint.asgi` is an ASGI app (Jupyter's tornado speaks no ASGI, so
server_ext/asgi.py hands it each request). It first does what is Conch's: a request from a page
(an Origin header) is 403 and one without a key Conch handed out is 401, both before the SDK sees
it; GET is 405 (the spec's answer where no server stream is offered: nothing is ever pushed).
Then the key's binding rides in the ASGI scope's `state` into the SDK, which hands the handlers
the request (`ctx.request.state`). The SDK's manager runs in a task of its own, started on the
first request and ended by `close()`.
"""

from __future__ import annotations

import asyncio
import hmac
import secrets
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass
from typing import Any

import mcp_types as types
from mcp.server import Server, ServerRequestContext
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

from .. import __version__
from ..notebook.rules import MAX_CALLS_PER_TURN, NOTEBOOK_TOOLS
from ..notebook.service import Caller, NotebookTools
from ..providers.base import ToolCall
from .rules import SERVER_NAME

NOT_IN_TURN = "Not run: the notebook's tools work only during your turn in the chat."
INSTRUCTIONS = "The chat's notebook and its kernel, under the user's mode."
MAX_BODY = 1_000_000  # a request's body, at most (the SDK answers 413 past it)

# ASGI's three shapes (the SDK's are starlette's, which Conch does not import itself).
Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]


@dataclass
class McpBinding:
    """One ACP session's key to the notebook's tools: its chat, its agent, its turn's count."""

    chat: str
    caller: Caller
    in_turn: bool = False
    calls: int = 0


class McpEndpoint:
    def __init__(self, tools: NotebookTools, *, url: Callable[[], str | None]) -> None:
        self.tools = tools
        self.url = url  # where the server answers MCP (None while it is not known yet)
        self._bound: dict[str, McpBinding] = {}
        self.server: Server[Any] = Server(
            SERVER_NAME,
            version=__version__,
            instructions=INSTRUCTIONS,
            on_list_tools=self._list_tools,
            on_call_tool=self._call_tool,
        )
        self._manager = StreamableHTTPSessionManager(
            self.server, json_response=True, stateless=True, max_request_body_size=MAX_BODY
        )
        self._running: asyncio.Task[None] | None = None
        self._started = asyncio.Event()
        self._stopping = asyncio.Event()

    # --- what the sessions call ---

    def bind(self, chat: str, caller: Caller) -> tuple[str, McpBinding]:
        key = secrets.token_urlsafe(32)
        binding = McpBinding(chat, caller)
        self._bound[key] = binding
        return key, binding

    def unbind(self, key: str) -> None:
        self._bound.pop(key, None)

    def known(self, key: str) -> McpBinding | None:
        for held, binding in self._bound.items():
            if hmac.compare_digest(held.encode(), key.encode()):
                return binding
        return None

    # --- what the HTTP edge calls ---

    async def asgi(self, scope: Scope, receive: Receive, send: Send) -> None:
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        if headers.get("origin"):
            return await _refuse(send, 403, "A page cannot use the notebook's tools.")
        scheme, _, key = headers.get("authorization", "").partition(" ")
        binding = self.known(key.strip()) if scheme.lower() == "bearer" else None
        if binding is None:
            extra = [(b"www-authenticate", b"Bearer")]
            return await _refuse(send, 401, "This key opens nothing here.", extra)
        if scope["method"] == "GET":
            extra = [(b"allow", b"POST, DELETE")]
            return await _refuse(send, 405, "POST JSON-RPC here; no stream is offered.", extra)
        scope["state"] = {**scope.get("state", {}), "binding": binding}
        await self._start()
        await self._manager.handle_request(scope, receive, send)

    async def close(self) -> None:
        if self._running is not None:
            self._stopping.set()
            await self._running
            self._running = None

    async def _start(self) -> None:
        if self._running is None:
            self._running = asyncio.ensure_future(self._run())
        await self._started.wait()

    async def _run(self) -> None:
        async with self._manager.run():
            self._started.set()
            await self._stopping.wait()

    # --- the SDK's handlers ---

    async def _list_tools(
        self, ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        tools = [
            types.Tool(name=t.name, description=t.description, input_schema=t.parameters)
            for t in NOTEBOOK_TOOLS
        ]
        return types.ListToolsResult(tools=tools)

    async def _call_tool(
        self, ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        binding = _binding_of(ctx)
        if binding is None or not binding.in_turn:
            return _text(NOT_IN_TURN, error=True)
        call = ToolCall(f"mcp_{secrets.token_hex(6)}", params.name, params.arguments)
        calls, binding.calls = binding.calls, binding.calls + 1
        shown = await self.tools.call(binding.chat, binding.caller, call, calls)
        refused = calls >= MAX_CALLS_PER_TURN or shown.startswith("Not run")
        return _text(shown, error=refused)


def _binding_of(ctx: ServerRequestContext[Any]) -> McpBinding | None:
    """The binding asgi() put in the request's scope (none on a transport without one)."""
    scope = getattr(ctx.request, "scope", None)
    state = scope.get("state") if isinstance(scope, dict) else None
    binding = state.get("binding") if isinstance(state, dict) else None
    return binding if isinstance(binding, McpBinding) else None


def _text(text: str, *, error: bool = False) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)], is_error=error)


async def _refuse(
    send: Send, status: int, words: str, headers: list[tuple[bytes, bytes]] | None = None
) -> None:
    """An answer before the SDK: its JSON-RPC error type, with no request's id."""
    error = types.JSONRPCError(
        jsonrpc="2.0", id=None, error=types.ErrorData(code=-32000, message=words)
    )
    body = error.model_dump_json(by_alias=True, exclude_unset=True).encode()
    start = [(b"content-type", b"application/json"), (b"cache-control", b"no-store")]
    await send(
        {"type": "http.response.start", "status": status, "headers": start + (headers or [])}
    )
    await send({"type": "http.response.body", "body": body})
