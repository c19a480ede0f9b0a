"""Who a message mentions (conch_jupyter.rounds.mentions): rules, properties, unclear mentions."""

from __future__ import annotations

import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conch_jupyter.rounds.mentions import mentions_in, unknown_mentions, unknown_note

AGENTS = ["Writer", "Writer Pro", "Researcher", "Code Reviewer", "gpt-4.1 helper", "Critic"]

# --- Mentions: one row per rule -----------------------------------------------------------

MENTION_CASES = [
    # the name, whole and longest first
    ("plain", "@Writer draft it", ["Writer"]),
    ("at the very start and end", "@Writer", ["Writer"]),
    ("longest name first", "@Writer Pro, draft it", ["Writer Pro"]),
    ("longer name fails its boundary", "@Writer Prose is long", ["Writer"]),
    ("case-insensitive", "@wRiTeR pRo and @CRITIC", ["Writer Pro", "Critic"]),
    ("spaces in a name", "@Code Reviewer look at it", ["Code Reviewer"]),
    ("digits, dots, dashes in a name", "ask @gpt-4.1 helper.", ["gpt-4.1 helper"]),
    ("part of a name is nothing", "@Code Review and @Writ", []),
    ("unknown names are plain text", "@Nobody, @everyone", []),
    # what may come before the @
    ("e-mail address", "mail me@Writer.com or me@Writer", []),
    ("dotted local part", "a.b@Writer", []),
    ("after a digit", "2@Writer", []),
    ("after an underscore", "x_@Writer", []),
    ("after % + - .", "%@Writer +@Writer -@Writer .@Writer", []),
    ("after brackets and quotes", '(@Writer) "@Critic"', ["Writer", "Critic"]),
    ("after a newline or tab", "hi\n@Writer\t@Critic", ["Writer", "Critic"]),
    ("after another @", "@@Writer", ["Writer"]),
    # what may come after the name
    ("runs on into a letter", "@Writers", []),
    ("runs on into a digit", "@Writer2", []),
    ("runs on into an underscore", "@Writer_x", []),
    ("a dash running on into a word", "@Writer-bot", []),
    ("a dot running on into a word", "@Writer.com", []),
    ("full stop", "Over to @Writer.", ["Writer"]),
    ("full stop then text", "Over to @Writer. Then", ["Writer"]),
    (
        "comma, colon, semicolon",
        "@Writer, @Critic: @Researcher;",
        ["Writer", "Critic", "Researcher"],
    ),
    ("question and exclamation marks", "@Writer? @Critic!", ["Writer", "Critic"]),
    ("apostrophe ends a name", "@Writer's draft", ["Writer"]),
    ("typographic apostrophe", "@Writer’s draft", ["Writer"]),
    ("trailing dash", "@Writer - go", ["Writer"]),
    ("dash before a space", "@Writer- go", ["Writer"]),
    # each once, in order of first mention
    ("each once, first-mention order", "@Critic, @writer, @CRITIC, @Writer", ["Critic", "Writer"]),
    # URLs
    ("https URL", "see https://x.org/@Writer", []),
    ("http URL query", "http://x.org/?u=@Writer&v=1", []),
    ("ftp URL", "ftp://host/@Writer", []),
    ("any scheme", "git+ssh://host/@Writer", []),
    ("www address", "www.x.org/@Writer and WWW.x.org/@Critic", []),
    ("mention after a URL", "https://x.org/ @Writer", ["Writer"]),
    ("URL in parentheses", "(https://x.org/@Writer) @Critic", ["Critic"]),
    # inline code
    ("inline code", "a `@Writer` b", []),
    ("two-backtick code span", "``a `@Writer` b`` then @Critic", ["Critic"]),
    ("unmatched backtick is literal", "a ` @Writer", ["Writer"]),
    ("runs of different length don't close", "`` @Writer ` b", ["Writer"]),
    ("code span across lines", "`a\n@Writer` @Critic", ["Critic"]),
    ("mention next to code", "@Writer `code` @Critic", ["Writer", "Critic"]),
    # fenced blocks
    ("backtick fence", "```\n@Writer\n```\n@Critic", ["Critic"]),
    ("tilde fence", "~~~\n@Writer\n~~~\n@Critic", ["Critic"]),
    ("fence with an info string", "```python\nx = '@Writer'\n```", []),
    ("longer closing fence", "```\n@Writer\n`````\n@Critic", ["Critic"]),
    ("shorter fence does not close", "````\n```\n@Writer\n````\n@Critic", ["Critic"]),
    ("other fence char does not close", "```\n~~~\n@Writer\n```\n@Critic", ["Critic"]),
    ("closing fence with text does not close", "```\n``` x\n@Writer\n```\n@Critic", ["Critic"]),
    ("unclosed fence runs to the end", "@Critic\n```\n@Writer\n", ["Critic"]),
    ("unclosed tilde fence", "~~~~\n@Writer\n~~~", []),
    ("indented fence in a list", "- item\n    ```\n    @Writer\n    ```\n@Critic", ["Critic"]),
    ("fence in a block quote", "> ```\n> @Writer\n> ```\n@Critic", ["Critic"]),
    ("backticks in the info string: inline code", "```@Writer``` and @Critic", ["Critic"]),
    ("CRLF line ends", "```\r\n@Writer\r\n```\r\n@Critic", ["Critic"]),
    ("fence in mid-line is not a fence", "a ``` @Writer", ["Writer"]),
]


@pytest.mark.parametrize(
    ("text", "expected"), [c[1:] for c in MENTION_CASES], ids=[c[0] for c in MENTION_CASES]
)
def test_mention_rules(text: str, expected: list[str]) -> None:
    assert mentions_in(text, AGENTS) == expected


def test_names_are_returned_as_given_and_input_order_does_not_matter() -> None:
    assert mentions_in("@WRITER PRO", ["writer pro", "writer"]) == ["writer pro"]
    assert mentions_in("@Writer Pro", list(reversed(AGENTS))) == ["Writer Pro"]


def test_no_names_or_blank_names() -> None:
    assert mentions_in("@Writer", []) == []
    assert mentions_in("@ hello", ["", "  "]) == []
    assert mentions_in("no at sign", AGENTS) == []


def test_names_equal_but_for_case_resolve_to_the_first_given() -> None:
    assert mentions_in("@writer", ["Writer", "WRITER"]) == ["Writer"]


def test_a_names_own_punctuation_is_escaped() -> None:
    assert mentions_in("@a.b and @axb", ["a.b"]) == ["a.b"]
    assert mentions_in("@a+b", ["a+b"]) == ["a+b"]


def test_very_long_names_are_fine() -> None:
    long = "x" * 5_000
    assert mentions_in(f"@{long} and @{long[:10]}", [long, long[:10], long[:20]]) == [
        long,
        long[:10],
    ]


def _message(names: list[str], size: int = 16_000) -> str:
    parts = ["Here is what I found, in detail, with", "`x = 1`", "https://example.org/a/b"]
    parts += ["```python\nprint('@x')\n```\n", "me@example.org"]
    parts += [f"@{n}" for n in names[:10]]
    text = "\n".join(parts[i % len(parts)] for i in range(size // 10))
    return text[:size]


def test_mentions_are_fast_on_a_long_message_with_many_agents() -> None:
    names = [f"Agent {i} helper" for i in range(50)]
    for text in (_message(names), "@" * 16_000, "`@" * 8_000, "```\n@Agent 1\n" * 1_000):
        assert len(text) <= 16_000
        best = min(_timed(lambda t=text: mentions_in(t, names)) for _ in range(5))
        # Typically well under a millisecond; the bound leaves room for a busy machine.
        assert best < 0.02


def _timed(run: object) -> float:
    assert callable(run)
    start = time.perf_counter()
    run()
    return time.perf_counter() - start


# --- Mentions: properties ------------------------------------------------------------------

NAME = st.from_regex(r"[A-Za-z]([A-Za-z0-9 _.\-]{0,10}[A-Za-z0-9])?", fullmatch=True)
# Text with nothing that could be a mention, code, a fence or an address.
FILLER = st.text(alphabet="abcXYZ019 ,;:!?()'\"\n", max_size=60)
BEFORE = st.sampled_from([" ", "\n", "(", '"', "\t"])
AFTER = st.sampled_from([" ", "\n", ")", ", ", ". ", "'s ", "! ", "?"])


@settings(max_examples=100, deadline=None)
@given(name=NAME, before=FILLER, after=FILLER, left=BEFORE, right=AFTER, case=st.integers(0, 2))
def test_a_mention_at_a_word_boundary_is_found(
    name: str, before: str, after: str, left: str, right: str, case: int
) -> None:
    said = (name, name.upper(), name.lower())[case]
    text = f"{before}{left}@{said}{right}{after}"
    assert mentions_in(text, [name]) == [name]


@settings(max_examples=100, deadline=None)
@given(
    names=st.lists(NAME, min_size=1, max_size=4),
    before=FILLER,
    after=FILLER,
    char=st.sampled_from("`~"),
    length=st.integers(3, 6),
    closed=st.booleans(),
    info=st.sampled_from(["", "python", " text"]),
)
def test_nothing_inside_a_fenced_block_is_a_mention(
    names: list[str],
    before: str,
    after: str,
    char: str,
    length: int,
    closed: bool,
    info: str,
) -> None:
    inner = "\n".join(f"{before} @{n} {after}" for n in names)
    block = f"{char * length}{info}\n{inner}\n"
    text = f"{before}\n{block}" + (f"{char * length}\n{after}" if closed else "")
    assert mentions_in(text, names) == []


@settings(max_examples=100, deadline=None)
@given(name=NAME, before=FILLER, after=FILLER, ticks=st.integers(1, 4))
def test_nothing_inside_inline_code_is_a_mention(
    name: str, before: str, after: str, ticks: int
) -> None:
    code = "`" * ticks
    assert mentions_in(f"{before} {code} @{name} {code} {after}", [name]) == []


@settings(max_examples=200, deadline=None)
@given(
    names=st.lists(NAME, max_size=5),
    text=st.text(alphabet="@`~\n .-_/:abAB1 ", max_size=120),
)
def test_mentions_are_known_names_each_once_and_really_mentioned(
    names: list[str], text: str
) -> None:
    text = text + " " + " ".join(f"@{n}" for n in names[:2])
    found = mentions_in(text, names)
    assert set(found) <= set(names)
    assert len(found) == len(set(found))
    for name in found:
        assert f"@{name}".casefold() in text.casefold()


@settings(max_examples=100, deadline=None)
@given(
    base=NAME,
    suffix=st.from_regex(r"( [A-Za-z]|[A-Za-z0-9])[A-Za-z0-9]{0,5}", fullmatch=True),
    swap=st.booleans(),
    follow=st.sampled_from(["", " ", ", ", ". ", "x", "-x", ".x"]),
)
def test_longest_name_first_with_prefix_names(
    base: str, suffix: str, swap: bool, follow: str
) -> None:
    long = base + suffix
    names = [long, base] if swap else [base, long]
    assert mentions_in(f"hi @{long}, ok", names) == [long]
    assert mentions_in(f"hi @{base}, ok", names) == [base]
    # When the long name runs on into a word, only the short one can still be meant.
    ends = follow in ("", " ", ", ", ". ")
    expected = [long] if ends else ([base] if suffix[0] == " " else [])
    assert mentions_in(f"hi @{long}{follow}", names) == expected


@pytest.mark.parametrize(
    ("text", "unknown"),
    [
        ("@Nobody what is this?", ["Nobody"]),
        ("@Writer and @Fo, then @Fo again", ["Fo"]),
        ("@Writer's draft, @writer, @Data Bot", []),  # names someone has, spelled any case
        ("@Writerly", ["Writerly"]),  # not Writer: the name runs on
        ("mail me@example.com or see http://host/@page and `@code`", []),
        ("```\n@fenced\n```\n@Real-Name-", ["Real-Name"]),
        ("@42 and @ alone", []),  # a word starts with a letter
    ],
)
def test_a_mention_of_an_agent_nobody_has_is_found(text: str, unknown: list[str]) -> None:
    assert unknown_mentions(text, ["Writer", "Data Bot"]) == unknown


def test_the_unknown_mentions_note_says_who_answered_and_why() -> None:
    assert unknown_note(["Nobody"], "Writer", "the last to answer in this chat") == (
        "No agent here is called @Nobody, so Writer answered instead (the last to answer in "
        "this chat). Add agents in Settings."
    )
    assert unknown_note(["Fo", "Ba"], None, "") == (
        "No agent here is called @Fo and @Ba, so only the agents you named answered. "
        "Add agents in Settings."
    )
    with pytest.raises(ValueError, match="at least one"):
        unknown_note([], None, "")
