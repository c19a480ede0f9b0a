"""Stop says what it did, in a real JupyterLab 4 (issue 21, item 5).

An offline agent runs code that catches KeyboardInterrupt in a loop, in Auto. Stop ends the
round; a moment later the chat says the code did not stop and the kernel is still busy, and
offers Interrupt again and Restart kernel as real buttons where approvals are drawn. Interrupt
again does not end this code, and the words say so; Restart kernel does: the words and the
buttons go and a note says the kernel was restarted. No console errors.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from playwright.sync_api import Browser, expect

from ..support.browser import screenshot_path
from ..support.lab import Console, Lab, lab_folder, notebook, open_notebook, run_all, running_lab

pytestmark = [pytest.mark.browser, pytest.mark.timeout(240)]

CODE = (
    "import time\nwhile True:\n    try:\n        time.sleep(0.1)\n"
    "    except KeyboardInterrupt:\n        pass"
)


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    book = notebook("%load_ext conch_jupyter", "%conch")
    root = lab_folder(tmp_path_factory, "lab-stop", {"stuck.ipynb": book})
    with running_lab(root, offline_delay=0.05) as running:
        yield running


def test_stop_on_code_that_catches_the_interrupt_offers_a_restart_and_it_works(
    browser: Browser, lab: Lab
) -> None:
    page = open_notebook(
        browser, f"{lab.url}lab/workspaces/stuck/tree/stuck.ipynb?token={lab.token}"
    )
    console = Console(page)
    run_all(page)
    chat = page.locator(".conch-chat").first
    expect(chat).to_have_attribute("data-source", "server", timeout=60_000)
    modes = chat.locator(".conch-modes")
    modes.get_by_role("button", name="Auto").click()
    expect(modes.get_by_role("button", name="Auto")).to_have_attribute("aria-pressed", "true")
    box = chat.locator(".conch-input")
    box.fill(f"@Researcher run this, please:\n```python\n{CODE}\n```")
    box.press("Enter")
    card = chat.locator(".conch-round").first
    expect(card.locator(".conch-round-line")).to_contain_text(
        "Researcher is running code", timeout=60_000
    )
    page.wait_for_timeout(500)  # into its loop
    stuck = chat.locator(".conch-stuck")
    expect(stuck).to_be_hidden()
    card.get_by_role("button", name="Stop").click()

    # A moment later: the words, and two real buttons, where approvals are drawn.
    expect(stuck).to_be_visible(timeout=10_000)
    expect(stuck.locator(".conch-stuck-words")).to_have_text(
        "Researcher's code did not stop: the kernel is still busy."
    )
    again = stuck.get_by_role("button", name="Interrupt again")
    restart = stuck.get_by_role("button", name="Restart kernel")
    expect(again).to_be_visible()
    expect(restart).to_be_visible()
    assert again.evaluate("el => el.tagName") == "BUTTON"
    # The run's own block says what happened.
    block = chat.locator(".conch-tool").last
    expect(block).to_have_attribute("data-state", "skipped", timeout=10_000)
    block.locator("summary").click()
    expect(block.locator(".conch-tool-output")).to_contain_text("Not stopped")
    expect(block.locator(".conch-tool-output")).to_contain_text("The kernel is still busy.")
    chat.screenshot(path=screenshot_path("stop-stuck"))

    # Interrupt again: this code catches that one too, and the words say so.
    again.click()
    expect(stuck.locator(".conch-stuck-words")).to_contain_text(
        "even when interrupted again", timeout=10_000
    )
    expect(stuck).to_be_visible()

    # Restart kernel: the code is ended, the words and buttons go, a note says so.
    restart.click()
    expect(stuck).to_be_hidden(timeout=60_000)
    expect(chat.locator(".conch-log")).to_contain_text(
        "The kernel was restarted: Researcher's code is ended", timeout=10_000
    )
    chat.screenshot(path=screenshot_path("stop-restarted"))
    assert console.errors == []
    page.context.close()
