"""What the chat face reads and writes, as pure functions: who wrote a chat message, which of
Conch's commands a person typed, who Conch's bot users are, and the lines Conch posts (a new
chat's welcome, the round's one line as the floor changes hands and as its end, a question with
how to answer it, a stopped reply's mark, an outside agent's words marked as theirs). No rule of
a round lives here: these only translate. Every post is sealed as a whole on its way into the
chat (core/chat_seal.py's `seal_for_chat`, in rooms.py); what these lines wrap around a text (a
code span, a fence, emphasis) is made with chat_seal's wrappers, which nothing inside can close.

Who wrote a message: jupyterlab-chat says a message came from a client (`client_msg_received`:
a person, whatever sender name the client gave) or was written on the server
(`server_msg_sent`: a bot such as a Jupyter AI persona, or Conch itself). Conch knows its own
posts by their message ids, never by sender; another writer's message is someone else's words.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from ..core.chat_seal import code_block, code_span, fences_closed, literal
from ..rounds.engine import CONTINUABLE

Writer = Literal["ours", "person", "other"]

# The chat's action names (jupyterlab_chat.models.ChatMessageAction's values), as plain strings
# so this module needs no jupyterlab-chat to be installed.
FROM_A_CLIENT = "client_msg_received"
FROM_THE_SERVER = "server_msg_sent"

# Conch's own bot user, whose lines are Conch's: handovers, questions, the round's end.
CONCH_USER = "conch"
CONCH_NAME = "Conch"

# A streaming reply is written to the chat in steps: jupyterlab-chat's WebSocket model writes the
# whole .chat file at each update, so one write per model chunk would rewrite it hundreds of times.
STREAM_STEP_SECONDS = 0.1

HOW_TO_ANSWER = "Answer `/allow` or `/deny` here, or in the Conch view."


def writer_of(action: str, message_id: str, ours: set[str] | frozenset[str]) -> Writer | None:
    """Who wrote a new message the chat reports; None for a change that is no new message
    (an edit, an update of a streaming message)."""
    if message_id in ours:
        return "ours"
    if action == FROM_A_CLIENT:
        return "person"
    if action == FROM_THE_SERVER:
        return "other"
    return None


@dataclass(frozen=True)
class Command:
    """One of Conch's commands, typed by a person: `/stop`, `/continue`, `/allow` or `/deny`
    (with the question's id when more than one waits)."""

    name: Literal["stop", "continue", "allow", "deny"]
    call_id: str | None = None


_COMMAND = re.compile(
    r"\s*/(stop|continue|allow|deny)(?:\s+([A-Za-z0-9_\-]{1,64}))?\s*", re.IGNORECASE
)


def command_in(body: str) -> Command | None:
    """The command a message is, when it is one and nothing else."""
    found = _COMMAND.fullmatch(body)
    if found is None:
        return None
    name = found.group(1).lower()
    if name in ("stop", "continue"):
        return None if found.group(2) else Command("stop" if name == "stop" else "continue")
    return Command("allow" if name == "allow" else "deny", found.group(2))


def agent_user(agent_id: str) -> str:
    """The chat's username for one of Conch's agents (or outside agents): stable by id, so a
    rename changes the name shown and nothing else."""
    return f"conch-{agent_id}"


def initials_of(name: str) -> str:
    letters = [w[0] for w in re.split(r"[\s_\-]+", name) if w]
    return ("".join(letters[:2]) or name[:1] or "?").upper()


def question_line(entry: dict[str, object]) -> str:
    """A question waiting for the user's yes (a coding agent's permission, a run), with how to
    answer it."""
    who = str(entry.get("name") or "An agent")
    what = str(entry.get("title") or entry.get("tool") or "a tool call")
    detail = str(entry.get("detail") or entry.get("code") or "").strip("\n")
    shown = f"\n\n{code_block(detail)}" if detail.strip() else ""
    call = entry.get("call_id")
    which = f" (question {code_span(str(call))})" if call else ""
    return f"**{literal(who)}** asks to {literal(what)}{which}.{shown}\n\n{HOW_TO_ANSWER}"


def end_line(
    words: str, said_first: str | None, spent_usd: float | None, going_on: str | None = None
) -> str:
    """The round's end as one line: what Conch said of it first (when not already in `words`),
    the folded card's words, what the round cost, and how to continue it (`how_to_continue`)."""
    parts = [said_first] if said_first else []
    parts.append(words)
    if spent_usd:
        parts.append(f"${spent_usd:.4f}")
    line = " · ".join(parts)
    return f"{line} · {going_on}" if going_on else line


def how_to_continue(reason: str, limit: str = "round") -> str | None:
    """What the end line says of going on, for a round that ended at its own bound (None for
    any other end): `/continue`; at the chat's limit or the month's budget, raise it first."""
    if reason not in CONTINUABLE:
        return None
    if reason == "spend" and limit != "round":
        return "raise the limit, then `/continue` to go on"
    return "`/continue` to go on"


def round_line(words: str, turn: object, limit: object) -> str:
    """The round's one line while it runs: who has the floor, and how many of its replies this
    is ("Researcher handed over to Writer · 2 of 8")."""
    place = f" · {turn} of {limit}" if isinstance(turn, int) and isinstance(limit, int) else ""
    return f"{words}{place}"


def welcome_line(names: Sequence[str]) -> str:
    """A new chat's one line from Conch: who can be mentioned here, and how to stop them."""
    if names:
        who = ", ".join(f"@{literal(n)}" for n in names)
        start = f"Conch's agents are in this chat: {who}. Mention one to start a round"
    else:
        start = "Conch is in this chat, with no agents yet: add one in Conch's Settings"
    return (
        f"{start}; `/stop` stops it at once, and writing ends it after the running reply. "
        "Type `/` for Conch's commands."
    )


STOPPED_MARK = "*(Stopped here: the rest of this reply was not written.)*"


def stopped_reply(text: str) -> str:
    """A reply cut by Stop or `/stop`, marked as such on the reply itself."""
    return f"{fences_closed(text.rstrip())}\n\n{STOPPED_MARK}" if text.strip() else STOPPED_MARK


def from_elsewhere(text: str) -> str:
    """A person's message sent to the room through Conch's view or API rather than this chat:
    shown by Conch, so the chat holds the whole conversation."""
    return f"*Sent from Conch's view or API:* {text}"


def outside_words(text: str, speaker: str) -> str:
    """An outside agent's words, marked as theirs before them (where nothing they hold, such as
    a fence left open, can swallow the mark)."""
    mark = f"*An outside agent's words ({literal(speaker)}): no pictures, HTML shown as text.*"
    return f"{mark}\n\n{text}"
