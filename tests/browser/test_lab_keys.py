"""Keys typed in the view stay in the view (issue 23, item 1), in a real JupyterLab 4 and a real
Notebook 7 in chromium, one light and one dark.

The chat's box is focused, then Shift+Enter and the notebook's command-mode keys (`a`, `b`, `y`,
`m`, `dd`, `s`) and Escape are pressed in it, as a person would: the notebook keeps its cells, their
types and execution counts and is not saved; the box holds what was typed (Shift+Enter broke the
line) and keeps the focus; Escape closes the @ list and leaves the focus in the box; Enter sends.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
from playwright.sync_api import Browser, Page, expect

from ..support.browser import screenshot_path
from ..support.lab import (
    KERNEL_IDLE,
    Lab,
    lab_folder,
    notebook,
    open_notebook,
    run_all,
    running_lab,
    set_theme,
)

pytestmark = [pytest.mark.browser, pytest.mark.timeout(240)]

NUMBERED = re.compile(r"^\[\d+\]:$")
CELLS = ("%load_ext conch_jupyter\n%conch", "x = 1", "x + 1")

# Three outputs of the same chat, one with a run that asks for a yes (issue 23, item 4).
ONE_CHAT = (
    "%load_ext conch_jupyter\n%conch",
    "%%conch\n@Writer please run this:\n```python\nmade_in_one_place = 7\n```",
    "from conch_jupyter.widget import this_chat\nthis_chat()",
)

# What the notebook is: each cell's type and execution count, and whether it has unsaved changes.
SHAPE = """() => {
  const panel = window.jupyterapp.shell.currentWidget;
  const cells = panel.content.widgets.map(c => [c.model.type, c.model.executionCount ?? null]);
  return {cells, dirty: panel.context.model.dirty};
}"""


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    notebooks = {"keys.ipynb": notebook(*CELLS), "one.ipynb": notebook(*ONE_CHAT)}
    root = lab_folder(tmp_path_factory, "lab-keys", notebooks)
    with running_lab(root) as running:
        yield running


@pytest.mark.parametrize(
    ("app", "dark"), [("lab/tree", False), ("notebooks", True)], ids=["jupyterlab", "notebook7"]
)
def test_keys_typed_in_the_box_never_reach_the_notebook(
    browser: Browser, lab: Lab, app: str, dark: bool
) -> None:
    page = open_notebook(browser, f"{lab.url}{app}/keys.ipynb?token={lab.token}")
    set_theme(page, dark)
    run_all(page)
    chat = page.locator(".conch-chat").first
    expect(chat).to_have_attribute("data-source", "server", timeout=60_000)
    # The last cell has run (the kernel is the same for both apps, so its count is not known).
    expect(page.locator(".jp-InputArea-prompt").nth(2)).to_have_text(NUMBERED, timeout=30_000)
    page.wait_for_function(KERNEL_IDLE, timeout=30_000)
    before = page.evaluate(SHAPE)
    assert [kind for kind, _ in before["cells"]] == ["code", "code", "code"]
    assert before["dirty"], "running the cells changed the notebook, so `s` would save it"

    hint = chat.locator(".conch-empty")
    if app == "lab/tree":  # the first page to open it: the chat is empty, and says how to begin
        expect(hint).to_have_text(
            "Nothing here yet. Write a message below: type @ to choose who answers "
            "(Researcher or Writer), or just write and one of them answers. Enter sends."
        )
    else:
        expect(hint).to_be_hidden()
    box = chat.locator(".conch-input")
    box.click()
    box.type("first line")
    box.press("Shift+Enter")
    for key in ("a", "b", "y", "m", "d", "d", "s", "Escape"):
        box.press(key)
    expect(box).to_be_focused()
    expect(box).to_have_value("first line\nabymdds")
    pressed(page, before)

    # The @ list: Escape closes it and leaves the focus in the box, and the notebook is as it was.
    box.fill("")
    box.type("@Re")
    picker = chat.locator(".conch-mentions")
    expect(picker).to_be_visible()
    box.press("Escape")
    expect(picker).to_be_hidden()
    expect(box).to_be_focused()
    expect(box).to_have_value("@Re")
    pressed(page, before)

    # Enter sends what the box holds, still without running a cell.
    box.fill("hello from the keys test")
    box.press("Enter")
    expect(box).to_have_value("")
    expect(chat.locator(".conch-log")).to_contain_text("hello from the keys test", timeout=15_000)
    pressed(page, before)
    expect(hint).to_be_hidden()
    chat.screenshot(path=screenshot_path(f"keys-{app.split('/')[0]}-{'dark' if dark else 'light'}"))
    page.evaluate("() => window.jupyterapp.commands.execute('notebook:interrupt-kernel')")
    page.context.close()


def pressed(page: Page, before: dict[str, object]) -> None:
    """The notebook after the keys: the same cells and counts, and still not saved."""
    page.wait_for_timeout(300)  # a shortcut's command runs at once; give the page a beat anyway
    assert page.evaluate(SHAPE) == before


def test_a_notebook_draws_its_chat_once_and_every_other_output_points_there(
    browser: Browser, lab: Lab
) -> None:
    # A workspace of its own: the default one would open keys.ipynb beside it again.
    page = open_notebook(browser, f"{lab.url}lab/workspaces/one/tree/one.ipynb?token={lab.token}")
    run_all(page)
    chats = page.locator(".conch-chat")
    expect(chats.first).to_have_attribute("data-source", "server", timeout=60_000)
    lines = page.locator(".conch-elsewhere")
    cells = page.locator(".jp-Notebook .jp-Cell")
    # JupyterLab draws a cell's output once it is near the window: scroll down to the last one.
    expect(cells.nth(2).locator(".jp-OutputArea-output")).to_have_count(1, timeout=30_000)
    cells.nth(2).scroll_into_view_if_needed()
    expect(lines).to_have_count(2, timeout=30_000)
    expect(chats).to_have_count(1)
    expect(cells.nth(0).locator(".conch-chat")).to_have_count(1)
    expect(lines.last).to_contain_text(
        re.compile(r"^This notebook's chat is drawn in the output of cell \[\d+\], live")
    )
    # The pending run asks in one place only.
    approval = page.locator(".conch-approval")
    expect(approval).to_have_count(1, timeout=60_000)
    # "Go to the chat" takes you there, into its box.
    lines.last.get_by_role("button", name="Go to the chat").click()
    expect(chats.first.locator(".conch-input")).to_be_focused()
    # The full chat's cell run again: its output goes, the next output draws the chat in full,
    # and the fresh output of the first cell folds to a line.
    page.wait_for_function(KERNEL_IDLE, timeout=30_000)
    cells.nth(0).locator(".jp-InputArea-prompt").click()
    page.evaluate("() => window.jupyterapp.commands.execute('notebook:run-cell')")
    expect(cells.nth(1).locator(".conch-chat")).to_have_count(1, timeout=30_000)
    expect(cells.nth(0).locator(".conch-elsewhere")).to_have_count(1, timeout=30_000)
    expect(chats).to_have_count(1)
    expect(page.locator(".conch-approval")).to_have_count(1)
    page.locator(".conch-approval").get_by_role("button", name="Run", exact=True).click()
    expect(page.locator(".conch-tool").first).to_have_attribute("data-state", "ran", timeout=60_000)
    page.screenshot(path=screenshot_path("lab-one-chat"))
    page.context.close()
