"""The chat's kernel: found through the Jupyter server's own session and kernel managers, and
driven with jupyter_client's async client.

Owns everything Conch does to a kernel: finding the kernel of the session for a notebook's path,
running an agent's code in it (its output, errors and results as text, pictures as a one-line
mention), listing what it holds without side effects, asking for the inputs it ran, and
interrupting an agent's run (Stop, or the 60 s bound).

Theory of operation:
- One client per kernel, kept while the kernel lives; one agent call at a time per kernel (a
  lock), so the output of one run never mixes with another's.
- The user first: while the kernel is busy (the user's own cell), an agent's run waits for it to
  be idle before it is sent ("waiting for the kernel"), so an interrupt can only ever hit the
  agent's own code. It is sent with `stop_on_error=False`: when it is interrupted or fails, the
  kernel does not abort the execute requests queued after it (the user's cells).
- `list_variables` runs nothing of the user's: an empty, silent, history-free request whose
  user expression runs a helper in a namespace of its own, so no name is added to the kernel.
"""

from __future__ import annotations

import ast
import asyncio
import contextlib
import json
import queue
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from jupyter_client.session import Session
from jupyter_core.utils import ensure_async

from .rules import RUN_SECONDS, TIMEOUT_WORDS, Ending

# How often a waiting run looks again at the kernel's state.
POLL_SECONDS = 0.1
# How long to wait for the kernel to answer a read (history, variables), and to settle after
# an interrupt.
ANSWER_SECONDS = 10.0
SETTLE_SECONDS = 5.0
# A read waits this long for the user's running cell, then says the kernel is busy: a cell may
# itself be waiting for the chat (`await chat.settled()`), and reading must not deadlock it.
READ_WAIT_SECONDS = 5.0
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")

# Runs inside the kernel, in a namespace of its own (`ip` is the shell): the user's names,
# without IPython's own, underscores or modules, each with its type, shape or length, and repr.
_VARIABLES_SOURCE = """
import json, reprlib, types
short = reprlib.Repr()
short.maxstring = short.maxother = 80
hidden = ip.user_ns_hidden
rows = []
for name, value in list(ip.user_ns.items()):
    if name.startswith('_') or name in hidden or isinstance(value, types.ModuleType):
        continue
    size = ''
    try:
        shape = getattr(value, 'shape', None)
        if isinstance(shape, tuple):
            size = 'shape ' + str(shape)
        elif hasattr(value, '__len__') and not isinstance(value, type):
            size = 'len ' + str(len(value))
    except Exception:
        pass
    try:
        text = ' '.join(short.repr(value).split())
    except Exception as error:
        text = '<repr failed: ' + type(error).__name__ + '>'
    rows.append([name, type(value).__name__, size, text[:120]])
    if len(rows) >= 200:
        break
out = json.dumps(rows)
"""
_VARIABLES_EXPRESSION = (
    f"(lambda g: exec({_VARIABLES_SOURCE!r}, g) or g['out'])({{'ip': get_ipython()}})"
)


class NoKernel(Exception):
    """The chat's notebook has no running kernel (or the chat has no notebook)."""


class KernelBusy(Exception):
    """The user's own cell is still running: a read does not wait for it."""


@dataclass(frozen=True)
class RunResult:
    output: str
    ending: Ending


# What a run is doing, for the round card: "waiting" (for the user's cell) or "running".
OnState = Callable[[str], None]


class NotebookKernels:
    """The kernels of the server's notebooks, as the tools need them."""

    def __init__(
        self,
        *,
        sessions: Any,
        kernels: Any,
        contents: Any,
        run_seconds: float = RUN_SECONDS,
    ) -> None:
        # The server's SessionManager, MappingKernelManager and ContentsManager.
        self.sessions = sessions
        self.kernels = kernels
        self.contents = contents
        self.run_seconds = run_seconds
        self._clients: dict[str, Any] = {}
        self._locks: dict[str, asyncio.Lock] = {}

    async def kernel_id(self, path: str | None) -> str | None:
        """The kernel of the session for this notebook path, if one is running."""
        if not path:
            return None
        for session in await ensure_async(self.sessions.list_sessions()):
            kernel = session.get("kernel") or {}
            if session.get("path") == path and kernel.get("id") in self.kernels:
                state = getattr(self.kernels.get_kernel(kernel["id"]), "execution_state", "")
                if state != "dead":
                    return str(kernel["id"])
        return None

    async def notebook(self, path: str) -> dict[str, Any]:
        """The notebook as last saved (nbformat's JSON)."""
        model = await ensure_async(self.contents.get(path, content=True, type="notebook"))
        content: dict[str, Any] = json.loads(json.dumps(model["content"]))
        return content

    async def run(self, path: str | None, code: str, on_state: OnState) -> RunResult:
        """Run an agent's code in the notebook's kernel. Cancelling it interrupts the kernel."""
        kernel_id = await self._require(path)
        async with self._lock(kernel_id):
            # Wait first: a new client's handshake would itself queue behind the user's cell.
            await self._wait_idle(kernel_id, on_state)
            client = await self._client(kernel_id)
            on_state("running")
            msg_id = client.execute(
                code, store_history=True, allow_stdin=False, stop_on_error=False
            )
            parts: list[str] = []
            failed = False
            deadline = time.monotonic() + self.run_seconds
            try:
                failed = await self._collect(client, msg_id, parts, deadline)
            except TimeoutError:
                await self._interrupt(kernel_id)
                with contextlib.suppress(TimeoutError):
                    await self._collect(client, msg_id, [], time.monotonic() + SETTLE_SECONDS)
                return RunResult(_joined(parts) + TIMEOUT_WORDS, "timeout")
            except asyncio.CancelledError:
                # Stop: the agent's own code is what runs now (we waited for the user's cell).
                await asyncio.shield(self._interrupt(kernel_id))
                raise
            return RunResult(_joined(parts) or "(no output)", "failed" if failed else "ran")

    async def variables(self, path: str | None, on_state: OnState) -> list[list[str]]:
        """name, type, shape or length, short repr — of what the kernel holds."""
        kernel_id = await self._require(path)
        async with self._lock(kernel_id):
            await self._wait_idle(kernel_id, on_state, READ_WAIT_SECONDS)
            client = await self._client(kernel_id)
            msg_id = client.execute(
                "",
                silent=True,
                store_history=False,
                allow_stdin=False,
                user_expressions={"rows": _VARIABLES_EXPRESSION},
            )
            reply = await self._shell_reply(client, msg_id)
        found = reply["content"].get("user_expressions", {}).get("rows", {})
        if found.get("status") != "ok":
            raise NoKernel(f"The kernel could not list its variables ({found.get('ename')}).")
        rows: list[list[str]] = json.loads(ast.literal_eval(found["data"]["text/plain"]))
        return rows

    async def history(self, path: str | None) -> list[str]:
        """The inputs the kernel ran in this session, oldest first (the user's and agents')."""
        kernel_id = await self._require(path)
        async with self._lock(kernel_id):
            await self._wait_idle(kernel_id, lambda state: None, READ_WAIT_SECONDS)
            client = await self._client(kernel_id)
            msg_id = client.history(
                raw=True, output=False, hist_access_type="range", session=0, start=1, stop=None
            )
            reply = await self._shell_reply(client, msg_id)
        return [str(entry[2]) for entry in reply["content"].get("history", [])]

    async def close(self) -> None:
        for client in self._clients.values():
            client.stop_channels()
        self._clients.clear()

    # --- inside ---

    async def _require(self, path: str | None) -> str:
        kernel_id = await self.kernel_id(path)
        if kernel_id is None:
            raise NoKernel(path or "")
        return kernel_id

    def _lock(self, kernel_id: str) -> asyncio.Lock:
        return self._locks.setdefault(kernel_id, asyncio.Lock())

    async def _client(self, kernel_id: str) -> Any:
        client = self._clients.get(kernel_id)
        if client is None:
            manager = self.kernels.get_kernel(kernel_id)
            # A session of our own: a client sharing the manager's session id would share its
            # shell identity, and the kernel's replies would go to whichever connected last.
            own = Session(
                key=manager.session.key,
                signature_scheme=manager.session.signature_scheme,
                username="conch",
            )
            client = manager.client(session=own)
            client.start_channels()
            try:
                await client.wait_for_ready(timeout=ANSWER_SECONDS)
            except BaseException:
                client.stop_channels()
                raise
            self._clients[kernel_id] = client
        return client

    async def _wait_idle(
        self, kernel_id: str, on_state: OnState, limit: float | None = None
    ) -> None:
        """Wait for the user's running cell; with a `limit`, raise KernelBusy past it."""
        started, told = time.monotonic(), False
        while getattr(self.kernels.get_kernel(kernel_id), "execution_state", "idle") == "busy":
            if limit is not None and time.monotonic() - started > limit:
                raise KernelBusy(kernel_id)
            if not told:
                on_state("waiting")
                told = True
            await asyncio.sleep(POLL_SECONDS)

    async def _interrupt(self, kernel_id: str) -> None:
        with contextlib.suppress(Exception):  # a kernel that died meanwhile needs no interrupt
            await ensure_async(self.kernels.get_kernel(kernel_id).interrupt_kernel())

    async def _collect(self, client: Any, msg_id: str, parts: list[str], deadline: float) -> bool:
        """Gather the run's output until the kernel is idle again; True if the code raised."""
        failed = False
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError
            try:
                msg = await client.get_iopub_msg(timeout=min(left, 1.0))
            except queue.Empty:
                continue
            if msg.get("parent_header", {}).get("msg_id") != msg_id:
                continue  # the user's own cells, or another client's
            kind, content = msg["header"]["msg_type"], msg["content"]
            if kind == "status" and content.get("execution_state") == "idle":
                return failed
            if kind == "stream":
                parts.append(str(content.get("text", "")))
            elif kind in ("execute_result", "display_data"):
                parts.append(_shown(content.get("data") or {}))
            elif kind == "error":
                failed = True
                trace = "\n".join(_ANSI.sub("", line) for line in content.get("traceback", []))
                parts.append(trace or f"{content.get('ename')}: {content.get('evalue')}")
                parts.append("\n")

    async def _shell_reply(self, client: Any, msg_id: str) -> dict[str, Any]:
        deadline = time.monotonic() + ANSWER_SECONDS
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise NoKernel("The kernel did not answer in time.")
            try:
                reply: dict[str, Any] = await client.get_shell_msg(timeout=left)
            except queue.Empty:
                continue
            if reply.get("parent_header", {}).get("msg_id") == msg_id:
                return reply


def _shown(data: dict[str, Any]) -> str:
    """A result or display as text; a picture is a one-line mention, never its bytes."""
    pictures = sorted(kind for kind in data if kind.startswith("image/"))
    if pictures:
        return f"[a picture ({pictures[0]}) was shown in the notebook]\n"
    text = data.get("text/plain")
    return f"{text}\n" if isinstance(text, str) else ""


def _joined(parts: list[str]) -> str:
    return "".join(parts)
