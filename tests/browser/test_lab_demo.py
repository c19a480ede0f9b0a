"""The demo with Run All in a real JupyterLab 4 (light) and Notebook 7 (dark) (issue 23, item 8),
each on a copy of its own: every cell queued at once;
the person presses *Run* in the chat when the cell after the approval says it waits for that,
*Read* in the chat's header when the next waiting cell says so, and *Ask* again when the last
section's does (issue 32). The demo runs to its last cell, the approved run's output is in the
waiting cell and `print(total)` prints it, and no output anywhere is a Traceback or an Error.

Its last section (an agent adds a cell and runs it) needs Jupyter's collaboration: JupyterLab
runs with it, as `dev.py lab` installs it (the `live` extra, tests/live's environment), and the
person presses *Add it* and *Run*, and the cell ends the notebook with its output; Notebook 7
runs without it, and the agent says so in words."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Locator, expect

from ..live.env import live_env, live_python
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
    root = lab_folder(tmp_path_factory, "lab-demo", {"demo7.ipynb": DEMO.read_text()})
    with running_lab(root, offline_delay=0.02) as running:
        yield running


@pytest.fixture(scope="module")
def live_lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    """JupyterLab with Jupyter's collaboration, as `dev.py lab` installs it (the `live` extra)."""
    root = lab_folder(tmp_path_factory, "lab-demo-live", {"demo.ipynb": DEMO.read_text()})
    python = live_python()
    with running_lab(root, offline_delay=0.02, python=python, env_extra=live_env()) as running:
        yield running


@pytest.mark.parametrize(
    ("address", "dark", "live"),
    [("lab/workspaces/demo/tree/demo.ipynb", False, True), ("notebooks/demo7.ipynb", True, False)],
    ids=["jupyterlab-light-live", "notebook7-dark"],
)
def test_the_demo_runs_top_to_bottom_with_run_all(
    browser: Browser, request: pytest.FixtureRequest, address: str, dark: bool, live: bool
) -> None:
    lab: Lab = request.getfixturevalue("live_lab" if live else "lab")
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

    # The last section needs Ask again: the chat goes back to it when its cell says so.
    asking = cell('await chat.switched_to("ask")')
    expect(asking.locator(".jp-OutputArea")).to_contain_text(
        "Waiting for you to switch the chat to Ask in its header.", timeout=60_000
    )
    ask = chat.locator(".conch-modes").get_by_role("button", name="Ask")
    ask.scroll_into_view_if_needed()
    ask.click()
    expect(ask).to_have_attribute("aria-pressed", "true")
    page.wait_for_function(ALL_RAN, timeout=120_000)
    if live:
        # With Jupyter's collaboration (dev.py lab installs it): the Researcher asks to add its
        # cell, then to run it; Add it and Run, and the notebook ends with the cell and its output.
        approval = chat.locator(".conch-approval")
        expect(approval.locator(".conch-approval-head")).to_have_text(
            "Researcher wants to add a code cell at the end", timeout=60_000
        )
        approval.scroll_into_view_if_needed()
        approval.get_by_role("button", name="Add it").click()
        expect(approval.locator(".conch-approval-head")).to_contain_text(
            "wants to run cell", timeout=60_000
        )
        approval.get_by_role("button", name="Run", exact=True).click()
        added = cells.last
        expect(added.locator(".jp-InputArea")).to_contain_text("twice the sales", timeout=30_000)
        expect(added.locator(".jp-OutputArea")).to_have_text("twice the sales: 28", timeout=60_000)
    else:
        # Without it: the agent says so in words, and the notebook keeps its cells.
        refused = chat.locator(".conch-tool[data-tool=add_cell]")
        expect(refused.locator("summary")).to_have_text(
            "Researcher · add a cell · refused", timeout=60_000
        )
        expect(cells.last.locator(".jp-InputArea")).to_contain_text("add and run a cell")
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
