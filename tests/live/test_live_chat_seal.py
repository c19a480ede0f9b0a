"""Every post of Conch's into Jupyter Chat sealed under collaboration (issue 38): the same corpus
of tricks through each of Conch's writers as tests/browser/test_lab_chat_seal.py, where a `.chat`
is a shared document (jupyterlab-chat's YChat, each streamed step a new body in it): the chat
panel fetches nothing from elsewhere."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from playwright.sync_api import Browser

from ..browser.test_lab_chat_seal import Pictures, nothing_fetched, sealed_lab
from ..support.lab import Lab, lab_folder
from .env import live_env, live_python

pytestmark = [pytest.mark.browser, pytest.mark.timeout(600)]


@pytest.fixture(scope="module")
def pictures() -> Iterator[Pictures]:
    with Pictures() as serving:
        yield serving


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory, pictures: Pictures) -> Iterator[Lab]:
    root = lab_folder(tmp_path_factory, "lab-live-chat-seal", {"seal.chat": "{}"})
    with sealed_lab(root, pictures, python=live_python(), env_extra=live_env()) as running:
        yield running


def test_no_post_of_conchs_makes_a_shared_chats_panel_fetch_a_picture(
    browser: Browser, lab: Lab, pictures: Pictures
) -> None:
    nothing_fetched(browser, lab, pictures, "chat-sealed-live")
