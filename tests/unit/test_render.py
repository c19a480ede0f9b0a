"""Markdown drawn sealed: nothing that runs, loads from elsewhere or restyles the page survives."""

from __future__ import annotations

import re
from html.parser import HTMLParser

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conch_jupyter.core.render import TAGS, render_markdown, sanitize
from conch_jupyter.store.rows import Message

PNG = (
    "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQ"
    "GAhKmMIQAAAABJRU5ErkJggg=="
)


def test_markdown_is_drawn() -> None:
    html = render_markdown(
        "# Plan\n\n**bold** *it* ~~gone~~ `code`\n\n- one\n- two\n\n"
        "| a | b |\n|---|---|\n| 1 | 2 |\n\n> quoted\n\n```py\nprint(1)\n```"
    )
    for tag in ("<h1>", "<strong>", "<em>", "<s>", "<code>", "<ul>", "<li>", "<table>", "<td>"):
        assert tag in html
    assert "<blockquote>" in html
    assert "<pre><code>print(1)\n</code></pre>" in html


def test_a_persons_message_keeps_its_lines_and_an_agents_markdown_is_commonmark() -> None:
    typed = "Three things:\nA=1\nB=2\n\n- one\n- two"
    mine = Message("m1", "c1", "user", typed, 1.0).to_json()["html"]
    assert mine == (
        "<p>Three things:<br>\nA=1<br>\nB=2</p>\n<ul>\n<li>one</li>\n<li>two</li>\n</ul>\n"
    )
    theirs = Message("m2", "c1", "agent", typed, 1.0, agent="writer").to_json()["html"]
    assert "<br>" not in theirs
    assert "<p>Three things:\nA=1\nB=2</p>" in theirs
    # Still sealed: a line break is no way in for HTML.
    assert render_markdown("a\n<script>x</script>", lines=True) == (
        "<p>a<br>\n&lt;script&gt;x&lt;/script&gt;</p>\n"
    )


@pytest.mark.parametrize(
    "src",
    [
        "https://tracker.example/pixel.png",
        "http://127.0.0.1:8888/files/secret.png",
        "//tracker.example/pixel.png",
        "pixel.png",
        "/files/pixel.png",
    ],
)
def test_a_picture_from_elsewhere_is_dropped_and_its_alt_text_kept(src: str) -> None:
    html = render_markdown(f"See ![a chart]({src}) here.")
    assert "<img" not in html
    assert '<span class="conch-img-alt">[image: a chart]</span>' in html
    assert not re.search("pixel|secret", html)


@pytest.mark.parametrize(
    "src", ["file:///etc/passwd", "data:image/svg+xml;base64,PHN2Zz48L3N2Zz4=", "javascript:x"]
)
def test_a_picture_markdown_itself_refuses_stays_text(src: str) -> None:
    html = render_markdown(f"See ![a chart]({src}) here.")
    assert "<img" not in html
    assert f"![a chart]({src})" in html


def test_a_picture_without_alt_text_says_so() -> None:
    assert '<span class="conch-img-alt">[image]</span>' in render_markdown(
        "![](https://x.example/a.png)"
    )


def test_an_inline_picture_loads_nothing_and_is_drawn() -> None:
    html = render_markdown(f"![dot]({PNG})")
    assert f'<img src="{PNG}" alt="dot">' in html


@pytest.mark.parametrize(
    ("markdown", "href"),
    [
        ("[site](https://example.org/a?b=1)", "https://example.org/a?b=1"),
        ("[plain](http://example.org)", "http://example.org"),
        ("[mail](mailto:me@example.org)", "mailto:me@example.org"),
        ("<https://example.org/auto>", "https://example.org/auto"),
    ],
)
def test_links_open_safely(markdown: str, href: str) -> None:
    html = render_markdown(markdown)
    assert f'href="{href}"' in html
    assert 'target="_blank"' in html
    assert 'rel="noopener noreferrer"' in html


@pytest.mark.parametrize(
    "markdown",
    [
        "[x](javascript:alert(1))",
        "[x](JaVaScRiPt:alert(1))",
        "[x](vbscript:msgbox(1))",
        "[x](data:text/html;base64,PHNjcmlwdD4=)",
        "[x](/api/contents)",
        "[x](relative/page)",
        "[x](ftp://example.org/file)",
    ],
)
def test_links_that_are_not_web_or_mail_lose_their_address(markdown: str) -> None:
    html = render_markdown(markdown)
    assert "href=" not in html


@pytest.mark.parametrize(
    "hostile",
    [
        "<script>alert(1)</script>",
        "<img src=x onerror=alert(1)>",
        "<iframe src='https://evil.example'></iframe>",
        "<object data='https://evil.example/x.swf'></object>",
        "<embed src='https://evil.example/x'>",
        "<style>body{display:none}</style>",
        "<form action='https://evil.example'><input name=p></form>",
        "<a href='https://x.example' onclick='steal()'>x</a>",
        "<div style='position:fixed;inset:0'>cover</div>",
        "<svg><image href='https://evil.example/p.png'/></svg>",
        "<link rel=stylesheet href='https://evil.example/x.css'>",
    ],
)
def test_raw_html_in_markdown_is_only_text(hostile: str) -> None:
    html = render_markdown(f"before {hostile} after")
    assert "<" + hostile[1:4] not in html.replace("<p>", "").replace("</p>", "")
    assert "&lt;" in html  # shown as what it is: text


@pytest.mark.parametrize(
    ("fragment", "kept", "gone"),
    [
        ("<a href='javascript:alert(1)' onclick='x'>go</a>", "go", ["javascript", "onclick"]),
        ("<img src='https://tracker.example/p.png' alt='p'>", "", ["tracker"]),
        ("<script>alert(1)</script>ok", "ok", ["alert"]),
        ("<style>*{}</style>ok", "ok", ["*{}"]),
        ("<iframe src='https://x.example'>inner</iframe>ok", "ok", ["iframe", "inner"]),
        ("<p style='color:red' class='x' id='y'>t</p>", "<p>t</p>", ["style", "class", "id="]),
        ("<span class='conch-img-alt evil'>a</span>", 'class="conch-img-alt"', ["evil"]),
    ],
)
def test_the_allowlist_is_a_second_lock(fragment: str, kept: str, gone: list[str]) -> None:
    html = sanitize(fragment)
    assert kept in html
    for word in gone:
        assert word not in html


PIECES = st.sampled_from(
    [
        "text ",
        "**b** ",
        "`c` ",
        "\n\n",
        "- item\n",
        "[l](https://ok.example) ",
        "[j](javascript:x) ",
        "![i](https://evil.example/p.png) ",
        "<img src=https://evil.example/p.png> ",
        "<script>x</script>",
        "<a href=javascript:x onmouseover=y>a</a>",
        "<iframe src=//evil.example>",
        "<style>",
        '"><img src=//evil.example onerror=z>',
        "```\n",
        "> ",
        "<",
        ">",
        "&",
    ]
)


class _Elements(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.found: list[tuple[str, dict[str, str | None]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.found.append((tag, dict(attrs)))


ALLOWED = {"a": {"href", "title", "rel", "target"}, "img": {"src", "alt"}, "span": {"class"}}


@settings(max_examples=300, deadline=None)
@given(st.lists(PIECES, max_size=30).map("".join))
def test_nothing_hostile_survives_any_mix(markdown: str) -> None:
    parser = _Elements()
    parser.feed(render_markdown(markdown))
    for tag, attrs in parser.found:
        assert tag in TAGS, tag
        assert set(attrs) <= ALLOWED.get(tag, {"start"}), (tag, attrs)
        if tag == "a" and "href" in attrs:
            assert re.match(r"(https?://|mailto:)", attrs["href"] or ""), attrs
        if tag == "img":
            assert (attrs.get("src") or "data:image/").startswith("data:image/"), attrs
