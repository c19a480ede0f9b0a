"""What a run in the chat's kernel is, for the kernel and the notebook tools alike: its result
(`RunResult`), its output as it comes (`RunOutput`, bounded), a run Stop could not end
(`StuckRun`), the two callbacks a run reports through, and the two signals between the kernel
and the tools (`NoKernel`, `KernelBusy`), which the tools answer in words.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .rules import OUTPUT_LIMIT, After, Ending, cut_output

# How long a run is given to settle after an interrupt (the kernel's and the hand-over's).
SETTLE_SECONDS = 5.0


class NoKernel(Exception):
    """The chat's notebook has no running kernel (or the chat has no notebook).

    No ConchError: control flow between the kernel and the notebook tools, which answer the
    agent's call in words ("this chat has no running kernel") and never let it out."""


class KernelBusy(Exception):
    """The user's own cell is still running: a read does not wait for it.

    No ConchError: control flow between the kernel and the notebook tools, which answer the
    agent's call in words (BUSY_WORDS) and never let it out."""


@dataclass(frozen=True)
class RunResult:
    output: str
    ending: Ending
    # For run_cell: the run's outputs in nbformat's JSON, and the kernel's execution count.
    outputs: tuple[dict[str, Any], ...] = ()
    execution_count: int | None = None


# What a cell keeps of a run (run_cell): at most this many outputs and characters of stream text,
# like the model's share, bounded so code printing for a minute cannot fill the server's memory.
CELL_OUTPUTS = 200
CELL_TEXT = 1_000_000


@dataclass
class RunOutput:
    """A run's output as it comes: only its start is kept (all a model is ever shown), the rest
    only counted, so code printing for a minute cannot fill the server's memory."""

    keep: int = OUTPUT_LIMIT
    parts: list[str] = field(default_factory=list)
    kept: int = 0
    total: int = 0
    # run_cell's: the outputs as nbformat JSON (None: not kept), and the execution count.
    cells: list[dict[str, Any]] | None = None
    cell_text: int = 0
    count: int | None = None

    def add_output(self, output: dict[str, Any]) -> None:
        """One output for the cell: consecutive stream text of one name joins, as in Jupyter."""
        if self.cells is None:
            return
        if output["output_type"] == "stream":
            text = str(output.get("text", ""))[: max(CELL_TEXT - self.cell_text, 0)]
            self.cell_text += len(text)
            last = self.cells[-1] if self.cells else None
            if last and last["output_type"] == "stream" and last["name"] == output["name"]:
                last["text"] += text
                return
            output = {**output, "text": text}
        if len(self.cells) < CELL_OUTPUTS:
            self.cells.append(output)

    def add(self, text: str) -> None:
        self.total += len(text)
        room = self.keep - self.kept
        if room > 0:
            self.parts.append(text[:room])
            self.kept += min(len(text), room)

    def text(self, limit: int = OUTPUT_LIMIT) -> str:
        """What was said, at most `limit` characters, with a note (the true length) if cut."""
        return cut_output("".join(self.parts), limit, total=self.total)


# What a run is doing, for the round card: "waiting" (for the user's cell) or "running".
OnState = Callable[[str], None]


@dataclass
class StuckRun:
    """An agent's run that Stop interrupted and that still runs a moment later. `ended` gets
    how it came to an end once the kernel is done with it."""

    kernel_id: str
    msg_id: str
    ended: asyncio.Future[After]
    interrupts: int = 1  # Stop's, then one for each Interrupt again
    restarting: bool = False
    restarted: bool = False  # the kernel answered after the user's Restart: the run is gone
    watcher: asyncio.Task[None] | None = None


OnStuck = Callable[[StuckRun], None]
