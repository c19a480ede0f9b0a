"""The view behaves as part of the notebook (issue 23), in a real JupyterLab 4 (dark) and a real
Notebook 7 (light) in chromium; test_lab_keys.py has the keys in the other two (JupyterLab light,
Notebook 7 dark), so each app is seen in both themes.

One notebook per app: its first cell draws the chat, a `%conch … ?` line sends its question (not
IPython's help), and a bare `%conch` later folds to a line that points at the chat. Then in the
chat: a reply's Markdown is drawn while it streams (bold and bullets, never the raw marks); an
agent added, renamed and removed elsewhere reaches the @ list at once, no reload; a mention of an
agent nobody has is answered in words; a round of one agent draws the small card. No console
errors.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
from playwright.sync_api import Browser, Locator, Page, expect

from ..support.browser import screenshot_path
from ..support.lab import (
    Console,
    Lab,
    lab_folder,
    notebook,
    open_notebook,
    run_all,
    running_lab,
    set_theme,
)

pytestmark = [pytest.mark.browser, pytest.mark.timeout(240)]

QUESTION = "what is in this notebook?"
CELLS = ("%load_ext conch_jupyter\n%conch", f"%conch @Writer {QUESTION}", "%conch")
APPS = [
    pytest.param("lab/workspaces/habits/tree", True, "Fennel", id="jupyterlab-dark"),
    pytest.param("notebooks", False, "Foxglove", id="notebook7-light"),
]

# The streaming reply as the page draws it at one moment: its bold words, its list items (a list
# is a list while it streams, issue 32), and whether a raw Markdown mark or a drawn bullet shows.
# One read, so all three are of the same moment.
STREAMING = """() => {
  const text = document.querySelector(".conch-agent.is-streaming .conch-streaming-text");
  if (!text) return null;
  return {
    strong: Array.from(text.querySelectorAll("strong"), (s) => s.textContent),
    bullets: text.querySelectorAll("ul > li").length,
    raw: text.textContent.includes("**") || text.textContent.includes("•"),
  };
}"""


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    notebooks = {f"{name}.ipynb": notebook(*CELLS) for name in ("habits-lab", "habits-7")}
    root = lab_folder(tmp_path_factory, "lab-habits", notebooks)
    # Slow enough that a reply streams for seconds: its Markdown is seen before it settles.
    with running_lab(root, offline_delay=0.08) as running:
        yield running


def streamed(page: Page, *, bullets: bool) -> dict[str, Any]:
    """The streaming reply once its bold words (and, if asked, a bullet) are drawn, still
    streaming: what the page held at that moment."""
    wanted = "m => m && m.strong.length > 0" + (" && m.bullets > 0" if bullets else "")
    handle = page.wait_for_function(
        f"() => {{ const m = ({STREAMING})(); return ({wanted})(m) ? m : null; }}",
        timeout=60_000,
        polling=50,
    )
    moment: dict[str, Any] = handle.json_value()
    return moment


def picker(chat: Locator, typed: str) -> Locator:
    box = chat.locator(".conch-input")
    box.fill("")
    box.type(typed)
    return chat.locator(".conch-mention .conch-mention-name")


@pytest.mark.parametrize(("app", "dark", "added"), APPS)
def test_the_view_keeps_the_notebooks_habits(
    browser: Browser, lab: Lab, app: str, dark: bool, added: str
) -> None:
    name = "habits-lab" if app.startswith("lab") else "habits-7"
    page = open_notebook(browser, f"{lab.url}{app}/{name}.ipynb?token={lab.token}")
    console = Console(page)
    set_theme(page, dark)
    run_all(page)
    cells = page.locator(".jp-Notebook .jp-Cell")
    chats = page.locator(".conch-chat")
    chat = cells.nth(0).locator(".conch-chat")
    expect(chat).to_have_attribute("data-source", "server", timeout=60_000)

    # The `?` line sent its question: the chat has it, and the cell shows no help page.
    expect(chat.locator(".conch-user").first).to_contain_text(QUESTION, timeout=30_000)

    # One chat per notebook: the later outputs are lines that say where it is.
    cells.nth(2).scroll_into_view_if_needed()
    lines = page.locator(".conch-elsewhere")
    expect(lines).to_have_count(2, timeout=30_000)
    expect(chats).to_have_count(1)
    expect(lines.first).to_contain_text(
        re.compile(r"^This notebook's chat is drawn in the output of cell \[\d+\], live")
    )
    help_words = cells.nth(1).locator(".jp-OutputArea").inner_text()
    assert "Docstring" not in help_words
    assert "not found" not in help_words
    card = chat.locator(".conch-round").first
    expect(card).to_have_attribute("data-state", "folded", timeout=60_000)

    # An agent added, renamed and removed elsewhere (the API, as another page would) reaches the
    # open chat's @ list at once.
    agents = f"{lab.url}conch/api/agents"
    with lab.client() as http:
        made = http.post(agents, json={"name": added})
        assert made.status_code == 201, made.text
        expect(picker(chat, f"@{added[:3]}")).to_have_text([added], timeout=5_000)
        renamed = f"{added} Two"
        changed = http.patch(f"{agents}/{made.json()['id']}", json={"name": renamed})
        assert changed.status_code == 200, changed.text
        expect(picker(chat, f"@{added[:3]}")).to_have_text([renamed], timeout=5_000)
        gone = http.delete(f"{agents}/{changed.json()['id']}")
        assert gone.status_code == 204, gone.text
        expect(picker(chat, f"@{added[:3]}")).to_have_count(0, timeout=5_000)
    box = chat.locator(".conch-input")
    box.press("Escape")

    # A mention of an agent nobody has: said in words, who answered instead (the Writer, the
    # last to answer), whose reply is drawn formatted while it streams, the raw marks never shown.
    box.fill("@Nobody are you there?")
    box.press("Enter")
    moment = streamed(page, bullets=False)
    assert "Writer" in moment["strong"], moment
    assert not moment["raw"], moment
    chat.screenshot(path=screenshot_path(f"{name}-streaming-markdown"))
    expect(chat.locator(".conch-note").last).to_have_text(
        re.compile(r"No agent here is called @Nobody, so Writer answered instead"), timeout=15_000
    )
    # (a lone reply, not a round: it draws no card) once it has settled
    expect(chat.locator(".conch-agent")).to_have_count(2, timeout=60_000)
    expect(chat.locator(".conch-agent.is-streaming")).to_have_count(0, timeout=60_000)

    # A round of one agent: the small card (its face and line, no room for arcs), and the reply's
    # bullets drawn while it streams.
    box.fill("@Writer one line, please")
    box.press("Enter")
    moment = streamed(page, bullets=True)
    assert moment["bullets"] > 0, moment
    assert not moment["raw"], moment
    solo = chat.locator(".conch-round").last
    expect(solo).to_have_class(re.compile(r"\bis-solo\b"))
    expect(solo.locator(".conch-stage")).to_have_css("height", "60px")
    expect(solo).to_have_attribute("data-state", "folded", timeout=60_000)
    chat.screenshot(path=screenshot_path(f"{name}-{'dark' if dark else 'light'}"))
    set_theme(page, False)  # the theme is a stored setting: the next page starts light
    assert console.errors == []
    page.context.close()
