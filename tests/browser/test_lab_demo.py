"""The demo with Run All in a real JupyterLab 4 (light) and Notebook 7 (dark) (issue 23, item 8),
each on a copy of its own: every cell queued at once;
the person presses *Run* in the chat when the cell after the approval says it waits for that,
and *Read* in the chat's header when the next waiting cell says so. The demo runs to its last
cell, the approved run's output is in the waiting cell and `print(total)` prints it, and no
output anywhere is a Traceback or an Error."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Locator, expect

from ..support.browser import screenshot_path
from ..support.lab import Console, Lab, lab_folder, open_notebook, run_all, running_lab, set_theme

pytestmark = [pytest.mark.browser, pytest.mark.timeout(300)]

DEMO = Path(__file__).resolve().parents[2] / "notebooks" / "demo.ipynb"
# Every code cell has run: an execution count, none still queued ("[*]").
ALL_RAN = """() => {
  const panel = window.jupyterapp.shell.currentWidget;
  const cells = panel.content.widgets.filter((cell) => cell.model.type === "code");
  return cells.length > 0 && cells.every((cell) => typeof cell.model.executionCount === "number")
    && panel.sessionContext.session.kernel.status === "idle";
}"""


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    demo = DEMO.read_text()
    root = lab_folder(tmp_path_factory, "lab-demo", {"demo.ipynb": demo, "demo7.ipynb": demo})
    with running_lab(root, offline_delay=0.02) as running:
        yield running


@pytest.mark.parametrize(
    ("address", "dark"),
    [("lab/workspaces/demo/tree/demo.ipynb", False), ("notebooks/demo7.ipynb", True)],
    ids=["jupyterlab-light", "notebook7-dark"],
)
def test_the_demo_runs_top_to_bottom_with_run_all(
    browser: Browser, lab: Lab, address: str, dark: bool
) -> None:
    page = open_notebook(browser, f"{lab.url}{address}?token={lab.token}")
    console = Console(page)
    set_theme(page, dark)
    run_all(page)
    cells = page.locator(".jp-Notebook .jp-CodeCell")

    def cell(source: str) -> Locator:
        """The code cell whose source holds this (not a chat that quotes it)."""
        return cells.filter(has=page.locator(".jp-InputArea", has_text=source))

    waiting = cell("await chat.answered()")
    expect(waiting.locator(".jp-OutputArea")).to_contain_text(
        "Waiting for your answer in the chat: Writer asks to run code in this kernel.",
        timeout=120_000,
    )
    approval = page.locator(".conch-approval")
    expect(approval).to_have_count(1, timeout=30_000)
    expect(approval.locator("pre.conch-code")).to_have_text("total = sum(sales)\nprint(total)")
    approval.scroll_into_view_if_needed()
    approval.get_by_role("button", name="Run", exact=True).click()
    expect(approval).to_have_count(0, timeout=30_000)
    # The approved run ran in the waiting cell; the next cell sees what it made.
    expect(waiting.locator(".jp-OutputArea")).to_contain_text("14", timeout=60_000)
    printed = cell("print(total)  # noqa: F821 (the Writer's run made it")
    expect(printed.locator(".jp-OutputArea")).to_have_text("14", timeout=60_000)

    reading = cell('await chat.switched_to("read")')
    expect(reading.locator(".jp-OutputArea")).to_contain_text(
        "Waiting for you to switch the chat to Read in its header.", timeout=60_000
    )
    chat = page.locator(".conch-chat").filter(has=page.locator(".conch-modes")).first
    read = chat.locator(".conch-modes").get_by_role("button", name="Read")
    read.scroll_into_view_if_needed()
    read.click()
    expect(read).to_have_attribute("aria-pressed", "true")

    page.wait_for_function(ALL_RAN, timeout=120_000)
    shown = f"demo-run-all-{'dark' if dark else 'light'}"
    page.screenshot(path=screenshot_path(shown), full_page=True)
    saved = cell("the run Read refused")
    expect(saved.locator(".jp-OutputArea")).to_have_text(
        "Researcher read_notebook ran\nWriter run_code ran\nWriter run_code refused\n14"
    )
    outputs = page.locator(".jp-Notebook .jp-OutputArea")
    text = "\n".join(outputs.all_inner_texts())
    assert "Traceback" not in text
    assert "Error" not in text, text
    assert (
        page.locator(".jp-Notebook [data-mime-type='application/vnd.jupyter.error']").count() == 0
    )
    assert (
        page.locator(".jp-Notebook [data-mime-type='application/vnd.jupyter.stderr']").count() == 0
    )
    set_theme(page, False)  # the theme is a stored setting: the next page starts light
    assert console.errors == []
    page.context.close()
