"""What a model is handed for one turn: the system prompt and the chat's history, labelled.

Only the user's own messages reach a model as plain text. The speaker's own earlier replies are
its assistant turns; every other agent's reply, every outside answer and every tool's output is
quoted as data under a label that names who said it, inside a fence it cannot close; Conch's own
notes carry Conch's label. So the history reads the same whichever provider gets it, and each
reply's agent is named.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ..providers.base import Turn
from ..store.rows import Message
from .engine import ROUND_LIMITS
from .prompts import quote_agent, quote_note, quote_outside, quote_tool, room_prompt

# Enough context for a conversation, bounded so a long chat cannot blow up a request.
HISTORY_MESSAGES = 40
HISTORY_CHARS = 60_000


@dataclass(frozen=True)
class Said:
    """One stored message, as history needs it."""

    role: str  # "user" | "agent" | "outside" | "note" | "tool"
    text: str
    speaker: str | None = None  # the agent's (or outside agent's) name
    tool: str | None = None  # a tool message's tool
    id: str = ""  # the stored message's id (what a kept coding agent's session has heard)

    @classmethod
    def of(cls, message: Message, names: Mapping[str, str]) -> Said:
        """A stored message, its speaker named as people see them (`names`: id → name)."""
        speaker = names.get(message.agent, message.agent) if message.agent else None
        tool = (message.tool or {}).get("tool")
        return cls(message.role, message.text, speaker, tool, message.id)


def system_prompt(
    *,
    speaker: str,
    persona: str,
    instructions: str,
    room: Sequence[tuple[str, str]],
    outside: Sequence[str],
    in_round: bool,
) -> str:
    parts = [f"You are {speaker}."]
    if persona.strip():
        parts.append(f"About you: {persona.strip()}")
    if instructions.strip():
        parts.append(f"Your instructions from the user:\n{instructions.strip()}")
    parts.append(
        room_prompt(
            speaker=speaker, room=room, outside=outside, in_round=in_round, limits=ROUND_LIMITS
        )
    )
    return "\n\n".join(parts)


def history_turns(said: Sequence[Said], speaker: str) -> tuple[Turn, ...]:
    """The last messages of the chat as turns for `speaker`, merged so roles alternate."""
    window: list[Turn] = []
    size = 0
    for item in reversed(said[-HISTORY_MESSAGES:]):
        turn = _as_turn(item, speaker)
        size += len(turn.text)
        if window and size > HISTORY_CHARS:
            break
        window.append(turn)
    window.reverse()
    merged: list[Turn] = []
    for turn in window:
        if merged and merged[-1].role == turn.role:
            merged[-1] = Turn(turn.role, f"{merged[-1].text}\n\n{turn.text}")
        else:
            merged.append(turn)
    # Providers want the history to open with the user and to end on the user's side.
    while merged and merged[0].role != "user":
        merged.pop(0)
    if merged and merged[-1].role != "user":
        merged.append(Turn("user", quote_note(f"It is {speaker}'s turn.")))
    return tuple(merged)


def _as_turn(item: Said, speaker: str) -> Turn:
    if item.role == "user":
        return Turn("user", item.text)
    if item.role == "agent" and item.speaker == speaker:
        return Turn("assistant", item.text)
    return Turn("user", _quoted(item.role, item.speaker, item.tool, item.text))


# Every turn of a round quotes the same last messages again, for each speaker: the same words
# give the same quote, so each is made once while it stays in recent history.
@functools.lru_cache(maxsize=4 * HISTORY_MESSAGES)
def _quoted(role: str, speaker: str | None, tool: str | None, text: str) -> str:
    if role == "agent":
        return quote_agent(speaker or "another agent", text)
    if role == "outside":
        return quote_outside(speaker or "an outside agent", text)
    if role == "tool":
        return quote_tool(speaker or "an agent", tool or "tool", text)
    return quote_note(text)
