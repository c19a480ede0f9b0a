"""The kernel side's way to the server's Conch API.

A kernel started by a Jupyter server that runs Conch inherits CONCH_SERVER_URL and
CONCH_KERNEL_KEY; the key opens conch/api/ and nothing else. A kernel started before Conch loaded
falls back to finding its server among the running ones by JPY_PARENT_PID and using its token.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Mapping
from typing import Any
from urllib.parse import quote

import httpx

KERNEL_KEY_HEADER = "X-Conch-Kernel-Key"


class ConchClientError(Exception):
    """The API said no, in words (`code` is the API's error code; `status` its HTTP status)."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message


class ConchNotFound(ConchClientError):
    def __init__(self, message: str) -> None:
        super().__init__(0, "no_server", message)


class ConchClient:
    def __init__(
        self,
        server_url: str,
        *,
        kernel_key: str | None = None,
        token: str | None = None,
        timeout: float = 30.0,
    ) -> None:
        headers = {}
        if kernel_key:
            headers[KERNEL_KEY_HEADER] = kernel_key
        elif token:
            headers["Authorization"] = f"token {token}"
        self.api_url = server_url.rstrip("/") + "/conch/api/"
        self._http = httpx.Client(headers=headers, timeout=timeout, trust_env=False)

    @classmethod
    def from_environment(cls, env: Mapping[str, str] | None = None) -> ConchClient:
        env = os.environ if env is None else env
        url, key = env.get("CONCH_SERVER_URL"), env.get("CONCH_KERNEL_KEY")
        if url and key:
            return cls(url, kernel_key=key)
        parent = env.get("JPY_PARENT_PID")
        if parent:
            from jupyter_server.serverapp import list_running_servers

            for server in list_running_servers():
                if str(server.get("pid")) == parent:
                    return cls(server["url"], token=server.get("token") or None)
        raise ConchNotFound(
            "No Jupyter server with Conch was found for this kernel. Start JupyterLab with "
            "conch-jupyter installed, then restart the kernel."
        )

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> ConchClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- the API ---

    def agents(self) -> list[dict[str, Any]]:
        agents: list[dict[str, Any]] = self._call("GET", "agents")["agents"]
        return agents

    def create_agent(self, **body: Any) -> dict[str, Any]:
        return self._call("POST", "agents", body)

    def update_agent(self, agent_id: str, **changes: Any) -> dict[str, Any]:
        return self._call("PATCH", f"agents/{quote(agent_id, safe='')}", changes)

    def delete_agent(self, agent_id: str) -> None:
        self._call("DELETE", f"agents/{quote(agent_id, safe='')}")

    def conversations(self) -> list[dict[str, Any]]:
        chats: list[dict[str, Any]] = self._call("GET", "conversations")["conversations"]
        return chats

    def create_conversation(self, title: str = "") -> dict[str, Any]:
        return self._call("POST", "conversations", {"title": title})

    def conversation(self, conversation_id: str) -> dict[str, Any]:
        return self._call("GET", f"conversations/{conversation_id}")

    def send(self, conversation_id: str, text: str) -> str:
        message_id: str = self._call(
            "POST", f"conversations/{conversation_id}/messages", {"text": text}
        )["message_id"]
        return message_id

    def stop(self, conversation_id: str) -> bool:
        return bool(self._call("POST", f"conversations/{conversation_id}/round/stop")["stopped"])

    def follow(self, conversation_id: str) -> Iterator[dict[str, Any]]:
        """The chat's live stream: a snapshot first, then messages, events, deltas, round state."""
        url = self.api_url + f"conversations/{conversation_id}/events"
        with self._http.stream("GET", url, timeout=httpx.Timeout(30.0, read=None)) as response:
            if response.status_code >= 400:
                response.read()
                self._raise(response)
            for line in response.iter_lines():
                if line.startswith("data:"):
                    yield json.loads(line[5:].strip())

    # --- plumbing ---

    def _call(self, method: str, path: str, body: Any = None) -> dict[str, Any]:
        try:
            response = self._http.request(
                method, self.api_url + path, json=body if body is not None else None
            )
        except httpx.HTTPError as error:
            raise ConchClientError(
                0, "unreachable", f"Conch's server did not answer: {error}"
            ) from None
        if response.status_code >= 400:
            self._raise(response)
        answer: dict[str, Any] = response.json() if response.content else {}
        return answer

    @staticmethod
    def _raise(response: httpx.Response) -> None:
        try:
            error = response.json()["error"]
            code, message = str(error["code"]), str(error["message"])
        except (ValueError, KeyError, TypeError):
            code, message = "http_error", f"HTTP {response.status_code}"
        raise ConchClientError(response.status_code, code, message)
