"""`python3 dev.py lab`'s start-up (issue 32, item 6), as dev.py makes it, in chromium: its own
Jupyter folders and copy of the demo (dev.py's WORK moved to a temporary folder), started with
--no-browser as in a container. The address it prints opens the demo (not the Launcher), the
demo is trusted and not marked changed once its kernel is up, and no news prompt shows. (dev.py
writes JupyterLab's settings defaults into .venv, as `dev.py lab` would.)
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest
from playwright.sync_api import Browser, expect

from ..support.browser import screenshot_path
from ..support.jupyter_process import START_DEADLINE, free_port
from ..support.lab import KERNEL_IDLE, Console, Lab, jupyter_home_env, lab_folder

pytestmark = [pytest.mark.browser, pytest.mark.timeout(240)]

ROOT = Path(__file__).resolve().parents[2]
ADDRESS = re.compile(r"http://127\.0\.0\.1:\d+/lab/tree/demo\.ipynb\?token=(\w+)")
# Whether JupyterLab asks about news: its notification setting's default as this JupyterLab
# serves it ("none", ask, unless dev.py's overrides.json says "false", never).
NEWS = """async () => {
  const settings = await window.jupyterapp.serviceManager.settings.fetch(
    "@jupyterlab/apputils-extension:notification");
  return settings.schema.properties.fetchNews.default;
}"""


def dev() -> ModuleType:
    spec = importlib.util.spec_from_file_location("dev_for_lab_start", ROOT / "dev.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def started(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Lab, ModuleType]]:
    if Path(sys.prefix).resolve() != (ROOT / ".venv").resolve():
        pytest.skip(
            "this starts .venv's JupyterLab as dev.py lab starts its own: "
            "run the tests from .venv (dev.py test)"
        )
    root = lab_folder(tmp_path_factory, "lab-start", {})
    module = dev()
    module.WORK = root / "work"
    env = jupyter_home_env(root / "jupyter-home")
    saved = dict(os.environ)
    os.environ.update(env)  # dev.py's `jupyter trust` signs in these folders
    try:
        module.prepare_lab(module.TESTS)
    finally:
        os.environ.clear()
        os.environ.update(saved)
    port = free_port()
    extra = [
        "--no-browser",
        "--ip=127.0.0.1",
        f"--port={port}",
        "--port-retries=0",
        "--LabApp.expose_app_in_browser=True",
        f"--ConchApp.data_dir={root / 'conch'}",
    ]
    # Jupyter makes the token, as for a person, and prints it in the address (one given by
    # config it prints as "...").
    log = root / "lab.log"
    command = module.lab_command(module.TESTS, extra, root=True)
    with log.open("ab") as out:
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=root)
    lab = Lab(f"http://127.0.0.1:{port}/", "", log, command, env, process)
    try:
        deadline = time.monotonic() + START_DEADLINE
        while not (printed := ADDRESS.search(log.read_text())):
            assert process.poll() is None, log.read_text()[-3000:]
            assert time.monotonic() < deadline, log.read_text()[-3000:]
            time.sleep(0.2)
        lab.token = printed.group(1)
        yield lab, module
    finally:
        lab.stop()


def test_the_printed_address_opens_the_trusted_demo_and_no_news_prompt(
    browser: Browser, started: tuple[Lab, ModuleType]
) -> None:
    lab, module = started
    printed = ADDRESS.search(lab.log.read_text())
    assert printed is not None, lab.log.read_text()[-3000:]
    # The copy is the demo's cells as the repository has them, with this kernel's own words
    # for itself (JupyterLab writes those into a notebook as its kernel starts).
    copy = json.loads((module.WORK / "demo.ipynb").read_text())
    assert copy["cells"] == json.loads((ROOT / "notebooks" / "demo.ipynb").read_text())["cells"]
    assert copy["metadata"]["kernelspec"]["name"] == "python3"
    assert copy["metadata"]["language_info"]["name"] == "python"
    page = browser.new_context(viewport={"width": 1280, "height": 900}).new_page()
    console = Console(page)
    page.goto(printed.group(0))
    page.wait_for_function("window.jupyterapp !== undefined", timeout=60_000)
    page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=60_000)
    page.wait_for_function(KERNEL_IDLE, timeout=60_000)
    expect(page.locator(".lm-DockPanel-tabBar .lm-mod-current")).to_contain_text("demo.ipynb")
    assert page.evaluate("() => window.jupyterapp.shell.currentWidget.context.path") == (
        "demo.ipynb"
    )
    expect(page.locator(".jp-Notebook .jp-MarkdownCell").first).to_contain_text(
        "Conch: agents that talk"
    )
    # Not marked changed once open and its kernel is up, and trusted.
    assert page.evaluate("() => window.jupyterapp.shell.currentWidget.context.model.dirty") is False
    expect(page.locator(".lm-DockPanel-tabBar .lm-mod-current")).not_to_have_class(
        re.compile(r"jp-mod-dirty")
    )
    log = lab.log.read_text()
    assert "not trusted" not in log, log[-3000:]
    # JupyterLab does not ask about news: its setting says no, and no such prompt is shown.
    assert page.evaluate(NEWS) == "false"
    expect(page.get_by_text(re.compile("Jupyter news", re.I))).to_have_count(0)
    page.screenshot(path=screenshot_path("dev-lab-start"))
    assert console.errors == []
    page.context.close()
