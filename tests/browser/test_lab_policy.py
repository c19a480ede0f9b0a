"""An administrator's policy in a real JupyterLab 4: the controls it locks are drawn locked, each
with the sentence that ends "set by your administrator" (issue 26).

The policy is in the server's config file, as a hub's image holds it. The chat's mode switch
offers Ask and Read and draws Auto locked with its sentence; Settings say what is locked in each
section: only the providers allowed can be chosen for an agent, no outside agent can be added,
and no pairing can be made. What the server itself refuses is tests/server/test_policy_api.py.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from playwright.sync_api import Browser, expect

from ..support.browser import screenshot_path
from ..support.lab import Console, Lab, lab_folder, notebook, open_notebook, run_all, running_lab

pytestmark = [pytest.mark.browser, pytest.mark.timeout(240)]

BY_ADMIN = "set by your administrator."
POLICY = {
    "modes": ["ask", "read"],
    "door": False,
    "outside_hosts": False,
    "providers": {"kinds": ["offline", "openai"]},
    "acp": False,
    "max_chat_usd": 2,
    "max_monthly_usd": 20,
}


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    book = notebook("%load_ext conch_jupyter", "%conch agents", "%conch")
    root = lab_folder(tmp_path_factory, "lab-policy", {"policy.ipynb": book})
    with running_lab(root, config={"ConchApp": {"policy": POLICY}}) as running:
        yield running


def test_locked_controls_are_drawn_locked_with_the_sentence(browser: Browser, lab: Lab) -> None:
    page = open_notebook(browser, f"{lab.url}lab/tree/policy.ipynb?token={lab.token}")
    console = Console(page)
    run_all(page)

    # The chat's mode switch: Auto locked, with its sentence; Ask and Read still switch.
    chat = page.locator(".conch-chat").first
    expect(chat).to_have_attribute("data-source", "server", timeout=60_000)
    modes = chat.locator(".conch-modes")
    auto = modes.get_by_role("button", name="Auto")
    expect(auto).to_be_disabled(timeout=20_000)
    expect(auto).to_have_class("conch-mode is-locked")
    # Its words are in the tooltip the button names (js/hints.js), not a browser's title.
    tip = auto.get_attribute("aria-describedby")
    assert tip, "the locked Auto names no tooltip"
    expect(page.locator(f"#{tip.split()[-1]}")).to_have_text(
        f"Auto is off on this server: {BY_ADMIN}"
    )
    expect(chat.locator(".conch-mode-lock")).to_have_text(f"Auto is off on this server: {BY_ADMIN}")
    modes.get_by_role("button", name="Read").click()
    expect(modes.get_by_role("button", name="Read")).to_have_attribute("aria-pressed", "true")
    expect(modes.get_by_role("button", name="Ask")).to_be_enabled()
    chat.screenshot(path=screenshot_path("policy-mode-switch"))

    # The chat's limit: its form says the cap and keeps it as the field's max.
    chat.locator(".conch-limit-open").click()
    expect(chat.locator(".conch-spend-lock")).to_have_text(
        f"A chat's limit can be at most $2.00 on this server: {BY_ADMIN}"
    )
    expect(chat.locator(".conch-limit-input")).to_have_attribute("max", "2")
    chat.locator(".conch-limit-form").get_by_role("button", name="Cancel").click()

    # Settings, section by section.
    settings = page.locator(".conch-settings").first
    agents = settings.locator(".conch-panel").nth(0)
    expect(agents.locator(".conch-locked")).to_have_text(
        f"Providers allowed on this server: openai, offline: {BY_ADMIN} "
        f"Coding agents over ACP are off on this server: {BY_ADMIN}",
        timeout=20_000,
    )
    agents.get_by_role("button", name="Add an agent").click()
    kind = agents.locator("select[name=kind]")
    expect(kind.locator("option[value=anthropic]")).to_be_disabled()
    expect(kind.locator("option[value=openai]")).to_be_enabled()
    settings.screenshot(path=screenshot_path("policy-settings-agents"))
    expect(agents.locator(".conch-month .conch-spend-lock")).to_have_text(
        f"The monthly budget can be at most $20.00 on this server: {BY_ADMIN}"
    )

    settings.get_by_role("tab", name="Outside agents").click()
    outside = settings.locator(".conch-panel").nth(1)
    expect(outside.locator(".conch-locked")).to_have_text(
        f"Outside agents are off on this server: {BY_ADMIN}"
    )
    expect(outside.locator(".conch-outside-add")).to_be_hidden()

    settings.get_by_role("tab", name="Agents that can talk to yours").click()
    pairings = settings.locator(".conch-panel").nth(2)
    expect(pairings.locator(".conch-locked")).to_have_text(
        f"The door is closed on this server, so no agent can be let in: {BY_ADMIN}"
    )
    expect(pairings.get_by_role("button", name="Pair")).to_be_hidden()
    settings.screenshot(path=screenshot_path("policy-settings-pairings"))
    assert console.errors == []
    page.context.close()
