"""What every browser test shares: one chromium for the package (each test opens a context
of its own in it), and pytest-jupyter's loop kept out of the way (support/browser.py says why)."""

from __future__ import annotations

from ..support.browser import browser, jp_asyncio_loop, jp_server_cleanup

__all__ = ["browser", "jp_asyncio_loop", "jp_server_cleanup"]
