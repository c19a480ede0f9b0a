"""The hand-over to a cell waiting in `answered()`: a cell that waits for the user's answer
holds the kernel, so an approved run goes to it instead of to the kernel's queue, and the cell
runs it in the kernel's main thread (the user's namespace; Stop's interrupt lands on it as on
any run). Only the kernel itself may take its handed runs: it shows an HMAC of its id with the
key of its own connection (`handover_proof`).

`HandOver` is a room of NotebookKernels (kernel.py), which holds its state and its interrupt.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import hmac
import math
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar
from uuid import uuid4

from ..core.errors import ConchError
from .rules import OUTPUT_LIMIT, TIMEOUT_WORDS
from .runs import SETTLE_SECONDS, OnState, RunOutput, RunResult

# The hand-over (`answered()`): a cell that waits for the user's answer holds the kernel, so an
# approved run goes to it instead of to the kernel's queue. A waiting cell asks again at once
# after each answer; it counts as waiting for this long after its last question ended.
WAITER_GRACE_SECONDS = 2.0
# A handed run that no waiting cell took in this long runs as any other run (the cell ended).
TAKE_SECONDS = 3.0
# The longest a waiting cell's one question may wait for a run.
TAKE_WAIT_MOST = 30.0


def handover_proof(session_key: bytes, kernel_id: str) -> str:
    """What a kernel shows to take its own handed runs: an HMAC of its id with the key of its
    own connection (which only that kernel and its server hold; the kernel key is every
    kernel's, so it alone cannot say which kernel asks)."""
    return hmac.new(
        session_key, b"conch-handover:" + kernel_id.encode(), hashlib.sha256
    ).hexdigest()


class NotHanded(ConchError):
    """The hand-over refused: not this kernel's proof, or no such handed run."""

    status = 403
    statuses: ClassVar[Mapping[str, int]] = {"no_handed_run": 404}


@dataclass
class HandedRun:
    """An approved run handed to the cell that waits in `answered()`: the code, exactly as the
    user approved it, and what the cell gives back."""

    id: str
    kernel_id: str
    code: str
    taken: asyncio.Event = field(default_factory=asyncio.Event)
    withdrawn: bool = False  # nobody took it in time: it ran as any other run
    result: asyncio.Future[tuple[str, int, bool]] = field(
        default_factory=lambda: asyncio.get_running_loop().create_future()
    )


class HandOver:
    """NotebookKernels' hand-over: its state lives there (`_waiters`, `_offered`, `_taken`)."""

    kernels: Any
    run_seconds: float
    _waiters: dict[str, float]
    _offered: dict[str, asyncio.Queue[HandedRun]]
    _taken: dict[str, HandedRun]

    async def _interrupt(self, kernel_id: str) -> None:
        raise NotImplementedError  # NotebookKernels' own

    def check_proof(self, kernel_id: str, proof: str) -> None:
        """Only the kernel itself may take its handed runs (NotHanded otherwise)."""
        manager = self.kernels.get_kernel(kernel_id) if kernel_id in self.kernels else None
        key = getattr(getattr(manager, "session", None), "key", None)
        if not isinstance(key, bytes) or not hmac.compare_digest(
            handover_proof(key, kernel_id), proof
        ):
            raise NotHanded(
                "not_this_kernel", "Only the kernel itself may take the runs approved for it."
            )

    async def take(self, kernel_id: str, proof: str, wait: float) -> HandedRun | None:
        """A waiting cell's question: the next approved run for its kernel, within `wait`
        seconds, or None. While it asks (and a moment after), approved runs come here."""
        self.check_proof(kernel_id, proof)
        offered = self._offered.setdefault(kernel_id, asyncio.Queue())
        self._waiters[kernel_id] = math.inf
        deadline = time.monotonic() + min(max(wait, 0.0), TAKE_WAIT_MOST)
        try:
            while True:
                try:
                    handed = await asyncio.wait_for(offered.get(), deadline - time.monotonic())
                except TimeoutError:
                    return None
                if not handed.withdrawn:
                    break
        finally:
            self._waiters[kernel_id] = time.monotonic()
        handed.taken.set()
        self._taken[handed.id] = handed
        return handed

    def give(
        self, kernel_id: str, proof: str, run_id: str, output: str, total: int, failed: bool
    ) -> None:
        """The waiting cell's answer: what the handed run printed (its start, and how long it
        was in all), and whether it raised."""
        self.check_proof(kernel_id, proof)
        handed = self._taken.get(run_id)
        if handed is None or handed.kernel_id != kernel_id:
            raise NotHanded("no_handed_run", "No run handed to this kernel has that id.")
        del self._taken[run_id]
        if not handed.result.done():
            handed.result.set_result((output[:OUTPUT_LIMIT], max(total, len(output)), failed))

    def _waiting(self, kernel_id: str) -> bool:
        since = self._waiters.get(kernel_id)
        return since is not None and time.monotonic() - since < WAITER_GRACE_SECONDS

    async def _hand(self, kernel_id: str, code: str, on_state: OnState) -> RunResult | None:
        """Give the approved run to the waiting cell, which runs it in the kernel's main thread
        (the user's namespace; Stop's interrupt lands on it as on any run). None: no cell took
        it in time, so it runs as any other run."""
        handed = HandedRun(uuid4().hex, kernel_id, code)
        offered = self._offered.setdefault(kernel_id, asyncio.Queue())
        offered.put_nowait(handed)
        try:
            await asyncio.wait_for(handed.taken.wait(), TAKE_SECONDS)
        except TimeoutError:
            handed.withdrawn = True
            return None
        on_state("running")
        try:
            text, total, failed = await asyncio.wait_for(
                asyncio.shield(handed.result), self.run_seconds
            )
        except TimeoutError:
            await self._interrupt(kernel_id)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(handed.result), SETTLE_SECONDS)
            output = self._handed_output(handed)
            return RunResult(
                output.text(OUTPUT_LIMIT - len(TIMEOUT_WORDS)) + TIMEOUT_WORDS, "timeout"
            )
        except asyncio.CancelledError:
            # Stop: the waiting cell runs the agent's code now, in the main thread.
            await asyncio.shield(self._interrupt(kernel_id))
            raise
        output = RunOutput()
        output.add(text)
        output.total = total
        return RunResult(output.text() or "(no output)", "failed" if failed else "ran")

    @staticmethod
    def _handed_output(handed: HandedRun) -> RunOutput:
        output = RunOutput()
        if handed.result.done() and not handed.result.cancelled():
            text, total, _ = handed.result.result()
            output.add(text)
            output.total = total
        return output
