"""The view's two files: one self-contained ES module and its CSS, prefixed, loading nothing."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from conch_jupyter.widget import ChatWidget, SettingsWidget

STATIC = Path(__file__).resolve().parent.parent / "conch_jupyter" / "widget" / "static"
JS = (STATIC / "widget.js").read_text()
CSS = (STATIC / "widget.css").read_text()


def test_the_module_imports_nothing_and_loads_nothing() -> None:
    # anywidget loads it from a blob URL: a relative import would fail, a CDN one is not allowed.
    assert not re.search(r"^\s*import\s", JS, re.MULTILINE)
    assert "import(" not in JS
    addresses = set(re.findall(r"https?://[^\s\"'`]+", JS))
    assert addresses == {"http://www.w3.org/2000/svg", "https://…"}  # a namespace, a placeholder
    assert "fetch(" not in JS
    assert "XMLHttpRequest" not in JS
    assert "export default" in JS


def test_only_sealed_html_is_ever_inserted() -> None:
    # innerHTML is set once, in h(), fed only by the `html` key: items Python drew sealed.
    assert len(re.findall(r"\.innerHTML\s*=", JS)) == 1
    assert re.findall(r"\bhtml: ([\w.]+)", JS) == ["item.html"] * JS.count("html: item.html")
    assert "insertAdjacentHTML" not in JS
    assert "outerHTML" not in JS
    assert "eval(" not in JS


def test_the_css_is_prefixed_and_loads_nothing() -> None:
    assert "@import" not in CSS
    assert not re.search(r"url\(", CSS)
    selectors = re.findall(r"(?m)^([^\s@{}/][^{]*)\{", CSS)
    for group in selectors:
        for selector in group.split(","):
            if selector.strip() in ("from", "to"):
                continue
            assert re.match(r"\s*\.conch(-[\w-]+)?\b", selector), selector
    for name in re.findall(r"@keyframes\s+([\w-]+)", CSS):
        assert name.startswith("conch-")


def test_motion_is_transform_and_opacity_only() -> None:
    for block in re.findall(r"@keyframes[^{]+\{((?:[^{}]*\{[^{}]*\})*)", CSS):
        properties = set(re.findall(r"([\w-]+)\s*:", block))
        assert properties <= {"transform", "opacity"}, properties
    transitions = re.findall(r"transition[\w-]*\s*:\s*([^;]+);", CSS)
    assert all(re.match(r"(opacity|transform)\b", t) for t in transitions), transitions
    keyframes = re.findall(r"\.animate\(\s*(\[[^\]]*\]|frames)", JS)
    assert keyframes, "the card animates"
    for frames in keyframes:
        if frames != "frames":
            assert set(re.findall(r"(\w+):", frames)) <= {"opacity", "transform"}, frames
    assert "prefers-reduced-motion" in JS
    assert "prefers-reduced-motion" in CSS


@pytest.mark.parametrize("widget", [ChatWidget, SettingsWidget])
def test_both_widgets_are_drawn_by_the_one_module(widget: type) -> None:
    assert str(widget._esm) == JS  # type: ignore[attr-defined]
    assert str(widget._css) == CSS  # type: ignore[attr-defined]
