"""What both widgets share on the kernel side: the view's two built files (static/, made from
js/ at build time), a client for the server, work run on the kernel's event loop, and the one
dispatcher for the view's messages (the relay, where the view cannot reach the server itself).

Python owns the state (synced traits); the view only draws it and sends actions as custom
messages {"type": ..., ...}. Each action is a coroutine run on the kernel's event loop, so a slow
server never holds the kernel up. Outside a kernel (plain IPython, no running loop) the work runs
to its end at once instead, with a client of its own.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from pathlib import Path
from typing import Any

import anywidget
import traitlets

from ..client import AsyncConchClient, ConchClientError

log = logging.getLogger(__name__)

STATIC = Path(__file__).resolve().parent / "static"
ClientFactory = Callable[[], AsyncConchClient]
Action = Callable[[dict[str, Any]], Awaitable[None]]
Work = Coroutine[Any, Any, None]


def running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


class KernelWidget(anywidget.AnyWidget):
    _esm = STATIC / "widget.js"
    _css = STATIC / "widget.css"

    # Which of the two views this model draws ("chat" or "settings").
    view = traitlets.Unicode("").tag(sync=True)

    def __init__(self, *, client_factory: ClientFactory | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._client_factory = client_factory or AsyncConchClient.from_environment
        self._client: AsyncConchClient | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._acting: set[asyncio.Task[None]] = set()
        self._loop = running_loop()
        self.on_msg(self._on_view_message)

    # --- for subclasses ---

    def actions(self) -> Mapping[str, Action]:
        """The view's message types and what each one does."""
        return {}

    def say_problem(self, words: str) -> None:
        """Show a problem in words (never a traceback)."""
        raise NotImplementedError

    def client(self) -> AsyncConchClient:
        if self._client is None:
            self._client = self._client_factory()
        return self._client

    def spawn(self, work: Work) -> asyncio.Task[None] | None:
        """Run work on the kernel's event loop (its task is returned); with no loop running,
        run it to its end now."""
        loop = running_loop()
        if loop is not None:
            task = loop.create_task(self._guarded(work))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
            return task
        if self._loop is not None and self._loop.is_running():  # called from another thread
            asyncio.run_coroutine_threadsafe(self._guarded(work), self._loop)
        else:
            asyncio.run(self._once(work))
        return None

    # --- plumbing ---

    def _on_view_message(self, _widget: Any, content: Any, _buffers: Any) -> None:
        if not isinstance(content, dict):
            return
        action = self.actions().get(str(content.get("type")))
        if action is not None:
            self.act(_call(action, content))

    def act(self, work: Work) -> None:
        """Spawn an action and keep track of it until it is done (see `acting`)."""
        task = self.spawn(work)
        if task is not None:
            self._acting.add(task)
            task.add_done_callback(self._acting.discard)

    async def acting(self) -> None:
        """Wait until every action asked for so far has been done."""
        while self._acting:
            await asyncio.gather(*list(self._acting), return_exceptions=True)

    async def _guarded(self, work: Work) -> None:
        try:
            await work
        except ConchClientError as error:
            self.say_problem(error.message)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("Conch widget: an action failed")
            self.say_problem("Something went wrong in the widget; the kernel's log says more.")

    async def _once(self, work: Work) -> None:
        # A loop of its own lives only as long as this call: so does its client.
        self._client = None
        try:
            await self._guarded(work)
        finally:
            if self._client is not None:
                await self._client.aclose()
            self._client = None

    def close(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        client, self._client = self._client, None
        loop = running_loop()
        if client is not None and loop is not None:
            loop.create_task(client.aclose())
        super().close()


async def _call(action: Action, content: dict[str, Any]) -> None:
    await action(content)
