"""Continue a round stopped at its bound (issue 40), in a real JupyterLab 4 and Notebook 7 in
chromium, with two metered agents on a scripted model server speaking OpenAI's wire format that
hand the floor back and forth until the loop rule ends the round: the end line at the bottom of
the chat and the folded card offer Continue with the round's cost and the chat's, a click and a
key press each continue it with fresh bounds, the offer is announced, and it reads in the dark
theme too. No console errors.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
from playwright.sync_api import Browser, Locator, expect

from ..server.test_rounds_server import by_speaker
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
from ..support.scripted_models import Reply, ScriptedModels

pytestmark = [pytest.mark.browser, pytest.mark.timeout(300)]

# 1,000 tokens in and 10,000 out at $1 and $2 per million: $0.021 a reply.
PRICE = {"input_per_mtok": 1, "output_per_mtok": 2}


def priced(text: str) -> Reply:
    return Reply(text=text, usage=(1_000, 10_000))


@pytest.fixture(scope="module")
def models() -> Iterator[ScriptedModels]:
    with ScriptedModels() as scripted:
        scripted.responder = by_speaker(
            {"Ann": lambda _n: priced("@Bob your go"), "Bob": lambda _n: priced("@Ann back")}
        )
        yield scripted


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory, models: ScriptedModels) -> Iterator[Lab]:
    root = lab_folder(
        tmp_path_factory,
        "lab-continue",
        {"go-on.ipynb": notebook("%load_ext conch_jupyter\n%conch", "%conch continue")},
    )
    with running_lab(root) as running:
        with running.client() as http:
            provider = {"kind": "openai", "model": "m", "base_url": models.openai_url}
            for name in ("Ann", "Bob"):
                body = {"name": name, "provider": {**provider, "api_key": "k"}, "price": PRICE}
                added = http.post(f"{running.url}conch/api/agents", json=body)
                assert added.status_code == 201, added.text
        yield running


def ended_rounds(lab: Lab) -> int:
    """How many rounds the notebook's chat has ended, as Conch's API says."""
    with lab.client() as http:
        listed = http.get(f"{lab.url}conch/api/conversations").json()["conversations"]
        [chat] = [c for c in listed if c.get("path") == "go-on.ipynb"]
        whole = http.get(f"{lab.url}conch/api/conversations/{chat['id']}").json()
    return len([e for e in whole["events"] if e["type"] == "round.ended"])


def rounds_ended(chat: Locator, count: int) -> None:
    """Wait until `count` rounds are folded (each ended at the loop rule's fifth swap)."""
    cards = chat.locator(".conch-round")
    expect(cards).to_have_count(count, timeout=30_000)
    expect(cards.nth(count - 1)).to_have_attribute("data-state", "folded", timeout=30_000)


def test_continue_by_click_and_by_keyboard_in_jupyterlab(
    browser: Browser, lab: Lab, models: ScriptedModels
) -> None:
    page = open_notebook(browser, f"{lab.url}lab/tree/go-on.ipynb?token={lab.token}")
    console = Console(page)
    run_all(page)
    chat = page.locator(".conch-chat").first
    expect(chat).to_have_attribute("data-source", "server", timeout=60_000)
    # %conch continue (the kernel key), run with the notebook before any round: nothing to
    # continue, said in words. Waited for before the first message, which would make it "a
    # round is running" instead.
    cell = page.locator(".jp-Notebook .jp-Cell").nth(1)
    expect(cell.locator(".jp-OutputArea-output")).to_contain_text(
        "There is no round to continue: none has ended here since the server started.",
        timeout=60_000,
    )
    box = chat.locator(".conch-input")
    box.click()
    box.type("@Ann start")
    box.press("Enter")
    rounds_ended(chat, 1)
    # The end line, at the bottom of the chat: the round's cost and the chat's ($0.021 a reply).
    end = chat.locator(".conch-continue-line")
    expect(end).to_have_count(1, timeout=15_000)
    expect(chat.locator(".conch-log > li").last).to_have_class(re.compile("conch-continue-line"))
    expect(end.locator(".conch-continue-words")).to_have_text(
        "The round stopped at its bound · 5 replies · $0.11"
    )
    button = end.get_by_role("button", name="Continue (this chat: $0.11 of $5)")
    expect(button).to_be_visible()
    # The folded card offers the same, and the offer is announced to screen readers.
    card = chat.locator(".conch-round").first
    expect(card.get_by_role("button", name="Continue (this chat: $0.11 of $5)")).to_be_visible()
    status = chat.locator(".conch-sr-only[role=status]")
    expect(status).to_have_attribute("aria-live", "polite")
    expect(status).to_contain_text("Continue (this chat: $0.11 of $5) is offered at the end")
    chat.screenshot(path=screenshot_path("lab-continue-offered"))

    # One click: a new round from the agent next on the floor (Bob, handed over by Ann).
    button.click()
    rounds_ended(chat, 2)
    assert len(models.requests) == 10  # five fresh replies: every bound fresh
    first_again = chat.locator(".conch-msg.conch-agent").nth(5)
    expect(first_again.locator(".conch-place")).to_have_text("turn 1 · handed over by Ann")
    expect(card.locator(".conch-round-continue button")).to_have_count(0)  # only the latest
    expect(chat.locator(".conch-continue-line")).to_have_count(1)
    expect(chat.locator(".conch-continue-line button")).to_have_text(
        "Continue (this chat: $0.21 of $5)", timeout=15_000
    )

    # By keyboard: Tab from the folded card reaches its Continue, and Enter presses it.
    latest = chat.locator(".conch-round").nth(1)
    latest.locator(".conch-round-folded").focus()
    page.keyboard.press("Tab")
    expect(latest.locator(".conch-round-continue button")).to_be_focused()
    page.keyboard.press("Enter")
    rounds_ended(chat, 3)
    assert len(models.requests) == 15
    # The button went with the round it continued: the focus is back in the composer.
    expect(box).to_be_focused()

    # %conch continue (the kernel key) only asks, in the chat; the user's yes there goes on.
    cell.locator(".jp-InputArea-editor").click()
    page.keyboard.press("Shift+Enter")
    expect(cell.locator(".jp-OutputArea-output")).to_have_text(
        "Asked in the chat: say yes there to continue the round.", timeout=30_000
    )
    asking = chat.locator(".conch-approval[data-tool=continue]")
    expect(asking).to_contain_text(
        "From the notebook's kernel: continue the round, from Bob, with fresh bounds?"
    )
    expect(status).to_contain_text("The notebook's kernel asks to continue the round.")
    assert len(models.requests) == 15  # nothing went on by the kernel's say-so
    asking.get_by_role("button", name="Continue", exact=True).click()
    rounds_ended(chat, 4)
    expect(asking).to_have_count(0)
    assert len(models.requests) == 20

    # A message since: the offer goes, and nothing is continued.
    box.type("thanks, enough")
    box.press("Enter")
    expect(chat.locator(".conch-continue-line")).to_have_count(0, timeout=15_000)
    expect(chat.locator(".conch-round-continue button")).to_have_count(0)
    assert console.errors == []
    page.context.close()


def test_notebook_7_offers_continue_in_the_dark_theme(
    browser: Browser, lab: Lab, models: ScriptedModels
) -> None:
    page = open_notebook(browser, f"{lab.url}notebooks/go-on.ipynb?token={lab.token}")
    console = Console(page)
    set_theme(page, dark=True)
    run_all(page)
    chat = page.locator(".conch-chat").first
    expect(chat).to_have_attribute("data-source", "server", timeout=60_000)
    # The rounds the chat had (JupyterLab's test left four), all drawn before this one starts.
    had = ended_rounds(lab)
    expect(chat.locator(".conch-round")).to_have_count(had, timeout=30_000)
    box = chat.locator(".conch-input")
    box.click()
    box.type("@Bob your turn to start")
    box.press("Enter")
    rounds_ended(chat, had + 1)
    before = len(models.requests)
    end = chat.locator(".conch-continue-line")
    expect(end).to_have_count(1, timeout=30_000)
    button = end.locator("button")
    expect(button).to_have_text(re.compile(r"^Continue \(this chat: \$\d+\.\d\d of \$5\)$"))
    # Readable in the dark: the button's words and its ground differ.
    colours = button.evaluate(
        "b => { const s = getComputedStyle(b); return [s.color, s.backgroundColor] }"
    )
    assert colours[0] != colours[1], colours
    chat.screenshot(path=screenshot_path("notebook7-continue-dark"))
    # By keyboard again: Space presses the end line's button.
    button.focus()
    page.keyboard.press("Space")
    rounds_ended(chat, had + 2)
    expect(chat.locator(".conch-continue-line")).to_have_count(1, timeout=30_000)
    assert len(models.requests) == before + 5
    set_theme(page, dark=False)
    assert console.errors == []
    page.context.close()
