"""The notebook's tools for coding agents: an MCP server (Streamable HTTP, JSON answers) that each
ACP session is offered in `new_session`'s `mcp_servers`, bound to that chat and agent by a key
of its own.

Owns the MCP side only: `initialize`, `tools/list` and `tools/call` over JSON-RPC 2.0. The tools
are the very registry the model agents are offered (`notebook.rules.NOTEBOOK_TOOLS`: whatever is
added there comes through here, with no second list), and each call goes through the same
NotebookTools.call as a model agent's: the chat's mode and taint, the user's yes, the bound of
calls a turn, the log. A call is taken only while that agent's turn runs in that chat: between
turns (or after Stop) it is refused in words.

Pure of HTTP: `McpEndpoint.answer(key, body)` takes the bearer key and the parsed body and gives
the JSON-RPC answer (None for a notification); server_ext's handler is the thin HTTP edge.
"""

from __future__ import annotations

import hmac
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .. import __version__
from ..notebook.rules import MAX_CALLS_PER_TURN, NOTEBOOK_TOOLS
from ..notebook.service import Caller, NotebookTools
from ..providers.base import ToolCall
from .rules import SERVER_NAME

PROTOCOL_VERSION = "2025-06-18"
NOT_IN_TURN = "Not run: the notebook's tools work only during your turn in the chat."


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

    # --- what the sessions call ---

    def bind(self, chat: str, caller: Caller) -> tuple[str, McpBinding]:
        key = secrets.token_urlsafe(32)
        binding = McpBinding(chat, caller)
        self._bound[key] = binding
        return key, binding

    def unbind(self, key: str) -> None:
        self._bound.pop(key, None)

    # --- what the HTTP edge calls ---

    def known(self, key: str) -> McpBinding | None:
        for held, binding in self._bound.items():
            if hmac.compare_digest(held.encode(), key.encode()):
                return binding
        return None

    async def answer(self, binding: McpBinding, body: Any) -> dict[str, Any] | None:
        if not isinstance(body, dict) or body.get("jsonrpc") != "2.0" or "method" not in body:
            return _error(None, -32600, "Not a JSON-RPC 2.0 request.")
        method, rid = body.get("method"), body.get("id")
        if "id" not in body:
            return None  # a notification (notifications/initialized, cancelled): nothing to say
        params = body.get("params") or {}
        if method == "initialize":
            return _result(
                rid,
                {
                    "protocolVersion": PROTOCOL_VERSION,
                    "capabilities": {"tools": {"listChanged": False}},
                    "serverInfo": {"name": SERVER_NAME, "version": __version__},
                    "instructions": "The chat's notebook and its kernel, under the user's mode.",
                },
            )
        if method == "ping":
            return _result(rid, {})
        if method == "tools/list":
            tools = [
                {"name": t.name, "description": t.description, "inputSchema": t.parameters}
                for t in NOTEBOOK_TOOLS
            ]
            return _result(rid, {"tools": tools})
        if method == "tools/call":
            if not isinstance(params, dict) or not isinstance(params.get("name"), str):
                return _error(rid, -32602, "tools/call needs a tool's name.")
            arguments = params.get("arguments")
            return _result(rid, await self._call(binding, params["name"], arguments))
        return _error(rid, -32601, f"There is no method {str(method)[:80]!r} here.")

    async def _call(self, binding: McpBinding, name: str, arguments: Any) -> dict[str, Any]:
        if not binding.in_turn:
            return _text(NOT_IN_TURN, error=True)
        call = ToolCall(
            f"mcp_{secrets.token_hex(6)}",
            name,
            arguments if isinstance(arguments, dict) else None,
        )
        calls, binding.calls = binding.calls, binding.calls + 1
        shown = await self.tools.call(binding.chat, binding.caller, call, calls)
        refused = calls >= MAX_CALLS_PER_TURN or shown.startswith("Not run")
        return _text(shown, error=refused)


def _text(text: str, *, error: bool = False) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": text}], "isError": error}


def _result(rid: Any, result: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rid, "result": result}


def _error(rid: Any, code: int, message: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rid, "error": {"code": code, "message": message}}
