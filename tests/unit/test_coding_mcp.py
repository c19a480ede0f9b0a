"""The MCP side of the notebook's tools for coding agents (coding/mcp.py): its ASGI app, driven
by the `mcp` SDK's own client over its Streamable HTTP transport, in process (no Jupyter)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import httpx2
import mcp_types
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from conch_jupyter.coding.mcp import INSTRUCTIONS, NOT_IN_TURN, McpEndpoint
from conch_jupyter.coding.rules import SERVER_NAME
from conch_jupyter.notebook.rules import NOTEBOOK_TOOLS
from conch_jupyter.notebook.service import Caller, NotebookTools
from conch_jupyter.store.chats import Store
from conch_jupyter.store.hub import Hub

URL = "http://127.0.0.1:1/conch/mcp"


@asynccontextmanager
async def endpoint_in(tmp_path: Path) -> AsyncIterator[McpEndpoint]:
    store = Store(tmp_path / "c.sqlite3", clock=lambda: 1.0)
    tools = NotebookTools(store=store, hub=Hub(), kernels=None)
    mcp = McpEndpoint(tools, url=lambda: URL)
    try:
        yield mcp
    finally:
        await mcp.close()
        store.close()


def http_to(mcp: McpEndpoint, headers: dict[str, str]) -> httpx2.AsyncClient:
    return httpx2.AsyncClient(transport=httpx2.ASGITransport(app=mcp.asgi), headers=headers)


@asynccontextmanager
async def client(mcp: McpEndpoint, key: str, mode: str) -> AsyncIterator[Client]:
    http = http_to(mcp, {"Authorization": f"Bearer {key}"})
    async with http, Client(streamable_http_client(URL, http_client=http), mode=mode) as c:
        yield c


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_the_sdks_client_lists_the_one_registry_and_calls_a_tool(
    tmp_path: Path, mode: str
) -> None:
    async with endpoint_in(tmp_path) as endpoint:
        await lists_and_calls(endpoint, mode)


async def lists_and_calls(endpoint: McpEndpoint, mode: str) -> None:
    key, binding = endpoint.bind("c_1", Caller("coder", "Coder"))
    assert endpoint.known(key) is binding
    assert endpoint.known("wrong") is None
    async with client(endpoint, key, mode) as mcp:
        assert mcp.server_info is not None
        assert mcp.server_info.name == SERVER_NAME
        assert mcp.instructions == INSTRUCTIONS
        listed = await mcp.list_tools()
        assert [t.name for t in listed.tools] == [t.name for t in NOTEBOOK_TOOLS]
        assert listed.tools[0].input_schema == NOTEBOOK_TOOLS[0].parameters
        # Outside its turn a call is refused in words (a result, not a protocol error).
        called = await mcp.call_tool("run_code", {"code": "1"})
        assert called.is_error
        assert called.content == [mcp_types.TextContent(type="text", text=NOT_IN_TURN)]
        with pytest.raises(MCPError):
            await mcp.read_resource("file:///etc/passwd")  # no resources here: no such method
    endpoint.unbind(key)
    assert endpoint.known(key) is None


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_in_its_turn_a_call_is_judged_by_the_chats_mode_and_logged_as_its_agents(
    tmp_path: Path, mode: str
) -> None:
    """The key's binding reaches the SDK's handler in either protocol era: the call goes through
    NotebookTools under that chat's mode (Read refuses a run) and is logged as that agent's."""
    async with endpoint_in(tmp_path) as endpoint:
        store = endpoint.tools.store
        chat = (await store.create_conversation(title="c")).id
        await store.set_mode(chat, "read")
        key, binding = endpoint.bind(chat, Caller("coder", "Coder"))
        binding.in_turn = True
        async with client(endpoint, key, mode) as mcp:
            called = await mcp.call_tool("run_code", {"code": "1"})
        assert called.is_error
        [text] = called.content
        assert isinstance(text, mcp_types.TextContent)
        assert text.text.startswith("Not run")
        assert binding.calls == 1
        [line] = [m for m in store.messages(chat) if m.role == "tool"]
        assert (line.agent, line.tool and line.tool["state"]) == ("coder", "refused")


async def test_without_its_key_or_from_a_page_the_endpoint_opens_nothing(tmp_path: Path) -> None:
    async with endpoint_in(tmp_path) as endpoint:
        await opens_nothing(endpoint)


async def opens_nothing(endpoint: McpEndpoint) -> None:
    key, _ = endpoint.bind("c_1", Caller("coder", "Coder"))
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    accept = {"Accept": "application/json, text/event-stream"}
    for headers, status in (
        ({}, 401),
        ({"Authorization": "Bearer not-a-key"}, 401),
        ({"Authorization": f"Bearer {key}", "Origin": "http://evil.example"}, 403),
    ):
        async with http_to(endpoint, {**accept, **headers}) as http:
            answer = await http.post(URL, json=body)
        assert answer.status_code == status
        assert answer.json()["error"]["message"]
    async with http_to(endpoint, {**accept, "Authorization": f"Bearer {key}"}) as http:
        assert (await http.get(URL)).status_code == 405
        garbage = await http.post(
            URL, content=b"{not json", headers={"Content-Type": "application/json"}
        )
        assert garbage.status_code == 400
        assert garbage.json()["error"]["code"] == mcp_types.PARSE_ERROR
        big = await http.post(
            URL, content=b"x" * 1_000_001, headers={"Content-Type": "application/json"}
        )
        assert big.status_code == 413
