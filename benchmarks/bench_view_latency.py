"""From a model's chunk to its words in the page: the notebook view in chromium, talking to a
real JupyterLab's Conch itself (the direct path), paced and in a burst; median, p90 and p99.

The model is bench_stream_latency's stamped scripted OpenAI-compatible server: it stamps each
unique text chunk ("r01c017 ") just before writing it to the socket. JupyterLab runs in a
subprocess (the tests' tests/support/lab.py) with one agent on that server. The page is JupyterLab's
own (its config, its cookies), with the built view mounted on it for one chat, as anywidget mounts
it, with no kernel in between; a MutationObserver stamps each chunk's text the moment the view
has put it in the page (in the streaming reply, or in the settled reply when a burst arrives
within one read). Both stamps are wall-clock (this machine's), so the difference is the
whole path: Conch's provider and turn routine, the hub, the event stream, the browser's fetch,
the view's reader, its state and its drawing.

- paced: 100 chunks a reply, 20 ms apart (a model writing at a reading pace);
- burst: 200 chunks a reply, written as fast as the socket takes them.

Prints; never asserts on speed.

    .venv/bin/python -m benchmarks.bench_view_latency [--replies 4]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from ._machine import code_line, load_line, machine_line, summarize
from .bench_stream_latency import StampedModels, script

REPO = Path(__file__).resolve().parent.parent

from playwright.sync_api import Page, sync_playwright  # noqa: E402

from hatch_build import STATIC, build_view  # noqa: E402
from tests.support.browser import ARGS, CHROMIUM  # noqa: E402
from tests.support.lab import Lab, running_lab  # noqa: E402

MOUNT = """async ([source, id]) => {
  const el = document.createElement("div");
  el.style.cssText = "position: fixed; top: 0; left: 0; width: 700px; height: 600px;"
    + "z-index: 9999; background: white; overflow: auto";
  document.body.append(el);
  const blob = new Blob([source], {type: "text/javascript"});
  const view = (await import(URL.createObjectURL(blob))).default;
  const traits = {view: "chat", conversation_id: id};
  const model = {get: (k) => traits[k], on() {}, off() {}, send() {}};
  await view.render({model, el});
  window.seen = {};
  const mark = /r\\d\\dc\\d\\d\\d /g;
  new MutationObserver(() => {
    const now = performance.timeOrigin + performance.now();
    // The reply streaming, or (a burst can settle within one read) the reply as it settled.
    const last = [...el.querySelectorAll(".conch-agent")].pop();
    for (const found of (last?.textContent || "").matchAll(mark)) window.seen[found[0]] ??= now;
  }).observe(el, {subtree: true, childList: true, characterData: true});
  return true;
}"""


def one_reply(page: Page, lab: Lab, chat: str, number: int) -> None:
    with lab.client() as http:
        address = f"{lab.url}conch/api/conversations/{chat}"
        answer = http.post(f"{address}/messages", json={"text": "Go"})
        answer.raise_for_status()
        deadline = time.monotonic() + 60
        while http.get(address).json()["busy"]:
            if time.monotonic() > deadline:
                raise RuntimeError(f"reply {number} did not end")
            time.sleep(0.05)


def run(replies: int) -> None:
    build_view()
    source = (STATIC / "widget.js").read_text()
    with tempfile.TemporaryDirectory() as folder, StampedModels() as models:
        # perf_counter_ns stamps, as wall-clock milliseconds
        offset_ms = time.time() * 1000 - time.perf_counter_ns() / 1e6
        with running_lab(Path(folder), offline_delay=0) as lab, sync_playwright() as playwright:
            with lab.client() as http:
                for default in ("researcher", "writer"):
                    http.delete(f"{lab.url}conch/api/agents/{default}")
                provider = {"kind": "openai", "model": "scripted", "base_url": models.openai_url,
                            "api_key": "sk-bench"}  # fmt: skip
                made = http.post(f"{lab.url}conch/api/agents",
                                 json={"name": "Streamer", "provider": provider})  # fmt: skip
                made.raise_for_status()
                chat = http.post(f"{lab.url}conch/api/conversations", json={"title": "bench"})
                chat_id = chat.json()["id"]
            browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
            page = browser.new_page()
            page.goto(f"{lab.url}lab?token={lab.token}")
            page.wait_for_function("document.getElementById('jupyter-config-data') !== null")
            page.evaluate(MOUNT, [source, chat_id])
            page.wait_for_selector(".conch-chat[data-source=server]")
            number = 0
            for name, chunks, delay in (("paced", 100, 0.02), ("burst", 200, 0.0)):
                samples: list[float] = []
                for round_ in range(replies + 1):  # the first is a warm-up
                    number += 1
                    texts = script(models, number, chunks, delay)
                    one_reply(page, lab, chat_id, number)
                    page.wait_for_timeout(200)
                    seen = page.evaluate("window.seen")
                    if round_ == 0:
                        continue
                    for text in texts:
                        if text in seen and text in models.written:
                            written = models.written[text] / 1e6 + offset_ms
                            samples.append(seen[text] - written)
                    missing = sum(text not in seen for text in texts)
                    if missing:
                        print(f"  {name}: {missing} chunks of reply {number} never seen")
                s = summarize(samples)  # in milliseconds here
                print(
                    f"{name:>6}: {len(samples)} chunks, chunk → words in the page:"
                    f" median {s.median:.1f} ms, p90 {s.p90:.1f} ms, p99 {s.p99:.1f} ms"
                )
            browser.close()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--replies", type=int, default=4)
    args = parser.parse_args()
    print(f"machine: {machine_line()}")
    print(code_line())
    print(f"date: {time.strftime('%Y-%m-%d')}   {load_line()}")
    run(args.replies)


if __name__ == "__main__":
    main()
