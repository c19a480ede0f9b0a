"""Who a message mentions: "@" and an agent's whole name, and whom an unclear mention goes to.

Pure functions only (stdlib and core/names.py, no I/O), so the round engine and the driver share one
set of rules and the tests can hammer them.

Theory of operation:
- A mention is "@" and an agent's whole name, longest name first, outside code and addresses
  (`mentions_in`).
- Someone else's card must never decide where your words go (ADR 0112, first non-negotiable).
  An outside agent may not take a name that clashes with one of yours (core/names.py), but a clash
  can still be there (a name kept before that rule, a file edited by hand). A mention of such an
  outside agent goes to your agent instead, the chat is told, and nothing of that message is
  sent to any outside agent (`read_mentions`).
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from itertools import accumulate

from ..core.names import clashes
from ..core.text import and_join

# A fence may sit in a quote or a list, so indentation and ">" are allowed before it: a missed
# fence would let code hand the floor on, while an extra one only misses a mention.
# Searched in "\n" + text: a pattern led by a literal runs several times faster than "^".
_FENCE_LINE = re.compile(r"\n[ \t>]*(```+|~~~+)([^\n]*)")
_TICKS = re.compile(r"``*")  # not "`+": this spelling lets re search for the literal
# Any scheme, not only http(s)/ftp: "@Name" in a path or query is never meant for us. The span
# starts at "://" (a scheme holds no "@"): a search led by a literal is many times faster.
_URL = re.compile(r"://\S*")
# Searching for the dot first lets `re` skip ahead; the lookbehind checks the "www" before it.
_WWW = re.compile(r"\.(?<=www\.)\S*", re.IGNORECASE)


_Trie = dict[str, "_Trie"]


def _trie_regex(node: _Trie) -> str:
    # Names share prefixes, so at each "@" the regex follows one branch instead of trying every
    # name in turn. Going on is tried before stopping, which makes the longest name win; the
    # boundary check sits after the group, so a longer name that fails it ("@Writer Prose")
    # backtracks to a shorter one ("Writer").
    branches = []
    for key, child in node.items():
        chain = re.escape(key)
        while len(child) == 1 and "" not in child:  # walk a chain: recursion only at forks
            ((key, child),) = child.items()
            chain += re.escape(key)
        if chain:
            branches.append(chain + _trie_regex(child))
    if not branches:
        return ""
    group = branches[0] if len(branches) == 1 else f"(?:{'|'.join(branches)})"
    return f"(?:{group})?" if "" in node else group


@lru_cache(maxsize=64)
def _mention_pattern(names: tuple[str, ...]) -> tuple[re.Pattern[str], dict[str, str]] | None:
    by_fold: dict[str, str] = {}
    for name in names:  # the first spelling given wins among names equal but for case
        if name.strip():
            by_fold.setdefault(name.casefold(), name)
    if not by_fold:
        return None
    trie: _Trie = {}
    for name in by_fold.values():
        node = trie
        for char in name:
            node = node.setdefault(char.lower() if len(char.lower()) == 1 else char, {})
        node[""] = {}  # a name ends here
    pattern = re.compile(
        # Not after a word or address character (me@Writer.com, a.b@Writer).
        rf"@(?<![\w.%+\-]@)({_trie_regex(trie)})"
        # The name ends: no word character, no "-" or "." running on into one (@Writer.com).
        r"(?!\w|[-.][^\W_])",
        re.IGNORECASE,
    )
    return pattern, by_fold


def _code_spans(text: str, start: int, end: int, spans: list[tuple[int, int]]) -> None:
    """Add the inline code of text[start:end] to spans, the CommonMark way."""
    runs = [m.span() for m in _TICKS.finditer(text, start, end)]
    # A span closes at the next run of exactly its length; find each one's in a backward pass
    # so a text full of unmatched backticks stays linear.
    closer: list[int] = [-1] * len(runs)
    last_seen: dict[int, int] = {}
    for i in range(len(runs) - 1, -1, -1):
        size = runs[i][1] - runs[i][0]
        closer[i], last_seen[size] = last_seen.get(size, -1), i
    i = 0
    while i < len(runs):
        if closer[i] < 0:  # never closed: the backticks are literal text
            i += 1
        else:
            spans.append((runs[i][0], runs[closer[i]][1]))
            i = closer[i] + 1


def _excluded_spans(text: str) -> list[tuple[int, int]]:
    """Fenced blocks, inline code and URLs: an "@" in them is never a mention."""
    spans: list[tuple[int, int]] = []
    plain_start = 0
    opened: tuple[str, int, int] | None = None  # fence char, fence length, block start
    for m in _FENCE_LINE.finditer("\n" + text):
        run, rest = m.group(1), m.group(2)
        line_start, line_end = m.start(), m.end() - 1  # in text, without the "\n" put in front
        if opened is None:
            # A backtick in a backtick fence's info string makes the line inline code instead.
            if run[0] == "`" and "`" in rest:
                continue
            _code_spans(text, plain_start, line_start, spans)
            opened = (run[0], len(run), line_start)
        elif run[0] == opened[0] and len(run) >= opened[1] and not rest.strip(" \t\r"):
            spans.append((opened[2], line_end))
            plain_start, opened = line_end, None
    if opened is None:
        _code_spans(text, plain_start, len(text), spans)
    else:  # an unclosed fence runs to the end, as in CommonMark
        spans.append((opened[2], len(text)))
    # A URL cannot run past the end of a line, so one search over the whole text will do.
    spans += [m.span() for m in _URL.finditer(text)]
    if "www." in text.lower():
        spans += [m.span() for m in _WWW.finditer(text)]
    return sorted(spans)


def mentions_in(text: str, names: Iterable[str]) -> list[str]:
    """The agents `text` mentions, spelled as in `names`, each once, in order of first mention.

    An apostrophe ends a name ("@Writer's draft" mentions Writer), as does any punctuation not
    running on into a word. Unknown names are plain text.
    """
    compiled = _mention_pattern(tuple(names)) if "@" in text else None
    if compiled is None:
        return []
    pattern, by_fold = compiled
    candidates = list(pattern.finditer(text))
    spans = _excluded_spans(text) if candidates else []
    # With the running maximum of the ends, one bisect answers "inside any span?".
    starts, ends = [start for start, _ in spans], list(accumulate((e for _, e in spans), max))
    found: list[str] = []
    for m in candidates:
        i = bisect_right(starts, m.start()) - 1
        if i >= 0 and m.start() < ends[i]:
            continue
        said = m.group(1)
        # Case-insensitive matching and casefold agree but for rare letters; then ask re.
        name = by_fold.get(said.casefold()) or next(
            n for n in by_fold.values() if re.fullmatch(re.escape(n), said, re.IGNORECASE)
        )
        if name not in found:
            found.append(name)
    return found


# "@" and a word that names no one: starts with a letter, not after a word or address character.
_AT_WORD = re.compile(r"@(?<![\w.%+\-]@)([^\W\d_][\w-]*)")


def unknown_mentions(text: str, names: Iterable[str]) -> list[str]:
    """The "@Word"s in `text` that mention no one in `names` (outside code and addresses), each
    once, in order: a mention of an agent nobody has, which the chat answers in words."""
    if "@" not in text:
        return []
    compiled = _mention_pattern(tuple(names))
    spans = _excluded_spans(text)
    starts, ends = [start for start, _ in spans], list(accumulate((e for _, e in spans), max))
    unknown: list[str] = []
    for m in _AT_WORD.finditer(text):
        i = bisect_right(starts, m.start()) - 1
        if i >= 0 and m.start() < ends[i]:
            continue
        if compiled is not None and compiled[0].match(text, m.start()):
            continue  # a name someone has
        word = m.group(1).rstrip("-")
        if word not in unknown:
            unknown.append(word)
    return unknown


def unknown_note(unknown: Sequence[str], answered: str | None, why: str) -> str:
    """Conch's note on mentions of agents nobody has: who answered instead, and why."""
    if not unknown:
        raise ValueError("unknown must hold at least one name")
    said = and_join([f"@{word}" for word in unknown])
    head = f"No agent here is called {said}"
    if answered is None:  # others were mentioned by name: the message went to them
        return f"{head}, so only the agents you named answered. Add agents in Settings."
    return f"{head}, so {answered} answered instead ({why}). Add agents in Settings."


# --- Unclear mentions: your agent wins ------------------------------------------------------


@dataclass(frozen=True)
class Mentions:
    """Whom a message goes to, and the mentions that could have meant an outside agent too."""

    named: list[str]  # your agents and outside agents, in order of first mention
    unclear: list[tuple[str, str]]  # (the outside agent's name, your agent it went to instead)


def read_mentions(text: str, ours: Sequence[str], outside: Sequence[str] = ()) -> Mentions:
    """The agents `text` mentions, each once, your agent taking any mention it clashes over.

    When a mention could mean an outside agent and one of yours (names.clashes), it goes to
    yours, and no outside agent is named at all: a message written for your agent must not go
    out because of it.
    """
    clashing = clashes(tuple(ours), tuple(outside))
    # Clashing outside names go first: among names equal but for case the first spelling is
    # the one found, and an unclear mention must be seen as one.
    found = mentions_in(text, (*clashing, *ours, *(n for n in outside if n not in clashing)))
    unclear = [(name, clashing[name]) for name in found if name in clashing]
    if not unclear:
        return Mentions(found, [])
    yours = set(ours)
    named = [clashing.get(n, n) for n in found if n in clashing or n in yours]
    return Mentions(list(dict.fromkeys(named)), unclear)


def unclear_note(unclear: Sequence[tuple[str, str]]) -> str:
    """Conch's note on where unclear mentions went, and that nothing was sent outside."""
    if not unclear:
        raise ValueError("unclear must hold at least one mention")
    said = [
        f"@{outside} could mean your agent {ours} or the outside agent “{outside}”: "
        f"it went to {ours}."
        for outside, ours in unclear
    ]
    return (
        " ".join(said) + " Nothing of this message was sent outside. To ask the outside agent, "
        "give it a name of its own first (Settings → Outside agents)."
    )
