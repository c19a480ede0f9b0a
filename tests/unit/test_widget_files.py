"""The view's two built files: one self-contained ES module and its CSS, prefixed, loading nothing
from elsewhere; and its sources in js/, where the only network calls go to the page's own
Jupyter server (js/server.js) and the only HTML inserted is the server's sealed drawing."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from conch_jupyter.widget import ChatWidget, SettingsWidget

ROOT = Path(__file__).resolve().parents[2]
STATIC = ROOT / "conch_jupyter" / "widget" / "static"
JS = (STATIC / "widget.js").read_text()
CSS = (STATIC / "widget.css").read_text()
SOURCES = {p.name: p.read_text() for p in (ROOT / "js").glob("*.js")}


def test_the_module_imports_nothing_and_loads_nothing_from_elsewhere() -> None:
    # anywidget loads it from a blob URL: a relative import would fail, a CDN one is not allowed.
    assert not re.search(r"^\s*import\s", JS, re.MULTILINE)
    assert "import(" not in JS
    addresses = set(re.findall(r"https?://[^\s\"'`]+", JS))
    # A namespace, a placeholder, and the address Settings fills in for a local Ollama (an
    # agent's setting: the server calls it, never the page).
    assert addresses == {"http://www.w3.org/2000/svg", "https://…", "http://localhost:11434/v1"}
    assert JS.count("http://localhost:11434/v1") == 1  # that one constant (providers.js)
    assert "XMLHttpRequest" not in JS
    assert "WebSocket" not in JS
    assert re.search(r"export (default|\{\s*\w+ as default\s*\})", JS)


def test_only_the_server_module_calls_the_network_and_only_under_conch_api() -> None:
    calling = sorted(name for name, text in SOURCES.items() if "fetch(" in text)
    assert calling == ["chat-agents.js", "server.js"]
    # Conch's JupyterLab extension for Jupyter Chat (a bundle of its own, not the view) reads
    # only who can be named, from the page's own server.
    agents = SOURCES["chat-agents.js"]
    assert re.findall(r"fetch\(([^,]+),", agents) == ['`${config.baseUrl || "/"}conch/api/roster`']
    assert "conch:agents" not in JS  # not bundled into the view
    server = SOURCES["server.js"]
    # Every call goes to {base_url}conch/api/…, the base URL being the page's own config's.
    assert server.count("fetch(") == 2
    assert "this.base = `${server.baseUrl}conch/api/`;" in server
    assert re.findall(r"fetch\(([^,]+),", server) == ["this.base + path", "url"]
    assert "const url = `${this.base}conversations/" in server


def test_only_sealed_html_is_ever_inserted() -> None:
    # innerHTML is set once, in h(), fed only by the `html` key: items the server drew sealed.
    for text in (JS, "\n".join(SOURCES.values())):
        assert len(re.findall(r"\.innerHTML\s*=", text)) == 1
        assert set(re.findall(r"\bhtml: ([\w.]+)", text)) == {"item.html"}
        assert "insertAdjacentHTML" not in text
        assert "outerHTML" not in text
        assert "eval(" not in text
    assert "innerHTML" in SOURCES["dom.js"]


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


def test_static_holds_only_what_the_build_makes() -> None:
    assert sorted(p.name for p in STATIC.iterdir()) == ["widget.css", "widget.js"]
    ignored = (ROOT / ".gitignore").read_text()
    assert "conch_jupyter/widget/static/" in ignored.splitlines()
