"""The real thing: JupyterLab 4 (and Notebook 7) in chromium, running the demo notebook.

`jupyter lab` starts on loopback with a token and its own data folder, with the offline model
slowed down so a round lasts a few seconds. The test runs every cell of notebooks/demo.ipynb,
sees the first round's card live, presses Stop, and sees the card fold; then Notebook 7 draws
the same widgets from a copy of the demo (a kernel of its own). Screenshots go to tests/.screens/.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, expect

from ..support.browser import screenshot_path
from ..support.lab import Lab, lab_folder, open_notebook, running_lab

pytestmark = [pytest.mark.browser, pytest.mark.timeout(180)]

DEMO = Path(__file__).resolve().parents[2] / "notebooks" / "demo.ipynb"


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    # A copy each: the demo's Run All waits in `await chat.answered()` for a Run no one presses
    # here, so a second Run All in the same kernel would queue behind it for ten minutes.
    demo = DEMO.read_text()
    root = lab_folder(tmp_path_factory, "lab", {"demo.ipynb": demo, "demo7.ipynb": demo})
    with running_lab(root) as running:
        yield running


def test_the_demo_runs_in_jupyterlab_and_stop_folds_the_card(browser: Browser, lab: Lab) -> None:
    page = open_notebook(browser, f"{lab.url}lab/tree/demo.ipynb?token={lab.token}")
    # Not awaited: the cells run on while the test watches.
    page.evaluate("() => { window.jupyterapp.commands.execute('notebook:run-all-cells'); }")
    card = page.locator(".conch-round").first
    expect(card).to_have_attribute("data-state", "live", timeout=60_000)
    line = card.locator(".conch-round-line")
    expect(line).to_have_text(re.compile(r"^(Researcher|Writer) is answering · [12] of 8 replies$"))
    expect(card.locator(".conch-face")).to_have_count(2)
    expect(card.locator(".conch-face.has-floor")).to_have_count(1)
    expect(page.locator(".conch-chat [role=status]").first).to_contain_text("is answering")
    page.locator(".conch-settings").first.wait_for()  # %conch agents drew Settings too
    # The floor passes from the first agent to the second: an arc, and the pearl on it.
    expect(card.locator(".conch-arc")).to_have_count(1, timeout=30_000)
    expect(line).to_have_text("Writer is answering · 2 of 8 replies")
    expect(card.locator(".conch-face.has-floor .conch-face-name")).to_have_text("Writer")
    card.scroll_into_view_if_needed()
    page.locator(".conch-chat").first.screenshot(path=screenshot_path("lab-round-live"))
    card.get_by_role("button", name="Stop").click()
    expect(card).to_have_attribute("data-state", "folded", timeout=15_000)
    folded = card.locator(".conch-round-folded")
    expect(folded).to_have_text(
        re.compile(r"^Researcher and Writer took turns · \d repl(y|ies) · ended: you stopped it$")
    )
    expect(card.locator(".conch-stage")).to_be_hidden()
    page.locator(".conch-chat").first.screenshot(path=screenshot_path("lab-round-folded"))
    # The rest of the tour runs: a round with handovers, stopped from its cell.
    handover = page.locator(".jp-OutputArea-output").filter(has_text="handed over to")
    expect(handover.last).to_be_visible(timeout=60_000)
    expect(page.locator(".conch-chat").first.locator(".conch-handover")).to_contain_text(
        ["Researcher handed over to Writer"]
    )
    page.evaluate(
        "() => window.jupyterapp.commands.execute('apputils:change-theme', "
        "{theme: 'JupyterLab Dark'})"
    )
    page.wait_for_function("document.body.dataset.jpThemeLight === 'false'")
    page.locator(".conch-chat").first.screenshot(path=screenshot_path("lab-chat-dark"))
    page.evaluate(
        "() => window.jupyterapp.commands.execute('apputils:change-theme', "
        "{theme: 'JupyterLab Light'})"
    )
    page.context.close()


def test_notebook_7_draws_the_same_widgets(browser: Browser, lab: Lab) -> None:
    page = open_notebook(browser, f"{lab.url}notebooks/demo7.ipynb?token={lab.token}")
    page.evaluate("() => { window.jupyterapp.commands.execute('notebook:run-all-cells'); }")
    expect(page.locator(".conch-settings .conch-row")).to_have_count(2, timeout=60_000)
    card = page.locator(".conch-round").last
    expect(card).to_be_visible(timeout=60_000)
    expect(page.locator(".conch-input").first).to_be_visible()
    page.locator(".conch-chat").first.screenshot(path=screenshot_path("notebook7-chat"))
    page.evaluate("() => { window.jupyterapp.commands.execute('notebook:interrupt-kernel'); }")
    page.context.close()
