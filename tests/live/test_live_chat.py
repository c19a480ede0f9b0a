"""Rooms in Jupyter Chat under collaboration: real JupyterLab 4 with jupyter-collaboration and
jupyterlab-chat (the venv tests/live/env.py builds), where a `.chat` is a shared document
(jupyterlab-chat's YChat) rather than its WebSocket model. The same person, typing in the chat,
sees the same round stream, fold and stop as without collaboration (tests/browser/test_lab_chat.py).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from playwright.sync_api import Browser

from ..browser.test_lab_chat import a_round_then_stop, this_checkouts_extension
from ..support.lab import Lab, lab_folder, running_lab
from .env import live_env, live_python

pytestmark = [pytest.mark.browser, pytest.mark.timeout(600)]


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    root = lab_folder(tmp_path_factory, "lab-live-chat", {"room.chat": "{}"})
    python = live_python()
    # Conch runs from this checkout there (not installed), and so does its JupyterLab extension.
    config = this_checkouts_extension(root)
    with running_lab(
        root, offline_delay=0.15, python=python, env_extra=live_env(), config=config
    ) as running:
        yield running


def test_a_round_in_a_shared_chat_document_streams_and_stop_ends_the_next(
    browser: Browser, lab: Lab
) -> None:
    a_round_then_stop(browser, lab, "chat-round-live")
