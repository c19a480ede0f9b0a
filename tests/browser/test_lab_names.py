"""Someone else's card never decides where your words go (issue 16), in a real JupyterLab 4 in
chromium: real a2a-sdk peers on loopback, the view talking to the server with the page's auth.

Adding an outside agent whose card calls itself "Researcher please" is refused in the server's
words and the view asks for a name of its own; an outside agent whose name only looks like your
Researcher's (a hand-edited file) says so in Settings and is renamed there; and the chat's @
picker never shows two entries that read as one.
"""

from __future__ import annotations

import json

import nbformat
import pytest
from playwright.sync_api import Browser, Locator, Page, expect

from ..support.a2a_peers import Peer
from ..support.browser import need_chromium, screenshot_path
from ..support.lab import Lab, open_notebook, running_lab

pytestmark = [pytest.mark.browser, pytest.mark.timeout(240)]

LOOKALIKE = "Rese\u0430rcher"  # a Cyrillic а: the key differs from Researcher, the look does not


def test_a_clashing_card_asks_for_a_name_and_the_picker_shows_no_lookalikes(
    browser: Browser, tmp_path_factory: pytest.TempPathFactory
) -> None:
    need_chromium()
    root = tmp_path_factory.mktemp("lab-names")
    work = root / "work"
    work.mkdir()
    book = nbformat.v4.new_notebook()
    cells = ["%load_ext conch_jupyter", "%conch outside", "%conch"]
    book.cells = [nbformat.v4.new_code_cell(c) for c in cells]
    book.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    (work / "names.ipynb").write_text(nbformat.writes(book))
    with (
        Peer(name="Researcher please") as pleaser,
        Peer(name="Scout") as scout,
        Peer(name="Helper") as helper,
        running_lab(root) as lab,
    ):
        # Two outside agents already there: Scout, and one a hand edit named like your Researcher.
        with lab.client() as http:
            for peer in (scout, helper):
                added = http.post(f"{lab.url}conch/api/outside", json={"paste": peer.address})
                assert added.status_code == 201, added.text
        outside_file = root / "conch" / "agents" / "outside.json"
        stored = json.loads(outside_file.read_text())
        for entry in stored["agents"]:
            if entry["name"] == "Helper":
                entry["name"] = LOOKALIKE
        outside_file.write_text(json.dumps(stored))
        page_check(browser, lab, pleaser)
        assert pleaser.sends() == []  # refused, then added under a name: never sent a word
        assert helper.sends() == []


def open_picker(page: Page) -> tuple[Locator, Locator, Locator]:
    """The notebook's chat, once it follows the server, with "@" typed in its box."""
    chat = page.locator(".conch-chat").first
    expect(chat).to_have_attribute("data-source", "server", timeout=60_000)
    box = chat.locator(".conch-input")
    box.click()
    box.type("@")
    return chat, box, chat.locator(".conch-mention .conch-mention-name")


def page_check(browser: Browser, lab: Lab, pleaser: Peer) -> None:
    page = open_notebook(browser, f"{lab.url}lab/tree/names.ipynb?token={lab.token}")
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.evaluate("() => { window.jupyterapp.commands.execute('notebook:run-all-cells'); }")
    settings = page.locator(".conch-settings").first
    rows = settings.locator(".conch-panel:visible .conch-row")
    expect(rows).to_have_count(2, timeout=60_000)

    # The look-alike says its clash in words; Scout does not.
    clashing = rows.filter(has_text=LOOKALIKE)
    expect(clashing.locator(".conch-clash")).to_have_text(
        "Its name clashes with your agent “Researcher”: a mention of it goes to Researcher, "
        "and it is sent nothing until you rename it."
    )
    expect(rows.filter(has_text="Scout").locator(".conch-clash")).to_have_count(0)
    expect(rows.filter(has_text="Scout").locator(".conch-claim")).to_have_text(
        "It says it's run by Acme Research. It describes itself as “Finds things.”"
    )

    # The chat's picker: your agents, Scout marked as outside, the look-alike held back.
    chat, box, names = open_picker(page)
    expect(names).to_have_text(["Researcher", "Writer", "Scout"])
    expect(chat.locator(".conch-mention .conch-mention-tag")).to_have_text(["outside"])
    expect(chat.locator(".conch-mention-held")).to_contain_text("your “Researcher”")
    chat.screenshot(path=screenshot_path("lab-names-picker"))
    box.type("rese")
    expect(names).to_have_text(["Researcher"])
    box.press("Escape")
    box.fill("")

    # Adding the card that calls itself "Researcher please": the server's words, a name asked.
    settings.locator(".conch-paste").fill(pleaser.address)
    settings.get_by_role("button", name="Add", exact=True).click()
    expect(settings.locator(".conch-panel:visible [role=alert]")).to_have_text(
        "The card calls this agent “Researcher please”, which starts with the name of your "
        "agent “Researcher”: a mention must say whom it means, so add it again with a name of "
        "its own.",
        timeout=30_000,
    )
    name = settings.get_by_label("Your name for it (optional)")
    expect(name).to_be_focused()
    expect(settings.locator(".conch-ask-name")).to_be_visible()
    settings.screenshot(path=screenshot_path("lab-names-asked"))
    name.fill("researcher")  # a name of your own must follow the rule too
    name.press("Enter")
    expect(settings.locator(".conch-panel:visible [role=alert]")).to_contain_text(
        "“researcher” is the name of your agent “Researcher”", timeout=30_000
    )
    name.fill("Acme Helper")
    name.press("Enter")
    expect(rows).to_have_count(3, timeout=30_000)
    expect(rows.filter(has_text="Acme Helper")).to_have_count(1)
    expect(settings.locator(".conch-panel:visible [role=alert]")).to_be_hidden()
    expect(name).to_have_value("")

    # Renaming the look-alike: its clash is gone.
    clashing.get_by_role("button", name=f"Rename {LOOKALIKE}").click()
    editor = settings.get_by_label(f"New name for {LOOKALIKE}")
    editor.fill("Field Scout")
    editor.press("Enter")
    renamed = rows.filter(has_text="Field Scout")
    expect(renamed).to_have_count(1, timeout=30_000)
    expect(renamed.locator(".conch-clash")).to_have_count(0)
    expect(settings.locator(".conch-clash")).to_have_count(0)
    settings.screenshot(path=screenshot_path("lab-names-renamed"))

    assert errors == []
    page.context.close()

    # A chat opened now offers everyone, once each, outside agents marked.
    page = open_notebook(browser, f"{lab.url}lab/tree/names.ipynb?token={lab.token}")
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.evaluate("() => { window.jupyterapp.commands.execute('notebook:run-all-cells'); }")
    chat, _, names = open_picker(page)
    expect(names).to_have_text(["Researcher", "Writer", "Scout", "Field Scout", "Acme Helper"])
    expect(chat.locator(".conch-mention .conch-mention-tag")).to_have_count(3)
    expect(chat.locator(".conch-mention-held")).to_have_count(0)
    assert errors == []
    page.context.close()
