"""The chat stays live while the kernel is busy, restarted or gone (issue 12), in a real
JupyterLab 4 and Notebook 7 under an awkward base_url (/user/a%40b/), light and dark.

The view talks to the Jupyter server itself with the page's own auth: a cell that sleeps for a
minute does not hold up the round card, the streaming reply or Stop, and after the kernel is
restarted or shut down the chat keeps streaming and can still be written in. No console errors.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from playwright.sync_api import Browser, Page, expect

from .browser import chromium, need_chromium, screenshot_path
from .lab import Console, Lab, notebook, open_notebook, run_all, running_lab, set_theme

pytestmark = [pytest.mark.browser, pytest.mark.timeout(240)]

BASE_URL = "/user/a%40b/"
KERNEL_STATUS = (
    "() => window.jupyterapp.shell.currentWidget?.sessionContext?.session?.kernel?.status"
)
KERNEL_ID = "() => window.jupyterapp.shell.currentWidget.sessionContext.session.kernel.id"
ROUND = "%conch @Researcher find options, @Writer draft it. Take turns."


@pytest.fixture
def jp_asyncio_loop() -> None:
    return None


@pytest.fixture
def jp_server_cleanup() -> None:
    return None


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    need_chromium()
    root = tmp_path_factory.mktemp("lab-live")
    work = root / "work"
    work.mkdir()
    busy = notebook("%load_ext conch_jupyter", ROUND, "import time\ntime.sleep(60)")
    for name in ("busy-light", "busy-dark", "busy7"):
        (work / f"{name}.ipynb").write_text(busy)
    (work / "gone.ipynb").write_text(notebook("%load_ext conch_jupyter", "%conch"))
    with running_lab(root, base_url=BASE_URL, offline_delay=0.12) as running:
        yield running


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with chromium() as running:
        yield running


def stop_and_time_the_fold(page: Page, card: Any) -> float:
    started = time.monotonic()
    card.get_by_role("button", name="Stop").click()
    expect(card).to_have_attribute("data-state", "folded", timeout=5_000)
    return time.monotonic() - started


def busy_kernel_scenario(page: Page, name: str) -> None:
    chat = page.locator(".conch-chat").first
    expect(chat).to_have_attribute("data-source", "server", timeout=60_000)
    card = chat.locator(".conch-round").first
    expect(card).to_have_attribute("data-state", "live", timeout=60_000)
    # The sleeping cell holds the kernel: everything below happens without it.
    page.wait_for_function(f"({KERNEL_STATUS})() === 'busy'", timeout=30_000)
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
    seconds = stop_and_time_the_fold(page, card)
    print(f"{name}: Stop to folded card, kernel busy: {seconds:.2f} s")
    # Stop ends the round at once; the card folds (a 0.24 s motion) within a second of it.
    assert seconds < 1.5, f"the card folded {seconds:.2f} s after Stop"
    expect(card.locator(".conch-round-folded")).to_contain_text("ended: you stopped it")
    # Writing works while the kernel is busy too: the message goes, a new round answers.
    box = chat.locator(".conch-input")
    box.fill("@Writer one line, please")
    box.press("Enter")
    expect(chat.locator(".conch-user")).to_have_count(2, timeout=10_000)
    expect(chat.locator(".conch-round").nth(1)).to_have_attribute(
        "data-state", "folded", timeout=60_000
    )
    expect(chat.locator(".conch-agent").last.locator(".conch-who")).to_have_text("Writer")
    assert page.evaluate(KERNEL_STATUS) == "busy"  # all of it while the cell still ran
    chat.screenshot(path=screenshot_path(f"{name}-busy-kernel-after"))
    page.evaluate("() => { window.jupyterapp.commands.execute('notebook:interrupt-kernel'); }")


@pytest.mark.parametrize("dark", [False, True], ids=["light", "dark"])
def test_jupyterlab_round_card_stream_and_stop_work_while_the_kernel_is_busy(
    browser: Browser, lab: Lab, dark: bool
) -> None:
    name = "busy-dark" if dark else "busy-light"
    page = open_notebook(
        browser, f"{lab.url}lab/workspaces/{name}/tree/{name}.ipynb?token={lab.token}"
    )
    console = Console(page)
    set_theme(page, dark)
    run_all(page)
    busy_kernel_scenario(page, "lab-dark" if dark else "lab-light")
    set_theme(page, False)
    assert console.errors == []
    page.context.close()


def test_notebook_7_round_card_stream_and_stop_work_while_the_kernel_is_busy(
    browser: Browser, lab: Lab
) -> None:
    page = open_notebook(browser, f"{lab.url}notebooks/busy7.ipynb?token={lab.token}")
    console = Console(page)
    run_all(page)
    busy_kernel_scenario(page, "notebook7")
    assert console.errors == []
    page.context.close()


def test_after_a_restart_or_a_shutdown_the_chat_streams_and_can_be_written_in(
    browser: Browser, lab: Lab
) -> None:
    page = open_notebook(browser, f"{lab.url}lab/workspaces/gone/tree/gone.ipynb?token={lab.token}")
    console = Console(page)
    run_all(page)
    chat = page.locator(".conch-chat").first
    expect(chat).to_have_attribute("data-source", "server", timeout=60_000)
    page.wait_for_function(f"({KERNEL_STATUS})() === 'idle'", timeout=30_000)
    kernel = page.evaluate(KERNEL_ID)
    box = chat.locator(".conch-input")
    with lab.client() as http:
        assert http.post(f"{lab.url}api/kernels/{kernel}/restart").status_code == 200
        page.wait_for_function(f"({KERNEL_STATUS})() === 'idle'", timeout=30_000)
        box.fill("@Researcher find options, @Writer draft it. Take turns.")
        box.press("Enter")
        card = chat.locator(".conch-round").first
        expect(card).to_have_attribute("data-state", "live", timeout=30_000)
        expect(chat.locator(".conch-streaming-text")).not_to_be_empty(timeout=30_000)
        expect(card).to_have_attribute("data-state", "folded", timeout=120_000)
        assert http.delete(f"{lab.url}api/kernels/{kernel}").status_code == 204
    page.wait_for_function(
        f"!['idle', 'busy', 'starting'].includes(({KERNEL_STATUS})())", timeout=30_000
    )
    box.fill("@Writer one more line, please")
    box.press("Enter")
    expect(chat.locator(".conch-user")).to_have_count(2, timeout=10_000)
    second = chat.locator(".conch-round").nth(1)
    expect(second).to_have_attribute("data-state", "live", timeout=30_000)
    expect(second).to_have_attribute("data-state", "folded", timeout=60_000)
    expect(chat.locator(".conch-agent").last.locator(".conch-who")).to_have_text("Writer")
    chat.screenshot(path=screenshot_path("lab-kernel-gone"))
    assert console.errors == []
    page.context.close()
