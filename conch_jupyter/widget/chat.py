"""ChatWidget: one chat, followed live from the kernel, and `this_chat()` for %conch.

The kernel tells the view which chat it shows (`conversation_id`). Where the page was served by
the Jupyter server running Conch, the view then follows the chat and sends and stops by itself
(js/chat-source.js), so it stays live while the kernel is busy or gone. For the Python API
(`post`, `stop_round`, `settled`, `messages`) and for front ends without such a server (the
relay), a task on the kernel's event loop also follows the server's event stream. It builds no
timeline: it keeps the stream's raw items (stream.py) in the `stream` trait, and the relayed view
feeds them into the same state a stream it reads itself feeds (js/timeline.js builds the items,
once); it sends "send" and "stop" here. If the stream drops, it resumes where it stood (the
server sends what it missed, not the chat again). It follows from a page of the last messages.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections.abc import Mapping
from typing import Any

import traitlets

from ..client import AsyncConchClient, ConchClient, ConchClientError, StreamPlace
from .base import Action, ClientFactory, KernelWidget, running_loop
from .handover import ThisKernel, run_here, this_kernel
from .stream import ChatStream, Item

TITLE_LIMIT = 200
NO_NOTEBOOK_TITLE = "Chat without a notebook"
READY_WAIT = 5.0  # seconds a send waits for the live stream to be followed
# The kernel follows a chat from a page of its last messages, not the whole chat: opening a
# long chat costs the same as a short one (DESIGN.md "Long chats"); `messages` reads the rest.
FOLLOW_PAGE = 50
# The most a relayed view's page of earlier messages may ask for (the server's own bound).
EARLIER_LIMIT = 1_000
# What settled() reads each time it asks whether the chat is done: a page, not the chat.
SETTLED_PAGE = 20
# How long answered()'s one question for a handed run waits at the server.
HANDED_WAIT = 0.25
WHAT_IT_DOES = {
    "run_code": "run code in this kernel",
    "run_cell": "run a cell",
    "add_cell": "add a cell",
    "edit_cell": "change a cell",
    "delete_cell": "delete a cell",
}


def _what_it_asks(ask: dict[str, Any]) -> str:
    """ "Writer asks to run code in this kernel (press Run or Don't run)"."""
    doing = WHAT_IT_DOES.get(str(ask.get("tool")), f"use {ask.get('tool') or 'a tool'}")
    return f"{ask.get('name') or ask.get('agent') or 'an agent'} asks to {doing}"


class ChatWidget(KernelWidget):
    """A chat drawn live: replies stream in, rounds show as cards, Stop ends them."""

    conversation_id = traitlets.Unicode("").tag(sync=True)
    # The stream's raw items for a relayed view: the latest snapshot, then every item since.
    stream = traitlets.List(traitlets.Dict()).tag(sync=True)
    notice = traitlets.Unicode("").tag(sync=True)
    problem = traitlets.Unicode("").tag(sync=True)

    def __init__(
        self, conversation_id: str, *, client_factory: ClientFactory | None = None, **kwargs: Any
    ) -> None:
        super().__init__(
            client_factory=client_factory, view="chat", conversation_id=conversation_id, **kwargs
        )
        self._chat = ChatStream()
        # Sends and stops go out in the order they were asked for, and a send waits until the
        # follower has its snapshot, so the reply it starts streams here from its first word.
        self._order = asyncio.Lock()
        self._ready = asyncio.Event()
        self._following = running_loop() is not None
        # Whether a view draws this chat from the kernel (the relay): only then does each chunk
        # of a streaming reply go to the front end, as a message of its own (a view that talks
        # to the server itself gets them from there; the Python API needs only whole messages).
        self._relaying = False
        # The messages before the followed page, read once: (the followed page's first, them).
        self._before_first: tuple[str, list[Item]] = ("", [])
        self.spawn(self._follow() if self._following else self._load())

    @property
    def messages(self) -> list[Item]:
        """The chat's messages as the server stored them, as far as the stream has brought them:
        those before the page it opened with are read from the server (once) when asked for."""
        followed = list(self._chat.messages.values())
        if self._chat.earlier and followed:
            first = str(followed[0]["id"])
            if self._before_first[0] != first:
                with ConchClient.from_environment() as client:
                    earlier = client.conversation(self.conversation_id, 1_000, first)
                    pages = [earlier]
                    while earlier.get("earlier") and earlier["messages"]:
                        before = str(earlier["messages"][0]["id"])
                        earlier = client.conversation(self.conversation_id, 1_000, before)
                        pages.append(earlier)
                older = [m for page in reversed(pages) for m in page["messages"]]
                self._before_first = (first, older)
            return [*self._before_first[1], *followed]
        return followed

    @property
    def round(self) -> Item | None:
        """The running round's live state ({speaker, replies, limit}), or None."""
        return self._chat.round

    # --- what Python code can do ---

    def post(self, text: str) -> None:
        """Send a message to the chat, as the composer does (a problem shows in `problem`).

        It is sent before this returns, not on the kernel's event loop: a long cell run after
        it (a training run, a query) cannot hold the message back."""
        if not text.strip():
            return
        rnd = self._chat.round
        try:
            with ConchClient.from_environment() as client:
                client.send(self.conversation_id, text)
        except ConchClientError as error:
            if error.code == "no_server":
                raise
            self.problem = error.message
            return
        self._sent(rnd)

    def stop_round(self) -> None:
        """End the running round at once, as the card's Stop does."""
        with ConchClient.from_environment() as client:
            stopped = client.stop(self.conversation_id)
        self.notice = "" if stopped else "No round is running."

    async def settled(self, timeout: float = 120.0) -> None:
        """Wait until the chat has answered everything — or until it waits for you: a run that
        asks for your yes, or one waiting for the kernel, which this very cell holds (the cell
        must end before the agent's code can run in it). `answered()` waits for your answer."""
        deadline = time.monotonic() + timeout
        await self.acting()  # what was sent from here has reached the server
        while True:
            chat = await self.client().conversation(self.conversation_id, SETTLED_PAGE)
            waiting_for_you = (
                chat.get("asking") or (chat.get("working") or {}).get("state") == "waiting"
            )
            if not chat["busy"] or waiting_for_you:
                break
            if time.monotonic() > deadline:
                raise TimeoutError(f"the chat was still answering after {timeout:.0f} s")
            await asyncio.sleep(0.2)
        await self._caught_up(chat)

    async def answered(self, timeout: float = 600.0) -> None:
        """Wait for your answers in the chat, then until the chat has answered everything: for
        Run / Don't run (and every other yes the chat asks for), saying in this cell's output
        what it waits for. A run you approve meanwhile runs here, in this cell: the cell holds
        the kernel, so this is where the agent's code can run now (in your namespace, its
        output under this cell, Stop interrupts it as any run). With Run All, the cells after
        this one run after your answer."""
        deadline = time.monotonic() + timeout
        await self.acting()
        client, me = self.client(), this_kernel()
        told: set[str] = set()
        while True:
            chat = await client.conversation(self.conversation_id, SETTLED_PAGE)
            asking = chat.get("asking") or []
            if not chat["busy"] and not asking:
                break
            for ask in asking:
                if ask.get("call_id") not in told:
                    told.add(str(ask.get("call_id")))
                    # Flushed now: while this cell awaits, the kernel answers the view's messages,
                    # and text left in the buffer would go out under theirs.
                    print(f"Waiting for your answer in the chat: {_what_it_asks(ask)}.", flush=True)
            if time.monotonic() > deadline:
                raise TimeoutError(f"the chat still waited after {timeout:.0f} s")
            if me is None:
                await asyncio.sleep(0.2)
                continue
            took = await client.take_handed(me.kernel_id, me.proof, HANDED_WAIT)
            if took.get("run"):
                await self._run_handed(client, me, took["run"])
        await self._caught_up(chat)

    async def switched_to(self, mode: str, timeout: float = 600.0) -> None:
        """Wait until you switch the chat to `mode` ("ask", "auto" or "read") in its header,
        saying in this cell's output what it waits for (only you can: the kernel key may not)."""
        if mode not in ("ask", "auto", "read"):
            raise ValueError(f"a chat's mode is ask, auto or read, not {mode!r}")
        deadline = time.monotonic() + timeout
        client, told = self.client(), False
        while (await client.conversation(self.conversation_id, 1)).get("mode") != mode:
            if not told:
                told = True
                words = f"Waiting for you to switch the chat to {mode.capitalize()} in its header."
                print(words, flush=True)
            if time.monotonic() > deadline:
                raise TimeoutError(f"the chat was not switched to {mode} in {timeout:.0f} s")
            await asyncio.sleep(0.2)

    async def _run_handed(
        self, client: AsyncConchClient, me: ThisKernel, run: dict[str, Any]
    ) -> None:
        """The approved run, here in the kernel's main thread (see handover.py)."""
        from IPython import get_ipython

        shell = get_ipython()
        namespace = shell.user_ns if shell is not None else {}
        ran = run_here(str(run["code"]), namespace)
        given = (me.kernel_id, me.proof, str(run["id"]), ran.output, ran.total, ran.failed)
        try:
            await client.give_handed(*given)
        except KeyboardInterrupt:  # Stop's interrupt after the run ended: it ended already
            await client.give_handed(*given)

    async def _caught_up(self, chat: dict[str, Any]) -> None:
        # Give the live stream a moment to bring the last items here too (a round's end comes
        # after its last message: the relayed view folds its card only once it is here).
        stored = {str(m["id"]) for m in chat["messages"]}
        events = {int(e["seq"]) for e in chat.get("events", [])}
        for _ in range(50):
            here = stored <= self._chat.messages.keys() and events <= self._chat.events
            if here and not self._chat.streaming:
                return
            await asyncio.sleep(0.05)

    # --- the view's messages ---

    def actions(self) -> Mapping[str, Action]:
        return {
            "send": self._post,
            "stop": self._stop,
            "refresh": self._refresh,
            "relay": self._relay,
            "earlier": self._earlier,
        }

    def say_problem(self, words: str) -> None:
        self.problem = words

    async def _post(self, content: dict[str, Any]) -> None:
        text = str(content.get("text", ""))
        if not text.strip():
            return
        async with self._order:
            if self._following:
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(self._ready.wait(), READY_WAIT)
            rnd = self._chat.round
            try:
                await self.client().send(self.conversation_id, text)
            except ConchClientError as error:
                self.problem = error.message
                self.send({"type": "send.failed", "text": text})
                return
        self._sent(rnd)

    def _sent(self, rnd: dict[str, Any] | None) -> None:
        self.problem = ""
        if rnd and rnd.get("speaker"):
            who = self._chat.name(str(rnd["speaker"]))
            self.notice = f"Your message ends the round once {who}'s reply is in."

    async def _stop(self, _content: dict[str, Any]) -> None:
        async with self._order:
            stopped = await self.client().stop(self.conversation_id)
        self.notice = "" if stopped else "No round is running."

    async def _relay(self, _content: dict[str, Any]) -> None:
        # A view begins to relay: from now on each chunk goes to the front end, and the trait
        # goes again with the chunks that came before (a view drawn late missed their messages).
        self._relaying = True
        self.stream = list(self._chat.items)

    async def _earlier(self, content: dict[str, Any]) -> None:
        # A relayed view scrolled up: the page before its oldest message, read here for it.
        before = str(content.get("before") or "")
        limit = content.get("limit")
        if not before or not isinstance(limit, int) or not 0 < limit <= EARLIER_LIMIT:
            return
        try:
            page = await self.client().conversation(self.conversation_id, limit, before)
        except ConchClientError as error:
            self.problem = error.message
            return
        self.send({"type": "item", "item": {"type": "earlier", "conversation": page}})

    async def _refresh(self, _content: dict[str, Any]) -> None:
        await self._load()

    # --- following the chat ---

    async def _load(self) -> None:
        chat = await self.client().conversation(self.conversation_id, FOLLOW_PAGE)
        self._take({"type": "snapshot", "conversation": chat})

    async def _follow(self) -> None:
        delay = 0.5
        # Following again after a drop resumes where the stream stood: not the chat again.
        place = StreamPlace()
        while True:
            try:
                follow = self.client().follow(self.conversation_id, FOLLOW_PAGE, place)
                async for item in follow:
                    if item.get("type") in ("snapshot", "resumed"):
                        self.problem, delay = "", 0.5
                    self._take(item)
                    self._ready.set()
            except ConchClientError as error:
                if error.status == 404:
                    self.problem = "This chat is no longer on the server."
                    return
                if error.code == "no_server" or (400 <= error.status < 500 and error.status != 429):
                    self.problem = error.message
                    return
                self.problem = f"{error.message} Trying again…"
            await asyncio.sleep(delay)
            delay = min(delay * 2, 10.0)

    def _take(self, item: Item) -> None:
        changed = self._chat.take(item)
        if changed == "delta":
            if self._relaying:
                self.send({"type": "item", "item": item})
        elif changed == "items":
            with self.hold_sync():
                if item.get("type") == "event" and item["event"].get("type") == "round.ended":
                    self.notice = ""
                # The chat's items go to the page only for a view that draws through the
                # kernel: a view that talks to the server itself reads them from there.
                if self._relaying:
                    self.stream = list(self._chat.items)


# --- this notebook's chat ---------------------------------------------------------------------

_CHATS: dict[str, ChatWidget] = {}


def notebook_title(env: Mapping[str, str] | None = None) -> str:
    """The title of this notebook's chat: the notebook's path (Jupyter tells the kernel)."""
    env = os.environ if env is None else env
    path = env.get("JPY_SESSION_NAME", "").strip()
    return path[-TITLE_LIMIT:] if path else NO_NOTEBOOK_TITLE


def notebook_path(env: Mapping[str, str] | None = None) -> str | None:
    """This kernel's notebook as a path under the server's root (as the API spells it), or None.

    JupyterLab starts a notebook's kernel with JPY_SESSION_NAME set to the notebook's full path
    on disk (the kernel's folder joined with the notebook's name); the server's root, which
    Conch gives its kernels, makes it relative again. A path outside the root is no notebook.
    """
    env = os.environ if env is None else env
    path = env.get("JPY_SESSION_NAME", "").strip()
    if not path or not os.path.isabs(path):
        return path or None
    root = env.get("CONCH_ROOT_DIR", "").strip()
    if not root:
        return None
    relative = os.path.relpath(os.path.realpath(path), os.path.realpath(root))
    if relative == "." or relative.split(os.sep)[0] == "..":
        return None
    return relative.replace(os.sep, "/")


def this_chat_id(client: ConchClient, env: Mapping[str, str] | None = None) -> str:
    """The id of this notebook's chat on the server, made the first time it is asked for.

    A notebook's chat carries the notebook's path, so its agents work in this kernel; it is
    found again by that path (several chats may share a notebook: the newest is this one).
    """
    title = notebook_title(env)
    path = notebook_path(env)
    mine = [
        c
        for c in client.conversations()
        if c.get("path") == path and (path is not None or c.get("title") == title)
    ]
    if mine:
        return str(max(mine, key=lambda c: float(c.get("created", 0)))["id"])
    return str(client.create_conversation(title, path)["id"])


def this_chat(client: ConchClient | None = None) -> ChatWidget:
    """This notebook's chat widget: one per chat per kernel, shown again by each %conch."""
    if client is None:
        with ConchClient.from_environment() as own:
            conversation_id = this_chat_id(own)
    else:
        conversation_id = this_chat_id(client)
    widget = _CHATS.get(conversation_id)
    if widget is None or widget.comm is None:  # never made, or closed since
        widget = _CHATS[conversation_id] = ChatWidget(conversation_id)
    return widget
