"""Markdown sealed for Jupyter Chat: the one function every post of Conch's into a chat goes
through (`seal_for_chat`), and the wrappers Conch puts around a text inside a post (`code_span`,
`code_block`, `literal`) that no text inside can close.

Jupyter Chat's panel draws a message's Markdown itself (JupyterLab's renderer, with HTML, and
pictures fetched), so Conch cannot clean the HTML as `render` does for the notebook view: it
changes the Markdown instead, so that no renderer's reading of it holds

- a picture: every `![` gets a word joiner (U+2060, invisible) between `!` and `[`, so it is at
  most a link; no picture loads from anywhere, data: included;
- raw HTML or an autolink in angle brackets: every `<` before a letter, `/`, `!` or `?` gets one,
  so it is text;
- a link to anything but http, https or mailto: `](` and `]:` (an inline link and a reference
  definition) get one unless what follows is such an address, and `ftp://` does (the chat's
  renderer links bare ftp addresses).

The word joiner goes in everywhere, code included (where it shows nothing), never by telling code
from text: a sealing that skips what it takes for code is fooled by any fence or span that the
chat's renderer reads otherwise. Nothing is taken out and nothing is escaped with a backslash, so
sealing a sealed text changes nothing and never undoes an escape. The rest of Conch (the notebook
view) draws through `render`.
"""

from __future__ import annotations

import re

from markdown_it import MarkdownIt
from markdown_it.token import Token

JOINER = "\u2060"  # WORD JOINER: invisible, no line break, not white space to any renderer

_SAFE_ADDRESS = r"(?:https?://|mailto:)"
_WAYS_IN = re.compile(
    r"(?<=!)(?=\[)"  # a picture
    r"|(?<=<)(?=[A-Za-z/!?])"  # a tag, a comment, a declaration or an autolink
    rf"|(?<=\])(?=\((?!{_SAFE_ADDRESS}))"  # an inline link elsewhere
    rf"|(?<=\])(?=:(?![ \t]*{_SAFE_ADDRESS}))"  # a reference definition elsewhere
    r"|(?<=ftp)(?=://)",  # a bare ftp address
    re.IGNORECASE,
)


def seal_for_chat(text: str) -> str:
    """A text as Jupyter Chat may draw it: no picture, no raw HTML, links only http, https and
    mailto. Safe to apply twice: seal_for_chat(seal_for_chat(x)) == seal_for_chat(x)."""
    return _WAYS_IN.sub(JOINER, text)


def code_span(text: str) -> str:
    """`text` as inline code that nothing in it can close: fenced by one backtick more than its
    longest run of them (CommonMark 6.1), line ends as spaces."""
    inside = text.replace("\r\n", " ").replace("\n", " ").replace("\r", " ") or " "
    ticks = "`" * (_longest_run(inside, "`") + 1)
    if inside.strip() and (inside[0] in "` " or inside[-1] in "` "):
        inside = f" {inside} "  # one space each side is taken off again; a tick is kept apart
    return f"{ticks}{inside}{ticks}"


def code_block(text: str) -> str:
    """`text` as a fenced code block that no line of it can close: its fence is longer than any
    run of backticks in it (a tilde never closes a backtick fence)."""
    fence = "`" * max(3, _longest_run(text, "`") + 1)
    return f"{fence}\n{text.rstrip(chr(10))}\n{fence}"


_PUNCTUATION = re.compile(r"([!-/:-@\[-`{-~])")


def literal(text: str) -> str:
    """Words (a name, a title) shown as they are, on one line, inside Conch's own Markdown:
    every ASCII punctuation mark escaped, so nothing in them is Markdown or closes the emphasis
    around them."""
    one_line = " ".join(text.split())
    return _PUNCTUATION.sub(r"\\\1", one_line)


_MD = MarkdownIt("commonmark")


def fences_closed(text: str) -> str:
    """`text` with a code fence it leaves open closed, so that what Conch writes after it (a
    stopped reply's mark) is not drawn as code."""
    open_fence = next(
        (
            t
            for t in _MD.parse(text)
            if t.type == "fence" and t.level == 0 and t.map and not _closes(text, t)
        ),
        None,
    )
    if open_fence is None:
        return text
    return f"{text.rstrip()}\n{open_fence.markup}"


def _closes(text: str, fence: Token) -> bool:
    """Whether a top-level fence is closed by a line of its own."""
    start, end = fence.map or (0, 0)
    lines = text.split("\n")[start:end]
    if len(lines) < 2:
        return False
    last = lines[-1].strip()
    return len(last) >= len(fence.markup) and set(last) == {fence.markup[0]}


def _longest_run(text: str, char: str) -> int:
    runs = re.findall(f"{re.escape(char)}+", text)
    return max((len(r) for r in runs), default=0)
