"""Debian's chromium, driven by Playwright for Python: the one way the browser tests start it."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from playwright.sync_api import Browser, sync_playwright

CHROMIUM = Path("/usr/bin/chromium")
SCREENS = Path(__file__).resolve().parents[1] / ".screens"
ARGS = [
    "--no-sandbox",
    "--headless",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
]


# Playwright's sync API keeps its own event loop running in the test's thread, and the browser
# tests start no server in it (a child process, or none): pytest-jupyter's autouse loop and
# clean-up must stay out of the way. A browser test module imports these two to say so.
@pytest.fixture
def jp_asyncio_loop() -> None:
    return None


@pytest.fixture
def jp_server_cleanup() -> None:
    return None


def need_chromium() -> None:
    if not CHROMIUM.exists():
        pytest.skip(
            f"Debian chromium is missing at {CHROMIUM}: `apt-get install -y chromium` "
            "(`python3 dev.py test` installs it where it can)"
        )


@contextmanager
def chromium() -> Iterator[Browser]:
    """A running headless browser; skips the test when chromium is missing."""
    need_chromium()
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        try:
            yield browser
        finally:
            browser.close()


@pytest.fixture(scope="package")
def browser() -> Iterator[Browser]:
    """One headless chromium for a package of tests (tests/browser and tests/live import it in
    their conftest.py): a test opens a context of its own in it and closes it when done."""
    with chromium() as running:
        yield running


def screenshot_path(name: str) -> str:
    SCREENS.mkdir(parents=True, exist_ok=True)
    return str(SCREENS / f"{name}.png")
