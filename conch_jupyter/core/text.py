"""Text from elsewhere made safe to keep and to show: `clean_text` (every text that enters Conch
passes here), `clean_json`, the fence no text can close, and names fit for one line of ours.

A leaf: pure functions of the standard library, imported by every layer above it.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

NAME_LIMIT = 80
_TICKS = re.compile(r"``*")  # not "`+": this spelling lets re search for the literal


# Characters that can hide or reorder text on screen or in a prompt: bidi overrides and
# isolates, zero-width characters, and lone surrogates (they break UTF-8 encoding later).
_DROPPED = [*range(0x20), *range(0x7F, 0xA0), *range(0x202A, 0x202F), *range(0x2066, 0x206A)]
_DROPPED += [0x200B, 0x200C, 0x200D, 0x2060, 0xFEFF, *range(0xD800, 0xE000)]
# C0 and C1 controls go, but tabs and line breaks stay; U+2028/U+2029 read as line breaks.
_CLEAN_TABLE: dict[int, str | None] = dict.fromkeys(_DROPPED) | {9: "\t", 10: "\n"}
_CLEAN_TABLE |= {0x2028: "\n", 0x2029: "\n"}


def clean_text(text: str, limit: int | None = None) -> str:
    """Text without control or invisible characters, cut to `limit` characters ("…" if cut;
    None: never cut). Every text from elsewhere passes here where it enters Conch (a model's
    stream, an outside agent's answer, a door message, an API body, a kernel's output), so
    none holds a character that cannot be stored (a lone surrogate) or shown plainly.

    Line ends become "\\n" (U+2028/U+2029 too: some readers treat them as line breaks); tabs
    stay, so code keeps its shape. A cut text is exactly `limit` characters long, the last
    being "…".
    """
    if limit is not None and limit < 1:
        raise ValueError("limit must be at least 1")
    if text.isascii() and text.isprintable():
        cleaned = text  # what nearly every piece of a stream is: nothing to drop
    else:
        cleaned = text.replace("\r\n", "\n").replace("\r", "\n").translate(_CLEAN_TABLE)
    if limit is not None and len(cleaned) > limit:
        return cleaned[: limit - 1] + "…"
    return cleaned


def clean_json(value: Any) -> Any:
    """A parsed JSON value with every string in it (keys too) cleaned by `clean_text`, uncut:
    for what arrives as JSON inside JSON (a tool call's arguments)."""
    if isinstance(value, str):
        return clean_text(value)
    if isinstance(value, list):
        return [clean_json(item) for item in value]
    if isinstance(value, dict):
        return {clean_text(str(key)): clean_json(item) for key, item in value.items()}
    return value


def fence(text: str) -> str:
    """`text`, verbatim, in a backtick fence longer than any backtick run inside it."""
    longest = max((len(run) for run in _TICKS.findall(text)), default=0)
    ticks = "`" * max(3, longest + 1)
    return f"{ticks}text\n{text}\n{ticks}"


def shown_name(name: str) -> str:
    """A name fit for one line of ours: no line breaks, quotes, brackets or backticks."""
    one_line = " ".join(clean_text(name, NAME_LIMIT).split())
    return re.sub(r"[\"“”\[\]<>`]", "", one_line).strip() or "unnamed"


def and_join(items: Sequence[str]) -> str:
    return f"{', '.join(items[:-1])} and {items[-1]}" if len(items) > 1 else "".join(items)
