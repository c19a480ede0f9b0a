"""The demo notebook runs top to bottom against a real server, offline, with no key."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import nbformat
import pytest
from jupyter_client.blocking import BlockingKernelClient
from nbclient import NotebookClient

from .jupyter_process import JupyterProcess

pytestmark = pytest.mark.timeout(240)

DEMO = Path(__file__).resolve().parent.parent / "notebooks" / "demo.ipynb"


@pytest.fixture
def server(tmp_path: Path) -> Iterator[JupyterProcess]:
    process = JupyterProcess(tmp_path / "data", tmp_path / "root")
    process.start()
    try:
        yield process
    finally:
        process.stop()


def test_the_demo_notebook_runs_offline(server: JupyterProcess) -> None:
    """Run it in a kernel the server itself started, as JupyterLab would."""
    with server.client() as http:
        kernel = http.post(f"{server.url}api/kernels", json={"name": "python3"}).json()
    connection = server.root_dir / ".jupyter-home" / "runtime" / f"kernel-{kernel['id']}.json"
    notebook = nbformat.read(DEMO, as_version=4)
    runner = NotebookClient(notebook, timeout=120)
    runner.kc = client = BlockingKernelClient(connection_file=str(connection))
    client.load_connection_file()
    client.start_channels()
    try:
        client.wait_for_ready(timeout=60)
        for index, cell in enumerate(notebook.cells):
            runner.execute_cell(cell, index)
    finally:
        client.stop_channels()
    outputs = [
        "".join(
            o.get("text", "") or o.get("data", {}).get("text/plain", "")
            for o in cell.get("outputs", [])
        )
        for cell in notebook.cells
        if cell.cell_type == "code"
    ]
    assert "('Researcher', 'offline')" in outputs[0]
    round_output = outputs[2]
    assert "offline" in round_output.lower()
    assert "[round ended: loop, 5 replies]" in round_output
    assert "Researcher handed over to Writer" in round_output
    saved = outputs[4]
    assert "'user'" in saved
    assert "'note'" in saved
