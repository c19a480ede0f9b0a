"""The HTTP edge of the notebook's tools for coding agents (coding/mcp.py): `{base_url}conch/mcp`,
each request handed to the endpoint's ASGI app (the `mcp` SDK's Streamable HTTP transport,
behind Conch's key and Origin checks).

Not Jupyter's auth: a coding agent holds no Jupyter token (it is never given one). Each ACP
session holds its own bearer key, which opens this endpoint for its chat and agent only and
nothing else of Conch or Jupyter; a request without a key Conch handed out is 401. Anything a
browser sends (an Origin header) is refused, as at the door: this is for processes, not pages.
"""

from __future__ import annotations

import asyncio

from jupyter_server.auth.decorator import allow_unauthenticated
from tornado import web

from .asgi import serve
from .services import ConchServices


class McpHandler(web.RequestHandler):
    def initialize(self) -> None:
        self._gone = asyncio.Event()

    def check_xsrf_cookie(self) -> None:
        """Bearer keys, not cookies: no cross-site form can hold one."""

    def on_connection_close(self) -> None:
        self._gone.set()

    async def _answer(self) -> None:
        services: ConchServices = self.settings["conch"]
        await serve(self, services.mcp.asgi, self._gone)

    # Jupyter's own sign-in does not apply (coding/mcp.py checks its bearer key), so Jupyter is
    # told so, as it asks of every extension endpoint that is not @web.authenticated.
    @allow_unauthenticated
    async def post(self) -> None:
        await self._answer()

    @allow_unauthenticated
    async def get(self) -> None:
        await self._answer()

    @allow_unauthenticated
    async def delete(self) -> None:
        await self._answer()
