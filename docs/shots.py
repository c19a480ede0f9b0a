"""The pictures the README and the docs show, made by `python3 dev.py shots` (never by hand).

It starts JupyterLab with Conch on the offline agents (Researcher and Writer, given a price so
their replies carry the cost line), as the browser tests start it (tests/support/lab.py), drives
the demo's steps in Debian's chromium through Playwright, and writes each picture of SHOTS into
docs/_static/shots/. SHOTS is the one list: tests/unit/test_docs.py holds every picture the README
and the docs name to be one of these, and each of these to be committed.

Run it in the test venv (dev.py does): it needs playwright and the tests' support code.
"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
OUT = Path(__file__).resolve().parent / "_static" / "shots"

# Every picture this writes, by file name (without .png), with what it shows.
SHOTS = {
    "round-light": "a round in a notebook: the round card, Researcher handing over to Writer, "
    "each reply's cost line (light theme)",
    "round-dark": "the same round in JupyterLab's dark theme",
    "approval-light": "an agent asking to run code in the notebook's kernel, in Ask mode",
    "settings-light": "Settings: your agents, their providers and the month's budget",
    "chat-light": "a round in a Jupyter Chat document (light theme)",
    "chat-dark": "the same round in Jupyter Chat, in the dark theme",
}

# A made-up price per million tokens, so the offline replies are metered and show their line.
PRICE = {"input_per_mtok": 30, "output_per_mtok": 150}
ROUND = "@Researcher find options for a weekend trip, @Writer draft it"
CODE = "print(sum(range(10)))"
WIDTH, HEIGHT = 1100, 900
# JupyterLab draws its splash screen over the page while it changes the theme.
NO_SPLASH = "() => document.getElementById('jupyterlab-splash') === null"


def themed(page: Any, *, dark: bool) -> None:
    from tests.support.lab import set_theme

    set_theme(page, dark)
    page.wait_for_function(NO_SPLASH)


def shot_path(out: Path, name: str) -> str:
    """Where `name` is written: first into `out`, a folder of this run, so a run that fails
    half-way leaves the committed pictures as they were."""
    if name not in SHOTS:
        raise KeyError(f"{name} is not in SHOTS")
    return str(out / f"{name}.png")


def priced(lab: Any) -> None:
    """The default agents, given a price: their replies then carry the cost line."""
    with lab.client() as http:
        agents = http.get(f"{lab.url}conch/api/agents").json()["agents"]
        for agent in agents:
            answer = http.patch(f"{lab.url}conch/api/agents/{agent['id']}", json={"price": PRICE})
            answer.raise_for_status()


def notebook_shots(browser: Any, lab: Any, out: Path) -> None:
    from playwright.sync_api import expect

    from tests.support.lab import open_notebook, run_all

    page = open_notebook(browser, f"{lab.url}lab/tree/shots.ipynb?token={lab.token}")
    page.set_viewport_size({"width": WIDTH, "height": HEIGHT})
    run_all(page)
    chat = page.locator(".conch-chat").first
    expect(chat).to_have_attribute("data-source", "server", timeout=60_000)
    box = chat.locator(".conch-input")
    box.click()
    box.fill(ROUND)
    box.press("Enter")
    card = chat.locator(".conch-round").last
    # Writer has the floor, Researcher's reply has its cost line: the round as it runs.
    expect(card.locator(".conch-face.has-floor .conch-face-name")).to_have_text(
        "Writer", timeout=60_000
    )
    expect(chat.locator(".conch-msg.conch-agent .conch-cost").first).to_be_visible(timeout=30_000)
    card.scroll_into_view_if_needed()
    chat.screenshot(path=shot_path(out, "round-light"))
    themed(page, dark=True)
    chat.screenshot(path=shot_path(out, "round-dark"))
    themed(page, dark=False)
    expect(card).to_have_attribute("data-state", "folded", timeout=90_000)

    box.fill(f"@Researcher run this, please:\n```python\n{CODE}\n```")
    box.press("Enter")
    approval = chat.locator(".conch-approval")
    expect(approval).to_have_count(1, timeout=60_000)
    approval.scroll_into_view_if_needed()
    chat.screenshot(path=shot_path(out, "approval-light"))
    approval.get_by_role("button", name="Don't run").click()
    expect(approval).to_have_count(0, timeout=30_000)

    settings = page.locator(".conch-settings").last
    expect(settings.locator(".conch-row")).to_have_count(2, timeout=60_000)
    settings.scroll_into_view_if_needed()
    settings.screenshot(path=shot_path(out, "settings-light"))
    page.context.close()


def chat_shots(browser: Any, lab: Any, out: Path) -> None:
    from playwright.sync_api import expect

    # Tall enough for the whole round; a fresh workspace (`reset`): the chat alone, no side bar.
    page = browser.new_context(viewport={"width": WIDTH, "height": 1160}).new_page()
    page.goto(f"{lab.url}lab/tree/room.chat?reset&token={lab.token}")
    page.wait_for_function("window.jupyterapp !== undefined", timeout=60_000)
    box = page.locator(".jp-chat-input-container textarea").first
    box.wait_for(timeout=60_000)
    page.evaluate("() => window.jupyterapp.commands.execute('application:toggle-left-area')")
    box.fill(ROUND)
    page.keyboard.press("Escape")  # the @ list the text opened
    box.press("Enter")
    chat = page.locator(".jp-chat-messages-container")
    expect(chat.get_by_text("Researcher and Writer took turns · 2 replies")).to_be_visible(
        timeout=120_000
    )
    page.screenshot(path=shot_path(out, "chat-light"))
    themed(page, dark=True)
    page.screenshot(path=shot_path(out, "chat-dark"))
    page.context.close()


def lab_config(root: Path) -> dict[str, Any]:
    """JupyterLab finds Conch's extension for Jupyter Chat as this checkout built it."""
    found = root / "labextensions"
    found.mkdir()
    (found / "conch-jupyter").symlink_to(ROOT / "conch_jupyter" / "labextension")
    return {"LabApp": {"extra_labextensions_path": [str(found)]}}


def main() -> int:
    sys.path.insert(0, str(ROOT))
    from tests.support.browser import CHROMIUM, chromium
    from tests.support.lab import notebook, running_lab

    if not CHROMIUM.exists():
        print(f"[conch] the pictures need Debian's chromium at {CHROMIUM}", file=sys.stderr)
        return 1
    with tempfile.TemporaryDirectory(prefix="conch-shots-") as folder:
        root = Path(folder)
        (root / "work").mkdir()
        book = notebook("%load_ext conch_jupyter\n%conch", "%conch agents")
        (root / "work" / "shots.ipynb").write_text(book)
        (root / "work" / "room.chat").write_text(json.dumps({}))
        with running_lab(root, offline_delay=0.12, config=lab_config(root)) as lab:
            priced(lab)
            with chromium() as browser:
                notebook_shots(browser, lab, root)
                chat_shots(browser, lab, root)
        OUT.mkdir(parents=True, exist_ok=True)
        for name in SHOTS:
            shutil.copyfile(shot_path(root, name), OUT / f"{name}.png")
            print(f"[conch] wrote {(OUT / f'{name}.png').relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
