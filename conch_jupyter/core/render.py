"""Markdown drawn sealed: the only HTML the chat view ever inserts comes from here.

Owns turning an agent's (or an outside agent's) Markdown into HTML that cannot run anything,
load anything from elsewhere, or restyle the page. markdown-it-py draws the Markdown with raw
HTML turned off; nh3 then cleans the result against a short allowlist, as a second lock:

- no script, style, iframe, object, embed, form, or event attributes (nothing outside the list);
- a picture whose source is elsewhere is dropped and its alt text kept ("[image: alt]"); only an
  inline data: picture (PNG, JPEG, GIF, WebP) is drawn, since it loads nothing;
- links keep only absolute http, https and mailto addresses, and open in a new tab with
  rel="noopener noreferrer".
"""

from __future__ import annotations

import functools
import html
import re
from collections.abc import Sequence
from typing import Any

import nh3
from markdown_it import MarkdownIt
from markdown_it.token import Token

_INLINE_IMAGE = re.compile(r"data:image/(?:png|jpeg|gif|webp);base64,[A-Za-z0-9+/=]+\Z")
_LINK = re.compile(r"(?:https?://|mailto:)\S+\Z", re.IGNORECASE)

TAGS = {
    *("p", "br", "hr", "h1", "h2", "h3", "h4", "h5", "h6", "blockquote"),
    *("strong", "em", "del", "s", "code", "pre", "ul", "ol", "li", "a", "span", "img"),
    *("table", "thead", "tbody", "tr", "th", "td"),
}
ATTRIBUTES = {"a": {"href", "title"}, "img": {"src", "alt", "title"}, "ol": {"start"}}
# Dropped with everything inside them, not just unwrapped.
DROPPED_WITH_CONTENT = {"script", "style", "iframe", "object", "embed", "form", "template"}


def _image(renderer: Any, tokens: Sequence[Token], idx: int, options: Any, env: Any) -> str:
    token = tokens[idx]
    src = str(token.attrGet("src") or "")
    alt = "".join(child.content for child in token.children or ())
    if _INLINE_IMAGE.match(src):
        return f'<img src="{html.escape(src)}" alt="{html.escape(alt)}">'
    shown = f"[image: {alt}]" if alt else "[image]"
    return f'<span class="conch-img-alt">{html.escape(shown)}</span>'


def _markdown(*, breaks: bool) -> MarkdownIt:
    options = {"html": False, "linkify": False, "typographer": False, "breaks": breaks}
    md = MarkdownIt("commonmark", options)
    md.enable(["table", "strikethrough"])
    md.add_render_rule("image", _image)
    return md


_MD = _markdown(breaks=False)
# A person's message keeps the lines they typed (Shift+Enter in the chat's box): each line end
# is a line break, as in a chat, where Markdown alone would join the lines into one.
_MD_LINES = _markdown(breaks=True)


def _keep(tag: str, attribute: str, value: str) -> str | None:
    """nh3's attribute filter: the last word on what may load or link."""
    if tag == "a" and attribute == "href":
        return value if _LINK.match(value.strip()) else None
    if tag == "img" and attribute == "src":
        return value if _INLINE_IMAGE.match(value.strip()) else None
    return value


def sanitize(fragment: str) -> str:
    """Clean an HTML fragment against the allowlist (also used on already-drawn Markdown)."""
    return nh3.clean(
        fragment,
        tags=TAGS,
        clean_content_tags=DROPPED_WITH_CONTENT,
        attributes=ATTRIBUTES,
        attribute_filter=_keep,
        link_rel="noopener noreferrer",
        set_tag_attribute_values={"a": {"target": "_blank"}},
        url_schemes={"http", "https", "mailto", "data"},
        allowed_classes={"span": {"conch-img-alt"}},
        strip_comments=True,
    )


# Every snapshot carries each message's HTML: a settled message is drawn once, then remembered.
@functools.lru_cache(maxsize=4096)
def render_markdown(text: str, *, lines: bool = False) -> str:
    """Markdown as sealed HTML: safe to insert with innerHTML. `lines`: every line end is a line
    break (a person's message)."""
    return sanitize((_MD_LINES if lines else _MD).render(text))
