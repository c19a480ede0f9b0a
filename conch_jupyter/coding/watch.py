"""The watch: what ends a coding agent's running turn besides its own answer, judged as it
happens.

- **A change made unasked** (`watch_call`): trust, but watch. A tool call that changes something,
  reported done without having come through a permission question, where the chat wanted one
  (Read, Ask, a tainted Auto: rules.acted_unasked), ends the turn `unasked`; the owner says so in
  words and marks the agent's card. A `fetch` done unasked is such a change once the chat was
  tainted before it. Conch's own notebook tools judge themselves, each call.
- **The quiet clock** (`until_ended`): an agent that sends nothing for `quiet_seconds` mid-turn
  ends it `quiet`. The clock runs from the prompt and from whatever the agent last sent, and stops
  while a question of the turn waits for the user (the agent's own permission question, or one
  of Conch's notebook tools it called); once that is answered it has a whole quiet period again.

The turn's other endings (a flood of words, a spend bound) are set by the turn itself as the
agent's words and cost reports arrive (turn.py); `until_ended` waits on that one event beside the
prompt's answer, so nothing is polled.

May import: core, store (its rows), notebook (the rules), coding's rules and turn.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from ..store.rows import Mode
from .rules import acted_unasked
from .turn import CodingTurn, ReportedCall, TurnEnd


def watch_call(turn: CodingTurn, call: ReportedCall, *, mode: Mode, tainted: bool) -> None:
    """A changing call it ran without having asked, where the chat wanted a question, ends the
    turn `unasked` (the first such call is the one said)."""
    if call.conch is not None or turn.unasked is not None:
        return
    if acted_unasked(
        mode=mode,
        tainted=call.tainted(tainted or turn.tainted),
        kind=call.kind,
        status=call.status,
        asked=call.asked,
        command=call.command or None,
    ):
        turn.unasked = call
        turn.end("unasked")


async def until_ended(
    turn: CodingTurn,
    prompt: asyncio.Future[Any],
    *,
    quiet_seconds: float,
    clock: Callable[[], float],
    user_asked: Callable[[], bool],
) -> TurnEnd | None:
    """Wait for the prompt's answer (None) or for what ends the turn first. `user_asked()`:
    whether one of Conch's own tools, called in this turn, waits for the user now."""
    waited = False  # a question waited for the user when the clock last ran out
    while True:
        left = quiet_seconds - (clock() - turn.last_sent)
        await asyncio.wait(
            {prompt, turn.ending}, timeout=max(left, 0.0), return_when=asyncio.FIRST_COMPLETED
        )
        if turn.ending.done():
            return turn.ending.result()
        if prompt.done():
            return None
        if clock() - turn.last_sent < quiet_seconds:
            continue  # it sent something meanwhile
        asking = bool(turn.questions_waiting) or user_asked()
        if asking or waited:
            waited = asking
            turn.last_sent = clock()
            continue
        return "quiet"
