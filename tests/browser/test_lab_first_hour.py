"""A newcomer's first hour (issue 32) in a real JupyterLab 4 and a real Notebook 7 in chromium,
done as a person does it: keys typed, what is seen clicked, the page looked at.

- Settings open from the chat's header in one click; a coding agent added there with its persona
  and four environment lines typed with Enter keeps every line, and a line that cannot be right
  is refused in words at Save (item 1, 2).
- The header lays out at 320 and 600 px and full width, both themes: its groups (the title, the
  mode and its sentence, the spend and Limit, Settings) wrap as wholes, never overlap, never leave
  the chat, the sentence never a word a line, Limit beside the spend where there is room (item 3).
- A message written over lines (Shift+Enter) keeps them on screen and in what the agent answers;
  the reply's list is a list while it streams, and its label is whole (item 7).
- JupyterLab's Create New View for Cell Output and New View for Notebook each give a chat that is
  read, written and answered there (item 4; JupyterLab dark).

JupyterLab is seen light and Notebook 7 dark in the Settings and lines tests, the other way round
in the header's. No console errors.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

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

pytestmark = [pytest.mark.browser, pytest.mark.timeout(300)]

CELLS = ("%load_ext conch_jupyter\n%conch",)
NAMES = ("first-lab", "first-7", "head-lab", "head-7", "views")
APPS = [
    pytest.param("lab/tree", False, id="jupyterlab-light"),
    pytest.param("notebooks", True, id="notebook7-dark"),
]

# The header's parts as the page lays them out: each part's box, the chat's, and the mode
# sentence's line height (to count its lines).
HEAD = """head => {
  const box = (el) => {
    if (!el || el.hidden || !el.getClientRects().length) return null;
    const r = el.getBoundingClientRect();
    return {
      left: r.left, right: r.right, top: r.top, bottom: r.bottom, width: r.width, height: r.height,
    };
  };
  const q = (s) => box(head.querySelector(s));
  const words = head.querySelector(".conch-mode-words");
  return {
    chat: box(head.closest(".conch-chat")),
    parts: {
      title: q(".conch-head-title"),
      switch: q(".conch-modes"),
      sentence: q(".conch-mode-words"),
      limit: q(".conch-limit-open"),
      settings: q(".conch-settings-open"),
      ...Object.fromEntries(
        Array.from(head.querySelectorAll(".conch-spend-part"), (p, i) => [`spend${i}`, box(p)])
      ),
    },
    line: parseFloat(getComputedStyle(words).lineHeight) || 17,
  };
}"""

# Any label in the chat whose words do not fit in it (cut, or hidden past its edge).
CUT = """chat => Array.from(chat.querySelectorAll(
  ".conch-head *, .conch-who, .conch-place, .conch-typing, .conch-round-line, " +
  ".conch-round-folded, .conch-tool-summary, .conch-note-text, .conch-hint, button, label, " +
  ".conch-md em"
)).filter(el => el.getClientRects().length && el.clientWidth > 0
  && el.scrollWidth > el.clientWidth + 1).map(el => el.textContent.trim())"""


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    notebooks = {f"{name}.ipynb": notebook(*CELLS) for name in NAMES}
    root = lab_folder(tmp_path_factory, "lab-first-hour", notebooks)
    # Slow enough that a reply streams for seconds: its list is seen before it settles.
    with running_lab(root, offline_delay=0.08) as running:
        yield running


def open_chat(browser: Browser, lab: Lab, app: str, name: str, dark: bool) -> tuple[Page, Locator]:
    # A JupyterLab workspace of its own: the default one would bring back the notebooks (and
    # views) an earlier test left open.
    where = f"lab/workspaces/{name}/tree" if app.startswith("lab") else app
    page = open_notebook(browser, f"{lab.url}{where}/{name}.ipynb?token={lab.token}")
    set_theme(page, dark)
    run_all(page)
    chat = page.locator(".conch-chat").first
    expect(chat).to_have_attribute("data-source", "server", timeout=60_000)
    return page, chat


@pytest.mark.parametrize(("app", "dark"), APPS)
def test_settings_from_the_header_keep_every_line_typed(
    browser: Browser, lab: Lab, app: str, dark: bool
) -> None:
    name = "first-lab" if app.startswith("lab") else "first-7"
    page, chat = open_chat(browser, lab, app, name, dark)
    console = Console(page)
    agent = "Coder Lab" if app.startswith("lab") else "Coder Seven"

    # One click on Settings in the header: the agents, outside agents and pairings, in place.
    settings_button = chat.locator(".conch-head").get_by_role("button", name="Settings")
    settings_button.click()
    settings = chat.locator(".conch-settings")
    expect(settings.get_by_role("tab")).to_have_text(
        ["Your agents", "Outside agents", "Agents that can talk to yours", "Tools"]
    )
    expect(settings.locator(".conch-row").filter(has_text="Writer")).to_be_visible()
    settings.get_by_role("button", name="Add an agent").click()
    form = settings.locator(".conch-form:visible")
    expect(form.locator("[name=name]")).to_be_focused()
    page.keyboard.type(agent)
    form.locator("[name=persona]").click()
    page.keyboard.type("Reads the code.")
    page.keyboard.press("Enter")
    page.keyboard.type("Writes the tests.")
    form.locator("[name=kind]").select_option("acp")
    form.locator("[name=command]").click()
    page.keyboard.type("coder-not-installed")
    # Four environment lines typed with Enter, and a fifth that cannot be right.
    form.locator("[name=env]").click()
    for line in ("ALPHA=1", "BETA=two words", "GAMMA=3=three", "DELTA="):
        page.keyboard.type(line)
        page.keyboard.press("Enter")
    page.keyboard.type("EPSILON 5")
    expect(form.locator("[name=env]")).to_have_value(
        "ALPHA=1\nBETA=two words\nGAMMA=3=three\nDELTA=\nEPSILON 5"
    )
    form.get_by_role("button", name="Save").click()
    expect(form.get_by_role("alert")).to_have_text(
        "Environment line 5 (“EPSILON 5”) has no “=”: write NAME=value, one a line."
    )
    with lab.client() as http:
        listed = http.get(f"{lab.url}conch/api/agents").json()["agents"]
    assert agent not in [a["name"] for a in listed]  # refused: nothing saved
    # The person takes the last line back (and its line break), then saves.
    form.locator("[name=env]").click()
    page.keyboard.press("Control+End")
    for _ in range(len("EPSILON 5") + 1):
        page.keyboard.press("Backspace")
    form.get_by_role("button", name="Save").click()
    row = settings.locator(".conch-row").filter(has_text=agent)
    expect(row).to_contain_text(
        "coding agent (ACP) · coder-not-installed · not started yet · "
        "env: ALPHA, BETA, DELTA, GAMMA",
        timeout=10_000,
    )
    with lab.client() as http:
        saved = next(
            a for a in http.get(f"{lab.url}conch/api/agents").json()["agents"] if a["name"] == agent
        )
    assert saved["persona"] == "Reads the code.\nWrites the tests."
    assert saved["provider"]["env_names"] == ["ALPHA", "BETA", "DELTA", "GAMMA"]
    chat.screenshot(path=screenshot_path(f"{name}-settings-in-the-chat"))

    # Enter in a one-line field saves: the name changed and Enter pressed.
    row.get_by_role("button", name="Edit").click()
    form.locator("[name=name]").click()
    page.keyboard.press("End")
    page.keyboard.type(" Two")
    page.keyboard.press("Enter")
    expect(settings.locator(".conch-row").filter(has_text=f"{agent} Two")).to_be_visible()
    with lab.client() as http:
        kept = http.get(f"{lab.url}conch/api/agents/{saved['id']}").json()
    assert kept["persona"] == "Reads the code.\nWrites the tests."
    assert kept["provider"]["env_names"] == ["ALPHA", "BETA", "DELTA", "GAMMA"]
    # The new agent is offered in the chat at once; Settings close with the same button.
    settings_button.click()
    expect(settings).to_have_count(0)
    expect(settings_button).to_have_attribute("aria-expanded", "false")
    box = chat.locator(".conch-input")
    box.click()
    page.keyboard.type("@Coder")
    expect(chat.locator(".conch-mention .conch-mention-name")).to_have_text([f"{agent} Two"])
    page.keyboard.press("Escape")
    with lab.client() as http:
        http.delete(f"{lab.url}conch/api/agents/{saved['id']}")
    set_theme(page, False)  # the theme is a stored setting: the next page starts light
    assert console.errors == []
    page.context.close()


@pytest.mark.parametrize(("app", "dark"), APPS)
def test_a_messages_lines_are_kept_and_a_list_is_a_list_while_it_streams(
    browser: Browser, lab: Lab, app: str, dark: bool
) -> None:
    name = "first-lab" if app.startswith("lab") else "first-7"
    page, chat = open_chat(browser, lab, app, name, dark)
    console = Console(page)
    chat.locator(".conch-input").click()
    page.keyboard.type("@Writer the first line")
    page.keyboard.press("Shift+Enter")
    page.keyboard.type("and the second")
    page.keyboard.press("Enter")
    mine = chat.locator(".conch-user .conch-md").last
    expect(mine.locator("br")).to_have_count(1, timeout=30_000)
    assert mine.inner_text().strip() == "@Writer the first line\nand the second"

    # While the reply streams: its list is a list (items, no "•" text), its label whole.
    handle = page.wait_for_function(
        """() => {
          const text = document.querySelector(".conch-agent.is-streaming .conch-streaming-text");
          if (!text || !text.querySelector("ul > li")) return null;
          return {items: text.querySelectorAll("ul > li").length, words: text.textContent,
                  label: text.querySelector("p > em")?.textContent ?? ""};
        }""",
        timeout=60_000,
        polling=50,
    )
    moment: dict[str, Any] = handle.json_value()
    assert moment["items"] >= 1, moment
    assert "•" not in moment["words"], moment
    assert moment["label"] == "(offline — no model was asked)", moment
    assert not page.evaluate(CUT, chat.element_handle()), "a label is cut"
    chat.screenshot(path=screenshot_path(f"{name}-streaming-list"))

    # Settled: the agent had both lines (the offline agent quotes what it was asked, a line
    # each: its own part of the message, without its @name).
    reply = chat.locator(".conch-msg.conch-agent").last
    expect(chat.locator(".conch-agent.is-streaming")).to_have_count(0, timeout=60_000)
    expect(reply.locator("blockquote")).to_have_text("the first line\nand the second")
    assert reply.locator("blockquote").inner_text().strip().split("\n") == [
        "the first line",
        "and the second",
    ]
    expect(reply.locator(".conch-md > ul > li")).to_have_count(3)
    chat.screenshot(path=screenshot_path(f"{name}-settled-list"))
    assert not page.evaluate(CUT, chat.element_handle()), "a label is cut"
    set_theme(page, False)
    assert console.errors == []
    page.context.close()


def head_layout(page: Page, chat: Locator) -> dict[str, Any]:
    layout: dict[str, Any] = page.evaluate(HEAD, chat.locator(".conch-head").element_handle())
    return layout


def assert_laid_out(layout: dict[str, Any], *, limit_beside_spend: bool) -> None:
    """Every part inside the chat, none over another, the sentence never a word a line."""
    chat = layout["chat"]
    parts = {k: v for k, v in layout["parts"].items() if v is not None}
    assert {"title", "switch", "sentence", "limit", "settings", "spend0"} <= set(parts), parts
    for key, box in parts.items():
        assert box["left"] >= chat["left"] - 1, (key, layout)
        assert box["right"] <= chat["right"] + 1, (key, layout)
    keys = sorted(parts)
    for i, a in enumerate(keys):
        for b in keys[i + 1 :]:
            one, two = parts[a], parts[b]
            apart = (
                one["right"] <= two["left"] + 1
                or two["right"] <= one["left"] + 1
                or one["bottom"] <= two["top"] + 1
                or two["bottom"] <= one["top"] + 1
            )
            assert apart, (a, b, layout)
    sentence = parts["sentence"]
    lines = round(sentence["height"] / layout["line"])
    # At least some 15 letters a line: at most three lines for its 35-55 letters.
    assert lines <= 3, layout
    assert sentence["width"] >= min(150, chat["width"] - 10), layout
    if limit_beside_spend:
        last = parts[max(k for k in parts if k.startswith("spend"))]
        middle = (parts["limit"]["top"] + parts["limit"]["bottom"]) / 2
        assert last["top"] <= middle <= last["bottom"], layout


@pytest.mark.parametrize(
    ("app", "name"),
    [("lab/tree", "head-lab"), ("notebooks", "head-7")],
    ids=["jupyterlab", "notebook7"],
)
def test_the_header_lays_out_from_320_px_to_full_width(
    browser: Browser, lab: Lab, app: str, name: str
) -> None:
    lab_app = app.startswith("lab")
    page, chat = open_chat(browser, lab, app, name, dark=lab_app)
    console = Console(page)
    if lab_app:  # the file browser closed, as a person does on a narrow screen
        page.locator(".jp-SideBar.jp-mod-left .lm-TabBar-tab.lm-mod-current").click()
    # Full width, in Read (its sentence the longest but one).
    chat.locator(".conch-head").get_by_role("button", name="Read").click()
    expect(chat.locator(".conch-mode-words")).to_have_text(
        "Read: agents can read the notebook but not run code."
    )
    assert_laid_out(head_layout(page, chat), limit_beside_spend=True)
    chat.locator(".conch-head").screenshot(path=screenshot_path(f"{name}-head-full"))
    for width, dark in ((600, not lab_app), (320, lab_app)):
        set_theme(page, dark)
        page.set_viewport_size({"width": width, "height": 1000})
        chat.scroll_into_view_if_needed()
        expect(chat.locator(".conch-head")).to_be_visible()
        page.wait_for_function(
            "w => document.querySelector('.conch-chat').getBoundingClientRect().width < w",
            arg=width,
        )
        layout = head_layout(page, chat)
        assert_laid_out(layout, limit_beside_spend=width >= 600)
        assert not page.evaluate(CUT, chat.element_handle()), "a label is cut"
        page.screenshot(path=screenshot_path(f"{name}-head-{width}-{'dark' if dark else 'light'}"))
        # Ask: the switch answers a click at this width too.
        chat.locator(".conch-head").get_by_role("button", name="Ask").click()
        expect(chat.locator(".conch-mode-words")).to_have_text("Ask: every run waits for your yes.")
        assert_laid_out(head_layout(page, chat), limit_beside_spend=width >= 600)
        chat.locator(".conch-head").get_by_role("button", name="Read").click()
    chat.locator(".conch-head").get_by_role("button", name="Ask").click()
    set_theme(page, False)
    assert console.errors == []
    page.context.close()


def test_jupyterlabs_new_views_give_a_working_chat(browser: Browser, lab: Lab) -> None:
    """JupyterLab's own second views (issue 32, item 4): the cell output's new view and the
    notebook's new view each draw the chat in full, and it is read, written and answered there."""
    page, chat = open_chat(browser, lab, "lab/tree", "views", dark=True)
    console = Console(page)
    # Right-click the chat's output: Create New View for Cell Output.
    chat.locator(".conch-head-title").click(button="right")
    page.get_by_role("menuitem", name="Create New View for Cell Output").click()
    beside = page.locator(".jp-LinkedOutputView .conch-chat")
    expect(beside).to_have_count(1, timeout=30_000)
    expect(beside).to_have_attribute("data-source", "server", timeout=30_000)
    expect(page.locator(".jp-LinkedOutputView .conch-elsewhere")).to_have_count(0)
    # Written there: a run that asks, answered there; the notebook's own chat shows it too.
    beside.locator(".conch-input").click()
    page.keyboard.type("@Writer please run this:")
    page.keyboard.press("Shift+Enter")
    page.keyboard.type("```python")
    page.keyboard.press("Shift+Enter")
    page.keyboard.type("seen_beside = 3")
    page.keyboard.press("Shift+Enter")
    page.keyboard.type("```")
    page.keyboard.press("Enter")
    approval = beside.locator(".conch-approval")
    expect(approval).to_have_count(1, timeout=60_000)
    expect(chat.locator(".conch-approval")).to_have_count(1)
    page.screenshot(path=screenshot_path("views-output-beside"))
    approval.get_by_role("button", name="Run", exact=True).click()
    expect(approval).to_have_count(0, timeout=30_000)
    expect(chat.locator(".conch-approval")).to_have_count(0, timeout=30_000)
    expect(beside.locator(".conch-tool[data-tool=run_code] summary")).to_have_text(
        "Writer · code · ran", timeout=60_000
    )
    expect(chat.locator(".conch-user")).to_contain_text("please run this")
    # File → New View for Notebook: the second panel draws the chat in full too.
    chat.locator(".conch-head-title").click()
    page.get_by_role("menuitem", name="File", exact=True).click()
    page.get_by_role("menuitem", name="New View for Notebook").click()
    panels = page.locator(".jp-NotebookPanel")
    expect(panels).to_have_count(2, timeout=30_000)
    second = panels.nth(1).locator(".conch-chat")
    expect(second).to_have_count(1, timeout=60_000)
    expect(second.locator(".conch-user")).to_contain_text("please run this", timeout=30_000)
    expect(second.locator(".conch-input")).to_be_editable()
    page.screenshot(path=screenshot_path("views-notebook-second"))
    set_theme(page, False)
    assert console.errors == []
    page.context.close()
