"""The demo notebook runs top to bottom against a real server, offline, with no key."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

from .jupyter_process import JupyterProcess

pytestmark = pytest.mark.timeout(240)

DEMO = Path(__file__).resolve().parent.parent / "notebooks" / "demo.ipynb"
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"


@pytest.fixture
def server(tmp_path: Path) -> Iterator[JupyterProcess]:
    # Slow enough that the handover round is still running when the demo stops it.
    extra = ("--ConchApp.offline_delay=0.02",)
    process = JupyterProcess(tmp_path / "data", tmp_path / "root", extra=extra)
    process.start()
    try:
        yield process
    finally:
        process.stop()


def test_the_demo_notebook_runs_offline(server: JupyterProcess) -> None:
    """Run it in a kernel the server itself started, as JupyterLab would."""
    with server.client() as http:
        kernel = http.post(f"{server.url}api/kernels", json={"name": "python3"}).json()
    notebook = nbformat.read(DEMO, as_version=4)
    runner = NotebookClient(notebook, timeout=120)
    runner.kc = client = server.connect_kernel(kernel["id"])
    try:
        for index, cell in enumerate(notebook.cells):
            runner.execute_cell(cell, index)
    finally:
        client.stop_channels()
    code = [cell for cell in notebook.cells if cell.cell_type == "code"]
    errors = [o for cell in code for o in cell.get("outputs", []) if o["output_type"] == "error"]
    assert not errors, errors
    outputs = [
        "".join(
            o.get("text", "") or o.get("data", {}).get("text/plain", "")
            for o in cell.get("outputs", [])
        )
        for cell in code
    ]
    widgets = [
        sum(WIDGET_VIEW in o.get("data", {}) for o in cell.get("outputs", [])) for cell in code
    ]
    # %conch agents and %%conch each show a widget: Settings, then this notebook's chat.
    assert widgets[1:3] == [1, 1]
    assert code[1].source == "%conch agents"
    assert code[2].source.startswith("%%conch")
    # The handover round was stopped from the cell, mid-round.
    assert "Stopped the round." in outputs[4]
    saved = outputs[5].splitlines()
    assert saved[0] == "Researcher and Writer took turns · 2 replies"
    assert re.fullmatch(
        r"Researcher and Writer took turns · \d+ repl(y|ies) · ended: you stopped it", saved[1]
    )
    assert "— Writer's turn" in saved
    assert "— Researcher handed over to Writer" in saved
    assert "— The round ended: you stopped it." in saved
