"""Agents that work in the notebook, in a real JupyterLab 4 (light) and Notebook 7 (dark) (issue
14; opening a tool line brings it into view, issue 23).

An offline agent is given a fenced Python block and proposes to run it in the notebook's own
kernel: the approval shows the code in full, the user reaches Run with the keyboard, the round
card says the agent is running code, and the run is drawn as a folded block under the agent's
reply holding the code and what it printed. Don't run runs nothing; a Run the server no longer
takes (answered on another page: 409) is said in words. The header's mode switch
then changes the mode: Auto runs the next block without asking; Read refuses it. No console
errors.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from playwright.sync_api import Browser, Locator, Page, Route, expect

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

# The run sleeps a little, so the round card's working light can be seen saying so.
CODE = 'import time\ntime.sleep(1.5)\nanswer = 6 * 7\nprint("answer is", answer)'


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    book = notebook("%load_ext conch_jupyter", "%conch")
    notebooks = {f"{name}.ipynb": book for name in ("tools-light", "tools-dark")}
    root = lab_folder(tmp_path_factory, "lab-tools", notebooks)
    with running_lab(root, offline_delay=0.05) as running:
        yield running


def ask_to_run(chat: Locator, code: str) -> None:
    box = chat.locator(".conch-input")
    box.fill(f"@Researcher run this, please:\n```python\n{code}\n```")
    box.press("Enter")


def approve_with_the_keyboard(page: Page, chat: Locator, name: str) -> None:
    approval = chat.locator(".conch-approval")
    expect(approval).to_have_count(1, timeout=60_000)
    expect(approval.locator(".conch-approval-head")).to_contain_text("Researcher wants to run")
    # The code in full, as text, in a monospace block.
    expect(approval.locator("pre.conch-code")).to_have_text(CODE)
    family = approval.locator("pre.conch-code").evaluate("el => getComputedStyle(el).fontFamily")
    assert "mono" in family.lower(), family
    card = chat.locator(".conch-round").first
    expect(card.locator(".conch-round-line")).to_contain_text("Researcher is waiting for your yes")
    chat.screenshot(path=screenshot_path(f"{name}-approval"))
    # Keyboard: from the code, Tab reaches Run; Enter answers.
    approval.locator("pre.conch-code").focus()
    page.keyboard.press("Tab")
    expect(approval.get_by_role("button", name="Run", exact=True)).to_be_focused()
    page.keyboard.press("Enter")
    expect(card.locator(".conch-round-line")).to_contain_text(
        "Researcher is running code", timeout=10_000
    )
    expect(approval).to_have_count(0)
    # The focus was in the block that went: it moves on to the text box.
    expect(chat.locator(".conch-input")).to_be_focused()


def answered_elsewhere(page: Page, chat: Locator, lab: Lab) -> None:
    def no_on_another_page_first(route: Route) -> None:
        with lab.client() as http:
            assert http.post(route.request.url, json={"run": False}).status_code == 200
        route.continue_()

    page.route("**/conch/api/conversations/*/tools/*", no_on_another_page_first)
    ask_to_run(chat, CODE)
    approval = chat.locator(".conch-approval")
    expect(approval).to_have_count(1, timeout=60_000)
    approval.get_by_role("button", name="Run", exact=True).click()
    expect(chat.locator(".conch-problem")).to_contain_text("That run is no longer asking")
    expect(approval).to_have_count(0, timeout=10_000)
    page.unroute("**/conch/api/conversations/*/tools/*")


def the_run_is_drawn(chat: Locator, count: int, state: str) -> Locator:
    tool = chat.locator(".conch-tool")
    expect(tool).to_have_count(count, timeout=60_000)
    block = tool.nth(count - 1)
    expect(block).to_have_attribute("data-state", state)
    # Folded under the agent's reply: it follows Researcher's reply and opens on a click.
    previous = block.locator("xpath=preceding-sibling::li[1]")
    expect(previous).to_have_class("conch-msg conch-agent")
    expect(previous.locator(".conch-who")).to_have_text("Researcher")
    expect(previous.locator(".conch-md")).to_contain_text("I'll run your code in the notebook.")
    expect(block.locator("details")).not_to_have_attribute("open", "")
    block.locator("summary").click()
    expect(block.locator("pre.conch-code").first).to_have_text(CODE)
    # Opened, it is brought into view: its output is inside the log's visible area.
    output = block.locator(".conch-tool-output")
    expect(output).to_be_in_viewport()
    inside = """el => {
      const log = el.closest('.conch-log').getBoundingClientRect();
      const out = el.getBoundingClientRect();
      return out.top >= log.top - 1 && out.bottom <= log.bottom + 1;
    }"""
    block.page.wait_for_function(
        f"() => ({inside})(document.querySelectorAll('.conch-tool')"
        f"[{count - 1}].querySelector('.conch-tool-output'))"
    )
    return block


@pytest.mark.parametrize("dark", [False, True], ids=["jupyterlab-light", "notebook7-dark"])
def test_an_agent_proposes_code_the_user_runs_it_and_the_result_is_drawn(
    browser: Browser, lab: Lab, dark: bool
) -> None:
    name = "tools-dark" if dark else "tools-light"
    app = "notebooks" if dark else f"lab/workspaces/{name}/tree"
    page = open_notebook(browser, f"{lab.url}{app}/{name}.ipynb?token={lab.token}")
    console = Console(page)
    set_theme(page, dark)
    run_all(page)
    chat = page.locator(".conch-chat").first
    expect(chat).to_have_attribute("data-source", "server", timeout=60_000)
    modes = chat.locator(".conch-modes")
    expect(modes.get_by_role("button", name="Ask")).to_have_attribute("aria-pressed", "true")
    expect(chat.locator(".conch-mode-words")).to_have_text("Ask: every run waits for your yes.")

    ask_to_run(chat, CODE)
    approve_with_the_keyboard(page, chat, name)
    block = the_run_is_drawn(chat, 1, "ran")
    expect(block.locator(".conch-tool-output")).to_contain_text("answer is 42")
    expect(block.locator("summary")).to_have_text("Researcher · code · ran")
    chat.screenshot(path=screenshot_path(f"{name}-ran"))

    drawn = 1
    if dark:
        # Answered on another page first (the user's own token): this page's Run then meets the
        # server's 409, which is said in words, and the block goes.
        drawn += 1
        answered_elsewhere(page, chat, lab)
        skipped = the_run_is_drawn(chat, drawn, "skipped")
    else:
        # Don't run: nothing runs, the approval goes, and the block says so.
        ask_to_run(chat, CODE)
        approval = chat.locator(".conch-approval")
        expect(approval).to_have_count(1, timeout=60_000)
        approval.get_by_role("button", name="Don't run").click()
        expect(approval).to_have_count(0, timeout=10_000)
        drawn += 1
        skipped = the_run_is_drawn(chat, drawn, "skipped")
        expect(skipped.locator("summary")).to_have_text("Researcher · code · not run")

    # The header's switch: Auto runs the next block without asking; Read refuses it.
    mode, words, state = (
        ("Read", "Read: agents can read the notebook but not run code.", "refused")
        if dark
        else ("Auto", "Auto: agents run code without asking.", "ran")
    )
    modes.get_by_role("button", name=mode).click()
    expect(modes.get_by_role("button", name=mode)).to_have_attribute("aria-pressed", "true")
    expect(chat.locator(".conch-mode-words")).to_have_text(words)
    ask_to_run(chat, CODE)
    expect(chat.locator(".conch-round")).to_have_count(drawn + 1, timeout=30_000)
    expect(chat.locator(".conch-round").nth(drawn)).to_have_attribute(
        "data-state", "folded", timeout=60_000
    )
    the_run_is_drawn(chat, drawn + 1, state)
    expect(chat.locator(".conch-approval")).to_have_count(0)
    chat.screenshot(path=screenshot_path(f"{name}-{mode.lower()}"))
    set_theme(page, False)
    # The browser logs the 409 it was answered as a failed load; nothing else, and nothing thrown.
    conflict = "Failed to load resource: the server responded with a status of 409 (Conflict)"
    assert console.errors == ([conflict] if dark else [])
    page.context.close()
