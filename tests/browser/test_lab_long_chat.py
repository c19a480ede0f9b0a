"""A long chat in a real JupyterLab (issue 24): 10,000 messages, written into the store before
the server starts (tests/support/long_chats.py). `%conch` shows the notebook's chat: the view
opens it from a page of its last messages (a few thousand elements, not ~95,000), scrolling up
loads the pages before with the line being read kept in place, up to the first message; it draws
only what is near the viewport (at most 5,000 elements under the chat's root at the top, in the
middle and back at the bottom), drawing again what it dropped as the person scrolls back down,
with the line being read kept in place; "Newest messages" and sending a message go back to the
end, and a new round still streams and folds at the bottom. How fast is for
benchmarks/bench_long_chats.py to say (printed, never asserted here).
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from playwright.sync_api import Browser, expect

from ..support.browser import screenshot_path
from ..support.lab import Console, Lab, lab_folder, notebook, open_notebook, run_all, running_lab
from ..support.long_chats import long_chat_file

pytestmark = [pytest.mark.browser, pytest.mark.timeout(300)]

EXCHANGES = 5_000  # 10,000 messages
ELEMENTS = "() => document.querySelector('.conch-chat').querySelectorAll('*').length"
# Scroll the log to its top (a scroll event when it was not there), and say whether the first
# message of the chat is drawn.
TO_THE_TOP = """() => {
  const log = document.querySelector('.conch-chat .conch-log');
  log.scrollTop = 0;
  return log.textContent.includes('@Researcher question 0?');
}"""
# Scroll the log to the bottom of what is drawn, and say whether `text` is drawn.
DOWN_TO = """text => {
  const log = document.querySelector('.conch-chat .conch-log');
  log.scrollTop = log.scrollHeight;
  return log.textContent.includes(text);
}"""
# Scroll the log to the bottom of what is drawn; then the user's message at least partly in sight
# (its words, its top) and the first user's message drawn, measured at once, as the scroll left
# them (before the view draws again).
READING = """log => {
  log.scrollTop = log.scrollHeight - log.clientHeight;
  const top = log.getBoundingClientRect().top;
  const el = [...log.querySelectorAll('.conch-user')].find(
    (c) => c.getBoundingClientRect().bottom > top);
  return [el.textContent, el.getBoundingClientRect().top,
          log.querySelector('.conch-user').textContent];
}"""
WHERE = """(log, text) => {
  const el = [...log.querySelectorAll('.conch-user')].find((c) => c.textContent === text);
  return el ? el.getBoundingClientRect().top : null;
}"""


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    book = notebook("%load_ext conch_jupyter", "%conch")
    root = lab_folder(tmp_path_factory, "lab-long", {"long.ipynb": book})
    (root / "conch").mkdir(mode=0o700)
    long_chat_file(root / "conch", EXCHANGES, title="long.ipynb", path="long.ipynb")
    with running_lab(root) as running:
        yield running


def test_a_long_chat_opens_from_its_last_page_and_scrolls_back_to_its_first_message(
    browser: Browser, lab: Lab
) -> None:
    page = open_notebook(browser, f"{lab.url}lab/tree/long.ipynb?token={lab.token}")
    console = Console(page)
    drawn = time.monotonic()
    run_all(page)
    chat = page.locator(".conch-chat").first
    last = chat.locator(".conch-agent").filter(has_text=f"question {EXCHANGES - 1}:")
    expect(last).to_be_visible(timeout=60_000)
    print(
        f"\nthe last message visible {time.monotonic() - drawn:.2f} s after the notebook was drawn"
    )
    elements = page.evaluate(ELEMENTS)
    print(f"elements under the chat's root: {elements}")
    assert elements <= 5_000
    chat.screenshot(path=screenshot_path("lab-long-chat"))

    # One page up: what was the first item stays where it was, the page before above it.
    log = chat.locator(".conch-log")
    first_id, first_top = log.evaluate(
        "log => { log.scrollTop = 0; const el = log.firstElementChild;"
        " return [el.textContent, el.getBoundingClientRect().top]; }"
    )
    before = log.evaluate("log => log.children.length")
    page.wait_for_function(
        "n => document.querySelector('.conch-chat .conch-log').children.length > n", arg=before
    )
    page.wait_for_timeout(100)  # the draw after the page came
    kept = log.evaluate(
        "(log, text) => { const el = [...log.children].find((c) => c.textContent === text);"
        " return el ? [el.getBoundingClientRect().top, log.scrollTop] : null; }",
        first_id,
    )
    assert kept is not None
    top, scrolled = kept
    assert abs(top - first_top) <= 2, (top, first_top)
    assert scrolled > 0  # the earlier page went in above what was being read

    # Up to the first message of the chat: the far end of the chat dropped on the way.
    start = time.monotonic()
    page.wait_for_function(TO_THE_TOP, polling=100, timeout=240_000)
    print(f"scrolled back to the first message in {time.monotonic() - start:.1f} s")
    user = chat.locator(".conch-user").filter(has_text="@Researcher question 0?")
    expect(user).to_have_count(1)  # drawn once: no page doubled
    expect(user).to_be_in_viewport()
    top_elements = page.evaluate(ELEMENTS)
    assert top_elements <= 5_000, top_elements
    expect(last).to_have_count(0)  # the newest far below: dropped
    # Find-in-page finds what is drawn (real elements, not hidden ones).
    assert page.evaluate("() => window.find('@Researcher question 1?')")
    newest = chat.locator(".conch-newest")
    expect(newest).to_be_visible()

    # Down to the middle: what was dropped is drawn again, and the far top is dropped.
    start = time.monotonic()
    page.wait_for_function(DOWN_TO, arg="question 2500?", polling=50, timeout=120_000)
    print(f"scrolled down to the middle in {time.monotonic() - start:.1f} s")
    middle_elements = page.evaluate(ELEMENTS)
    assert middle_elements <= 5_000, middle_elements
    expect(user).to_have_count(0)
    # One more step down keeps the line being read where it was, items dropped above it.
    text, read_top, first_user = log.evaluate(READING)
    page.wait_for_function(
        "t => document.querySelector('.conch-chat .conch-log .conch-user').textContent !== t",
        arg=first_user,
    )
    page.wait_for_timeout(100)  # the draw's own frame
    now_top = log.evaluate(WHERE, text)
    assert now_top is not None
    assert abs(now_top - read_top) <= 2, (now_top, read_top)

    # Back at the bottom by scrolling: the newest messages are drawn again.
    start = time.monotonic()
    page.wait_for_function(DOWN_TO, arg=f"question {EXCHANGES - 1}:", polling=50, timeout=120_000)
    print(f"scrolled down to the last message in {time.monotonic() - start:.1f} s")
    expect(last).to_have_count(1)
    bottom_elements = page.evaluate(ELEMENTS)
    assert bottom_elements <= 5_000, bottom_elements
    print(f"elements: {top_elements} at the top, {middle_elements} in the middle,", end=" ")
    print(f"{bottom_elements} at the bottom")
    expect(newest).to_be_hidden()

    # Up a few steps, then "Newest messages": the last message in sight again.
    page.wait_for_function(
        "() => { const log = document.querySelector('.conch-chat .conch-log'); log.scrollTop = 0;"
        " return !document.querySelector('.conch-chat .conch-newest').hidden; }",
        polling=50,
    )
    expect(last).to_have_count(0)
    newest.click()
    expect(last).to_be_in_viewport()
    expect(newest).to_be_hidden()

    # Read far above again: sending a message goes to the newest, where its round is drawn.
    page.wait_for_function(
        "() => { const log = document.querySelector('.conch-chat .conch-log'); log.scrollTop = 0;"
        " return !document.querySelector('.conch-chat .conch-newest').hidden; }",
        polling=50,
    )
    # A new round still streams and folds at the bottom.
    box = chat.locator(".conch-input")
    box.fill("@Writer one more line, please")
    box.press("Enter")
    card = chat.locator(".conch-round").last
    expect(card).to_have_attribute("data-state", "folded", timeout=60_000)
    expect(chat.locator(".conch-user").last).to_contain_text("one more line")
    expect(chat.locator(".conch-user").last).to_be_in_viewport()
    assert console.errors == []
    page.context.close()
