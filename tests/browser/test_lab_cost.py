"""Cost in sight (issue 23, item 10) in a real JupyterLab 4 and Notebook 7 in chromium, with a
metered agent on a scripted model server speaking OpenAI's wire format (a hosted model cannot run
here): each metered reply's quiet line with its tokens and cost, the folded round's spend (kept
once the next round began, and on a page opened afresh), the
chat's total against its limit in the header, a limit set there that stops the next turn in
words, and a bad limit refused in the server's words.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
from playwright.sync_api import Browser, expect

from ..support.browser import screenshot_path
from ..support.lab import Lab, lab_folder, notebook, open_notebook, run_all, running_lab, set_theme
from ..support.scripted_models import Reply, ScriptedModels

pytestmark = [pytest.mark.browser, pytest.mark.timeout(240)]

# 1,000 tokens in and 10,000 out at $1 and $2 per million: $0.021 a reply.
PRICE = {"input_per_mtok": 1, "output_per_mtok": 2}


@pytest.fixture(scope="module")
def models() -> Iterator[ScriptedModels]:
    with ScriptedModels() as scripted:
        scripted.responder = lambda body: Reply(text="A **priced** answer.", usage=(1_000, 10_000))
        yield scripted


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory, models: ScriptedModels) -> Iterator[Lab]:
    cells = ("%load_ext conch_jupyter\n%conch", "%conch agents")
    root = lab_folder(tmp_path_factory, "lab-cost", {"cost.ipynb": notebook(*cells)})
    with running_lab(root) as running:
        with running.client() as http:
            provider = {"kind": "openai", "model": "m", "base_url": models.openai_url}
            body = {"name": "Bot", "provider": {**provider, "api_key": "k-1"}, "price": PRICE}
            added = http.post(f"{running.url}conch/api/agents", json=body)
            assert added.status_code == 201, added.text
        yield running


def test_the_cost_lines_and_a_limit_set_in_the_header(
    browser: Browser, lab: Lab, models: ScriptedModels
) -> None:
    page = open_notebook(browser, f"{lab.url}lab/tree/cost.ipynb?token={lab.token}")
    run_all(page)
    chat = page.locator(".conch-chat").first
    expect(chat).to_have_attribute("data-source", "server", timeout=60_000)
    spend = chat.locator(".conch-spend-words")
    expect(spend).to_have_text("$0.00 of $5.00 this chat · $0.00 of $50.00 this month")
    box = chat.locator(".conch-input")
    box.click()
    box.type("@Bot first")
    box.press("Enter")
    reply = chat.locator(".conch-msg.conch-agent").last
    expect(reply.locator(".conch-cost")).to_have_text(
        "1k tokens in · 10k out · $0.02", timeout=20_000
    )
    expect(spend).to_have_text("$0.02 of $5.00 this chat · $0.02 of $50.00 this month")
    card = chat.locator(".conch-round").last
    expect(card).to_have_attribute("data-state", "folded", timeout=15_000)
    expect(card.locator(".conch-round-folded")).to_have_text(re.compile(r"· \$0\.02$"))

    # A bad limit: the server's words, and the form stays open with what was typed.
    chat.get_by_role("button", name="Limit").click()
    limit = chat.get_by_label("This chat's limit in dollars")
    expect(limit).to_be_focused()
    limit.fill("-1")
    chat.get_by_role("button", name="Set", exact=True).click()
    expect(chat.locator(".conch-spend-said")).to_have_text(
        "A chat's limit must be between $0 and $10,000."
    )
    expect(limit).to_have_value("-1")
    # The limit set to what the chat has spent: the next turn is refused, in words.
    limit.fill("0.02")
    limit.press("Enter")
    expect(spend).to_have_text("$0.02 of $0.02 this chat · $0.02 of $50.00 this month")
    expect(limit).to_be_hidden()
    box.click()
    box.type("@Bot second")
    box.press("Enter")
    note = chat.locator(".conch-note").last
    expect(note).to_contain_text(
        "This chat has spent $0.02 of its $0.02 limit, so Bot did not answer. "
        "Raise the chat's limit in its header to go on.",
        timeout=20_000,
    )
    assert len(models.requests) == 1  # the second turn never reached the model
    # The first round's folded card keeps its cost once the next round has begun (issue 32).
    expect(chat.locator(".conch-round")).to_have_count(2)
    expect(chat.locator(".conch-round").first.locator(".conch-round-folded")).to_have_text(
        re.compile(r"· \$0\.02$")
    )
    chat.screenshot(path=screenshot_path("lab-cost-light"))

    # Settings: the month against its budget, by agent, and the budget set there.
    settings = page.locator(".conch-settings").first
    budget = settings.get_by_label("This month's budget in dollars")
    expect(budget).to_have_value("50")
    budget.fill("-5")
    budget.press("Enter")
    expect(settings.locator(".conch-problem").first).to_have_text(
        "The month's budget must be between $0 and $10,000."
    )
    budget.fill("0.5")
    settings.get_by_role("button", name="Set budget").click()
    expect(settings.locator(".conch-month-words")).to_have_text(
        "$0.02 of $0.50 spent on metered agents this month (UTC), in every chat."
    )
    expect(settings.locator(".conch-month-agents li")).to_have_text(["Bot $0.02"])
    expect(settings.locator(".conch-problem").first).to_be_hidden()
    # Said once: an offline agent's kind and model are the same word.
    expect(settings.locator(".conch-row .conch-small").first).to_have_text("offline · not metered")
    settings.screenshot(path=screenshot_path("lab-settings-month"))
    set_theme(page, dark=True)
    chat.screenshot(path=screenshot_path("lab-cost-dark"))
    set_theme(page, dark=False)
    page.context.close()


def test_notebook_7_shows_the_same_cost_lines(browser: Browser, lab: Lab) -> None:
    page = open_notebook(browser, f"{lab.url}notebooks/cost.ipynb?token={lab.token}")
    set_theme(page, dark=True)
    run_all(page)
    chat = page.locator(".conch-chat").first
    expect(chat).to_have_attribute("data-source", "server", timeout=60_000)
    expect(chat.locator(".conch-spend-words")).to_have_text(
        "$0.02 of $0.02 this chat · $0.02 of $0.50 this month"
    )
    expect(chat.locator(".conch-cost").first).to_have_text("1k tokens in · 10k out · $0.02")
    # A page opened afresh: the first round's card still says what it cost (issue 32).
    expect(chat.locator(".conch-round").first.locator(".conch-round-folded")).to_have_text(
        re.compile(r"· \$0\.02$")
    )
    chat.screenshot(path=screenshot_path("notebook7-cost-dark"))
    set_theme(page, dark=False)
    page.context.close()
