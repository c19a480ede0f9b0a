"""JupyterLab 4 (and Notebook 7) in a child process, for the browser tests: one way to start it.

`jupyter lab` starts on loopback with a token, its own Jupyter folders and Conch data folder,
under any base_url, with the offline model slowed down so a round lasts a few seconds.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import nbformat
import pytest
from playwright.sync_api import Browser, ConsoleMessage, Page

from .browser import need_chromium
from .jupyter_process import START_DEADLINE, free_port

KERNEL_IDLE = """() => {
  const panel = window.jupyterapp.shell.currentWidget;
  return panel?.sessionContext?.session?.kernel?.status === "idle";
}"""
# No "get notified about Jupyter news?" toast over the screenshots.
NO_NEWS = '{"fetchNews": "false"}'


@dataclass
class Lab:
    url: str  # ends with the base_url
    token: str
    log: Path
    command: list[str]
    env: dict[str, str]
    process: subprocess.Popen[bytes] | None = None

    def client(self) -> httpx.Client:
        return httpx.Client(
            headers={"Authorization": f"token {self.token}"}, trust_env=False, timeout=10
        )

    def start(self) -> None:
        with self.log.open("ab") as out:
            # Its own folder as the working one: jupyter-collaboration keeps its document store
            # (.jupyter_ystore.db) there.
            self.process = subprocess.Popen(
                self.command,
                stdout=out,
                stderr=subprocess.STDOUT,
                env=self.env,
                cwd=self.log.parent,
            )
        deadline = time.monotonic() + START_DEADLINE
        while True:
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"jupyter lab did not start:\n{self.log.read_text()[-4000:]}")
            try:
                answer = httpx.get(
                    f"{self.url}conch/api/agents", params={"token": self.token}, timeout=2
                )
                if answer.status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.2)

    def stop(self) -> None:
        if self.process is None:
            return
        self.process.terminate()
        try:
            self.process.wait(20)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(10)
        self.process = None


def jupyter_home_env(home: Path) -> dict[str, str]:
    """This environment for a Jupyter of its own: its config, data and runtime folders under
    `home`, and neither a model's key nor a Conch address or kernel key from outside."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "CONCH_SERVER_URL", "CONCH_KERNEL_KEY")
    }
    env.update(
        JUPYTER_PLATFORM_DIRS="1",
        JUPYTER_CONFIG_DIR=str(home / "config"),
        JUPYTER_DATA_DIR=str(home / "data"),
        JUPYTER_RUNTIME_DIR=str(home / "runtime"),
    )
    return env


@contextmanager
def running_lab(
    root: Path,
    *,
    base_url: str = "/",
    offline_delay: float = 0.05,
    config: dict[str, Any] | None = None,
    python: str = sys.executable,
    env_extra: dict[str, str] | None = None,
) -> Iterator[Lab]:
    """JupyterLab serving root/work; yields once Conch's API answers, stops it after. `config`
    goes in the server's config file (jupyter_server_config.json), as an image would hold it.

    `python`: another venv's (tests/live: one with jupyter-collaboration), where Conch is found
    on `env_extra`'s PYTHONPATH and enabled in the Jupyter config folder written here."""
    (root / "work").mkdir(exist_ok=True)
    home = root / "jupyter-home"
    env = jupyter_home_env(home)
    settings = home / "config" / "lab" / "user-settings" / "@jupyterlab" / "apputils-extension"
    settings.mkdir(parents=True, exist_ok=True)
    (settings / "notification.jupyterlab-settings").write_text(NO_NEWS)
    config = dict(config or {})
    if python != sys.executable:
        server = dict(config.get("ServerApp") or {})
        extensions = {**server.get("jpserver_extensions", {}), "conch_jupyter": True}
        server["jpserver_extensions"] = extensions
        config["ServerApp"] = server
    if config:
        (home / "config" / "jupyter_server_config.json").write_text(json.dumps(config))
    env.update(env_extra or {})
    port, token = free_port(), "t" + os.urandom(12).hex()
    command = [
        python,
        "-m",
        "jupyterlab",
        "--no-browser",
        "--allow-root",
        "--ip=127.0.0.1",
        f"--port={port}",
        "--port-retries=0",
        f"--ServerApp.base_url={base_url}",
        f"--IdentityProvider.token={token}",
        "--LabApp.expose_app_in_browser=True",
        "--JupyterNotebookApp.expose_app_in_browser=True",
        "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
        f"--ServerApp.root_dir={root / 'work'}",
        f"--ConchApp.data_dir={root / 'conch'}",
        f"--ConchApp.offline_delay={offline_delay}",
    ]
    lab = Lab(f"http://127.0.0.1:{port}{base_url}", token, root / "lab.log", command, env)
    try:
        lab.start()
        yield lab
    finally:
        lab.stop()


def open_notebook(browser: Browser, address: str) -> Page:
    page = browser.new_context(viewport={"width": 1280, "height": 1000}).new_page()
    page.goto(address)
    page.wait_for_function("window.jupyterapp !== undefined", timeout=60_000)
    page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=60_000)
    page.wait_for_function(KERNEL_IDLE, timeout=60_000)
    return page


def lab_folder(tmp: pytest.TempPathFactory, name: str, notebooks: Mapping[str, str]) -> Path:
    """A fresh folder for running_lab, its work/ holding these notebooks (file name → text); the
    browser test that asks for it is skipped first when chromium is missing."""
    need_chromium()
    root = tmp.mktemp(name)
    (root / "work").mkdir()
    for file, text in notebooks.items():
        (root / "work" / file).write_text(text)
    return root


def notebook(*cells: str) -> str:
    """A notebook of code cells with the python3 kernelspec, as text to write."""
    book = nbformat.v4.new_notebook()
    book.cells = [nbformat.v4.new_code_cell(c) for c in cells]
    book.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    return str(nbformat.writes(book))


class Console:
    """Every console error and uncaught exception of a page (but JupyterLab's own, named)."""

    def __init__(self, page: Page, ignore: tuple[str, ...] = ()) -> None:
        self.errors: list[str] = []
        self.ignore = ignore
        page.on("console", self._console)
        page.on("pageerror", lambda error: self.errors.append(f"uncaught: {error}"))

    def _console(self, message: ConsoleMessage) -> None:
        if message.type == "error" and not message.text.startswith(self.ignore):
            self.errors.append(message.text)


def run_all(page: Page) -> None:
    # Not awaited: the cells run on while the test watches.
    page.evaluate("() => { window.jupyterapp.commands.execute('notebook:run-all-cells'); }")


def set_theme(page: Page, dark: bool) -> None:
    theme = "JupyterLab Dark" if dark else "JupyterLab Light"
    page.evaluate(
        "theme => { window.jupyterapp.commands.execute('apputils:change-theme', {theme}); }", theme
    )
    page.wait_for_function(f"document.body.dataset.jpThemeLight === '{str(not dark).lower()}'")
