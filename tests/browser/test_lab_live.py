"""The chat stays live while the kernel is busy, restarted or gone (issue 12), in a real
JupyterLab 4 and Notebook 7 under an awkward base_url (/user/a%40b/), light and dark.

The view talks to the Jupyter server itself with the page's own auth: a cell that sleeps for
minutes does not hold up the round card, the streaming reply or Stop, and after the kernel is
restarted or shut down the chat keeps streaming, can still be written in, and Stop still ends a
round at once. No console errors.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Browser, Page, expect

from ..support.browser import need_chromium, screenshot_path
from ..support.lab import Console, Lab, notebook, open_notebook, run_all, running_lab, set_theme

pytestmark = [pytest.mark.browser, pytest.mark.timeout(240)]

BASE_URL = "/user/a%40b/"
KERNEL_STATUS = (
    "() => window.jupyterapp.shell.currentWidget?.sessionContext?.session?.kernel?.status"
)
KERNEL_ID = "() => window.jupyterapp.shell.currentWidget.sessionContext.session.kernel.id"
ROUND = "%conch @Researcher find options, @Writer draft it. Take turns."


def sleeping(notebook: str) -> str:
    """A cell that holds the kernel for ten minutes, and keeps a file beside its notebook for as
    long as it sleeps: the kernel's own word that it is busy. (The server's `execution_state` is
    not: a status the kernel sends for a message Jupyter does not track, or its debugger's
    requests on the control channel, can leave it "idle" while the cell still runs.)"""
    marker = f"{notebook}.sleeping"
    return (
        "import pathlib, time\n"
        f"pathlib.Path({marker!r}).touch()\n"
        "try:\n"
        "    time.sleep(600)\n"
        "finally:\n"
        f"    pathlib.Path({marker!r}).unlink()"
    )


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The folder Jupyter serves: the notebooks, and the sleeping cells' markers."""
    return tmp_path_factory.mktemp("lab-live") / "work"


@pytest.fixture(scope="module")
def lab(work: Path) -> Iterator[Lab]:
    need_chromium()
    work.mkdir()
    for name in ("busy-light", "busy-dark", "busy7"):
        busy = notebook("%load_ext conch_jupyter", ROUND, sleeping(f"{name}.ipynb"))
        (work / f"{name}.ipynb").write_text(busy)
    (work / "settings.ipynb").write_text(
        notebook("%load_ext conch_jupyter", "%conch pairings", sleeping("settings.ipynb"))
    )
    for name in ("gone-light", "gone-dark", "gone7", "words"):
        (work / f"{name}.ipynb").write_text(notebook("%load_ext conch_jupyter", "%conch"))
    with running_lab(work.parent, base_url=BASE_URL, offline_delay=0.12) as running:
        yield running


# JupyterLab's own words when its kernel is shut down under it (its debugger was asking the
# kernel something): not the view's, and not every time.
JUPYTERLAB_ON_SHUTDOWN = ("Could not restore the debugger state",)


def cookie_auth_only(page: Page) -> None:
    """Take the token out of the page's config (JupyterLab read it already), so the view must
    authenticate as it does under JupyterHub: the login cookie, and `_xsrf` as X-XSRFToken."""
    page.evaluate(
        """() => {
          const el = document.getElementById("jupyter-config-data");
          el.textContent = JSON.stringify({...JSON.parse(el.textContent), token: ""});
        }"""
    )


def stop_ends_it_at_once(card: Any, said: str) -> None:
    """Click the card's Stop; the round ends at once and the card folds (a 0.24 s motion)
    within a second of it, saying why."""
    started = time.monotonic()
    card.get_by_role("button", name="Stop").click()
    expect(card).to_have_attribute("data-state", "folded", timeout=5_000)
    seconds = time.monotonic() - started
    print(f"{said}: {seconds:.2f} s")
    assert seconds < 1.5, f"the card folded {seconds:.2f} s after Stop"
    expect(card.locator(".conch-round-folded")).to_contain_text("ended: you stopped it")


def still_sleeping(work: Path, notebook: str) -> bool:
    """Whether the notebook's sleeping cell runs (see `sleeping`), in the kernel's own word, not
    a page's: the page's status lags or goes blank while it redraws."""
    return (work / f"{notebook}.sleeping").exists()


def until_sleeping(page: Page, work: Path, notebook: str, seconds: float = 60) -> None:
    """Wait for the sleeping cell to hold the kernel; if it never does, keep a screenshot of what
    the cells show and say what the notebook's outputs are."""
    deadline = time.monotonic() + seconds
    while not still_sleeping(work, notebook):
        if time.monotonic() > deadline:
            page.screenshot(path=screenshot_path(f"{notebook}-never-sleeping"))
            outputs = page.locator(".jp-Notebook .jp-OutputArea").all_inner_texts()
            raise AssertionError(f"{notebook}'s sleeping cell never ran; its outputs: {outputs}")
        time.sleep(0.2)


def busy_kernel_scenario(page: Page, work: Path, notebook: str, name: str) -> None:
    chat = page.locator(".conch-chat").first
    expect(chat).to_have_attribute("data-source", "server", timeout=60_000)
    card = chat.locator(".conch-round").first
    expect(card).to_have_attribute("data-state", "live", timeout=60_000)
    # The sleeping cell holds the kernel: everything below happens without it.
    until_sleeping(page, work, notebook)
    streaming = chat.locator(".conch-msg.is-streaming .conch-streaming-text")
    expect(streaming).not_to_be_empty(timeout=30_000)
    before = len(streaming.text_content() or "")
    page.wait_for_function(
        "n => (document.querySelector('.conch-msg.is-streaming .conch-streaming-text')"
        "?.textContent?.length ?? n + 1) > n",
        arg=before,
        timeout=10_000,
    )
    chat.screenshot(path=screenshot_path(f"{name}-busy-kernel-live"))
    stop_ends_it_at_once(card, f"{name}: Stop to folded card, kernel busy")
    # Writing works while the kernel is busy too: the message goes, a new round answers.
    box = chat.locator(".conch-input")
    box.fill("@Writer one line, please")
    box.press("Enter")
    expect(chat.locator(".conch-user")).to_have_count(2, timeout=10_000)
    expect(chat.locator(".conch-round").nth(1)).to_have_attribute(
        "data-state", "folded", timeout=60_000
    )
    expect(chat.locator(".conch-agent").last.locator(".conch-who")).to_have_text("Writer")
    assert still_sleeping(work, notebook)  # all of it while the cell still ran
    chat.screenshot(path=screenshot_path(f"{name}-busy-kernel-after"))
    page.evaluate("() => { window.jupyterapp.commands.execute('notebook:interrupt-kernel'); }")


def in_a_page(
    browser: Browser,
    lab: Lab,
    address: str,
    dark: bool,
    scenario: Callable[[Page], None],
    ignore: tuple[str, ...] = (),
) -> None:
    """Open a notebook (under lab.url), theme it, run all its cells, play the scenario, and
    check the page logged no console error (but JupyterLab's own, named in ignore)."""
    page = open_notebook(browser, f"{lab.url}{address}?token={lab.token}")
    console = Console(page, ignore=ignore)
    set_theme(page, dark)
    run_all(page)
    scenario(page)
    set_theme(page, False)  # the theme is a stored setting: the next page starts light
    assert console.errors == []
    page.context.close()


def in_jupyterlab(name: str) -> str:
    return f"lab/workspaces/{name}/tree/{name}.ipynb"


@pytest.mark.parametrize("dark", [False, True], ids=["light", "dark"])
def test_jupyterlab_round_card_stream_and_stop_work_while_the_kernel_is_busy(
    browser: Browser, lab: Lab, work: Path, dark: bool
) -> None:
    name, shown = ("busy-dark", "lab-dark") if dark else ("busy-light", "lab-light")
    in_a_page(
        browser,
        lab,
        in_jupyterlab(name),
        dark,
        lambda p: busy_kernel_scenario(p, work, f"{name}.ipynb", shown),
    )


def test_notebook_7_round_card_stream_and_stop_work_while_the_kernel_is_busy(
    browser: Browser, lab: Lab, work: Path
) -> None:
    in_a_page(
        browser,
        lab,
        "notebooks/busy7.ipynb",
        False,
        lambda p: busy_kernel_scenario(p, work, "busy7.ipynb", "notebook7"),
    )


def dead_kernel_scenario(page: Page, lab: Lab, name: str) -> None:
    """Restart the chat's kernel, then shut it down: the chat streams, takes words, and stops."""
    chat = page.locator(".conch-chat").first
    expect(chat).to_have_attribute("data-source", "server", timeout=60_000)
    page.wait_for_function(f"({KERNEL_STATUS})() === 'idle'", timeout=30_000)
    kernel = page.evaluate(KERNEL_ID)
    box = chat.locator(".conch-input")
    with lab.client() as http:
        assert http.post(f"{lab.url}api/kernels/{kernel}/restart").status_code == 200
        page.wait_for_function(f"({KERNEL_STATUS})() === 'idle'", timeout=30_000)
        # Restarted: a round streams and runs to its end.
        box.fill("@Writer one line, please")
        box.press("Enter")
        first = chat.locator(".conch-round").first
        expect(first).to_have_attribute("data-state", "live", timeout=30_000)
        expect(chat.locator(".conch-streaming-text")).not_to_be_empty(timeout=30_000)
        expect(first).to_have_attribute("data-state", "folded", timeout=60_000)
        expect(chat.locator(".conch-agent").last.locator(".conch-who")).to_have_text("Writer")
        assert http.delete(f"{lab.url}api/kernels/{kernel}").status_code == 204
    page.wait_for_function(
        f"!['idle', 'busy', 'starting'].includes(({KERNEL_STATUS})())", timeout=30_000
    )
    # Shut down: the chat still takes words, streams the round, and Stop ends it at once.
    box.fill(ROUND.removeprefix("%conch "))
    box.press("Enter")
    expect(chat.locator(".conch-user")).to_have_count(2, timeout=10_000)
    second = chat.locator(".conch-round").nth(1)
    expect(second).to_have_attribute("data-state", "live", timeout=30_000)
    streaming = chat.locator(".conch-msg.is-streaming .conch-streaming-text")
    expect(streaming).not_to_be_empty(timeout=30_000)
    chat.screenshot(path=screenshot_path(f"{name}-kernel-gone-live"))
    stop_ends_it_at_once(second, f"{name}: Stop to folded card, kernel shut down")
    chat.screenshot(path=screenshot_path(f"{name}-kernel-gone"))


@pytest.mark.parametrize("dark", [False, True], ids=["light", "dark"])
def test_jupyterlab_chat_streams_takes_words_and_stops_after_a_restart_and_a_shutdown(
    browser: Browser, lab: Lab, dark: bool
) -> None:
    name, shown = ("gone-dark", "lab-dark") if dark else ("gone-light", "lab-light")

    def scenario(page: Page) -> None:
        dead_kernel_scenario(page, lab, shown)

    in_a_page(browser, lab, in_jupyterlab(name), dark, scenario, JUPYTERLAB_ON_SHUTDOWN)


def test_notebook_7_chat_streams_takes_words_and_stops_after_a_restart_and_a_shutdown(
    browser: Browser, lab: Lab
) -> None:
    def scenario(page: Page) -> None:
        dead_kernel_scenario(page, lab, "notebook7-dark")

    in_a_page(browser, lab, "notebooks/gone7.ipynb", True, scenario, JUPYTERLAB_ON_SHUTDOWN)


def test_a_refused_message_and_a_dropped_stream_are_said_in_words(
    browser: Browser, lab: Lab
) -> None:
    page = open_notebook(
        browser, f"{lab.url}lab/workspaces/words/tree/words.ipynb?token={lab.token}"
    )
    console = Console(page)
    cookie_auth_only(page)
    run_all(page)
    chat = page.locator(".conch-chat").first
    expect(chat).to_have_attribute("data-source", "server", timeout=60_000)
    alert = chat.locator(".conch-problem")
    box = chat.locator(".conch-input")
    # The server refuses it: the chat says why, and the words are back in the box.
    box.fill("x" * 17_000)
    box.press("Enter")
    expect(alert).to_have_text("text: String should have at most 16000 characters.")
    expect(box).to_have_value("x" * 17_000)
    # The only console error is the browser's own line about that 400.
    assert len(console.errors) == 1
    assert "400" in console.errors[0]
    console.errors.clear()
    # The stream drops (the Jupyter server restarts): said in words, then followed again from
    # a snapshot once it is back, with nothing lost and nothing shown twice.
    # Two replies, one each (no "Take turns": eight slow replies would only cost time here).
    box.fill("@Researcher find options, @Writer draft it.")
    box.press("Enter")
    card = chat.locator(".conch-round").first
    expect(card).to_have_attribute("data-state", "folded", timeout=120_000)
    before = chat.locator(".conch-user, .conch-agent, .conch-note, .conch-handover").count()
    lab.stop()
    expect(alert).to_contain_text("cannot be reached", timeout=15_000)
    expect(alert).to_contain_text("Trying again")
    lab.start()
    expect(alert).to_be_hidden(timeout=30_000)
    expect(chat.locator(".conch-user, .conch-agent, .conch-note, .conch-handover")).to_have_count(
        before
    )
    # JupyterLab itself says it lost the server, in a dialog of its own: close it first.
    page.wait_for_timeout(1_000)
    while page.locator(".jp-Dialog").count():
        page.locator(".jp-Dialog .jp-Dialog-button").last.click()
    box.fill("@Writer one line after the restart, please")
    box.press("Enter")
    expect(chat.locator(".conch-round").nth(1)).to_have_attribute(
        "data-state", "folded", timeout=60_000
    )
    with lab.client() as http:
        chats = http.get(f"{lab.url}conch/api/conversations").json()["conversations"]
        mine = next(c for c in chats if c["title"].endswith("words.ipynb"))
        stored = http.get(f"{lab.url}conch/api/conversations/{mine['id']}").json()["messages"]
    said = [m for m in stored if m["role"] in ("user", "agent")]
    drawn = chat.locator(".conch-user, .conch-agent")
    expect(drawn).to_have_count(len(said))
    last = [m for m in said if m["role"] == "agent"][-1]
    assert chat.locator(".conch-agent").last.locator(".conch-md").inner_html() == last["html"]
    # While the server was away, the browser itself logged the requests that failed (JupyterLab's
    # polling and sockets, the view's stream; a stream request that came in while the server
    # shut down got a 503 in words). Those are the browser's lines; nothing else went wrong: no
    # uncaught error, and no 500 from Conch, in the page or in the server's log.
    away = ("Failed to load resource: ", "WebSocket connection to ")
    assert all(e.startswith(away) for e in console.errors), console.errors
    assert not [e for e in console.errors if "status of 500" in e], console.errors
    served = lab.log.read_text(errors="replace")
    assert not re.search(r"\b500 [A-Z]+ \S*conch/api/", served)
    assert "ProgrammingError" not in served
    page.context.close()


def test_settings_work_straight_from_the_server_while_the_kernel_is_busy(
    browser: Browser, lab: Lab, work: Path
) -> None:
    address = f"{lab.url}lab/workspaces/settings/tree/settings.ipynb?token={lab.token}"
    page = open_notebook(browser, address)
    console = Console(page)
    cookie_auth_only(page)
    run_all(page)
    settings = page.locator(".conch-settings").first
    expect(settings).to_be_visible(timeout=60_000)
    until_sleeping(page, work, "settings.ipynb")
    panel = settings.locator(".conch-panel:visible")
    expect(panel.get_by_role("button", name="Pair", exact=True)).to_be_visible()
    # Pair Writer: the key is shown once, here, and the pairing is listed.
    panel.locator(".conch-choices input[value=writer]").check()
    panel.get_by_role("button", name="Pair", exact=True).click()
    once = panel.locator(".conch-once")
    expect(once).to_contain_text("It is shown only this once.", timeout=10_000)
    expect(once.locator(".conch-secret")).to_contain_text("conch_")
    expect(panel.locator(".conch-row")).to_have_count(1)
    panel.get_by_role("button", name="What it said").click()
    expect(panel.locator(".conch-said")).to_contain_text("It has not said anything yet.")
    # Your agents: edit Writer's persona; the server has it.
    settings.get_by_role("tab", name="Your agents").click()
    panel = settings.locator(".conch-panel:visible")
    panel.locator(".conch-row").filter(has_text="Writer").get_by_role("button", name="Edit").click()
    form = panel.locator(".conch-form:visible")
    form.locator("[name=persona]").fill("Writes it down, briefly.")
    form.get_by_role("button", name="Save").click()
    expect(panel.locator(".conch-form:visible")).to_have_count(0, timeout=10_000)
    expect(panel.locator(".conch-row").filter(has_text="Writer")).to_contain_text(
        "Writes it down, briefly."
    )
    with lab.client() as http:
        writer = http.get(f"{lab.url}conch/api/agents/writer").json()
        pairings = http.get(f"{lab.url}conch/api/pairings").json()["pairings"]
    assert writer["persona"] == "Writes it down, briefly."
    assert [p["agents"] for p in pairings] == [["writer"]]
    assert still_sleeping(work, "settings.ipynb")  # all of it while the cell still ran
    settings.screenshot(path=screenshot_path("lab-settings-busy-kernel"))
    page.evaluate("() => { window.jupyterapp.commands.execute('notebook:interrupt-kernel'); }")
    assert console.errors == []
    page.context.close()
