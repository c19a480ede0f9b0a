"""Markdown sealed for Jupyter Chat (core/chat_seal.py), against a CommonMark renderer with HTML
on (markdown-it-py, as the chat panel draws Markdown with HTML): over hostile texts, what a sealed
text draws holds no picture, no raw HTML and no link but http, https and mailto; sealing twice
changes nothing; and what Conch wraps around a text (a code span, a fence, emphasis) holds the
whole text, whatever it holds. tests/browser/test_lab_chat_seal.py draws them in the chat panel."""

from __future__ import annotations

from html.parser import HTMLParser

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from markdown_it import MarkdownIt

from conch_jupyter.coding.rules import unasked_words
from conch_jupyter.coding.turn import ReportedCall, what_it_ran
from conch_jupyter.core.chat_seal import (
    JOINER,
    code_block,
    code_span,
    fences_closed,
    literal,
    seal_for_chat,
)

CHAT = MarkdownIt("commonmark", {"html": True}).enable(["table", "strikethrough"])

# The tags CommonMark draws of its own: any other in the HTML came from the text.
MARKDOWN_TAGS = {
    *("p", "br", "hr", "h1", "h2", "h3", "h4", "h5", "h6", "blockquote", "pre", "code"),
    *("em", "strong", "s", "del", "ul", "ol", "li", "a"),
    *("table", "thead", "tbody", "tr", "th", "td"),
}
SAFE_LINKS = ("http://", "https://", "mailto:")

# The pieces of tricks: pictures, links and definitions, raw HTML, entities, autolinks, fences
# of both kinds, backslashes, and look-alikes (fullwidth, zero-width and the word joiner itself).
PIECES = [
    *("![", "!", "[", "]", "(", ")", "]:", "](", "\\", "\\\\", "<", ">", "</", "<!--", "-->"),
    *("<?", "<!X", "<![CDATA[", "img", "svg", "a href=", " src=", "=", '"', "'", " ", "\n"),
    *("\n\n", "    ", "\t", "> ", "- ", "1. ", "# ", "*", "_", "`", "``", "```", "~~~", "~~~~"),
    *("http://127.0.0.1:9/p.png", "https://e.example/x", "//e.example/y", "javascript:"),
    *("JaVaScRiPt:", "data:image/png;base64,iVBORw0KGgo=", "mailto:a@b.c", "ftp://e.example"),
    *("www.e.example", "vbscript:", "file:///etc", "&#33;", "&#91;", "&#60;", "&lt;", "&amp;"),
    *("&#x21;", "&#106;avascript:", "&colon;", "%6A", "ref", "x", "r", "ｉｍｇ", "！", "［"),
    *("］", "（", "）", "＜", "\u200b", "\u200c", "\u200d", "\ufeff", "\u2060", "\u00a0"),
]
# Whole tricks: an opener, words, what joins them to an address, the address, a closer.
OPENERS = ["![", "[", "\\![", "\\\\![", "!\u200b[", "<img src=", "<a href=", "<", "[r]: ", "> ["]
JOINS = ["](", "][r]\n\n[r]: ", "][]\n\n[x]: ", "]\n\n[x]:", "](<", "]( ", "](\n", "]"]
ADDRESSES = [
    *("http://127.0.0.1:9/p.png", "x.png", "//e.example/y", "javascript:alert(1)", "data:x"),
    *("data:image/png;base64,iVBORw0KGgo=", "mailto:a@b.c", "&#106;avascript:x", "<x>"),
]
CLOSERS = [")", ">", ' "t")', ")\n", "", "\n"]
trick = st.tuples(
    st.sampled_from(OPENERS),
    st.sampled_from(["x", "", "a b", "![i](x)", "`", "<b>"]),
    st.sampled_from(JOINS),
    st.sampled_from(ADDRESSES),
    st.sampled_from(CLOSERS),
).map("".join)
FENCES = ["```\n", "~~~\n", "```~~~\n", "  ```\n", "````\n", "`", "``", "\n"]
hostile = st.one_of(
    st.lists(st.sampled_from(PIECES), max_size=40).map("".join),
    st.text(alphabet=st.sampled_from(sorted(set("".join(PIECES)))), max_size=80),
    st.lists(st.one_of(trick, st.sampled_from(FENCES + PIECES)), max_size=12).map("".join),
)


class _Drawn(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[str] = []
        self.hrefs: list[str] = []
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        self.hrefs += [value or "" for name, value in attrs if tag == "a" and name == "href"]

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.handle_starttag(tag, attrs)

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def drawn(markdown: str) -> _Drawn:
    found = _Drawn()
    found.feed(CHAT.render(markdown))
    found.close()
    return found


def assert_safe(markdown: str) -> None:
    tokens = CHAT.parse(markdown)
    kinds = {t.type for t in tokens} | {c.type for t in tokens for c in t.children or ()}
    assert not kinds & {"image", "html_block", "html_inline"}, markdown
    shown = drawn(markdown)
    assert set(shown.tags) <= MARKDOWN_TAGS, (markdown, shown.tags)
    assert "img" not in shown.tags
    for href in shown.hrefs:
        assert href.lower().startswith(SAFE_LINKS), (markdown, href)


@settings(max_examples=600, deadline=None)
@given(hostile)
def test_a_sealed_text_draws_no_picture_no_html_and_only_safe_links(text: str) -> None:
    sealed = seal_for_chat(text)
    assert_safe(sealed)
    assert seal_for_chat(sealed) == sealed  # twice is once: no escape undone
    assert sealed.replace(JOINER, "") == text.replace(JOINER, "")  # only joiners put in


@settings(max_examples=300, deadline=None)
@given(hostile, hostile.filter(lambda name: bool(name.split())))
def test_what_conch_wraps_holds_the_whole_text_and_the_post_is_safe(text: str, name: str) -> None:
    """A question as Conch writes it: a name in emphasis, a command in a code span, its detail
    in a fence, then Conch's own words after: none can be closed from inside."""
    post = seal_for_chat(
        f"**{literal(name)}** ran {code_span(text)} here.\n\n{code_block(text)}\n\nAnswer now."
    )
    assert_safe(post)
    blocks = CHAT.parse(post)
    first, fence, last = [b for b in blocks if b.type in ("inline", "fence")]
    assert first.type == "inline"
    inline = first.children or []
    spans = [c for c in inline if c.type == "code_inline"]
    assert len(spans) == 1
    one_line = " ".join(text.replace("\r\n", "\n").replace("\r", "\n").split("\n")) or " "
    assert spans[0].content.replace(JOINER, "") == one_line.replace(JOINER, "")
    strong = [c for c in inline if c.type == "strong_open"]
    assert len(strong) == 1
    assert inline[-1].type == "text"
    assert inline[-1].content.endswith(" here.")
    assert fence.type == "fence"
    assert fence.content.replace(JOINER, "") == f"{text.rstrip(chr(10))}\n".replace(JOINER, "")
    assert last.content == "Answer now."


@given(
    st.text(st.characters(exclude_categories=("Cc", "Cs")), max_size=40).filter(str.split)
    | hostile.filter(lambda name: bool(name.split()))
)
def test_a_literal_shows_its_words_on_one_line(name: str) -> None:
    shown = "".join(drawn(f"**{literal(name)}**").text).strip()
    assert shown == " ".join(name.split())


@pytest.mark.parametrize(
    ("text", "sealed"),
    [
        # A backslash before a picture: still no picture, and no escape undone.
        ("\\![x](http://e/p.png)", f"\\!{JOINER}[x](http://e/p.png)"),
        # Fence lines that mix ``` and ~~~ seal the same: the picture inside is none.
        ("```\n~~~\n![x](http://e/p.png)\n```", f"```\n~~~\n!{JOINER}[x](http://e/p.png)\n```"),
        ("<img src=x>", f"<{JOINER}img src=x>"),
        ("[ok](https://e.example)", "[ok](https://e.example)"),
        ("[no](javascript:alert(1))", f"[no]{JOINER}(javascript:alert(1))"),
        ("[r]: https://e.example\n[r]", "[r]: https://e.example\n[r]"),
        ("[r]: /local\n[r]", f"[r]{JOINER}: /local\n[r]"),
        ("ftp://e.example", f"ftp{JOINER}://e.example"),
        ("a < b, 2<3, &lt;b&gt;", "a < b, 2<3, &lt;b&gt;"),
    ],
)
def test_seal_puts_a_word_joiner_in_each_way_in_and_nothing_else(text: str, sealed: str) -> None:
    assert seal_for_chat(text) == sealed
    assert seal_for_chat(sealed) == sealed


def test_a_code_span_outlasts_the_backticks_in_it() -> None:
    assert code_span("ls") == "`ls`"
    assert code_span("echo `id`") == "`` echo `id` ``"
    span = code_span("echo `id`")
    drawn_line = CHAT.render(f"ran {span} without asking")
    assert drawn_line == "<p>ran <code>echo `id`</code> without asking</p>\n"
    assert CHAT.render(code_span("``")) == "<p><code>``</code></p>\n"
    assert code_span("") == "` `"


def test_a_code_block_outlasts_any_fence_line_in_it() -> None:
    text = "```\n~~~\n````\nstill code"
    [token] = CHAT.parse(code_block(text))
    assert token.type == "fence"
    assert token.content == f"{text}\n"


@pytest.mark.parametrize(
    ("text", "closed"),
    [
        ("half a thought", "half a thought"),
        ("```py\ncode", "```py\ncode\n```"),
        ("~~~~\ncode\n```", "~~~~\ncode\n```\n~~~~"),
        ("```\ndone\n```", "```\ndone\n```"),
    ],
)
def test_a_fence_left_open_is_closed(text: str, closed: str) -> None:
    assert fences_closed(text) == closed


@settings(max_examples=200, deadline=None)
@given(hostile.filter(lambda command: bool(command.strip())))
def test_the_watchs_line_holds_the_whole_command_in_its_code(command: str) -> None:
    """The watch's line, "Coder ran `…` without asking you": a backtick closes nothing."""
    line = unasked_words("Coder", what_it_ran(ReportedCall(id="c1", command=command)))
    assert_safe(seal_for_chat(line))
    [paragraph] = [t for t in CHAT.parse(line) if t.type == "inline"]
    children = paragraph.children or []
    [span] = [c for c in children if c.type == "code_inline"]
    shown = " ".join(command[:300].replace("\r\n", "\n").replace("\r", "\n").split("\n"))
    assert span.content == (shown if shown.strip() else " ")
    assert children[0].content == "Coder ran "
    assert children[-1].content.startswith(" without asking you")
