"""Your MCP servers over HTTP: `GET/POST /mcp-servers`, `GET/PATCH/DELETE /mcp-servers/{id}`,
and `POST /mcp-servers/{id}/test` (Settings' Test: start it afresh and list its tools). Thin:
parse, call the service, serialise. The kernel key reads (every GET) and nothing else: adding,
changing, testing or removing a server is the user's own (403 `only_the_user`), since a server
runs a program or reaches an address with your keys.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from jupyter_server.auth.decorator import authorized
from pydantic import Field
from tornado import web

from ..mcp_servers.service import ServerIn
from .base import ApiError, ConchHandler
from .bodies import Body

MCP_SETTINGS = ("add, change, test or remove MCP servers", "Settings → Tools")
_Line = Annotated[str, Field(max_length=1_000)]
_Values = dict[Annotated[str, Field(max_length=200)], Annotated[str, Field(max_length=10_000)]]


class McpServerIn(Body):
    name: str = Field(max_length=100)
    transport: Literal["stdio", "http"]
    command: str | None = Field(default=None, max_length=1_000)
    args: list[_Line] | None = Field(default=None, max_length=64)
    url: str | None = Field(default=None, max_length=2_000)
    env: _Values | None = Field(default=None, max_length=64)
    headers: _Values | None = Field(default=None, max_length=64)


class McpServerPatch(Body):
    name: str | None = Field(default=None, max_length=100)
    transport: Literal["stdio", "http"] | None = None
    command: str | None = Field(default=None, max_length=1_000)
    args: list[_Line] | None = Field(default=None, max_length=64)
    url: str | None = Field(default=None, max_length=2_000)
    env: _Values | None = Field(default=None, max_length=64)
    headers: _Values | None = Field(default=None, max_length=64)


def _mismatch(body: McpServerIn) -> str | None:
    if body.transport == "stdio" and (body.url is not None or body.headers is not None):
        return "A stdio server takes command, args and env (not url or headers)."
    if body.transport == "http" and (body.command or body.args or body.env is not None):
        return "A Streamable HTTP server takes url and headers (not command, args or env)."
    return None


class McpServersHandler(ConchHandler):
    users_own = MCP_SETTINGS

    @web.authenticated
    @authorized
    def get(self) -> None:
        self.reply({"servers": self.conch.mcp_servers.list_json()})

    @web.authenticated
    @authorized
    async def post(self) -> None:
        body = self.body(McpServerIn)
        mismatch = _mismatch(body)
        if mismatch:
            raise ApiError(400, "invalid", mismatch)
        row = await self.conch.mcp_servers.create(
            ServerIn(
                name=body.name,
                transport=body.transport,
                command=body.command,
                args=tuple(body.args or ()),
                url=body.url,
                env=body.env,
                headers=body.headers,
            )
        )
        self.reply(self.conch.mcp_servers.to_json(row), 201)


class McpServerHandler(ConchHandler):
    users_own = MCP_SETTINGS

    @web.authenticated
    @authorized
    def get(self, server_id: str) -> None:
        service = self.conch.mcp_servers
        self.reply(service.to_json(service.get(server_id)))

    @web.authenticated
    @authorized
    async def patch(self, server_id: str) -> None:
        body = self.body(McpServerPatch)
        changes: dict[str, Any] = {k: getattr(body, k) for k in body.model_fields_set}
        service = self.conch.mcp_servers
        row = await service.update(server_id, changes)
        self.reply(service.to_json(row))

    @web.authenticated
    @authorized
    async def delete(self, server_id: str) -> None:
        await self.conch.mcp_servers.delete(server_id)
        self.conch.agents.forget_mcp_server(server_id)
        self.set_status(204)
        self.finish()


class McpServerTestHandler(ConchHandler):
    users_own = MCP_SETTINGS

    @web.authenticated
    @authorized
    async def post(self, server_id: str) -> None:
        service = self.conch.mcp_servers
        self.reply(service.to_json(await service.test(server_id)))


def mcp_server_routes() -> list[tuple[str, type[ConchHandler]]]:
    one = r"conch/api/mcp-servers/(?P<server_id>[A-Za-z0-9_\-]{1,64})"
    return [
        (r"conch/api/mcp-servers", McpServersHandler),
        (one, McpServerHandler),
        (one + r"/test", McpServerTestHandler),
    ]
