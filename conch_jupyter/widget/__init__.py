"""The notebook's views of Conch: the chat (live rounds, the composer) and Settings.

Both are anywidgets: Python owns the state in synced traits and talks to the server; the view
(static/widget.js, one self-contained module) only draws it and sends actions back.
"""

from __future__ import annotations

from .chat import ChatWidget, this_chat
from .settings import SettingsWidget

__all__ = ["ChatWidget", "SettingsWidget", "this_chat"]
