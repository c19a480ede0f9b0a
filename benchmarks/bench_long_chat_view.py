"""A long chat in a real JupyterLab: how soon its last message is visible, and what the page
holds, for a chat of 100 messages and one of 10,000 (issue 24; DESIGN.md "Long chats").

The chats are written into the store before JupyterLab starts (tests/support/long_chats.py),
each with its notebook's path, so `%conch` in that notebook shows it. JupyterLab runs as the
browser tests run it (tests/support/lab.py), in Debian's chromium (Playwright). Measured:

- first `%conch`: from the notebook drawn (its kernel idle) to the chat's last message visible,
  running `%load_ext conch_jupyter` and `%conch`;
- reopened: the notebook saved with the widget in it, opened on a new page (the kernel and its
  widget live on): from the notebook drawn to the last message visible;
- elements under the chat's root, and the page's JS heap once it is drawn;
- scrolled back to the first message (the 10,000-message chat): how long that takes, and the
  elements and JS heap then (the view draws a span near the viewport, window.js), side by side
  with the view before it did (everything loaded stayed drawn), measured on this machine.

Prints; never asserts on speed.

    .venv/bin/python -m benchmarks.bench_long_chat_view [--reopen 3]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from playwright.sync_api import Browser, Page, expect

from hatch_build import build_view
from tests.support.browser import chromium
from tests.support.lab import Lab, notebook, open_notebook, run_all, running_lab
from tests.support.long_chats import long_chat_file

from ._machine import code_line, load_line, machine_line

CHATS = {"100 messages": 50, "10,000 messages": 5_000}
HEAP = "() => performance.memory ? performance.memory.usedJSHeapSize : 0"
ELEMENTS = "() => document.querySelector('.conch-chat')?.querySelectorAll('*').length ?? 0"
# The 10,000-message chat scrolled to its first message with the view before it drew a span
# (commit 10f1bf6, everything loaded stayed drawn): elements under the chat's root, JS heap (MB),
# seconds of scrolling; this machine, load average 6.3.
BEFORE_TOP = (175_036, 93.0, 46.6)
# Scroll the log to its top; whether the chat's first message is drawn.
TO_THE_TOP = """() => {
  const log = document.querySelector('.conch-chat .conch-log');
  log.scrollTop = 0;
  return log.textContent.includes('@Researcher question 0?');
}"""


def last_visible(page: Page, exchanges: int) -> float:
    """Seconds until the chat's last reply is visible, from now."""
    start = time.monotonic()
    last = page.locator(".conch-chat .conch-agent").filter(has_text=f"question {exchanges - 1}:")
    expect(last.first).to_be_visible(timeout=120_000)
    return time.monotonic() - start


def one_chat(browser: Browser, lab: Lab, name: str, exchanges: int, reopen: int) -> None:
    # A workspace of its own: the page opens this notebook only.
    address = f"{lab.url}lab/workspaces/{name}/tree/{name}.ipynb?token={lab.token}"
    page = open_notebook(browser, address)
    run_all(page)
    first = last_visible(page, exchanges)
    elements, heap = page.evaluate(ELEMENTS), page.evaluate(HEAP)
    page.evaluate("() => window.jupyterapp.commands.execute('docmanager:save')")
    page.wait_for_timeout(1500)
    if exchanges > 1_000:
        start = time.monotonic()
        page.wait_for_function(TO_THE_TOP, polling=100, timeout=600_000)
        took = time.monotonic() - start
        page.wait_for_timeout(500)
        top, top_heap = page.evaluate(ELEMENTS), page.evaluate(HEAP)
    page.context.close()
    again = []
    for _ in range(reopen):
        page = open_notebook(browser, address)
        again.append(last_visible(page, exchanges))
        page.context.close()
    print(f"  first %conch: last message visible {first:.2f} s after the notebook was drawn")
    print(
        f"  reopened:     last message visible {statistics.median(again):.2f} s median"
        f" (of {reopen}: {', '.join(f'{a:.2f}' for a in again)}) after the notebook was drawn"
    )
    print(f"  elements under the chat's root: {elements}; JS heap {heap / 1e6:.1f} MB")
    if exchanges > 1_000:
        was, was_heap, was_took = BEFORE_TOP
        print(
            f"  scrolled to the first message in {took:.1f} s ({took / was_took:.2f}x the"
            f" {was_took} s before): {top} elements under the chat's root"
            f" ({top / was:.3f}x the {was:,} before), JS heap {top_heap / 1e6:.1f} MB"
            f" ({top_heap / 1e6 / was_heap:.2f}x the {was_heap} MB before)"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reopen", type=int, default=3, help="reopened pages per chat")
    args = parser.parse_args()
    print(machine_line())
    print(code_line())
    build_view()
    with tempfile.TemporaryDirectory(prefix="conch-bench-long-view-") as tmp:
        root = Path(tmp)
        (root / "work").mkdir()
        (root / "conch").mkdir(mode=0o700)
        names = {}
        for label, exchanges in CHATS.items():
            name = f"chat{exchanges}"
            (root / "work" / f"{name}.ipynb").write_text(
                notebook("%load_ext conch_jupyter", "%conch")
            )
            long_chat_file(root / "conch", exchanges, title=name, path=f"{name}.ipynb")
            names[label] = name
        with running_lab(root) as lab, chromium() as browser:
            print(load_line())
            for label, exchanges in CHATS.items():
                print(f"\n{label}")
                one_chat(browser, lab, names[label], exchanges, args.reopen)
            print(load_line())


if __name__ == "__main__":
    main()
