"""Rounds: agents taking turns in a chat.

Owns the pure round engine (`engine`: the floor, the bounds, why a round ended), who a message
mentions (`mentions`), the words a turn is told and how others' words are quoted (`prompts`,
`history`), the spend bounds (`spend`), one turn of one of your agents (`turn`) or of an outside
agent (`outside_turn`), and the async driver that runs them (`driver.RoundService`) around what is
live in a chat (`live_chat`). May import: `core`, `store`, `agents`, `providers`, `a2a` (the
outside client) and `notebook` (the tools a turn offers); never `door` or `server_ext`.
"""

from .engine import ROUND_LIMITS, Round, RoundLimits

__all__ = ["ROUND_LIMITS", "Round", "RoundLimits"]
