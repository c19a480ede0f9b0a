"""The embedded offline stand-in: replies without any model and without the network.

Owns the default agents' answers when no model is configured, so Conch can be tried (and its
rounds, Stop button and hand-ons demonstrated) anywhere. A reply is a pure function of the
request — same request, same reply — and says plainly that no model was asked. It streams word
by word with a small delay so a person can watch it arrive and press Stop (line by line, at once,
when the delay is 0, as in tests and benchmarks).

It shows a round working: each agent answers its own part of the message, in the user's words
("@Researcher find three options, @Writer draft a paragraph": the Researcher on "find three
options", with three points), and an agent that speaks after another in the round takes up what
that one said, read from the history it was handed (the quoted reply), so the handover and the
shared history can be seen.

It uses the notebook tools too, deterministically, so the demo works with no key: offered tools,
asked about the notebook (or its variables) it reads it; given a fenced Python block it proposes
to run it (only the first agent the message names does); asked to "add a cell" with a block it
adds it (and runs it too when asked to "add and run"), to "edit cell ID" with a block it reads
the notebook and then edits that cell, to "delete cell ID" it reads and deletes it, to "run
cell ID" it runs it; once a tool's result is back, it goes on with what came back.
"""

from __future__ import annotations

import asyncio
import hashlib
import re
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence

from ..core.text import fence
from .base import ModelRequest, StreamItem, TextDelta, ToolCall, Turn, Usage

LABEL = "*(offline — no model was asked)*"
QUOTE_LIMIT = 100
# Words by which a person asks the agents to talk among themselves; then each reply hands on.
TAKE_TURNS = re.compile(
    r"\b(take\s+turns|back\s+and\s+forth|discuss\w*|debat\w*|ping[-\s]?pong)\b", re.IGNORECASE
)
# Pieces of a reply in the same order as the source, so "".join(pieces) is the reply.
_WORDS = re.compile(r"\s*\S+|\s+$")
# The same by lines: a line with the blank lines before it and its own end.
_LINES = re.compile(r"\s*[^\n]+\n?|\s+$")

POINTS = (
    "Start with the smallest version that works, then grow it.",
    "Write down what “done” looks like before choosing a method.",
    "List the constraints first: time, data, and who has to agree.",
    "Try the simple option on a small sample and compare the results.",
    "Keep a note of every assumption so it can be checked later.",
    "Ask who will use the result and what they will decide with it.",
    "Split the work into steps that can each be checked on their own.",
    "Look for a worked example to copy before inventing a new one.",
)
# How the next agent takes up what the one before said (one line for each number of points).
TAKEN_UP = (
    "So a first draft: begin there, check it on something small, and go on only once it holds.",
    "So a first draft: begin with the first, then let the second decide what comes next.",
    "So a first draft: begin with the first, test it against the second, and keep the third in "
    "mind as the work goes on.",
)
NUMBERS = {"one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "a few": 3, "a couple": 2}
MOST_POINTS = 5
POINT_LIMIT = 90


class OfflineProvider:
    """A Provider that needs no model, no key and no network."""

    def __init__(
        self,
        delay: float = 0.03,
        *,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self.delay = delay
        self._sleep = sleep

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamItem]:
        call = offline_tool_call(request)
        text = offline_tool_reply(request) if request.steps else offline_reply(request)
        if call is not None:
            # A call after a step goes on with the same reply (its label was said before).
            text = f"\n\n{call[1]}" if request.steps else f"{LABEL}\n\n{call[1]}"
        words = _WORDS.findall(text)
        if self.delay:
            pieces = words
        else:
            # Nobody can watch the words arrive, and each piece costs the server a pass through
            # the stream and the loop (the door's benchmark answers at once): a line at a time,
            # with one sleep, which still gives the loop a chance to deliver a Stop.
            pieces = _LINES.findall(text)
            await self._sleep(0)
        for piece in pieces:
            if self.delay:
                await self._sleep(self.delay)
            yield TextDelta(piece)
        if call is not None:
            yield call[0]
        asked = [request.system, *(t.text for t in request.turns)]
        yield Usage(sum(len(part.split()) for part in asked), len(words))


# A fenced Python block in the user's message: the code the offline agent proposes to run.
_PYTHON_BLOCK = re.compile(r"```[ \t]*(?:python|py|ipython)?[ \t]*\n(.*?)```", re.S | re.I)
_ABOUT_THE_NOTEBOOK = re.compile(
    r"\b(notebook|variables?|kernel|cells?|data\s*frames?|df)\b", re.IGNORECASE
)


# What a person says to have the offline agent write cells (the ids are read_notebook's).
_ADD_CELL = re.compile(r"\badd\b(?P<run>\s+and\s+run)?\s+a\s+cell\b", re.I)
_ONE_CELL = re.compile(r"\b(?P<verb>edit|delete|run)\s+cell\s+(?P<id>[A-Za-z0-9_\-]{1,64})", re.I)
_ADDED_ID = re.compile(r"its id is (\S+?)\.?$", re.M)


def offline_cell_call(request: ModelRequest) -> tuple[ToolCall, str] | None:
    """The cell tool call the offline agent makes next, if the message asks it to write cells."""
    offered = {t.name for t in request.tools}
    if "add_cell" not in offered or not _first_named(request):
        return None
    text, step = request.user_text, len(request.steps)
    block = _PYTHON_BLOCK.search(text)
    code = block.group(1).strip("\n") if block else None
    added = _ADD_CELL.search(text)
    if added and code is not None:
        if step == 0:
            call = ToolCall("offline_1", "add_cell", {"cell_type": "code", "source": code})
            return call, "I'll add a cell to the notebook."
        found = _ADDED_ID.search(request.steps[-1].results[-1])
        if step == 1 and added.group("run") and found:
            call = ToolCall("offline_2", "run_cell", {"cell_id": found.group(1)})
            return call, "Now I'll run it."
        return None
    one = _ONE_CELL.search(text)
    if one is None:
        return None
    verb, cell_id = one.group("verb").lower(), one.group("id")
    if verb == "run":
        call = ToolCall("offline_1", "run_cell", {"cell_id": cell_id})
        return (call, "I'll run that cell.") if step == 0 else None
    if verb == "edit" and code is None:
        return None
    if step == 0:  # read first: a cell is never written blindly
        return ToolCall("offline_1", "read_notebook", {}), "Let me read the notebook first."
    if step == 1:
        arguments = {"cell_id": cell_id} | ({"source": code} if verb == "edit" else {})
        words = "I'll edit that cell." if verb == "edit" else "I'll delete that cell."
        return ToolCall("offline_2", f"{verb}_cell", arguments), words
    return None


def offline_tool_call(request: ModelRequest) -> tuple[ToolCall, str] | None:
    """The tool call the offline agent makes for this request, with the words it says first."""
    offered = {t.name for t in request.tools}
    cell = offline_cell_call(request) if offered else None
    if (
        cell is not None
        or _ADD_CELL.search(request.user_text)
        or _ONE_CELL.search(request.user_text)
    ):
        return cell
    if request.steps or not offered:
        return None
    block = _PYTHON_BLOCK.search(request.user_text)
    if block and "run_code" in offered and _first_named(request):
        code = block.group(1).strip("\n")
        return ToolCall(
            "offline_1", "run_code", {"code": code}
        ), "I'll run your code in the notebook."
    if _ABOUT_THE_NOTEBOOK.search(request.user_text) and "read_notebook" in offered:
        return ToolCall("offline_1", "read_notebook", {}), "Let me read the notebook first."
    return None


def offline_tool_reply(request: ModelRequest) -> str:
    """The answer once the tools have answered: what came back, quoted and cut short."""
    step = request.steps[-1]
    who = request.speaker or "the offline agent"
    # The same reply goes on (its label was said before the call).
    lines = ["", "", f"I'm **{who}**. Here is what came back:"]
    for call, result in zip(step.calls, step.results, strict=True):
        shown = result if len(result) <= 600 else result[:600] + "…"
        # No live @mentions from a tool's output: it must not hand the floor on.
        shown = re.sub(r"@(?=\w)", "", shown)
        lines += ["", f"`{call.name}`:", fence(shown)]
    return "\n".join(lines)


def _first_named(request: ModelRequest) -> bool:
    """The speaker is the first of the room the message names (or it names none of them)."""
    places = {name: request.user_text.find(f"@{name}") for name in request.room}
    named = [(at, name) for name, at in places.items() if at >= 0]
    return not named or min(named)[1] == request.speaker


def offline_reply(request: ModelRequest) -> str:
    """The whole reply for a request: deterministic, labelled, on the speaker's own part of the
    message, taking up the reply before it in the round, and handing on when asked to."""
    who = request.speaker or "the offline agent"
    task = own_part(request.user_text, request.speaker, request.room)
    before = reply_before(request.turns, request.user_text)
    lines = [LABEL, "", *subject_lines(who, task, before[0] if before else None)]
    taken = points_of(before[1]) if before else []
    if before and taken:
        lines += ["", taking_up(before[0], taken)]
    else:
        seed = hashlib.sha256(f"{request.speaker}\n{request.user_text}".encode()).digest()
        lines += ["", *(f"- {point}" for point in some_points(seed, points_asked(task)))]
    after = next_speaker(request.room, request.speaker)
    if after and TAKE_TURNS.search(request.user_text):
        lines += ["", f"@{after}, over to you."]
    return "\n".join(lines)


def own_part(text: str, speaker: str, room: Sequence[str]) -> str:
    """What the message asks of the speaker: the words after its @name up to the next name of
    the room ("@Researcher find options, @Writer draft it": "find options" for the
    Researcher); the words after the last name when its own part is empty ("@A and @B, take
    turns on it"); the whole message when it names no one."""
    names = sorted({n for n in room if n}, key=len, reverse=True)
    if not names:
        return text
    mention = re.compile("|".join(rf"@{re.escape(n)}\b" for n in names))
    found = list(mention.finditer(text))
    if not found:
        return text
    parts = [
        (m.group(0)[1:], text[m.end() : found[i + 1].start() if i + 1 < len(found) else None])
        for i, m in enumerate(found)
    ]
    own = " ".join(_trimmed(part) for name, part in parts if name == speaker).strip()
    return own or _trimmed(parts[-1][1]) or _trimmed(mention.sub("", text))


def _trimmed(part: str) -> str:
    """A part of a message without the joining words and marks around it."""
    part = part.strip(" \t\n,.;:!-–—")
    part = re.sub(r"^(?:and|then|or|please|also)\b[\s,]*", "", part, flags=re.I)
    return part.strip(" \t\n,.;:-–—")


def subject_lines(who: str, task: str, before: str | None) -> list[str]:
    """The reply's first lines: who answers, on what (the user's own words), and whose reply it
    builds on."""
    asked = quote(task)
    building = f", building on what **{_plain(before)}** said" if before else ""
    if not asked:
        return [f"**{who}**{building}: you did not ask anything in particular."]
    if "\n" not in asked:
        return [f"**{who}** on “{asked}”{building}:"]
    return [f"**{who}** on what you wrote{building}:", "", *(f"> {x}  " for x in asked.split("\n"))]


def points_asked(task: str) -> int:
    """How many points the speaker's part asks for ("three options", "one idea each"): three
    unless it says, at most MOST_POINTS."""
    # A number of things: "three options", "2 ideas", "one idea each" (not "note number 3").
    found = re.search(r"\b(\d+|one|two|three|four|five|a few|a couple)\s+[a-z]", task, re.I)
    if found is None:
        return 3
    word = found.group(1).lower()
    number = int(word) if word.isdigit() else NUMBERS[word]
    return max(1, min(MOST_POINTS, number))


def some_points(seed: bytes, count: int) -> list[str]:
    """`count` distinct points, chosen by the seed."""
    start, step = seed[0] % len(POINTS), 1 + 2 * (seed[1] % 2)  # 1 or 3: both cycle all 8
    return [POINTS[(start + i * step) % len(POINTS)] for i in range(count)]


# A quoted reply in the history (rounds/prompts.py's quote_agent): its label, then its fence.
_QUOTED_REPLY = re.compile(
    r'\[Reply from the agent "(?P<name>[^"\n]+)" — not from the user\.[^\]\n]*\]\n'
    r"(?P<ticks>`{3,})text\n(?P<text>.*?)\n(?P=ticks)(?!`)",
    re.S,
)


def reply_before(turns: Sequence[Turn], user_text: str) -> tuple[str, str] | None:
    """The reply of another agent that came last since the user's message, as the history
    hands it over (name, words); None when the speaker is the first to answer it."""
    if not turns or turns[-1].role != "user":
        return None
    last = turns[-1].text
    at = last.rfind(user_text) if user_text else -1
    since = last[at + len(user_text) :] if at >= 0 else last
    found = list(_QUOTED_REPLY.finditer(since))
    return (found[-1].group("name"), found[-1].group("text")) if found else None


def points_of(text: str) -> list[str]:
    """What a reply said, as up to three short points: its list items, or else its sentences
    (without the offline label, its own opening line or a handover)."""
    lines = [ln.strip() for ln in text.split("\n")]
    lines = [ln for ln in lines if ln and ln != LABEL and not ln.startswith((">", "**", "@"))]
    items = [m.group(1) for ln in lines if (m := re.match(r"(?:[-*+]|\d+[.)])\s+(.*)", ln))]
    if not items:
        prose = " ".join(lines)
        items = [s for s in re.split(r"(?<=[.!?])\s+", prose) if len(s.split()) > 2]
    points = []
    for item in items[:3]:
        cleaned = re.sub(r"[*`_#“”\"]|@(?=\w)", "", item).strip().rstrip(".")
        if len(cleaned) > POINT_LIMIT:
            cleaned = cleaned[:POINT_LIMIT].rsplit(" ", 1)[0].rstrip(" ,;:") + "…"
        if cleaned:
            points.append(cleaned)
    return points


def taking_up(name: str, points: Sequence[str]) -> str:
    """A paragraph that takes up what the agent before said, in its own words."""
    said = and_join([f"“{p}”" for p in points])
    many = {1: "one thing", 2: "two things", 3: "three things"}[len(points)]
    return f"{_plain(name)} said {many}: {said}. {TAKEN_UP[len(points) - 1]}"


def and_join(items: Sequence[str]) -> str:
    return f"{', '.join(items[:-1])} and {items[-1]}" if len(items) > 1 else "".join(items)


def _plain(name: str) -> str:
    return re.sub(r"[*`_\[\]<>@]", "", name)


def quote(text: str) -> str:
    """The first ~100 characters of what was asked, its lines kept (spaces inside a line and
    blank lines taken out), with no live @mentions.

    An @name in the quote would hand the floor on by accident, and markdown emphasis or code
    marks could swallow the rest of the reply, so both are taken out.
    """
    cleaned = re.sub(r"@(?=\w)", "", text)
    cleaned = re.sub(r"[*`>#]", "", cleaned)
    cleaned = "\n".join(
        line for line in (" ".join(part.split()) for part in cleaned.split("\n")) if line
    )
    if len(cleaned) <= QUOTE_LIMIT:
        return cleaned
    cut = cleaned[:QUOTE_LIMIT]
    if " " in cut or "\n" in cut:
        cut = re.split(r"[ \n](?=\S*\Z)", cut)[0]
    return cut.rstrip(" ,.;:\n") + "…"


def next_speaker(room: Sequence[str], speaker: str) -> str | None:
    """The name after the speaker in the room, wrapping around; None if no one else is there."""
    start = room.index(speaker) + 1 if speaker in room else 0
    for step in range(len(room)):
        name = room[(start + step) % len(room)]
        if name != speaker:
            return name
    return None
