"""What a long streaming reply costs, as it grows: a 20,000-character reply in 200 chunks, and
the same reply at 5,000 to 40,000 characters (100-character chunks), to see the growth.

- Kernel or server side, per chunk: before, the kernel drew the whole reply's Markdown sealed
  (core/render.py) on every chunk, so a reply cost the square of its length; now a streaming
  reply is plain text, appended, and drawn sealed once, when it settles (server side).
- In the page (Debian's chromium, the built view on a static page, as the harness tests mount
  it): the view's main-thread time per chunk, layout included (each chunk is followed by a
  forced layout), now (the new words appended, a paragraph to a block) next to before (the whole
  reply's sealed HTML set again on every chunk, as the old view replaced the element). Replies
  come in paragraphs of about 450 characters; a last row streams one 20,000-character paragraph,
  where the browser must lay out the growing paragraph again on every chunk.

If the cost grows linearly, the per-1,000-character column stays flat as the reply grows.
Prints; never asserts on speed.

    .venv/bin/python -m benchmarks.bench_view_stream
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from ._machine import code_line, load_line, machine_line

REPO = Path(__file__).resolve().parent.parent

from playwright.sync_api import sync_playwright  # noqa: E402

from conch_jupyter.core.render import render_markdown  # noqa: E402
from hatch_build import STATIC, build_view  # noqa: E402
from tests.support.browser import ARGS, CHROMIUM  # noqa: E402

SIZES = (5_000, 10_000, 20_000, 40_000)
CHUNK = 100
SENTENCE = "The plan has three parts: a **museum** in the morning, `lunch` by the river, a film. "
# A reply in paragraphs of about 450 characters, as models write them; and, for the worst case,
# one paragraph as long as the whole reply.
PARAGRAPHS = SENTENCE * 5 + "\n\n"

PAGE = """<!doctype html><html><head><meta charset="utf-8">
<link rel="stylesheet" href="/widget.css"></head><body style="width: 760px"><div id="root"></div>
<script type="module">
  const source = await (await fetch("/widget.js")).text();
  const blob = new Blob([source], {type: "text/javascript"});
  const view = (await import(URL.createObjectURL(blob))).default;
  const handlers = {};
  // The chat as the kernel relays it (no server behind this page): a snapshot in the `stream`
  // trait, then each chunk of the reply as a custom message, fed to the view's own timeline.
  const snapshot = {type: "snapshot", conversation: {title: "bench", messages: [], events: [],
    roster: {agents: [{id: "w", name: "Writer"}], outside: []},
    round: {speaker: "w", replies: 0, limit: 8}}};
  const state = {view: "chat", conversation_id: "", stream: [snapshot], notice: "", problem: ""};
  const model = {
    get: (k) => state[k], set() {}, save_changes() {}, send() {},
    on: (e, cb) => (handlers[e] ||= []).push(cb), off() {},
  };
  const fire = (name, ...args) => { for (const cb of handlers[name] || []) cb(...args); };
  await view.render({model, el: document.getElementById("root")});
  // The timeline folds a chunk in a microtask, and the view draws in the next one.
  const tick = () => new Promise((done) => setTimeout(done, 0));
  // Now: each chunk reaches the view, which appends its words to the streaming reply.
  window.now = async (chunks) => {
    let spent = 0;
    const reply = "r" + Math.random();
    for (const chunk of chunks) {
      const t0 = performance.now();
      fire("msg:custom", {type: "item", item: {type: "delta", reply, agent: "w", text: chunk}});
      await new Promise((done) => queueMicrotask(done));
      await new Promise((done) => queueMicrotask(done));
      await new Promise((done) => queueMicrotask(done));
      document.body.offsetHeight;  // layout, as the frame would do it
      spent += performance.now() - t0;
    }
    if (!document.querySelector(".conch-streaming-text")?.textContent) throw new Error("not drawn");
    fire("change:stream");  // the snapshot again: the reply is gone, nothing kept between runs
    await tick();
    return spent;
  };
  // Before: the whole reply's sealed HTML set again on every chunk.
  window.before = async (htmls) => {
    const box = document.createElement("div");
    box.className = "conch-md";
    document.getElementById("root").append(box);
    let spent = 0;
    for (const html of htmls) {
      const t0 = performance.now();
      box.innerHTML = html;
      document.body.offsetHeight;
      spent += performance.now() - t0;
    }
    box.remove();
    return spent;
  };
  window.ready = true;
</script></body></html>"""


def chunks_of(size: int, unit: str = PARAGRAPHS) -> list[str]:
    text = (unit * (size // len(unit) + 1))[:size]
    return [text[i : i + CHUNK] for i in range(0, size, CHUNK)]


class _Handler(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        if self.path == "/":
            body, kind = PAGE.encode(), "text/html"
        elif self.path not in ("/widget.js", "/widget.css"):
            self.send_error(404)
            return
        else:
            name = self.path.lstrip("/")
            body = (STATIC / name).read_bytes()
            kind = "text/css" if name.endswith(".css") else "text/javascript"
        self.send_response(200)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


@contextmanager
def static_page() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()


def kernel_side() -> None:
    print("\nkernel/server side, per reply (ms): Markdown drawn sealed")
    print(
        f"{'chars':>7} {'chunks':>6} {'before: every chunk':>20} {'per 1k':>8}"
        f" {'now: once settled':>18} {'per 1k':>8}"
    )
    for size in SIZES:
        chunks = chunks_of(size)
        render_markdown.cache_clear()
        text, started = "", time.perf_counter()
        for chunk in chunks:
            text += chunk
            render_markdown.__wrapped__(text)  # what the kernel did for every delta
        before = (time.perf_counter() - started) * 1000
        started = time.perf_counter()
        render_markdown.__wrapped__(text)
        now = (time.perf_counter() - started) * 1000
        print(
            f"{size:>7} {len(chunks):>6} {before:>20.1f} {before / size * 1000:>8.2f}"
            f" {now:>18.2f} {now / size * 1000:>8.3f}"
        )


def page_side() -> None:
    print("\nin the page, main-thread time per reply, layout included (ms)")
    print(
        f"{'chars':>7} {'chunks':>6} {'before: html again':>19} {'per 1k':>8}"
        f" {'now: appended':>14} {'per 1k':>8}"
    )
    with static_page() as url, sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        page = browser.new_page()
        page.goto(url)
        page.wait_for_function("window.ready === true")
        page.evaluate("chunks => window.now(chunks)", chunks_of(2_000))  # warm-up
        cases = [(size, PARAGRAPHS) for size in SIZES] + [(20_000, SENTENCE)]
        for size, unit in cases:
            chunks = chunks_of(size, unit)
            if unit == SENTENCE:
                print("one paragraph of 20,000 characters (the worst case):")
            htmls, text = [], ""
            for chunk in chunks:
                text += chunk
                htmls.append(render_markdown(text))
            now = min(page.evaluate("chunks => window.now(chunks)", chunks) for _ in range(3))
            before = min(page.evaluate("h => window.before(h)", htmls) for _ in range(3))
            print(
                f"{size:>7} {len(chunks):>6} {before:>19.1f} {before / size * 1000:>8.2f}"
                f" {now:>14.1f} {now / size * 1000:>8.2f}"
            )
        browser.close()


def main() -> None:
    build_view()
    print(f"machine: {machine_line()}")
    print(code_line())
    print(f"date: {time.strftime('%Y-%m-%d')}   {load_line()}")
    print(json.dumps({"chunk": CHUNK, "sizes": SIZES}))
    kernel_side()
    page_side()


if __name__ == "__main__":
    main()
