"""The kernel side's way to the server's Conch API.

A kernel started by a Jupyter server that runs Conch inherits CONCH_SERVER_URL and
CONCH_KERNEL_KEY; the key opens conch/api/ and nothing else. A kernel started before Conch loaded
falls back to finding its server among the running ones by JPY_PARENT_PID and using its token.

ConchClient is for plain code (blocking calls); AsyncConchClient is for the kernel's event loop,
where the chat widget follows a chat's live stream without holding the kernel up.
"""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator, Iterator, Mapping
from typing import Any
from urllib.parse import quote

import httpx

from .providers.sse import response_events

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
        self.api_url = server_url.rstrip("/") + "/conch/api/"
        self._http = httpx.Client(
            headers=_headers(kernel_key, token), timeout=timeout, trust_env=False
        )

    @classmethod
    def from_environment(cls, env: Mapping[str, str] | None = None) -> ConchClient:
        url, key, token = locate_server(env)
        return cls(url, kernel_key=key, token=token)

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

    def create_conversation(self, title: str = "", path: str | None = None) -> dict[str, Any]:
        """A new chat; with `path`, it belongs to that notebook (its agents work in its kernel)."""
        return self._call("POST", "conversations", _new_chat(title, path))

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
            raise _unreachable(error) from None
        return _answer(response)

    @staticmethod
    def _raise(response: httpx.Response) -> None:
        raise _error(response)


def locate_server(env: Mapping[str, str] | None = None) -> tuple[str, str | None, str | None]:
    """This kernel's Jupyter server with Conch: (url, kernel key, token), or ConchNotFound."""
    env = os.environ if env is None else env
    url, key = env.get("CONCH_SERVER_URL"), env.get("CONCH_KERNEL_KEY")
    if url and key:
        return url, key, None
    parent = env.get("JPY_PARENT_PID")
    if parent:
        from jupyter_server.serverapp import list_running_servers

        for server in list_running_servers():
            if str(server.get("pid")) == parent:
                return str(server["url"]), None, server.get("token") or None
    raise ConchNotFound(
        "No Jupyter server with Conch was found for this kernel. Start JupyterLab with "
        "conch-jupyter installed, then restart the kernel."
    )


def _headers(kernel_key: str | None, token: str | None) -> dict[str, str]:
    if kernel_key:
        return {KERNEL_KEY_HEADER: kernel_key}
    if token:
        return {"Authorization": f"token {token}"}
    return {}


def _unreachable(error: httpx.HTTPError) -> ConchClientError:
    return ConchClientError(0, "unreachable", f"Conch's server did not answer: {error}")


def _error(response: httpx.Response) -> ConchClientError:
    try:
        error = response.json()["error"]
        code, message = str(error["code"]), str(error["message"])
    except (ValueError, KeyError, TypeError):
        code, message = "http_error", f"HTTP {response.status_code}"
    return ConchClientError(response.status_code, code, message)


def _answer(response: httpx.Response) -> dict[str, Any]:
    if response.status_code >= 400:
        raise _error(response)
    answer: dict[str, Any] = response.json() if response.content else {}
    return answer


def _rows(answer: dict[str, Any], key: str) -> list[dict[str, Any]]:
    """The list an answer holds under `key` (e.g. {"outside": [...]})."""
    rows = answer.get(key)
    if not isinstance(rows, list):
        raise ConchClientError(200, "bad_answer", f"The server's answer had no {key} list.")
    return rows


def _new_chat(title: str, path: str | None) -> dict[str, Any]:
    return {"title": title, "path": path} if path else {"title": title}


def _path(*parts: str) -> str:
    return "/".join(quote(part, safe="") for part in parts)


class AsyncConchClient:
    """The same API for a kernel's event loop (the chat widget follows a chat with it).

    Errors are ConchClientError with the same words as ConchClient's. Beyond the chat API it
    speaks to outside agents and pairings, which Settings needs.
    """

    def __init__(
        self,
        server_url: str,
        *,
        kernel_key: str | None = None,
        token: str | None = None,
        timeout: float = 30.0,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.api_url = server_url.rstrip("/") + "/conch/api/"
        self._http = httpx.AsyncClient(
            headers=_headers(kernel_key, token),
            timeout=timeout,
            trust_env=False,
            transport=transport,
        )

    @classmethod
    def from_environment(cls, env: Mapping[str, str] | None = None) -> AsyncConchClient:
        url, key, token = locate_server(env)
        return cls(url, kernel_key=key, token=token)

    async def aclose(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> AsyncConchClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    # --- your agents and chats ---

    async def agents(self) -> list[dict[str, Any]]:
        return list((await self._call("GET", "agents"))["agents"])

    async def create_agent(self, **body: Any) -> dict[str, Any]:
        return await self._call("POST", "agents", body)

    async def update_agent(self, agent_id: str, **changes: Any) -> dict[str, Any]:
        return await self._call("PATCH", _path("agents", agent_id), changes)

    async def delete_agent(self, agent_id: str) -> None:
        await self._call("DELETE", _path("agents", agent_id))

    async def conversations(self) -> list[dict[str, Any]]:
        return list((await self._call("GET", "conversations"))["conversations"])

    async def create_conversation(self, title: str = "", path: str | None = None) -> dict[str, Any]:
        return await self._call("POST", "conversations", _new_chat(title, path))

    async def conversation(self, conversation_id: str) -> dict[str, Any]:
        return await self._call("GET", _path("conversations", conversation_id))

    async def send(self, conversation_id: str, text: str) -> str:
        path = _path("conversations", conversation_id) + "/messages"
        return str((await self._call("POST", path, {"text": text}))["message_id"])

    async def stop(self, conversation_id: str) -> bool:
        path = _path("conversations", conversation_id) + "/round/stop"
        return bool((await self._call("POST", path))["stopped"])

    async def follow(self, conversation_id: str) -> AsyncIterator[dict[str, Any]]:
        """The chat's live stream: a snapshot first, then messages, events, deltas, round state.

        It ends when the server ends the stream (a follower that fell behind is dropped and
        should follow again, starting from a new snapshot).
        """
        url = self.api_url + _path("conversations", conversation_id) + "/events"
        try:
            async with self._http.stream(
                "GET", url, timeout=httpx.Timeout(30.0, read=None)
            ) as response:
                if response.status_code >= 400:
                    await response.aread()
                    raise _error(response)
                async for event in response_events(response):
                    try:
                        yield event.json()
                    except ValueError:
                        continue  # not an item of ours; the stream goes on
        except httpx.HTTPError as error:
            raise _unreachable(error) from None

    # --- outside agents and pairings (Settings) ---

    async def outside(self) -> list[dict[str, Any]]:
        return _rows(await self._call("GET", "outside"), "outside")

    async def add_outside(self, paste: str, name: str | None = None) -> dict[str, Any]:
        """Add an outside agent; `name` is yours to give (needed when its card's name clashes
        with one of your agents')."""
        body = {"paste": paste} if name is None else {"paste": paste, "name": name}
        return await self._call("POST", "outside", body)

    async def rename_outside(self, outside_id: str, name: str) -> dict[str, Any]:
        return await self._call("PATCH", _path("outside", outside_id), {"name": name})

    async def delete_outside(self, outside_id: str) -> None:
        await self._call("DELETE", _path("outside", outside_id))

    async def repair_outside(self) -> list[dict[str, Any]]:
        return _rows(await self._call("POST", "outside/repair"), "outside")

    async def pairings(self) -> list[dict[str, Any]]:
        return list((await self._call("GET", "pairings"))["pairings"])

    async def create_pairing(self, agents: list[str], *, remote: bool = False) -> dict[str, Any]:
        return await self._call("POST", "pairings", {"agents": agents, "remote": remote})

    async def delete_pairing(self, pairing_id: str) -> None:
        await self._call("DELETE", _path("pairings", pairing_id))

    async def pairing_chats(self, pairing_id: str) -> list[dict[str, Any]]:
        return list((await self._call("GET", _path("pairings", pairing_id) + "/chats"))["chats"])

    async def _call(self, method: str, path: str, body: Any = None) -> dict[str, Any]:
        try:
            response = await self._http.request(method, self.api_url + path, json=body)
        except httpx.HTTPError as error:
            raise _unreachable(error) from None
        return _answer(response)
