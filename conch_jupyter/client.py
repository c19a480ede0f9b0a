"""The kernel side's way to the server's Conch API: ConchClient (blocking) and AsyncConchClient.

A kernel started by a Jupyter server that runs Conch inherits CONCH_SERVER_URL and
CONCH_KERNEL_KEY; the key opens conch/api/ and nothing else. A kernel started before Conch loaded
falls back to finding its server among the running ones by JPY_PARENT_PID and using its token.

Shaped like httpx's clients: `BaseConchClient` (client_base.py) does everything but I/O —
where the API is, what each call sends (a `Call`) and how each answer and error is read — and
the two subclasses only send: ConchClient for plain code, AsyncConchClient for the kernel's
event loop, where the chat widget follows a chat's live stream without holding the kernel up.
Both accept an httpx transport, the one I/O seam. Each API method is one line in each subclass,
over one `Call`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any, TypeVar

import httpx

from .client_base import (
    FOLLOW_TIMEOUT,
    KERNEL_KEY_HEADER,
    PAGE,
    Answer,
    BaseConchClient,
    Call,
    Calls,
    ConchClientError,
    ConchNotFound,
    Rows,
    StreamPlace,
    joined,
    locate_server,
    page_before,
)
from .core.sse import aiter_events, iter_events

__all__ = [
    "KERNEL_KEY_HEADER",
    "AsyncConchClient",
    "BaseConchClient",
    "Call",
    "Calls",
    "ConchClient",
    "ConchClientError",
    "ConchNotFound",
    "StreamPlace",
    "locate_server",
]

T = TypeVar("T")


class ConchClient(BaseConchClient):
    """Blocking calls, for plain code (the %conch magic)."""

    def __init__(
        self,
        server_url: str,
        *,
        kernel_key: str | None = None,
        token: str | None = None,
        timeout: float = 30.0,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        super().__init__(server_url, kernel_key=kernel_key, token=token)
        self._http = httpx.Client(
            headers=self.headers, timeout=timeout, trust_env=False, transport=transport
        )

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> ConchClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def do(self, call: Call[T]) -> T:
        method, url, body = self.request(call)
        try:
            response = self._http.request(method, url, json=body)
        except httpx.HTTPError as error:
            raise self.unreachable(error) from None
        return call.read(self.answer(response))

    def follow(
        self, conversation_id: str, limit: int | None = None, place: StreamPlace | None = None
    ) -> Iterator[dict[str, Any]]:
        """The chat's live stream: a snapshot first (with `limit`, of its last messages), then
        messages, events, deltas, round state.

        It ends when the server ends the stream (a follower that fell behind is dropped and
        should follow again). With a `place`, following again resumes where the last stream
        stood: what it missed, then `resumed` (the chat's live parts), not a new snapshot.
        """
        try:
            with self._http.stream(
                "GET",
                self.follow_url(conversation_id, limit),
                timeout=FOLLOW_TIMEOUT,
                headers=self.follow_headers(place),
            ) as response:
                if response.status_code >= 400:
                    response.read()
                    raise self.error(response)
                for event in iter_events(response):
                    if (item := self.item(event)) is not None:
                        if place is not None:
                            place.passed(event)
                        yield item
        except httpx.HTTPError as error:
            raise self.unreachable(error) from None

    # --- your agents and chats ---

    def agents(self) -> Rows:
        return self.do(Calls.agents)

    def create_agent(self, **body: Any) -> Answer:
        return self.do(Calls.create_agent(body))

    def update_agent(self, agent_id: str, **changes: Any) -> Answer:
        return self.do(Calls.update_agent(agent_id, changes))

    def delete_agent(self, agent_id: str) -> None:
        self.do(Calls.delete_agent(agent_id))

    def conversations(self) -> Rows:
        """Every chat, newest first (read page by page)."""
        rows: Rows = []
        before: str | None = None
        while True:
            page = self.do(Calls.conversations_page(PAGE, before))
            rows += page["conversations"]
            if not (before := page.get("next")):
                return rows

    def create_conversation(self, title: str = "", path: str | None = None) -> Answer:
        """A new chat; with `path`, it belongs to that notebook (its agents work in its kernel)."""
        return self.do(Calls.create_conversation(title, path))

    def conversation(
        self, conversation_id: str, limit: int | None = None, before: str | None = None
    ) -> Answer:
        """The chat: whole (read page by page, so no one request is long), or with `limit` one
        page of it: the last `limit` messages before the message `before`, and `earlier`."""
        if limit is not None:
            return self.do(Calls.conversation(conversation_id, limit, before))
        return joined(list(self.pages(conversation_id)))

    def pages(self, conversation_id: str, size: int = PAGE) -> Iterator[Answer]:
        """The chat a page at a time, newest first, back to its first message."""
        before: str | None = None
        while True:
            page = self.do(Calls.conversation(conversation_id, size, before))
            yield page
            if (before := page_before(page)) is None:
                return

    def send(self, conversation_id: str, text: str) -> str:
        return self.do(Calls.send(conversation_id, text))

    def stop(self, conversation_id: str) -> bool:
        return self.do(Calls.stop(conversation_id))

    def continue_round(self, conversation_id: str) -> Answer:
        """Continue the last round, stopped at its bound: with the kernel key, the chat asks the
        user first (`{"asking": call_id}`); with the token, `{"named", "continues": true}`."""
        return self.do(Calls.continue_round(conversation_id))

    def take_handed(self, kernel_id: str, proof: str, wait: float) -> Answer:
        """As AsyncConchClient.take_handed (answered()'s question), blocking."""
        return self.do(Calls.take_handed(kernel_id, proof, wait))

    def give_handed(
        self, kernel_id: str, proof: str, run_id: str, output: str, total: int, failed: bool
    ) -> Answer:
        """As AsyncConchClient.give_handed, blocking."""
        return self.do(Calls.give_handed(kernel_id, proof, run_id, output, total, failed))

    # --- outside agents and pairings ---

    def outside(self) -> Rows:
        return self.do(Calls.outside)

    def add_outside(self, paste: str, name: str | None = None) -> Answer:
        """Add an outside agent; `name` is yours to give (needed when its card's name clashes
        with one of your agents')."""
        return self.do(Calls.add_outside(paste, name))

    def rename_outside(self, outside_id: str, name: str) -> Answer:
        return self.do(Calls.rename_outside(outside_id, name))

    def delete_outside(self, outside_id: str) -> None:
        self.do(Calls.delete_outside(outside_id))

    def accept_outside_key(self, outside_id: str, thumbprint: str | None = None) -> Answer:
        return self.do(Calls.accept_outside_key(outside_id, thumbprint))

    def repair_outside(self) -> Rows:
        return self.do(Calls.repair_outside)

    def pairings(self) -> Rows:
        return self.do(Calls.pairings)

    def policy(self) -> Answer:
        """What the server's administrator locked: {"locked": {key: value}}."""
        return self.do(Calls.policy)

    def create_pairing(self, agents: list[str], *, remote: bool = False) -> Answer:
        return self.do(Calls.create_pairing(agents, remote))

    def delete_pairing(self, pairing_id: str) -> None:
        self.do(Calls.delete_pairing(pairing_id))

    def pairing_chats(self, pairing_id: str) -> Rows:
        return self.do(Calls.pairing_chats(pairing_id))


class AsyncConchClient(BaseConchClient):
    """The same API for a kernel's event loop (the widgets use it), with the same words."""

    def __init__(
        self,
        server_url: str,
        *,
        kernel_key: str | None = None,
        token: str | None = None,
        timeout: float = 30.0,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        super().__init__(server_url, kernel_key=kernel_key, token=token)
        self._http = httpx.AsyncClient(
            headers=self.headers, timeout=timeout, trust_env=False, transport=transport
        )

    async def aclose(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> AsyncConchClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def do(self, call: Call[T]) -> T:
        method, url, body = self.request(call)
        try:
            response = await self._http.request(method, url, json=body)
        except httpx.HTTPError as error:
            raise self.unreachable(error) from None
        return call.read(self.answer(response))

    async def follow(
        self, conversation_id: str, limit: int | None = None, place: StreamPlace | None = None
    ) -> AsyncIterator[dict[str, Any]]:
        """The chat's live stream, as ConchClient.follow gives it."""
        try:
            async with self._http.stream(
                "GET",
                self.follow_url(conversation_id, limit),
                timeout=FOLLOW_TIMEOUT,
                headers=self.follow_headers(place),
            ) as response:
                if response.status_code >= 400:
                    await response.aread()
                    raise self.error(response)
                async for event in aiter_events(response):
                    if (item := self.item(event)) is not None:
                        if place is not None:
                            place.passed(event)
                        yield item
        except httpx.HTTPError as error:
            raise self.unreachable(error) from None

    # --- your agents and chats ---

    async def agents(self) -> Rows:
        return await self.do(Calls.agents)

    async def create_agent(self, **body: Any) -> Answer:
        return await self.do(Calls.create_agent(body))

    async def update_agent(self, agent_id: str, **changes: Any) -> Answer:
        return await self.do(Calls.update_agent(agent_id, changes))

    async def delete_agent(self, agent_id: str) -> None:
        await self.do(Calls.delete_agent(agent_id))

    async def conversations(self) -> Rows:
        """Every chat, newest first (read page by page)."""
        rows: Rows = []
        before: str | None = None
        while True:
            page = await self.do(Calls.conversations_page(PAGE, before))
            rows += page["conversations"]
            if not (before := page.get("next")):
                return rows

    async def create_conversation(self, title: str = "", path: str | None = None) -> Answer:
        return await self.do(Calls.create_conversation(title, path))

    async def conversation(
        self, conversation_id: str, limit: int | None = None, before: str | None = None
    ) -> Answer:
        """As ConchClient.conversation: whole (page by page), or one page with `limit`."""
        if limit is not None:
            return await self.do(Calls.conversation(conversation_id, limit, before))
        return joined([page async for page in self.pages(conversation_id)])

    async def pages(self, conversation_id: str, size: int = PAGE) -> AsyncIterator[Answer]:
        """The chat a page at a time, newest first, back to its first message."""
        before: str | None = None
        while True:
            page = await self.do(Calls.conversation(conversation_id, size, before))
            yield page
            if (before := page_before(page)) is None:
                return

    async def send(self, conversation_id: str, text: str) -> str:
        return await self.do(Calls.send(conversation_id, text))

    async def stop(self, conversation_id: str) -> bool:
        return await self.do(Calls.stop(conversation_id))

    async def continue_round(self, conversation_id: str) -> Answer:
        """As ConchClient.continue_round."""
        return await self.do(Calls.continue_round(conversation_id))

    async def take_handed(self, kernel_id: str, proof: str, wait: float) -> Answer:
        """answered()'s question: this kernel's next approved run ({"run": {"id", "code"}} or
        {"run": None} after `wait` seconds)."""
        return await self.do(Calls.take_handed(kernel_id, proof, wait))

    async def give_handed(
        self, kernel_id: str, proof: str, run_id: str, output: str, total: int, failed: bool
    ) -> Answer:
        """What the handed run printed, given back as that run's result."""
        return await self.do(Calls.give_handed(kernel_id, proof, run_id, output, total, failed))

    # --- outside agents and pairings (Settings) ---

    async def outside(self) -> Rows:
        return await self.do(Calls.outside)

    async def add_outside(self, paste: str, name: str | None = None) -> Answer:
        """Add an outside agent; `name` is yours to give (needed when its card's name clashes
        with one of your agents')."""
        return await self.do(Calls.add_outside(paste, name))

    async def rename_outside(self, outside_id: str, name: str) -> Answer:
        return await self.do(Calls.rename_outside(outside_id, name))

    async def delete_outside(self, outside_id: str) -> None:
        await self.do(Calls.delete_outside(outside_id))

    async def accept_outside_key(self, outside_id: str, thumbprint: str | None = None) -> Answer:
        return await self.do(Calls.accept_outside_key(outside_id, thumbprint))

    async def repair_outside(self) -> Rows:
        return await self.do(Calls.repair_outside)

    async def pairings(self) -> Rows:
        return await self.do(Calls.pairings)

    async def policy(self) -> Answer:
        """What the server's administrator locked: {"locked": {key: value}}."""
        return await self.do(Calls.policy)

    async def create_pairing(self, agents: list[str], *, remote: bool = False) -> Answer:
        return await self.do(Calls.create_pairing(agents, remote))

    async def delete_pairing(self, pairing_id: str) -> None:
        await self.do(Calls.delete_pairing(pairing_id))

    async def pairing_chats(self, pairing_id: str) -> Rows:
        return await self.do(Calls.pairing_chats(pairing_id))
