"""Agents writing a live notebook (issue 27): how soon another open page shows an agent's cell
edit, and what `read_notebook` costs on a 500-cell live notebook; each next to a reference.

1. **read_notebook, 500 cells** (goal ≤ 50 ms median): the tools' own reading path
   (NotebookDocuments.read, then the text the model gets) from a live YNotebook, next to the
   same notebook read from its file through Jupyter's FileContentsManager (what read_notebook
   did before). Run in the live venv (benchmarks/_live_read.py); wall time and CPU time.
2. **edit → visible in another page** (goal ≤ 300 ms median): JupyterLab with
   jupyter-collaboration (the venv tests/live builds), the notebook open in a page; the user's
   message "@Researcher edit cell ID …" in Ask (the offline agent reads the notebook, then asks
   to edit the cell); from the user's yes (its POST) until the page's own shared model holds the
   new source: the edit's whole path (the answer, the cells read again and checked, the write
   into the shared document, its websocket, the page). Also the whole round, from the message
   posted (two tool calls and the model's steps) in Auto. Reference: the user's own edit of a
   cell in a second page of the same browser until the first page shows it (the
   collaboration's own latency), stamped on one clock.

Prints; never asserts on speed.

    .venv/bin/python -m benchmarks.bench_live_cells [--edits 15]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from playwright.sync_api import Page, sync_playwright

from tests.live.env import live_env, live_python
from tests.support.browser import ARGS, CHROMIUM
from tests.support.lab import Lab, notebook, open_notebook, running_lab

from ._machine import code_line, load_line, machine_line, summarize

REPO = Path(__file__).resolve().parent.parent
BOOK = "bench.ipynb"
# Stamp (on the page's clock) the moment cell 2's shared model holds `wanted`.
WATCH = """wanted => {
  const cell = window.jupyterapp.shell.currentWidget.content.model.cells.get(1).sharedModel;
  window.shownAt = null;
  const look = () => {
    if (cell.getSource() === wanted) { cell.changed.disconnect(look); window.shownAt = Date.now(); }
  };
  cell.changed.connect(look);
}"""
SHOWN = "() => window.shownAt"
SET = """source => {
  window.jupyterapp.shell.currentWidget.content.model.cells.get(1).sharedModel.setSource(source);
  return Date.now();
}"""


def read_part(python: str, rounds: int) -> None:
    env = {**{k: v for k, v in os.environ.items() if k != "PYTHONHOME"}, "PYTHONPATH": str(REPO)}
    done = subprocess.run(
        [python, "-m", "benchmarks._live_read", str(rounds)],
        capture_output=True, text=True, check=True, env=env, cwd=REPO,
    )  # fmt: skip
    found = json.loads(done.stdout.strip().splitlines()[-1])
    live, file = statistics.median(found["live"]), statistics.median(found["file"])
    print(f"read_notebook, 500 cells ({found['chars'][0]:,} characters of text), {rounds} rounds:")
    for name in ("live", "file"):
        s, cpu = summarize(found[name]), statistics.median(found[f"{name}_cpu"])
        print(f"  {name:>4}: {s.ms()}   CPU median {cpu / 1e6:8.3f} ms")
    print(f"  live / file (median): {live / file:.2f}   goal: live ≤ 50 ms median")


def post(lab: Lab, chat: str, text: str) -> None:
    with lab.client() as http:
        address = f"{lab.url}conch/api/conversations/{chat}"
        http.post(f"{address}/messages", json={"text": text}).raise_for_status()


def answer_yes(lab: Lab, chat: str) -> float:
    """Wait for the edit to ask, say yes; the wall-clock ms just before the yes was sent."""
    with lab.client() as http:
        address = f"{lab.url}conch/api/conversations/{chat}"
        deadline = time.monotonic() + 60
        while not (asking := http.get(address).json()["asking"]):
            if time.monotonic() > deadline:
                raise RuntimeError("the edit never asked")
            time.sleep(0.02)
        said = time.time() * 1000
        http.post(f"{address}/tools/{asking[0]['call_id']}", json={"run": True}).raise_for_status()
    return said


def settle(lab: Lab, chat: str) -> None:
    with lab.client() as http:
        deadline = time.monotonic() + 60
        while http.get(f"{lab.url}conch/api/conversations/{chat}").json()["busy"]:
            if time.monotonic() > deadline:
                raise RuntimeError("the round did not end")
            time.sleep(0.05)


def edit_part(python: str, edits: int) -> None:
    with tempfile.TemporaryDirectory() as folder, sync_playwright() as playwright:
        root = Path(folder)
        (root / "work").mkdir()
        (root / "work" / BOOK).write_text(notebook("a = 1", "b = 0", "c = 3"))
        with running_lab(root, offline_delay=0, python=python, env_extra=live_env()) as lab:
            browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
            address = f"{lab.url}lab/tree/{BOOK}?token={lab.token}"
            watcher: Page = open_notebook(browser, address)
            typist: Page = open_notebook(browser, address)
            with lab.client() as http:
                chat = http.post(f"{lab.url}conch/api/conversations", json={"path": BOOK}).json()
            cell = watcher.evaluate(
                "() => window.jupyterapp.shell.currentWidget.content.model.cells.get(1).id"
            )
            agent: list[float] = []
            whole: list[float] = []
            user: list[float] = []
            for n in range(1, edits + 2):  # the first is a warm-up
                wanted = f"b = {n}"
                watcher.evaluate(WATCH, wanted)
                mode = "ask" if n % 2 else "auto"
                with lab.client() as http:
                    address = f"{lab.url}conch/api/conversations/{chat['id']}"
                    http.patch(address, json={"mode": mode}).raise_for_status()
                posted = time.time() * 1000
                post(lab, chat["id"], f"@Researcher edit cell {cell}:\n```python\n{wanted}\n```")
                if mode == "ask":
                    posted = answer_yes(lab, chat["id"])
                shown = watcher.wait_for_function(SHOWN, timeout=30_000).json_value()
                settle(lab, chat["id"])
                mine = f"b = {n}  # by hand"
                watcher.evaluate(WATCH, mine)
                typed = typist.evaluate(SET, mine)
                by_hand = watcher.wait_for_function(SHOWN, timeout=30_000).json_value()
                if n > 1:
                    (agent if mode == "ask" else whole).append(shown - posted)
                    user.append(by_hand - typed)
            browser.close()
    a, w, u = summarize(agent), summarize(whole), summarize(user)
    print(f"edit → visible in another page, {edits} edits:")
    print(f"  agent's edit (the user's yes → the other page shows it):  median {a.median:7.1f} ms"
          f"   p90 {a.p90:7.1f} ms   ({a.count} edits)")  # fmt: skip
    print(f"  whole round, Auto (message → the other page shows it):  median {w.median:7.1f} ms"
          f"   p90 {w.p90:7.1f} ms   ({w.count} edits)")  # fmt: skip
    print(f"  reference, the user's own edit (page → page):             median {u.median:7.1f} ms"
          f"   p90 {u.p90:7.1f} ms   p99 {u.p99:7.1f} ms")  # fmt: skip
    print(
        f"  agent / reference (median): {a.median / max(u.median, 0.1):.1f}"
        "   goal: agent ≤ 300 ms median"
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--edits", type=int, default=15)
    parser.add_argument("--reads", type=int, default=30)
    args = parser.parse_args()
    print(f"machine: {machine_line()}")
    print(code_line())
    print(f"date: {time.strftime('%Y-%m-%d')}   {load_line()}")
    python = live_python()
    read_part(python, args.reads)
    edit_part(python, args.edits)


if __name__ == "__main__":
    main()
