"""The HTTP edge of the notebook's tools for coding agents (coding/mcp.py): MCP's Streamable HTTP
transport at `{base_url}conch/mcp`, answered in plain JSON (no stream is opened).

Not Jupyter's auth: a coding agent holds no Jupyter token (it is never given one). Each ACP
session holds its own bearer key, which opens this endpoint for its chat and agent only and
nothing else of Conch or Jupyter; a request without a key Conch handed out is 401. Anything a
browser sends (an Origin header) is refused, as at the door: this is for processes, not pages.
"""

from __future__ import annotations

import json
from typing import Any

from jupyter_server.auth.decorator import allow_unauthenticated
from tornado import web

from .services import ConchServices

MAX_BODY = 1_000_000


class McpHandler(web.RequestHandler):
    def check_xsrf_cookie(self) -> None:
        """Bearer keys, not cookies: no cross-site form can hold one."""

    @property
    def conch(self) -> ConchServices:
        services: ConchServices = self.settings["conch"]
        return services

    def _json(self, status: int, data: Any) -> None:
        self.set_status(status)
        self.set_header("Content-Type", "application/json")
        self.set_header("Cache-Control", "no-store")
        self.finish(json.dumps(data))

    # Jupyter's own sign-in does not apply (its bearer key is checked below), so Jupyter is told
    # so, as it asks of every extension endpoint that is not @web.authenticated.
    @allow_unauthenticated
    async def post(self) -> None:
        if self.request.headers.get("Origin"):
            return self._json(403, _error("A page cannot use the notebook's tools."))
        auth = self.request.headers.get("Authorization", "")
        scheme, _, key = auth.partition(" ")
        binding = self.conch.mcp.known(key.strip()) if scheme.lower() == "bearer" else None
        if binding is None:
            self.set_header("WWW-Authenticate", "Bearer")
            return self._json(401, _error("This key opens nothing here."))
        if len(self.request.body or b"") > MAX_BODY:
            return self._json(413, _error("The request is larger than 1 MB."))
        try:
            body = json.loads(self.request.body or b"")
        except ValueError:
            return self._json(400, _error("The body is not JSON."))
        answer = await self.conch.mcp.answer(binding, body)
        if answer is None:
            self.set_status(202)
            self.finish()
            return None
        return self._json(200, answer)

    @allow_unauthenticated
    def get(self) -> None:
        # No server-initiated stream: every answer comes in the POST's own response.
        self.set_header("Allow", "POST")
        self._json(405, _error("POST JSON-RPC here; no stream is offered."))

    delete = get


def _error(words: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": None, "error": {"code": -32000, "message": words}}
