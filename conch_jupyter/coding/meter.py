"""The meter: what a coding agent's turn cost, read from what the agent reports.

ACP's `usage_update.cost` is the session's cumulative cost so far, in the agent's currency (USD
for every adapter that reports one). An adapter's counter starts again whenever the session is
opened anew: claude-agent-acp runs a new CLI for a resumed or loaded session and does not carry
the old total over, and a new session (after Stop, the least recently used close, an idle end or
a new process) starts at 0 too. So the meter's base is kept per opening: each opening of a
session starts it at 0 (`Meter.open`), and each report adds what the figure grew by since the
last report of the same opening (`Meter.grew`). No turn is billed less than its own reports show.

Pure: no I/O; the turn (sessions.py) feeds it the reports and bills the sum.

May import: nothing of Conch (the coding package's rooms use it).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from acp import schema


@dataclass
class Meter:
    """One chat's session on a coding agent: its cumulative cost as last reported in the
    current opening of that session."""

    figure: float = 0.0  # the cumulative cost the agent last reported, since this opening

    def open(self) -> None:
        """The session is opened anew (resume, load, new, a new process): its counter starts at
        0, whatever the old opening had reached."""
        self.figure = 0.0

    def grew(self, figure: float) -> float:
        """What a report of the cumulative `figure` adds: its growth since the last report of
        this opening. A figure below the last one is a counter that started again without an
        opening Conch saw: all of it is new."""
        grown = figure - self.figure if figure >= self.figure else figure
        self.figure = figure
        return grown


def reported_usd(cost: schema.Cost | None) -> float | None:
    """A usage update's cost in USD; None when it carries none, in another currency, or not a
    finite amount of zero or more (nothing is guessed from it)."""
    if cost is None or str(cost.currency).strip().upper() != "USD":
        return None
    amount = float(cost.amount)
    if not math.isfinite(amount) or amount < 0:
        return None
    return amount
