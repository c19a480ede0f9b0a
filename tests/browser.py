"""Debian's chromium, driven by Playwright for Python: the one way the browser tests start it."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from playwright.sync_api import Browser, sync_playwright

CHROMIUM = Path("/usr/bin/chromium")
SCREENS = Path(__file__).resolve().parent / ".screens"
ARGS = [
    "--no-sandbox",
    "--headless",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
]


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


def screenshot_path(name: str) -> str:
    SCREENS.mkdir(parents=True, exist_ok=True)
    return str(SCREENS / f"{name}.png")
