"""The pure half of the kernel-side clients (client.py): what each call of Conch's API sends,
how answers and errors are read, and where a kernel finds its server. It sends nothing itself.

`Call` is one request as data with the reader of its answer; `Calls` lists every call of the
API; `BaseConchClient` holds the address and headers and turns responses into answers or a
ConchClientError in words. The subclasses in client.py only send.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, TypeVar
from urllib.parse import quote, urlencode

import httpx

from .core.errors import ConchError
from .core.sse import SSEEvent

KERNEL_KEY_HEADER = "X-Conch-Kernel-Key"

# A live stream may be quiet for as long as no one writes; only connecting is bounded.
FOLLOW_TIMEOUT = httpx.Timeout(30.0, read=None)

T = TypeVar("T")
Client = TypeVar("Client", bound="BaseConchClient")
Answer = dict[str, Any]
Rows = list[dict[str, Any]]


class ConchClientError(ConchError):
    """The API said no, in words (`code` is the API's error code; `status` the HTTP status the
    server answered with, kept as it came)."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(code, message, status=status)

    def _render_traceback_(self) -> list[str]:
        # IPython shows this instead of a traceback: a refusal in words is not a crash.
        return [f"Conch: {self.message}"]


class ConchNotFound(ConchClientError):
    """No server with Conch was found: nobody answered, so `status` is 0 and `code` `no_server`."""

    def __init__(self, message: str) -> None:
        super().__init__(0, "no_server", message)


@dataclass(frozen=True)
class Call(Generic[T]):
    """One API request as data, and how its answer is read."""

    method: str
    path: str
    read: Callable[[Answer], T]
    body: Any = None


def _path(*parts: str, **query: str | int | None) -> str:
    path = "/".join(quote(part, safe="") for part in parts)
    given = {k: str(v) for k, v in query.items() if v is not None}
    return f"{path}?{urlencode(given)}" if given else path


def _rows(key: str) -> Callable[[Answer], Rows]:
    """A reader for the list an answer holds under `key` (e.g. {"outside": [...]})."""

    def read(answer: Answer) -> Rows:
        rows = answer.get(key)
        if not isinstance(rows, list):
            raise ConchClientError(200, "bad_answer", f"The server's answer had no {key} list.")
        return rows

    return read


def _field(key: str, kind: Callable[[Any], T]) -> Callable[[Answer], T]:
    return lambda answer: kind(answer[key])


def _whole(answer: Answer) -> Answer:
    return answer


def _nothing(answer: Answer) -> None:
    return None


_stopped = _field("stopped", bool)


class Calls:
    """Every call of the API, as data; both clients send these."""

    agents = Call("GET", "agents", _rows("agents"))
    conversations = Call("GET", "conversations", _rows("conversations"))
    outside = Call("GET", "outside", _rows("outside"))
    repair_outside = Call("POST", "outside/repair", _rows("outside"))
    pairings = Call("GET", "pairings", _rows("pairings"))
    policy = Call("GET", "policy", _whole)  # {"locked": {...}}: what the administrator locked

    @staticmethod
    def create_agent(body: dict[str, Any]) -> Call[Answer]:
        return Call("POST", "agents", _whole, body)

    @staticmethod
    def update_agent(agent_id: str, changes: dict[str, Any]) -> Call[Answer]:
        return Call("PATCH", _path("agents", agent_id), _whole, changes)

    @staticmethod
    def delete_agent(agent_id: str) -> Call[None]:
        return Call("DELETE", _path("agents", agent_id), _nothing)

    @staticmethod
    def create_conversation(title: str, path: str | None) -> Call[Answer]:
        body = {"title": title, "path": path} if path else {"title": title}
        return Call("POST", "conversations", _whole, body)

    @staticmethod
    def conversation(
        conversation_id: str, limit: int | None = None, before: str | None = None
    ) -> Call[Answer]:
        """The chat whole, or with `limit` a page of it: the last `limit` messages before the
        message `before`, with `earlier` saying whether there are more (DESIGN.md "Long chats")."""
        path = _path("conversations", conversation_id, limit=limit, before=before)
        return Call("GET", path, _whole)

    @staticmethod
    def conversations_page(limit: int, before: str | None = None) -> Call[Answer]:
        """A page of the chat list, newest first: {"conversations", "next"}."""
        return Call("GET", _path("conversations", limit=limit, before=before), _whole)

    @staticmethod
    def send(conversation_id: str, text: str) -> Call[str]:
        path = _path("conversations", conversation_id, "messages")
        return Call("POST", path, _field("message_id", str), {"text": text})

    @staticmethod
    def take_handed(kernel_id: str, proof: str, wait: float) -> Call[Answer]:
        """The hand-over (`answered()`): this kernel's next approved run, {"run": … or None}."""
        body = {"proof": proof, "wait": wait}
        return Call("POST", _path("kernels", kernel_id, "handed"), _whole, body)

    @staticmethod
    def give_handed(
        kernel_id: str, proof: str, run_id: str, output: str, total: int, failed: bool
    ) -> Call[Answer]:
        body = {"proof": proof, "output": output, "total": total, "failed": failed}
        return Call("POST", _path("kernels", kernel_id, "handed", run_id), _whole, body)

    @staticmethod
    def stop(conversation_id: str) -> Call[bool]:
        return Call("POST", _path("conversations", conversation_id, "round", "stop"), _stopped)

    @staticmethod
    def continue_round(conversation_id: str) -> Call[Answer]:
        path = _path("conversations", conversation_id, "round", "continue")
        return Call("POST", path, _whole)

    @staticmethod
    def add_outside(paste: str, name: str | None) -> Call[Answer]:
        body = {"paste": paste} if name is None else {"paste": paste, "name": name}
        return Call("POST", "outside", _whole, body)

    @staticmethod
    def rename_outside(outside_id: str, name: str) -> Call[Answer]:
        return Call("PATCH", _path("outside", outside_id), _whole, {"name": name})

    @staticmethod
    def accept_outside_key(outside_id: str, thumbprint: str | None = None) -> Call[Answer]:
        """The key the outside agent's card now shows (or its being unsigned) replaces the one
        pinned when it was added — if `thumbprint` is given, only when it is that key (the
        user's own request: the kernel key is refused)."""
        body: dict[str, Any] = {"accept_key": True}
        if thumbprint is not None:
            body["thumbprint"] = thumbprint
        return Call("POST", _path("outside", outside_id, "repair"), _whole, body)

    @staticmethod
    def delete_outside(outside_id: str) -> Call[None]:
        return Call("DELETE", _path("outside", outside_id), _nothing)

    @staticmethod
    def create_pairing(agents: list[str], remote: bool) -> Call[Answer]:
        return Call("POST", "pairings", _whole, {"agents": agents, "remote": remote})

    @staticmethod
    def delete_pairing(pairing_id: str) -> Call[None]:
        return Call("DELETE", _path("pairings", pairing_id), _nothing)

    @staticmethod
    def pairing_chats(pairing_id: str) -> Call[Rows]:
        return Call("GET", _path("pairings", pairing_id, "chats"), _rows("chats"))


# How many messages a page holds when the clients read a chat, or the chat list, page by page.
PAGE = 500


@dataclass
class StreamPlace:
    """Where a followed stream stands: the SSE id of the last stored item it delivered. Give
    the same one to the next follow and it resumes there, without the chat again."""

    id: str = ""

    def passed(self, event: SSEEvent) -> None:
        if event.id:
            self.id = event.id


def joined(pages: list[Answer]) -> Answer:
    """A chat read page by page (newest page first), as one answer: the newest page's live
    parts, with every page's messages, events and ledger rows in order."""
    if not pages:
        raise ConchClientError(200, "bad_answer", "The server gave no page of the chat.")
    whole = dict(pages[0])
    for key in ("messages", "events", "spend"):
        whole[key] = [row for page in reversed(pages) for row in page.get(key, [])]
    whole["earlier"] = False
    return whole


def page_before(page: Answer) -> str | None:
    """The message the next (earlier) page ends before, or None when this page is the first."""
    messages = page.get("messages") or []
    return str(messages[0]["id"]) if page.get("earlier") and messages else None


class BaseConchClient:
    """What both clients share, with no I/O: the address, the headers, the words of errors."""

    def __init__(
        self, server_url: str, *, kernel_key: str | None = None, token: str | None = None
    ) -> None:
        self.api_url = server_url.rstrip("/") + "/conch/api/"
        self.headers = _headers(kernel_key, token)

    @property
    def reads_only(self) -> bool:
        """Whether this client holds only the kernel key: it reads, writes in a chat and stops a
        round; every other change is the user's own, from their page (DESIGN.md)."""
        return KERNEL_KEY_HEADER in self.headers

    @classmethod
    def from_environment(cls: type[Client], env: Mapping[str, str] | None = None) -> Client:
        url, key, token = locate_server(env)
        return cls(url, kernel_key=key, token=token)

    def request(self, call: Call[Any]) -> tuple[str, str, Any]:
        """(method, url, JSON body) for a call."""
        return call.method, self.api_url + call.path, call.body

    def follow_url(self, conversation_id: str, limit: int | None = None) -> str:
        return self.api_url + _path("conversations", conversation_id, "events", limit=limit)

    @staticmethod
    def follow_headers(place: StreamPlace | None) -> dict[str, str]:
        """A stream that resumes says where it stood (SSE's own Last-Event-ID)."""
        return {"Last-Event-ID": place.id} if place is not None and place.id else {}

    @staticmethod
    def answer(response: httpx.Response) -> Answer:
        """An answer's JSON object, or the API's error in words."""
        if response.status_code >= 400:
            raise BaseConchClient.error(response)
        try:
            answer: Any = response.json() if response.content else {}
        except ValueError:
            answer = None
        if not isinstance(answer, dict):
            raise ConchClientError(response.status_code, "bad_answer", "The answer was not JSON.")
        return answer

    @staticmethod
    def error(response: httpx.Response) -> ConchClientError:
        """The API's error (its JSON shape {"error": {"code", "message"}}), or the status."""
        try:
            error = response.json()["error"]
            code, message = str(error["code"]), str(error["message"])
        except (ValueError, KeyError, TypeError):
            code, message = "http_error", f"HTTP {response.status_code}"
        return ConchClientError(response.status_code, code, message)

    @staticmethod
    def unreachable(error: httpx.HTTPError) -> ConchClientError:
        return ConchClientError(0, "unreachable", f"Conch's server did not answer: {error}")

    @staticmethod
    def item(event: SSEEvent) -> dict[str, Any] | None:
        """A followed chat's item, or None for an event that is not one of ours."""
        try:
            return event.json()
        except ValueError:
            return None


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
