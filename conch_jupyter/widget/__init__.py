"""The notebook's views of Conch: the chat (live rounds, the composer) and Settings.

Both are anywidgets: Python says which chat (or section) to show; the view (built from js/ into
static/widget.js, one self-contained module) talks to the page's Jupyter server itself where it
can, and otherwise draws the traits the kernel keeps and sends actions back.
The view builds the timeline, once: where it draws through the kernel, the kernel passes the
event stream's raw items on. The kernel side. May import: `client`; never anything that runs on
the server.
"""

from __future__ import annotations

from .chat import ChatWidget, this_chat
from .settings import SettingsWidget

__all__ = ["ChatWidget", "SettingsWidget", "this_chat"]
