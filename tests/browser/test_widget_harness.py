"""The view in a real browser: widget.js on a static page, with a tiny fake model and no kernel.

The page loads widget.js from a blob URL, as anywidget does, so a relative import or a CDN load
would fail here too. The chat is drawn as in the relay: a scripted event stream (Markdown drawn
sealed by core/render.py) goes through the real kernel-side code (widget/stream.py's ChatStream),
whose raw items are the model's `stream` trait; the view builds the timeline from them.

Frames: every animation a card runs must animate only transform and opacity (checked exactly),
and no frame may take over 50 ms of main-thread work while a card animates (Long Animation Frame
entries, which Chrome reports only for frames over 50 ms). The 16 ms budget is for real hardware;
a headless browser on a shared two-core box is not a place to time it.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Browser, Page, expect

from conch_jupyter.core.render import render_markdown
from conch_jupyter.rounds.engine import ROUND_END_WORDS, end_words
from conch_jupyter.rounds.prompts import turn_note
from conch_jupyter.widget.stream import ChatStream

from ..support.browser import screenshot_path

pytestmark = [pytest.mark.browser, pytest.mark.timeout(120)]

STATIC = Path(__file__).resolve().parents[2] / "conch_jupyter" / "widget" / "static"

PAGE = """<!doctype html>
<html><head><meta charset="utf-8"><title>Conch view harness</title>
<link rel="stylesheet" href="/widget.css">
<style>
  body { margin: 16px; background: var(--jp-layout-color0, #fff); width: 760px; }
  body.dark {
    --jp-layout-color0: #111111; --jp-layout-color1: #1e1e1e; --jp-layout-color2: #2b2b2b;
    --jp-layout-color3: #3a3a3a; --jp-content-font-color1: rgba(255,255,255,0.87);
    --jp-content-font-color2: rgba(255,255,255,0.6);
    --jp-content-font-color3: rgba(255,255,255,0.4);
    --jp-border-color2: #3f3f3f; --jp-brand-color1: #4f9cf0; --jp-warn-color1: #f0a040;
  }
</style></head>
<body><div id="root"></div>
<script type="module">
  const source = await (await fetch("/widget.js")).text();
  const url = URL.createObjectURL(new Blob([source], { type: "text/javascript" }));
  const view = (await import(url)).default;
  class FakeModel {
    constructor(state) {
      this.state = { ...state }; this.handlers = {}; this.sent = []; this.saved = 0;
    }
    get(name) { return this.state[name]; }
    set(name, value) { this.state[name] = value; this.emit(`change:${name}`); }
    save_changes() { this.saved += 1; }
    on(event, callback) { (this.handlers[event] ||= []).push(callback); }
    off(event, callback) {
      if (!event) { this.handlers = {}; return; }
      const kept = (this.handlers[event] || []).filter((cb) => callback && cb !== callback);
      this.handlers[event] = kept;
    }
    send(content) { this.sent.push(content); }
    emit(event, ...args) { for (const cb of [...(this.handlers[event] || [])]) cb(...args); }
    update(patch) {
      Object.assign(this.state, patch);
      for (const name of Object.keys(patch)) this.emit(`change:${name}`);
    }
  }
  window.mount = (state) => {
    window.cleanup?.();
    const el = document.getElementById("root");
    el.replaceChildren();
    window.model = new FakeModel(state);
    window.cleanup = view.render({ model: window.model, el });
    return true;
  };
  window.frames = [];
  window.slowFrames = [];
  if (PerformanceObserver.supportedEntryTypes.includes("long-animation-frame")) {
    const slow = (list) => window.slowFrames.push(...list.getEntries().map((e) => e.duration));
    new PerformanceObserver(slow).observe({ type: "long-animation-frame" });
  }
  window.watchFrames = (ms) => new Promise((resolve) => {
    const times = [];
    const start = performance.now();
    const tick = (t) => {
      times.push(t);
      if (t - start < ms) requestAnimationFrame(tick); else resolve(times);
    };
    requestAnimationFrame(tick);
  });
  window.animatedProperties = () => [...new Set(document.getAnimations().flatMap((a) =>
    a.effect.getKeyframes().flatMap((k) => Object.keys(k))))]
    .filter((p) => !["offset", "computedOffset", "easing", "composite"].includes(p));
  window.ready = true;
</script></body></html>
"""


class _Server(ThreadingHTTPServer):
    hits: list[str]


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def do_GET(self) -> None:
        self.server.hits.append(self.path)
        files = {"/widget.js": "text/javascript", "/widget.css": "text/css"}
        if self.path == "/":
            body, kind = PAGE.encode(), "text/html"
        elif self.path in files:
            body, kind = (STATIC / self.path.lstrip("/")).read_bytes(), files[self.path]
        else:
            body, kind = b"\x89PNG\r\n\x1a\n", "image/png"  # what a tracking pixel would fetch
        self.send_response(200)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture(scope="module")
def harness() -> Iterator[_Server]:
    server = _Server(("127.0.0.1", 0), _Handler)
    server.hits = []
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


@pytest.fixture
def page(browser: Browser, harness: _Server) -> Iterator[Page]:
    context = browser.new_context(viewport={"width": 800, "height": 900})
    page = context.new_page()
    page.goto(f"http://127.0.0.1:{harness.server_address[1]}/")
    page.wait_for_function("window.ready === true")
    yield page
    context.close()


# --- a scripted chat, through the kernel side's own state code -------------------------------

OURS = {"researcher": "Researcher", "writer": "Writer", "data-bot": "Data Bot"}


class Chat:
    """A chat's event stream, written by hand, taken as the kernel takes it for the view."""

    def __init__(
        self, outside: dict[str, str] | None = None, clashing: dict[str, str] | None = None
    ) -> None:
        self.state = ChatStream()
        self.created, self.seq, self.replies = 1_000.0, 0, 0
        clashes = clashing or {}
        roster = {
            "agents": [{"id": i, "name": n} for i, n in OURS.items()],
            "outside": [
                {"id": i, "name": n, "clashes_with": clashes.get(i)}
                for i, n in (outside or {}).items()
            ],
        }
        snapshot = {"title": "notebooks/demo.ipynb", "messages": [], "events": [], "busy": False}
        self.state.take({"type": "snapshot", "conversation": {**snapshot, "roster": roster}})

    def _now(self) -> float:
        self.created += 1
        return self.created

    def _message(self, role: str, text: str, **more: Any) -> None:
        mid = more.pop("id", f"m{int(self.created)}-{role}")
        message = {"id": mid, "role": role, "text": text, "created": self._now(), **more}
        if role != "note":
            message["html"] = render_markdown(text)  # as the server draws it, sealed
        if message.get("agent"):
            message["name"] = self.state.name(message["agent"])
        self.state.take({"type": "message", "message": message})

    def _event(self, kind: str, **data: Any) -> None:
        self.seq += 1
        event = {"seq": self.seq, "type": kind, "created": self._now(), **data}
        self.state.take({"type": "event", "event": event})

    def user(self, text: str) -> Chat:
        self._message("user", text)
        return self

    def start(self, *named: str) -> Chat:
        self._event("round.started", named=list(named))
        return self

    def floor(self, speaker: str, handed_by: str | None = None) -> Chat:
        self.state.take(
            {"type": "round", "round": {"speaker": speaker, "replies": self.replies, "limit": 8}}
        )
        name = self.state.name
        note = turn_note(name(speaker), name(handed_by) if handed_by else None)
        self._message("note", note, round={"turn": self.replies + 1, "handed_by": handed_by})
        return self

    def stream(self, reply: str, agent: str, text: str) -> Chat:
        self.state.take(chunk(reply, agent, text))
        return self

    def reply(self, reply: str, agent: str, text: str, handed_by: str | None = None) -> Chat:
        place = {"turn": self.replies + 1, "handed_by": handed_by}
        self._message("agent", text, id=reply, agent=agent, round=place)
        self.replies += 1
        return self

    def ask(self, agent: str) -> Chat:
        self._event("round.asking", agent=agent)
        self.state.take(
            {"type": "round", "round": {"speaker": agent, "replies": self.replies, "limit": 8}}
        )
        return self

    def answer(self, agent: str, text: str) -> Chat:
        self._message("outside", text, agent=agent, round={"turn": self.replies + 1})
        self.replies += 1
        return self

    def end(self, reason: str) -> Chat:
        if ROUND_END_WORDS[reason]:
            self._message("note", f"The round ended: {ROUND_END_WORDS[reason]}.")
        self.state.take({"type": "round", "round": None})
        spoken = [self.state.name(str(m["agent"])) for m in self.spoken()]
        words = end_words(spoken, self.replies, reason)
        self._event("round.ended", turns=self.replies, reason=reason, words=words)
        return self

    def spoken(self) -> list[dict[str, Any]]:
        return [m for m in self.state.messages.values() if m["role"] in ("agent", "outside")]

    def traits(self) -> dict[str, Any]:
        return {"view": "chat", "stream": list(self.state.items), "notice": "", "problem": ""}


def chunk(reply: str, agent: str, text: str) -> dict[str, Any]:
    return {"type": "delta", "reply": reply, "agent": agent, "text": text}


def mount(page: Page, traits: dict[str, Any]) -> None:
    page.evaluate("state => window.mount(state)", traits)


def update(page: Page, traits: dict[str, Any]) -> None:
    page.evaluate("patch => window.model.update(patch)", traits)


def sent(page: Page) -> list[dict[str, Any]]:
    """What the view sent the kernel, after its first word (a chat asks for the relay)."""
    result: list[dict[str, Any]] = page.evaluate("window.model.sent")
    return [m for m in result if m != {"type": "relay"}]


REPLY_R = "Options:\n\n- a museum\n- a **film** marathon\n\n@Writer, over to you."
REPLY_W = "A plan for Saturday, in `three` steps.\n\n@Researcher, over to you."


def two_agent_round() -> Chat:
    chat = Chat().user("@Researcher find options, @Writer draft it. Take turns.")
    chat.start("researcher", "writer").floor("researcher")
    chat.reply("r1", "researcher", REPLY_R)
    chat.floor("writer", handed_by="researcher")
    return chat.stream("w1", "writer", "A plan for Saturday, in `three`")


def card(page: Page) -> Any:
    return page.locator(".conch-round").first


def pearl_rests_on(page: Page, face_name: str) -> bool:
    return bool(
        page.evaluate(
            """name => {
              const face = [...document.querySelectorAll('.conch-face')]
                .find((f) => f.querySelector('.conch-face-name').textContent === name);
              const disc = face.querySelector('.conch-disc').getBoundingClientRect();
              const pearl = document.querySelector('.conch-pearl').getBoundingClientRect();
              const px = pearl.left + pearl.width / 2, py = pearl.top + pearl.height / 2;
              return Math.abs(px - (disc.left + disc.width / 2)) < 2 && Math.abs(py - disc.top) < 5;
            }""",
            face_name,
        )
    )


# --- the round card ---------------------------------------------------------------------------


def test_a_live_round_card_shows_faces_the_pass_and_who_has_the_floor(page: Page) -> None:
    mount(page, two_agent_round().traits())
    # No Jupyter server behind this page: the kernel relays, and is asked to.
    expect(page.locator(".conch-chat")).to_have_attribute("data-source", "kernel")
    assert page.evaluate("window.model.sent") == [{"type": "relay"}]
    round_card = card(page)
    expect(round_card).to_have_attribute("data-state", "live")
    expect(round_card.locator(".conch-face")).to_have_count(2)
    expect(round_card.locator(".conch-arc")).to_have_count(1)
    expect(round_card.locator(".conch-arc.is-newest")).to_have_count(1)
    expect(round_card.locator(".conch-face.has-floor .conch-face-name")).to_have_text("Writer")
    expect(round_card.locator(".conch-round-line")).to_have_text(
        "Writer is answering · 2 of 8 replies"
    )
    expect(round_card.locator(".conch-stop")).to_be_visible()
    stage = round_card.locator(".conch-stage")
    expect(stage).to_have_attribute("role", "img")
    expect(stage).to_have_attribute(
        "aria-label",
        "In the round: Researcher and Writer. The floor passed from Researcher to Writer. "
        "Writer has the floor.",
    )
    # Who is answering is announced to screen readers.
    expect(page.locator(".conch-chat [role=status]")).to_have_text("Writer is answering")
    # The log around it: the handover line, the agent's divider, the reply streaming in.
    expect(page.locator(".conch-handover")).to_have_text(
        ["Researcher's turn", "Researcher handed over to Writer"]
    )
    first = page.locator(".conch-agent").first
    expect(first.locator(".conch-who")).to_have_text("Researcher")
    expect(first.locator(".conch-place")).to_have_text("turn 1")
    streaming = page.locator(".conch-agent.is-streaming")
    expect(streaming.locator(".conch-place")).to_have_text("turn 2 · handed over by Researcher")
    # Its Markdown drawn as it streams, as nodes (sealed HTML once it settles): code already.
    expect(streaming.locator(".conch-streaming-text")).to_have_text("A plan for Saturday, in three")
    expect(streaming.locator(".conch-streaming-text code")).to_have_text("three")
    assert pearl_rests_on(page, "Writer")
    page.locator(".conch-chat").screenshot(path=screenshot_path("harness-round-live"))


def test_the_kernel_relays_each_chunk_and_its_trait_doubles_nothing(page: Page) -> None:
    chat = two_agent_round()
    mount(page, chat.traits())
    text = page.locator(".conch-agent.is-streaming .conch-streaming-text")
    # Markdown is drawn while it streams (issue 23, item 5): `three` is code already.
    expect(text).to_have_text("A plan for Saturday, in three")
    expect(text.locator("code")).to_have_text("three")
    more = chunk("w1", "writer", " steps, **first <b>the</b> museum")
    page.evaluate("item => window.model.emit('msg:custom', {type: 'item', item})", more)
    # An open ** is bold so far; HTML in the words is only text (no element made from it).
    expect(text).to_have_text("A plan for Saturday, in three steps, first <b>the</b> museum")
    expect(text.locator("strong")).to_have_text("first <b>the</b> museum")
    expect(text.locator("b")).to_have_count(0)
    # The trait synced again, the chunks joined as the kernel joins them: taken all over again.
    update(page, chat.stream("w1", "writer", " steps, **first <b>the</b> museum").traits())
    expect(text).to_have_text("A plan for Saturday, in three steps, first <b>the</b> museum")
    update(page, chat.reply("w1", "writer", REPLY_W, handed_by="researcher").traits())
    expect(page.locator(".conch-agent.is-streaming")).to_have_count(0)
    expect(page.locator(".conch-agent").nth(1).locator(".conch-md code")).to_have_text("three")
    # Through the kernel, the mode switch is not drawn (only the user's own page may change it).
    expect(page.locator(".conch-mode-bar")).to_be_hidden()


def test_a_new_pass_draws_its_arc_and_the_pearl_travels_on_the_compositor(page: Page) -> None:
    chat = two_agent_round()
    mount(page, chat.traits())
    page.wait_for_timeout(100)
    chat.reply("w1", "writer", REPLY_W, handed_by="researcher")
    chat.floor("researcher", handed_by="writer")
    update(page, chat.traits())
    round_card = card(page)
    expect(round_card.locator(".conch-arc")).to_have_count(2)
    expect(round_card.locator(".conch-arc").nth(1)).to_have_class("conch-arc is-newest")
    expect(round_card.locator(".conch-face.has-floor .conch-face-name")).to_have_text("Researcher")
    # Everything that moves moves by transform and opacity only.
    assert set(page.evaluate("window.animatedProperties()")) <= {"transform", "opacity"}
    moving = page.evaluate(
        "document.getAnimations().filter(a => a.playState === 'running' && "
        "a.effect.target.classList.contains('conch-pearl-track')).length"
    )
    assert moving == 1, "the pearl travels along the new arc"
    # Frames while it travels (the frame that drew the new items is not the animation's).
    page.evaluate("new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))")
    page.evaluate("window.slowFrames.length = 0")
    first: list[float] = page.evaluate("window.watchFrames(300)")
    assert not pearl_rests_on(page, "Researcher"), "mid-way, the pearl is on the arc"
    second: list[float] = page.evaluate("window.watchFrames(500)")
    assert len(first) + len(second) > 5
    page.evaluate("new Promise(r => setTimeout(r, 50))")  # entries arrive a little later
    assert page.evaluate("window.slowFrames") == [], "a frame took over 50 ms while animating"
    page.wait_for_function(
        "!document.getAnimations().some(a => a.effect.target.classList"
        ".contains('conch-pearl-track') && a.playState === 'running')"
    )
    assert pearl_rests_on(page, "Researcher")
    expect(page.locator(".conch-chat [role=status]")).to_have_text("Researcher is answering")
    # Recorded, not asserted: frame pacing in a headless browser on a shared box says little.
    gaps = [b - a for part in (first, second) for a, b in pairwise(part)]
    record = {"frames": len(first) + len(second), "longest_gap_ms": round(max(gaps), 1)}
    Path(screenshot_path("harness-frames")).with_suffix(".json").write_text(json.dumps(record))


def test_stop_asks_python_and_the_card_folds_to_one_line(page: Page) -> None:
    chat = two_agent_round()
    mount(page, chat.traits())
    round_card = card(page)
    round_card.locator(".conch-stop").click()
    assert {"type": "stop"} in sent(page)
    expect(round_card.locator(".conch-stop")).to_be_disabled()
    expect(round_card.locator(".conch-stop")).to_have_text("Stopping…")
    chat.reply("w1", "writer", "A plan for Saturday, in", handed_by="researcher")
    update(page, chat.end("stopped").traits())
    words = "Researcher and Writer took turns · 2 replies · ended: you stopped it"
    expect(round_card).to_have_attribute("data-state", "folded")
    folded = round_card.locator(".conch-round-folded")
    expect(folded).to_have_text(words)
    expect(round_card.locator(".conch-stage")).to_be_hidden()
    expect(round_card.locator(".conch-stop")).to_be_hidden()
    expect(page.locator(".conch-chat [role=status]")).to_have_text(words)
    expect(page.locator(".conch-note .conch-note-text")).to_have_text(
        "The round ended: you stopped it."
    )
    page.locator(".conch-chat").screenshot(path=screenshot_path("harness-round-folded"))
    folded.click()  # the folded line opens the picture again, still
    expect(folded).to_have_attribute("aria-expanded", "true")
    expect(round_card.locator(".conch-stage")).to_be_visible()
    expect(round_card.locator(".conch-face.has-floor")).to_have_count(0)


def test_a_round_that_simply_finished_folds_without_a_reason(page: Page) -> None:
    chat = Chat().user("@Researcher find options, @Writer draft it")
    chat.start("researcher", "writer").floor("researcher").reply("r1", "researcher", "Options.")
    chat.floor("writer").reply("w1", "writer", "A draft.").end("done")
    mount(page, chat.traits())
    expect(card(page)).to_have_attribute("data-state", "folded")
    expect(card(page).locator(".conch-round-folded")).to_have_text(
        "Researcher and Writer took turns · 2 replies"
    )
    expect(page.locator(".conch-handover").nth(1)).to_have_text("Writer's turn")


def test_reduced_motion_draws_arcs_at_once_and_rests_the_pearl(page: Page) -> None:
    page.emulate_media(reduced_motion="reduce")
    chat = two_agent_round()
    mount(page, chat.traits())
    chat.reply("w1", "writer", REPLY_W, handed_by="researcher")
    update(page, chat.floor("researcher", handed_by="writer").traits())
    round_card = card(page)
    expect(round_card.locator(".conch-arc")).to_have_count(2)
    assert page.evaluate("document.getAnimations().length") == 0
    newest = round_card.locator(".conch-arc.is-newest")
    assert newest.evaluate("arc => getComputedStyle(arc).opacity") == "1"
    assert pearl_rests_on(page, "Researcher")
    expect(round_card.locator(".conch-round-line")).to_have_text(
        "Researcher is answering · 3 of 8 replies"
    )
    page.locator(".conch-chat").screenshot(path=screenshot_path("harness-reduced-motion"))
    update(page, chat.end("stopped").traits())
    expect(round_card).to_have_attribute("data-state", "folded")  # at once, no fold animation
    assert page.evaluate("document.getAnimations().length") == 0


def test_an_outside_agent_is_marked_on_the_card_and_framed_in_the_log(page: Page) -> None:
    chat = Chat(outside={"helper": "Helper"}).user("@Helper what do you think?")
    chat.start("helper").ask("helper")
    mount(page, chat.traits())
    face = card(page).locator(".conch-face")
    expect(face).to_have_class("conch-face is-outside has-floor")
    expect(face).to_have_attribute("title", "Helper — outside agent")
    expect(face.locator(".conch-outside-badge")).to_be_visible()
    expect(card(page).locator(".conch-round-line")).to_have_text(
        "Helper (outside agent) is answering · 1 of 8 replies"
    )
    chat.answer("helper", "Try the **aquarium**. <script>alert(1)</script>").end("done")
    update(page, chat.traits())
    frame = page.locator(".conch-outside")
    expect(frame.locator(".conch-outside-mark")).to_have_text("Outside agent")
    expect(frame.locator(".conch-who")).to_have_text("Helper")
    expect(frame.locator(".conch-md strong")).to_have_text("aquarium")
    expect(frame.locator("script")).to_have_count(0)
    expect(card(page)).to_have_attribute("data-state", "folded")
    expect(card(page).locator(".conch-round-folded")).to_have_text("Helper answered · 1 reply")
    page.locator(".conch-chat").screenshot(path=screenshot_path("harness-outside"))


# --- the composer -----------------------------------------------------------------------------


def test_the_mention_picker_by_keyboard_and_mouse(page: Page) -> None:
    mount(page, Chat(outside={"helper": "Helper"}).traits())
    box = page.locator(".conch-input")
    options = page.locator(".conch-mention")
    names = options.locator(".conch-mention-name")
    box.click()
    box.type("Hello @")
    expect(page.locator(".conch-mentions")).to_be_visible()
    expect(names).to_have_text(["Researcher", "Writer", "Data Bot", "Helper"])
    expect(options.locator(".conch-mention-tag")).to_have_text(["outside"])
    expect(page.locator(".conch-mention-group")).to_have_text(["Your agents", "Outside agents"])
    expect(box).to_have_attribute("aria-expanded", "true")
    page.locator(".conch-chat").screenshot(path=screenshot_path("harness-mentions"))
    box.type("e")  # Researcher, Writer and Helper hold an "e"; those that start with it first
    expect(names).to_have_text(["Researcher", "Writer", "Helper"])
    box.type("r")
    expect(names).to_have_text(["Researcher", "Writer", "Helper"])
    box.press("ArrowDown")
    expect(options.nth(1)).to_have_attribute("aria-selected", "true")
    expect(box).to_have_attribute("aria-activedescendant", options.nth(1).get_attribute("id"))
    box.press("Enter")  # chooses; does not send
    expect(box).to_have_value("Hello @Writer ")
    expect(page.locator(".conch-mentions")).to_be_hidden()
    assert sent(page) == []
    box.type("and @da")
    expect(names).to_have_text(["Data Bot"])
    box.press("Tab")
    expect(box).to_have_value("Hello @Writer and @Data Bot ")
    box.type("then @h")
    page.locator(".conch-mention", has_text="Helper").click()  # by mouse
    expect(box).to_have_value("Hello @Writer and @Data Bot then @Helper ")
    box.type("@zz")
    expect(page.locator(".conch-mentions")).to_be_hidden()
    box.press("Backspace")
    box.press("Backspace")
    box.press("Backspace")
    box.press("Shift+Enter")
    box.type("second line")
    assert sent(page) == []
    box.press("Enter")
    assert sent(page) == [
        {"type": "send", "text": "Hello @Writer and @Data Bot then @Helper \nsecond line"}
    ]
    expect(box).to_have_value("")
    box.type("@W")
    box.press("Escape")
    expect(page.locator(".conch-mentions")).to_be_hidden()


def test_the_picker_never_offers_two_entries_alike_and_yours_wins(page: Page) -> None:
    """Issue 16: outside agents whose names read as one of yours (by the server's key, or the
    roster's clashes_with for a look-alike) are held back, and the picker says so."""
    chat = Chat(
        outside={
            "w2": "ＷＲＩＴＥＲ",  # full width: the same key as your Writer
            "rp": "Researcher please",  # starts with your Researcher
            "rc": "Reseаrcher",  # a Cyrillic а: the server's confusables see it
            "helper": "Helper",
            "helper-2": "he​lper",  # a zero-width space: the same key as Helper
        },
        clashing={"rc": "Researcher", "rp": "Researcher", "w2": "Writer"},
    )
    mount(page, chat.traits())
    box = page.locator(".conch-input")
    names = page.locator(".conch-mention .conch-mention-name")
    held = page.locator(".conch-mention-held")
    box.click()
    box.type("@")
    expect(names).to_have_text(["Researcher", "Writer", "Data Bot", "Helper"])
    expect(page.locator(".conch-mention .conch-mention-tag")).to_have_text(["outside"])
    expect(held).to_have_text(
        "Not offered here: outside agents whose names clash with your “Researcher” and "
        "“Writer”. Rename them in Settings → Outside agents."
    )
    page.locator(".conch-chat").screenshot(path=screenshot_path("harness-mentions-held"))
    box.type("researcher p")
    expect(page.locator(".conch-mention")).to_have_count(0)
    expect(held).to_contain_text("your “Researcher”")
    box.press("Enter")  # nothing to choose: Enter sends what was typed, to your Researcher
    assert sent(page) == [{"type": "send", "text": "@researcher p"}]
    box.type("@ｗ")  # full width typed: matches by key
    expect(names).to_have_text(["Writer"])
    box.press("Escape")
    expect(page.locator(".conch-mentions")).to_be_hidden()


def test_names_that_arrive_while_the_picker_is_open_are_offered_at_once(page: Page) -> None:
    chat = Chat()
    mount(page, {**chat.traits(), "stream": []})  # the chat's snapshot has not come yet
    box = page.locator(".conch-input")
    box.click()
    box.type("@W")
    expect(page.locator(".conch-mentions")).to_be_hidden()
    update(page, {"stream": chat.traits()["stream"]})
    expect(page.locator(".conch-mention .conch-mention-name")).to_have_text(["Writer"])


def test_sending_while_a_round_runs_says_it_ends_the_round(page: Page) -> None:
    mount(page, two_agent_round().traits())
    expect(page.locator(".conch-hint")).to_have_text("Sending now ends the round.")
    box = page.locator(".conch-input")
    assert "end the round" in (box.get_attribute("placeholder") or "")
    box.type("stop there, thanks")
    box.press("Enter")
    update(page, {"notice": "Your message ends the round once Writer's reply is in."})
    expect(page.locator(".conch-hint")).to_have_text(
        "Your message ends the round once Writer's reply is in."
    )
    # A message Python could not send comes back to the empty box.
    page.evaluate("window.model.emit('msg:custom', {type: 'send.failed', text: 'lost?'})")
    expect(box).to_have_value("lost?")


# --- sealed Markdown --------------------------------------------------------------------------


def test_sealed_markdown_blocks_a_remote_image(page: Page, harness: _Server) -> None:
    pixel = f"http://127.0.0.1:{harness.server_address[1]}/pixel.png"
    text = (
        f"Look: ![tracker]({pixel}) and <img src='{pixel}?raw'> "
        f"[a link](https://example.org) [bad](javascript:alert(1))\n\n"
        f'<iframe src="{pixel}?frame"></iframe><style>body{{display:none}}</style>'
    )
    chat = Chat().user("hello")
    chat._message("agent", text, id="a1", agent="writer")
    harness.hits.clear()
    mount(page, chat.traits())
    body = page.locator(".conch-agent .conch-md")
    expect(body).to_contain_text("[image: tracker]")
    expect(body.locator("img, iframe, style, script")).to_have_count(0)
    link = body.locator("a")
    expect(link).to_have_count(1)
    expect(link).to_have_attribute("href", "https://example.org")
    expect(link).to_have_attribute("target", "_blank")
    expect(link).to_have_attribute("rel", "noopener noreferrer")
    page.wait_for_timeout(300)
    assert not [hit for hit in harness.hits if hit.startswith("/pixel.png")]
    page.locator(".conch-chat").screenshot(path=screenshot_path("harness-sealed-markdown"))
    # The check can see a load: an image put on the page directly is fetched.
    page.evaluate(f"document.body.append(Object.assign(new Image(), {{src: '{pixel}?control'}}))")
    page.wait_for_function("[...document.images].every(i => i.complete)")
    assert "/pixel.png?control" in harness.hits


def test_the_chat_in_a_dark_theme(page: Page) -> None:
    page.evaluate("document.body.classList.add('dark')")
    chat = two_agent_round()
    chat._message("note", "Something went wrong inside Conch while answering; see the server log.")
    mount(page, chat.traits())
    background = card(page).evaluate("el => getComputedStyle(el).backgroundColor")
    assert background == "rgb(30, 30, 30)"
    page.locator(".conch-chat").screenshot(path=screenshot_path("harness-chat-dark"))


# --- settings -------------------------------------------------------------------------------


AGENTS = [
    {
        "id": "researcher",
        "name": "Researcher",
        "persona": "Finds options and facts.",
        "instructions": "Cite sources.",
        "provider": {"kind": "offline", "model": "", "base_url": None},
        "price": None,
        "has_key": False,
    },
    {
        "id": "writer",
        "name": "Writer",
        "persona": "Turns notes into prose.",
        "instructions": "",
        "provider": {"kind": "openai", "model": "gpt-4o-mini", "base_url": None},
        "price": {"input_per_mtok": 0.15, "output_per_mtok": 0.6},
        "has_key": True,
    },
]


def settings(**traits: Any) -> dict[str, Any]:
    base = {
        "view": "settings",
        "section": "agents",
        "agents": AGENTS,
        "outside": [],
        "pairings": [],
        "unavailable": {},
        "said": None,
        "problem": {},
        "working": "",
    }
    return {**base, **traits}


def test_settings_your_agents_add_edit_remove(page: Page) -> None:
    mount(page, settings())
    rows = page.locator(".conch-panel:visible .conch-row")
    expect(rows).to_have_count(2)
    expect(rows.nth(1)).to_contain_text("openai · gpt-4o-mini · $0.15/$0.6 per M tokens · key kept")
    page.locator(".conch-settings").screenshot(path=screenshot_path("harness-settings-agents"))
    rows.nth(1).get_by_role("button", name="Edit").click()
    form = page.locator(".conch-form:visible")
    expect(form.locator("h4")).to_have_text("Edit Writer")
    expect(form.locator("[name=model]")).to_have_value("gpt-4o-mini")
    expect(form.locator("[name=api_key]")).to_have_attribute(
        "placeholder", "a key is kept; leave empty to keep it"
    )
    form.locator("[name=persona]").fill("Writes plans.")
    form.get_by_role("button", name="Save").click()
    saved = sent(page)[-1]
    assert saved["type"] == "agent.save"
    assert saved["id"] == "writer"
    assert saved["agent"]["persona"] == "Writes plans."
    assert saved["agent"]["price"] == {"input_per_mtok": 0.15, "output_per_mtok": 0.6}
    assert "api_key" not in saved["agent"]["provider"]  # an empty key field keeps the key
    page.evaluate("window.model.emit('msg:custom', {type: 'done', action: 'agent.save', ok: true})")
    expect(page.locator(".conch-form:visible")).to_have_count(0)
    remove = rows.nth(0).get_by_role("button", name="Remove")
    remove.click()
    expect(rows.nth(0).get_by_role("button", name="Remove Researcher?")).to_be_visible()
    assert sent(page)[-1]["type"] == "agent.save"  # asked again first
    rows.nth(0).get_by_role("button", name="Remove Researcher?").click()
    assert sent(page)[-1] == {"type": "agent.remove", "id": "researcher"}
    page.get_by_role("button", name="Add an agent").click()
    form = page.locator(".conch-form:visible")
    form.locator("[name=name]").fill("Critic")
    form.get_by_role("button", name="Save").click()
    added = sent(page)[-1]
    assert added["id"] is None
    assert added["agent"]["provider"] == {"kind": "offline", "model": "", "base_url": None}
    assert added["agent"]["price"] is None
    update(page, {"problem": {"agents": "There is already an agent called Critic."}})
    expect(page.locator(".conch-panel:visible [role=alert]")).to_have_text(
        "There is already an agent called Critic."
    )


def test_settings_outside_agents_and_a_server_without_them(page: Page) -> None:
    helper = {
        "id": "helper",
        "name": "Helper",
        "address": "https://helper.example/a2a",
        "claim": "It says it's run by Example Org.",
        "has_key": True,
        "last_problem": "It did not answer in time.",
    }
    mount(page, settings(section="outside", outside=[helper]))
    row = page.locator(".conch-panel:visible .conch-row")
    expect(row.locator(".conch-claim")).to_have_text("It says it's run by Example Org.")
    problem = row.locator(".conch-row-problem")
    expect(problem).to_have_text("Last problem: It did not answer in time.")
    page.locator(".conch-paste").fill("https://other.example/ key abc")
    page.get_by_role("button", name="Add", exact=True).click()
    added = {"type": "outside.add", "paste": "https://other.example/ key abc", "name": None}
    assert sent(page)[-1] == added
    page.get_by_role("button", name="Repair everything").click()
    assert sent(page)[-1] == {"type": "outside.repair"}
    page.locator(".conch-settings").screenshot(path=screenshot_path("harness-settings-outside"))
    words = "Outside agents are not available on this server."
    update(page, {"outside": None, "unavailable": {"outside": words}})
    expect(page.locator(".conch-panel:visible")).to_contain_text(words)
    expect(page.locator(".conch-paste")).to_be_hidden()
    expect(page.get_by_role("button", name="Repair everything")).to_be_hidden()


def test_settings_outside_agents_ask_for_a_name_rename_and_say_a_clash(page: Page) -> None:
    """Issue 16: a card whose name clashes is refused in words and a name is asked for; an
    agent whose name clashes anyway says so on its row, and Rename gives it a name of its own."""
    clashing = {
        "id": "helper",
        "name": "Researcher please",
        "address": "https://helper.example/a2a",
        "claim": None,
        "has_key": False,
        "last_problem": None,
        "clashes_with": "Researcher",
    }
    mount(page, settings(section="outside", outside=[clashing]))
    row = page.locator(".conch-panel:visible .conch-row")
    expect(row.locator(".conch-clash")).to_have_text(
        "Its name clashes with your agent “Researcher”: a mention of it goes to Researcher, "
        "and it is sent nothing until you rename it."
    )
    # Adding a card that calls itself "Writer 2": refused in words, then named and added.
    page.locator(".conch-paste").fill("https://writer.example/")
    page.get_by_role("button", name="Add", exact=True).click()
    assert sent(page)[-1] == {
        "type": "outside.add",
        "paste": "https://writer.example/",
        "name": None,
    }
    words = (
        "The card calls this agent “Writer 2”, which starts with the name of your agent "
        "“Writer”: a mention must say whom it means, so add it again with a name of its own."
    )
    update(page, {"problem": {"outside": words}})
    page.evaluate(
        "window.model.emit('msg:custom', "
        "{type: 'done', action: 'outside.add', ok: false, code: 'name_taken'})"
    )
    expect(page.locator(".conch-panel:visible [role=alert]")).to_have_text(words)
    name = page.get_by_label("Your name for it (optional)")
    expect(name).to_be_focused()
    expect(page.locator(".conch-ask-name")).to_be_visible()
    page.locator(".conch-settings").screenshot(path=screenshot_path("harness-settings-name-asked"))
    name.fill("Scribe")
    name.press("Enter")
    assert [m["type"] for m in sent(page)].count("outside.add") == 2  # Enter sends it once
    assert sent(page)[-1] == {
        "type": "outside.add",
        "paste": "https://writer.example/",
        "name": "Scribe",
    }
    page.evaluate(
        "window.model.emit('msg:custom', {type: 'done', action: 'outside.add', ok: true})"
    )
    expect(page.locator(".conch-paste")).to_have_value("")
    expect(name).to_have_value("")
    expect(page.locator(".conch-ask-name")).to_be_hidden()
    # Renaming: the editor keeps what is typed across a redraw, and closes once it is done.
    row.get_by_role("button", name="Rename Researcher please").click()
    editor = row.get_by_label("New name for Researcher please")
    expect(editor).to_be_focused()
    editor.fill("Field Scout")
    update(page, {"working": "refresh"})  # a redraw while typing
    expect(editor).to_have_value("Field Scout")
    row.get_by_role("button", name="Save").click()
    assert sent(page)[-1] == {"type": "outside.rename", "id": "helper", "name": "Field Scout"}
    renamed = {**clashing, "name": "Field Scout", "clashes_with": None}
    update(page, {"outside": [renamed], "working": ""})
    page.evaluate(
        "window.model.emit('msg:custom', {type: 'done', action: 'outside.rename', ok: true})"
    )
    expect(row.locator("strong")).to_have_text("Field Scout")
    expect(row.locator(".conch-clash")).to_have_count(0)
    expect(row.get_by_role("button", name="Rename Field Scout")).to_be_visible()
    # Issue 34: its card's signature on the row; a card now signed with another key shows the
    # key it had and the one it has now, and Accept sends the user's yes for the new one.
    problem = "Field Scout is not called: its card is now signed with another key."
    changed = {
        **renamed,
        "signed": {"verified": False, "kid": "k1", "thumbprint": "AbCdEfGhIjKlMnOp"},
        "key_change": {"kid": "k2", "thumbprint": "ZyXwVuTsRqPoNm"},
        "signature_problem": problem,
    }
    unsigned = {**renamed, "id": "plain", "name": "Plain", "signed": None, "key_change": None}
    nothing = {"kid": None, "thumbprint": None}  # no longer signed
    gone = {**changed, "id": "bare", "name": "Bare", "key_change": nothing}
    update(page, {"outside": [changed, unsigned, gone]})
    rows = page.locator(".conch-panel:visible .conch-row")
    expect(rows.nth(0).locator(".conch-signed")).to_have_text(
        "signed · key AbCdEfGhIj… (not verified now)"
    )
    expect(rows.nth(0).locator(".conch-row-problem")).to_have_text(problem)
    expect(rows.nth(0).locator(".conch-key-change")).to_contain_text(
        "Key when added: key AbCdEfGhIj… · its card now: key ZyXwVuTsRq…"
    )
    expect(rows.nth(1).locator(".conch-signed")).to_have_text("not signed")
    expect(rows.nth(1).locator(".conch-key-change")).to_have_count(0)
    expect(rows.nth(2).locator(".conch-key-change")).to_contain_text("its card now: not signed")
    page.locator(".conch-settings").screenshot(path=screenshot_path("harness-settings-key-change"))
    accept = rows.nth(2).get_by_role("button", name="Accept the key Bare's card now shows")
    expect(accept).to_have_text("Accept it unsigned")
    accept.click()
    assert sent(page)[-1] == {"type": "outside.accept_key", "id": "bare", "thumbprint": None}
    rows.nth(0).get_by_role("button", name="Accept the key Field Scout's card now shows").click()
    assert sent(page)[-1] == {
        "type": "outside.accept_key",
        "id": "helper",
        "thumbprint": "ZyXwVuTsRqPoNm",
    }
    accepted = {**changed, "signed": {**changed["key_change"], "verified": True}}
    update(page, {"outside": [{**accepted, "key_change": None, "signature_problem": None}]})
    expect(rows.nth(0).locator(".conch-signed")).to_have_text("signed · key ZyXwVuTsRq…")
    expect(rows.nth(0).locator(".conch-key-change")).to_have_count(0)


def test_settings_pairing_shows_the_key_once_with_copy(page: Page) -> None:
    page.context.grant_permissions(["clipboard-read", "clipboard-write"])
    pairing = {"id": "p1", "agents": ["writer"], "remote": False, "address": "http://127.0.0.1/"}
    mount(page, settings(section="pairings", pairings=[pairing]))
    panel = page.locator(".conch-panel:visible")
    expect(panel.locator(".conch-row strong")).to_have_text("Writer")
    panel.locator(".conch-choices input[value=researcher]").check()
    panel.get_by_role("button", name="Pair", exact=True).click()
    assert sent(page)[-1] == {"type": "pairing.add", "agents": ["researcher"], "remote": False}
    made = {
        "type": "pairing.created",
        "id": "p2",
        "address": "http://127.0.0.1:8888/.well-known/agent-card.json",
        "key": "conch_k_secret",
        "paste": "http://127.0.0.1:8888/.well-known/agent-card.json\nkey: conch_k_secret",
    }
    page.evaluate("made => window.model.emit('msg:custom', made)", made)
    once = panel.locator(".conch-once")
    expect(once).to_contain_text("It is shown only this once.")
    expect(once.locator(".conch-secret")).to_have_text(made["paste"])
    expect(once).not_to_contain_text("undefined")
    once.get_by_role("button", name="Copy").click()
    expect(once.get_by_role("button", name="Copied")).to_be_visible()
    assert page.evaluate("navigator.clipboard.readText()") == made["paste"]
    page.locator(".conch-settings").screenshot(path=screenshot_path("harness-settings-pairing"))
    once.get_by_role("button", name="Done").click()
    expect(once).to_be_hidden()
    assert "conch_k_secret" not in page.evaluate("JSON.stringify(window.model.state)")
    panel.get_by_role("button", name="What it said").click()
    assert sent(page)[-1] == {"type": "pairing.said", "id": "p1"}
    said_chat = {  # the chat as the server sends it: the view draws it
        "title": "Door chat",
        "messages": [
            {"id": "u1", "role": "user", "text": "Hi", "html": "<p>Hi Writer</p>", "created": 1},
            {"id": "a1", "role": "agent", "agent": "writer", "html": "<p>Hello</p>", "created": 2},
        ],
        "events": [],
        "roster": {"agents": [{"id": "writer", "name": "Writer"}], "outside": []},
    }
    update(page, {"said": {"pairing": "p1", "chats": [{"id": "c1", "conversation": said_chat}]}})
    expect(panel.locator(".conch-said .conch-who")).to_have_text(["The other agent", "Writer"])
    expect(panel.locator(".conch-said")).not_to_contain_text("null")
    page.get_by_role("tab", name="Your agents").click()
    assert page.evaluate("window.model.state.section") == "agents"
