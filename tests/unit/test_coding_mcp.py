"""The MCP side of the notebook's tools for coding agents (coding/mcp.py), without HTTP."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from conch_jupyter.coding.mcp import NOT_IN_TURN, McpEndpoint
from conch_jupyter.notebook.rules import NOTEBOOK_TOOLS
from conch_jupyter.notebook.service import Caller, NotebookTools
from conch_jupyter.store.chats import Store
from conch_jupyter.store.hub import Hub


def endpoint(tmp_path: Path) -> tuple[McpEndpoint, Store]:
    store = Store(tmp_path / "c.sqlite3", clock=lambda: 1.0)
    tools = NotebookTools(store=store, hub=Hub(), kernels=None)
    return McpEndpoint(tools, url=lambda: "http://127.0.0.1:1/conch/mcp"), store


async def test_it_lists_the_one_registry_and_answers_in_json_rpc(tmp_path: Path) -> None:
    mcp, store = endpoint(tmp_path)
    key, binding = mcp.bind("c_1", Caller("coder", "Coder"))
    assert mcp.known(key) is binding
    assert mcp.known("wrong") is None
    hello: Any = await mcp.answer(binding, {"jsonrpc": "2.0", "id": 1, "method": "initialize"})
    assert hello["result"]["capabilities"] == {"tools": {"listChanged": False}}
    listed: Any = await mcp.answer(binding, {"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
    assert [t["name"] for t in listed["result"]["tools"]] == [t.name for t in NOTEBOOK_TOOLS]
    assert await mcp.answer(binding, {"jsonrpc": "2.0", "method": "notifications/x"}) is None
    unknown: Any = await mcp.answer(binding, {"jsonrpc": "2.0", "id": 3, "method": "nope"})
    assert unknown["error"]["code"] == -32601
    assert (await mcp.answer(binding, [1]) or {})["error"]["code"] == -32600
    mcp.unbind(key)
    assert mcp.known(key) is None
    store.close()


async def test_a_call_outside_its_turn_is_refused_in_words(tmp_path: Path) -> None:
    mcp, store = endpoint(tmp_path)
    _, binding = mcp.bind("c_1", Caller("coder", "Coder"))
    call = {"name": "run_code", "arguments": {"code": "1"}}
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": call}
    answer: Any = await mcp.answer(binding, body)
    assert answer["result"] == {"content": [{"type": "text", "text": NOT_IN_TURN}], "isError": True}
    bad: Any = await mcp.answer(binding, {**body, "params": {"arguments": {}}})
    assert bad["error"]["code"] == -32602
    store.close()
