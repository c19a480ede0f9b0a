"""The first quarter hour (issue 42) in a real JupyterLab 4 in chromium, done as a newcomer does
it, in the notebook's chat (Jupyter Chat's face is tests/browser/test_lab_chat.py):

- The demo's first kind of round, offline: each agent answers its own part of the message in the
  person's words, and the Writer takes up the Researcher's words (item 1).
- Settings: a local Ollama among the providers, its address filled in at one choice, each
  provider's Model box with an example; the Ollama agent saved so answers in the chat (its
  address pointed at a scripted server speaking Ollama's OpenAI-compatible wire) (item 3).
- Ask, Auto and Read, the spend line and Limit each say what they do on hover and on keyboard
  focus, named for a screen reader by aria-describedby, and whole inside the chat, light and dark;
  the chat box's placeholder fits at 600 px with the file browser open (item 4).

No console errors.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from playwright.sync_api import Browser, Locator, Page, expect

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

CELLS = ("%load_ext conch_jupyter\n%conch",)
NAMES = ("round", "ollama", "hints", "narrow")
# The words each control says (js/hints.js), as a person reads them.
ASK = "Ask: each run of code and each change to the notebook waits for your yes in this chat."
AUTO = "Auto: agents run code and change the notebook without asking"
READ = "Read: agents can read the notebook and its variables; every run and change is refused."
SPEND = "What this chat's replies have cost, against the chat's own limit"
LIMIT = "Limit: set this chat's own spending limit, in dollars"


@pytest.fixture(scope="module")
def models() -> Iterator[ScriptedModels]:
    with ScriptedModels() as scripted:
        scripted.ollama_models = ["llama3.2:latest"]
        scripted.responder = lambda _body: Reply(chunks=["Hello ", "from ", "llama."])
        yield scripted


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    notebooks = {f"{name}.ipynb": notebook(*CELLS) for name in NAMES}
    root = lab_folder(tmp_path_factory, "lab-first-quarter", notebooks)
    with running_lab(root, offline_delay=0.02) as running:
        yield running


def open_chat(browser: Browser, lab: Lab, name: str, width: int = 1280) -> tuple[Page, Locator]:
    page = open_notebook(
        browser, f"{lab.url}lab/workspaces/{name}/tree/{name}.ipynb?token={lab.token}"
    )
    page.set_viewport_size({"width": width, "height": 1000})
    run_all(page)
    chat = page.locator(".conch-chat").first
    expect(chat).to_have_attribute("data-source", "server", timeout=60_000)
    return page, chat


def say(page: Page, chat: Locator, text: str) -> None:
    chat.locator(".conch-input").click()
    page.keyboard.type(text)
    page.keyboard.press("Escape")  # the @ list, if it opened
    page.keyboard.press("Enter")


def test_the_writer_takes_up_the_researchers_words(browser: Browser, lab: Lab) -> None:
    page, chat = open_chat(browser, lab, "round")
    console = Console(page)
    say(
        page, chat, "@Researcher find three options for a tiny dataset, @Writer draft one paragraph"
    )
    expect(chat.locator(".conch-round-folded")).to_contain_text(
        "Researcher and Writer took turns", timeout=60_000
    )
    replies = chat.locator(".conch-msg.conch-agent")
    expect(replies).to_have_count(2)
    researcher, writer = replies.nth(0), replies.nth(1)
    # Each on its own part of the message, in the person's words, labelled offline.
    expect(researcher).to_contain_text("(offline — no model was asked)")
    expect(researcher).to_contain_text("Researcher on “find three options for a tiny dataset”:")
    points = researcher.locator(".conch-md > ul > li")
    expect(points).to_have_count(3)  # three options, as asked
    expect(writer).to_contain_text(
        "Writer on “draft one paragraph”, building on what Researcher said:"
    )
    said = [p.strip().rstrip(".") for p in points.all_inner_texts()]
    expect(writer).to_contain_text(
        f"Researcher said three things: “{said[0]}”, “{said[1]}” and “{said[2]}”."
    )
    assert "You asked" not in chat.inner_text()
    chat.screenshot(path=screenshot_path("quarter-round"))
    assert console.errors == []
    page.context.close()


def test_ollama_is_one_choice_in_settings_and_answers(
    browser: Browser, lab: Lab, models: ScriptedModels
) -> None:
    page, chat = open_chat(browser, lab, "ollama")
    console = Console(page)
    chat.locator(".conch-head").get_by_role("button", name="Settings").click()
    settings = chat.locator(".conch-settings")
    settings.get_by_role("button", name="Add an agent").click()
    form = settings.locator(".conch-form:visible")
    kind = form.locator("[name=kind]")
    offered = [o.strip() for o in kind.locator("option").all_inner_texts()]
    assert offered == [
        "offline (no model)",
        "openai",
        "anthropic",
        "Ollama (on this machine)",
        "coding agent (ACP)",
    ]
    model, address = form.locator("[name=model]"), form.locator("[name=base_url]")
    # Each provider's Model box shows what a model name looks like there.
    for value, example in [
        ("openai", "e.g. gpt-4.1-mini"),
        ("anthropic", "e.g. claude-sonnet-4-5"),
    ]:
        kind.select_option(value)
        expect(model).to_have_attribute("placeholder", example)
        expect(address).to_have_value("")
    # One choice: Ollama's address is filled in, no key is asked for.
    kind.select_option("ollama")
    expect(address).to_have_value("http://localhost:11434/v1")
    expect(model).to_have_attribute("placeholder", "e.g. llama3.2")
    expect(form.locator("[name=api_key]")).to_be_hidden()
    chat.screenshot(path=screenshot_path("quarter-ollama-settings"))
    form.locator("[name=name]").fill("Local")
    model.fill("llama3.2")
    form.get_by_role("button", name="Save").click()
    row = settings.locator(".conch-row").filter(has_text="Local")
    expect(row).to_contain_text("ollama · llama3.2", timeout=10_000)
    with lab.client() as http:
        agents = http.get(f"{lab.url}conch/api/agents").json()["agents"]
    [local] = [a for a in agents if a["name"] == "Local"]
    assert local["provider"]["kind"] == "openai"
    assert local["provider"]["base_url"] == "http://localhost:11434/v1"
    assert local["provider"]["model"] == "llama3.2"

    # Shown as Ollama again; pointed at this test's stand-in Ollama (its wire), it answers.
    row.get_by_role("button", name="Edit").click()
    expect(kind).to_have_value("ollama")
    address.fill(models.openai_url)
    form.get_by_role("button", name="Save").click()
    # Saved: an address that is not a local Ollama's (the stand-in's port) is shown by its wire.
    expect(row).to_contain_text("openai · llama3.2", timeout=10_000)
    chat.locator(".conch-head").get_by_role("button", name="Settings").click()
    say(page, chat, "@Local say hello")
    expect(chat.locator(".conch-msg.conch-agent").last).to_contain_text(
        "Hello from llama.", timeout=60_000
    )
    [asked] = [r for r in models.requests if r.route == "/v1/chat/completions"]
    assert asked.json["model"] == "llama3.2"
    assert "authorization" not in asked.headers
    with lab.client() as http:
        http.delete(f"{lab.url}conch/api/agents/{local['id']}")
    assert console.errors == []
    page.context.close()


def tip_of(page: Page, control: Locator) -> Locator:
    """The tooltip a control names with aria-describedby."""
    ids = (control.get_attribute("aria-describedby") or "").split()
    tips = [i for i in ids if i.startswith("conch-tip-")]
    assert len(tips) == 1, ids
    return page.locator(f"#{tips[0]}")


def inside(inner: Locator, outer: Locator) -> bool:
    a, b = inner.bounding_box(), outer.bounding_box()
    assert a is not None
    assert b is not None
    return (
        a["x"] >= b["x"] - 1
        and a["y"] >= b["y"] - 1
        and a["x"] + a["width"] <= b["x"] + b["width"] + 1
    )


@pytest.mark.parametrize("dark", [False, True], ids=["light", "dark"])
def test_the_header_controls_say_what_they_do(browser: Browser, lab: Lab, dark: bool) -> None:
    page, chat = open_chat(browser, lab, "hints")
    set_theme(page, dark)
    console = Console(page)
    head = chat.locator(".conch-head")
    ask, auto, read = (
        head.get_by_role("button", name=n, exact=True) for n in ("Ask", "Auto", "Read")
    )
    expect(ask).to_be_visible(timeout=30_000)

    # Hover: the pointer over Ask shows what Ask does, under it, whole, inside the chat.
    ask.hover()
    tip = tip_of(page, ask)
    expect(tip).to_be_visible()
    expect(tip).to_have_text(ASK)
    expect(tip).to_have_attribute("role", "tooltip")
    assert inside(tip, chat)
    chat.screenshot(path=screenshot_path(f"quarter-hint-ask-{'dark' if dark else 'light'}"))
    page.mouse.move(0, 0)
    expect(tip).to_be_hidden()

    # Keyboard focus: Tab from Ask to Auto, then Read, each saying its own; Escape hides it.
    ask.focus()
    expect(tip).to_be_visible()
    page.keyboard.press("Tab")
    expect(auto).to_be_focused()
    expect(tip).to_be_hidden()
    expect(tip_of(page, auto)).to_contain_text(AUTO)
    expect(tip_of(page, auto)).to_be_visible()
    page.keyboard.press("Tab")
    expect(read).to_be_focused()
    expect(tip_of(page, read)).to_have_text(READ)
    page.keyboard.press("Escape")
    expect(tip_of(page, read)).to_be_hidden()

    # A screen reader is given the same words: the accessible description of each control.
    for control, words in [(ask, ASK), (read, READ)]:
        described = control.evaluate(
            "el => el.getAttribute('aria-describedby').split(' ')"
            ".map(id => document.getElementById(id).textContent).join(' ')"
        )
        assert words in described

    # The spend line and Limit, likewise (the spend line is reachable by the keyboard).
    spend = head.locator(".conch-spend-words")
    spend.focus()
    expect(tip_of(page, spend)).to_contain_text(SPEND)
    expect(tip_of(page, spend)).to_be_visible()
    limit = head.get_by_role("button", name="Limit")
    limit.hover()
    expect(tip_of(page, limit)).to_contain_text(LIMIT)
    expect(tip_of(page, limit)).to_be_visible()
    assert inside(tip_of(page, limit), chat)
    set_theme(page, False)
    assert console.errors == []
    page.context.close()


# How much of the chat box's placeholder the box can show: its text's width in the box's font,
# against the box's own width inside its padding.
PLACEHOLDER = """input => {
  const style = getComputedStyle(input);
  const canvas = document.createElement("canvas").getContext("2d");
  canvas.font = `${style.fontStyle} ${style.fontWeight} ${style.fontSize} ${style.fontFamily}`;
  const room = input.clientWidth - parseFloat(style.paddingLeft) - parseFloat(style.paddingRight);
  return {text: input.placeholder, needs: canvas.measureText(input.placeholder).width, room};
}"""


def test_the_placeholder_fits_at_600_px_with_the_file_browser_open(
    browser: Browser, lab: Lab
) -> None:
    page, chat = open_chat(browser, lab, "narrow", width=600)
    console = Console(page)
    page.evaluate("() => window.jupyterapp.commands.execute('filebrowser:activate')")
    expect(page.locator(".jp-FileBrowser")).to_be_visible(timeout=30_000)
    box = chat.locator(".conch-input")
    expect(box).to_be_visible()
    fits = box.evaluate(PLACEHOLDER)
    assert fits["text"] == "Message (@ mentions)"
    assert fits["needs"] <= fits["room"], fits
    # And while a round runs (writing then ends it after the running reply).
    say(page, chat, "@Researcher and @Writer, take turns on it: one idea each.")
    expect(box).to_have_attribute("placeholder", "Send to end the round", timeout=30_000)
    fits = box.evaluate(PLACEHOLDER)
    assert fits["needs"] <= fits["room"], fits
    chat.get_by_role("button", name="Stop", exact=True).first.click()
    chat.screenshot(path=screenshot_path("quarter-narrow-placeholder"))
    assert console.errors == []
    page.context.close()
