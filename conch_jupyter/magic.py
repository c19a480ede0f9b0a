"""%conch and %%conch: this notebook's chat, from a cell (`%load_ext conch_jupyter`).

    %conch                  show this notebook's chat
    %conch <message>        send a message (mention agents with @Name) and show the chat
    %%conch                 send the cell as a message and show the chat
    %conch stop             end the running round at once
    %conch continue         ask, in the chat, to continue the round stopped at its bound
    %conch agents           your agents          (Settings)
    %conch outside          outside agents       (Settings)
    %conch pairings         agents that can talk to yours (Settings)

A question is a message: `%conch @Researcher what is in this notebook?` is sent as written, not
read as IPython's `notebook?` help (`questions_sent`, an input transformer the extension adds).
What it says is normal output (`%conch stop`: "Stopped the round."); a mistake is said in words,
never as a traceback, on stderr: in the cell (no server, an empty message) or on the chat itself
(a message the server refuses, as the composer would show it).
"""

from __future__ import annotations

import re
import sys
from typing import Any

from IPython.core.magic import Magics, line_cell_magic, magics_class
from IPython.display import display as _display

from .client import ConchClient, ConchClientError

SETTINGS = {"agents", "outside", "pairings"}


def show(thing: object) -> None:
    _display(thing)  # type: ignore[no-untyped-call]


def say(words: str) -> None:
    """A mistake, in words (stderr: the cell shows it as a problem, with no traceback)."""
    print(words, file=sys.stderr)


def tell(words: str) -> None:
    """What a command did, as the cell's normal output."""
    print(words)


# `%conch <words>?` on a line of its own (indented or not): IPython's help syntax would read the
# trailing `?` as "show the help of the last word". `%conch?` (no words) stays IPython's help.
QUESTION = re.compile(r"^(?P<indent>[ \t]*)%conch[ \t]+(?P<words>\S.*\?)[ \t]*$")


def questions_sent(lines: list[str]) -> list[str]:
    """An IPython input transformer (`input_transformers_cleanup`, which runs before the help
    syntax is read): each `%conch … ?` line becomes the magic's call with its words as written.
    A cell magic's cell (`%%…` first) is left as it is: its body is the magic's own text."""
    first = next((line for line in lines if line.strip()), "")
    if first.lstrip().startswith("%%"):
        return lines
    out: list[str] = []
    for n, line in enumerate(lines):
        body = line.rstrip("\r\n")
        found = QUESTION.match(body)
        continued = n > 0 and lines[n - 1].rstrip("\r\n").endswith("\\")
        if found is None or continued:
            out.append(line)
            continue
        call = f"get_ipython().run_line_magic('conch', {found['words'].strip()!r})"
        out.append(found["indent"] + call + line[len(body) :])
    return out


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
        tell("Stopped the round." if stopped else "No round is running.")
    elif command == "continue":
        with ConchClient.from_environment() as client:
            from .widget.chat import this_chat_id

            client.continue_round(this_chat_id(client))  # 409 in words: nothing to continue
        # The kernel key only asks: code an agent runs must not keep a round going.
        tell("Asked in the chat: say yes there to continue the round.")
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
    cleanup = ipython.input_transformers_cleanup
    if questions_sent not in cleanup:  # %load_ext twice, or %reload_ext: added once
        cleanup.append(questions_sent)
