"""The chat's kernel: found through the Jupyter server's own session and kernel managers, and
driven with jupyter_client's async client.

Owns everything Conch does to a kernel: finding the kernel of the session for a notebook's path,
running an agent's code in it (its output, errors and results as text, pictures as a one-line
mention), listing what it holds without side effects, asking for the inputs it ran,
interrupting an agent's run (Stop, or the 60 s bound), and following a run Stop could not end
until the kernel is done with it (the user's Interrupt again and Restart kernel act on it).

Its rooms: runs.py (what a run is and gives back) and handover.py (an approved run handed to
a cell waiting in `answered()`). Why the rest stays whole (past 500 lines): one client and one
lock per kernel are shared by a run, its Stop, the watcher of a run Stop could not end, and the
reads, and each of them must see the others' state at once.

Theory of operation:
- One client per kernel, kept while the kernel lives; one agent call at a time per kernel (a
  lock), so the output of one run never mixes with another's.
- The user first: while the kernel is busy (the user's own cell), an agent's run waits for it to
  be idle before it is sent ("waiting for the kernel"), so an interrupt can only ever hit the
  agent's own code. It is sent with `stop_on_error=False`: when it is interrupted or fails, the
  kernel does not abort the execute requests queued after it (the user's cells).
- `list_variables` runs nothing of the user's: an empty, silent, history-free request whose
  user expression runs a helper in a namespace of its own, so no name is added to the kernel.
- A run that goes on after Stop's interrupts (code that catches KeyboardInterrupt) is a
  `StuckRun`: Stop still ends at once, and the run's lock passes to a watcher that reads the
  kernel's broadcast until the run's request ends (or the kernel is idle, restarted or gone), so
  nothing else is sent to that kernel meanwhile and the watcher sees every message of the run.
  Reads do not wait for it: they say the kernel is busy.
"""

from __future__ import annotations

import ast
import asyncio
import contextlib
import json
import queue
import re
import time
from typing import Any

from jupyter_client.session import Session
from jupyter_core.utils import ensure_async

from .handover import HandedRun, HandOver
from .rules import OUTPUT_LIMIT, RUN_SECONDS, TIMEOUT_WORDS, After, Ending
from .runs import (
    SETTLE_SECONDS,
    KernelBusy,
    NoKernel,
    OnState,
    OnStuck,
    RunOutput,
    RunResult,
    StuckRun,
)

# How often a waiting run looks again at the kernel's state.
POLL_SECONDS = 0.1
# How long to wait for the kernel to answer a read (history, variables).
ANSWER_SECONDS = 10.0
# Stop interrupts an agent's run up to this many times, waiting this long each time for it to
# end (see `_stop`).
STOP_TRIES = 4
STOP_WAIT_SECONDS = 0.25
# A read waits this long for the user's running cell, then says the kernel is busy: a cell may
# itself be waiting for the chat (`await chat.settled()`), and reading must not deadlock it.
READ_WAIT_SECONDS = 5.0
# The user's Interrupt again waits this long for a stuck run to end before it answers; a restart
# waits this long for the kernel to be back.
AGAIN_WAIT_SECONDS = 1.0
RESTART_SECONDS = 30.0
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


class NotebookKernels(HandOver):
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
        self._stuck: dict[str, StuckRun] = {}  # kernel id → the run Stop could not end
        # The hand-over: kernel id → when its waiting cell's last question ended (inf: asking
        # now); the runs handed and not yet taken, per kernel; taken runs by id.
        self._waiters: dict[str, float] = {}
        self._offered: dict[str, asyncio.Queue[HandedRun]] = {}
        self._taken: dict[str, HandedRun] = {}

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

    async def is_open(self, path: str) -> bool:
        """A kernel session holds the notebook: a page has it open (as far as the server can
        tell without a shared document)."""
        return await self.kernel_id(path) is not None

    async def run(
        self,
        path: str | None,
        code: str,
        on_state: OnState,
        on_stuck: OnStuck | None = None,
        *,
        for_cell: bool = False,
    ) -> RunResult:
        """Run an agent's code in the notebook's kernel. Cancelling it interrupts the kernel;
        when the run goes on all the same, `on_stuck` gets it (before the cancellation goes on).
        `for_cell` (run_cell): the result carries the outputs and execution count for the cell."""
        kernel_id = await self._require(path)
        if kernel_id in self._stuck:
            on_state("waiting")  # an earlier run that Stop could not end still holds the kernel
        lock = self._lock(kernel_id)
        await lock.acquire()
        handed_on = False
        try:
            if not for_cell and self._waiting(kernel_id):
                handed = await self._hand(kernel_id, code, on_state)
                if handed is not None:
                    return handed
            # Wait first: a new client's handshake would itself queue behind the user's cell.
            await self._wait_idle(kernel_id, on_state)
            client = await self._client(kernel_id)
            on_state("running")
            msg_id = client.execute(
                code, store_history=True, allow_stdin=False, stop_on_error=False
            )
            output = RunOutput(cells=[] if for_cell else None)
            failed = False
            deadline = time.monotonic() + self.run_seconds
            begun: list[bool] = []  # the kernel said it began the run (before any Stop)
            try:
                failed = await self._collect(client, msg_id, output, deadline, begun)
            except TimeoutError:
                await self._interrupt(kernel_id)
                with contextlib.suppress(TimeoutError):
                    await self._collect(
                        client, msg_id, RunOutput(0), time.monotonic() + SETTLE_SECONDS
                    )
                # The words that say why it ended are never the part that gets cut.
                return RunResult(
                    output.text(OUTPUT_LIMIT - len(TIMEOUT_WORDS)) + TIMEOUT_WORDS,
                    "timeout",
                    tuple(output.cells or ()),
                    output.count,
                )
            except asyncio.CancelledError:
                # Stop: the agent's own code is what runs now (we waited for the user's cell).
                if not await asyncio.shield(self._stop(kernel_id, client, msg_id, bool(begun))):
                    stuck = self._watch(kernel_id, client, msg_id, lock)
                    handed_on = True
                    if on_stuck is not None:
                        on_stuck(stuck)
                raise
            ending: Ending = "failed" if failed else "ran"
            outputs = tuple(output.cells or ())
            return RunResult(output.text() or "(no output)", ending, outputs, output.count)
        finally:
            if not handed_on:
                lock.release()

    async def variables(self, path: str | None, on_state: OnState) -> list[list[str]]:
        """name, type, shape or length, short repr — of what the kernel holds."""
        kernel_id = await self._require(path)
        if kernel_id in self._stuck:
            raise KernelBusy(kernel_id)
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
        if kernel_id in self._stuck:
            raise KernelBusy(kernel_id)
        async with self._lock(kernel_id):
            await self._wait_idle(kernel_id, lambda state: None, READ_WAIT_SECONDS)
            client = await self._client(kernel_id)
            msg_id = client.history(
                raw=True, output=False, hist_access_type="range", session=0, start=1, stop=None
            )
            reply = await self._shell_reply(client, msg_id)
        return [str(entry[2]) for entry in reply["content"].get("history", [])]

    async def interrupt_again(self, stuck: StuckRun) -> bool:
        """The user's Interrupt again: one more interrupt, then a moment for the run to end.
        True when it ended."""
        if stuck.ended.done():
            return True
        stuck.interrupts += 1
        await self._interrupt(stuck.kernel_id)
        await asyncio.wait({stuck.ended}, timeout=AGAIN_WAIT_SECONDS)
        return stuck.ended.done()

    async def restart(self, stuck: StuckRun) -> None:
        """The user's Restart kernel: Jupyter's own restart of the run's kernel (as its Restart
        button does), waited for until the kernel answers again."""
        if stuck.ended.done():
            return
        stuck.restarting = True
        restarted = await ensure_async(self.kernels.restart_kernel(stuck.kernel_id))
        if isinstance(restarted, asyncio.Future):  # jupyter_server: resolved once it answers
            await asyncio.wait_for(restarted, RESTART_SECONDS)
        stuck.restarted = True  # a new kernel answered: nothing of the run is left
        await asyncio.wait({stuck.ended}, timeout=AGAIN_WAIT_SECONDS)
        await self._seen_idle(stuck.kernel_id)

    async def close(self) -> None:
        watchers = [s.watcher for s in self._stuck.values() if s.watcher is not None]
        for watcher in watchers:
            watcher.cancel()
        await asyncio.gather(*watchers, return_exceptions=True)
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
            client = self._clients[kernel_id] = await self._new_client(kernel_id)
        return client

    async def _new_client(self, kernel_id: str) -> Any:
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

    async def _stop(self, kernel_id: str, client: Any, msg_id: str, begun: bool = False) -> bool:
        """Interrupt the agent's run. An interrupt that lands after the code was sent but before
        the kernel began it is lost (ipykernel ignores SIGINT between requests): so when the
        kernel says it began the run only after that interrupt, and the run goes on, interrupt
        it again. Never when the run began before (the first interrupt hit it): a second one
        could hit the user's cell queued behind it. A few tries, a moment apart, so Stop stays
        quick; code that swallows KeyboardInterrupt runs on, as it would for Jupyter's button.
        True when the run ended; False when it still runs after the last try (it is stuck).
        `begun`: the kernel had said it began the run before Stop. When it had not, and still has
        not after those tries (a busy machine), wait for it to begin (up to SETTLE_SECONDS) and
        interrupt it then: a run that has not begun is not stuck."""
        began: list[bool] = []
        await self._interrupt(kernel_id)
        tries = 0
        late = time.monotonic() + SETTLE_SECONDS
        while tries < STOP_TRIES:
            try:
                await self._collect(
                    client, msg_id, RunOutput(0), time.monotonic() + STOP_WAIT_SECONDS, began
                )
                return True
            except TimeoutError:
                if began:  # it began after the interrupt, and goes on
                    await self._interrupt(kernel_id)
                if begun or began or time.monotonic() >= late:
                    tries += 1  # while it has not begun at all, only the late bound counts
        return False

    def _watch(self, kernel_id: str, client: Any, msg_id: str, lock: asyncio.Lock) -> StuckRun:
        """Follow a run Stop could not end; the watcher holds the kernel's lock (handed on by
        the run) until the kernel is done with it."""
        stuck = StuckRun(kernel_id, msg_id, asyncio.get_running_loop().create_future())
        self._stuck[kernel_id] = stuck
        stuck.watcher = asyncio.create_task(
            self._until_done(stuck, client, lock), name=f"conch-stuck-{kernel_id}"
        )
        return stuck

    async def _until_done(self, stuck: StuckRun, client: Any, lock: asyncio.Lock) -> None:
        after: After = "gone"
        try:
            after = await self._how_it_ends(stuck, client)
        finally:
            if self._stuck.get(stuck.kernel_id) is stuck:
                del self._stuck[stuck.kernel_id]
            if after == "restart":  # a client of the kernel before the restart: start afresh
                old = self._clients.pop(stuck.kernel_id, None)
                if old is not None:
                    old.stop_channels()
            lock.release()
            if not stuck.ended.done():
                stuck.ended.set_result(after)

    async def _seen_idle(self, kernel_id: str) -> None:
        """After a restart, make sure the server sees the new kernel idle. It learns the state
        from the kernel's broadcast, and a new kernel's first words ("starting") can be lost
        while the server's subscription reconnects; then it would go on saying "busy" (the old
        run's), and an agent's next run would wait for it for ever. An empty, silent request is
        answered busy then idle, which the server does see."""
        if getattr(self.kernels.get_kernel(kernel_id), "execution_state", None) != "busy":
            return
        # A client of its own, for this one request: the kernel's lock may be taken by an agent's
        # run waiting for the very idle this brings.
        client = await self._new_client(kernel_id)
        try:
            msg_id = client.execute("", silent=True, store_history=False, allow_stdin=False)
            await self._shell_reply(client, msg_id)
        finally:
            client.stop_channels()
        deadline = time.monotonic() + AGAIN_WAIT_SECONDS
        while time.monotonic() < deadline:
            if getattr(self.kernels.get_kernel(kernel_id), "execution_state", None) != "busy":
                return
            await asyncio.sleep(POLL_SECONDS)

    async def _how_it_ends(self, stuck: StuckRun, client: Any) -> After:
        """Read the kernel's broadcast until the run's request ends; the server's own view of
        the kernel's state says when it restarted (Jupyter's Restart, or ours), was shut down
        or died. Idle at the server means the run ended too (its state follows every request
        in order), whether or not its own end was seen here."""
        restarted = False
        while True:
            if stuck.restarted:
                return "restart"
            if stuck.kernel_id not in self.kernels:
                return "gone"
            state = getattr(self.kernels.get_kernel(stuck.kernel_id), "execution_state", None)
            if state == "dead":
                return "gone"
            if state in ("starting", "restarting"):
                restarted = True
            elif state == "idle":
                return "restart" if restarted or stuck.restarting else self._by(stuck)
            try:
                msg = await client.get_iopub_msg(timeout=POLL_SECONDS)
            except queue.Empty:
                continue
            except Exception:  # the channel closed with a restart: the server's state says
                await asyncio.sleep(POLL_SECONDS)
                continue
            kind, content = msg["header"]["msg_type"], msg["content"]
            if kind != "status":
                continue
            if content.get("execution_state") == "starting":
                restarted = True  # a new kernel process says hello
            elif (
                content.get("execution_state") == "idle"
                and msg.get("parent_header", {}).get("msg_id") == stuck.msg_id
            ):
                return self._by(stuck)

    @staticmethod
    def _by(stuck: StuckRun) -> After:
        return "restart" if stuck.restarting else "interrupt" if stuck.interrupts > 1 else "itself"

    async def _interrupt(self, kernel_id: str) -> None:
        with contextlib.suppress(Exception):  # a kernel that died meanwhile needs no interrupt
            await ensure_async(self.kernels.get_kernel(kernel_id).interrupt_kernel())

    async def _collect(
        self,
        client: Any,
        msg_id: str,
        output: RunOutput,
        deadline: float,
        began: list[bool] | None = None,
    ) -> bool:
        """Gather the run's output until the kernel is idle again; True if the code raised.
        `began` gets an entry when the kernel says it begins the run (its `execute_input`)."""
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
            if kind == "execute_input":
                if began is not None:
                    began.append(True)
                count = content.get("execution_count")
                output.count = count if isinstance(count, int) else output.count
            if kind == "status" and content.get("execution_state") == "idle":
                return failed
            if kind == "stream":
                output.add(str(content.get("text", "")))
                name = "stderr" if content.get("name") == "stderr" else "stdout"
                output.add_output({"output_type": "stream", "name": name, "text": content["text"]})
            elif kind in ("execute_result", "display_data"):
                output.add(_shown(content.get("data") or {}))
                shown = {
                    "output_type": kind,
                    "data": content.get("data") or {},
                    "metadata": content.get("metadata") or {},
                }
                if kind == "execute_result":
                    shown["execution_count"] = content.get("execution_count")
                output.add_output(shown)
            elif kind == "error":
                failed = True
                trace = "\n".join(_ANSI.sub("", line) for line in content.get("traceback", []))
                output.add(trace or f"{content.get('ename')}: {content.get('evalue')}")
                output.add("\n")
                error = {k: content.get(k) for k in ("ename", "evalue", "traceback")}
                output.add_output({"output_type": "error", **error})

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
