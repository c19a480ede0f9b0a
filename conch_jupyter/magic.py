"""%conch and %%conch: this notebook's chat, from a cell (`%load_ext conch_jupyter`).

    %conch                  show this notebook's chat
    %conch <message>        send a message (mention agents with @Name) and show the chat
    %%conch                 send the cell as a message and show the chat
    %conch stop             end the running round at once
    %conch agents           your agents          (Settings)
    %conch outside          outside agents       (Settings)
    %conch pairings         agents that can talk to yours (Settings)

A mistake is said in words, never as a traceback: in the cell (no server, an empty message) or
on the chat itself (a message the server refuses, as the composer would show it).
"""

from __future__ import annotations

import sys
from typing import Any

from IPython.core.magic import Magics, line_cell_magic, magics_class
from IPython.display import display as _display

from .client import ConchClient, ConchClientError

SETTINGS = {"agents", "outside", "pairings"}


def show(thing: object) -> None:
    _display(thing)  # type: ignore[no-untyped-call]


def say(words: str) -> None:
    print(words, file=sys.stderr)


@magics_class
class ConchMagics(Magics):
    @line_cell_magic
    def conch(self, line: str, cell: str | None = None) -> None:
        """Talk to your agents in this notebook's chat; see `conch_jupyter.magic`."""
        try:
            run(line, cell)
        except ConchClientError as error:
            say(error.message)


def run(line: str, cell: str | None = None) -> None:
    """What %conch / %%conch do with their words."""
    word = line.strip()
    if cell is not None:
        text = "\n".join(part for part in (word, cell.strip()) if part)
        if not text:
            say("Write the message in the cell, below %%conch.")
            return
        send(text)
        return
    command = word.lower()
    if command in SETTINGS:
        from .widget import SettingsWidget

        show(SettingsWidget(command))
    elif command == "stop":
        with ConchClient.from_environment() as client:
            from .widget.chat import this_chat_id

            stopped = client.stop(this_chat_id(client))
        say("Stopped the round." if stopped else "No round is running.")
    elif not word:
        from .widget import this_chat

        show(this_chat())
    else:
        send(word)


def send(text: str) -> None:
    """Send through this notebook's chat widget, so its live view shows the whole reply."""
    from .widget.base import running_loop
    from .widget.chat import this_chat

    chat = this_chat()
    chat.problem = ""
    chat.post(text)
    if running_loop() is None and chat.problem:  # no kernel loop: it was sent already
        say(chat.problem)
    show(chat)


def load_ipython_extension(ipython: Any) -> None:
    ipython.register_magics(ConchMagics)
