"""The test servers' own start-up: a slow kernel is waited for, a broken one says why, and a
server that cannot start shows its log. (On a loaded machine a kernel once took long enough to
start that jupyter_client's heartbeat check called it dead, failing every test of a module.)"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import pytest

from ..support.jupyter_process import JupyterProcess

pytestmark = pytest.mark.timeout(240)


def kernel_spec(server: JupyterProcess, name: str, shell: str) -> None:
    """A kernel spec in the server's own data folder whose kernel runs `shell` first."""
    spec = server.root_dir / ".jupyter-home" / "data" / "kernels" / name
    spec.mkdir(parents=True)
    argv = ["sh", "-c", shell, "{connection_file}"]  # the connection file is $0 in `shell`
    spec.joinpath("kernel.json").write_text(
        json.dumps({"argv": argv, "display_name": name, "language": "python"})
    )


def start_kernel(server: JupyterProcess, name: str) -> str:
    with server.client() as http:
        answer = http.post(f"{server.url}api/kernels", json={"name": name})
    assert answer.status_code == 201, answer.text
    return str(answer.json()["id"])


def test_a_slow_kernel_is_waited_for_and_a_broken_one_says_why(tmp_path: Path) -> None:
    server = JupyterProcess(tmp_path / "data", tmp_path / "root")
    # Four seconds of silence before the kernel even starts: longer than the heartbeat's one
    # second, which is what a loaded machine looks like to jupyter_client's wait_for_ready.
    kernel_spec(server, "slow", f"sleep 4; exec {sys.executable} -m ipykernel_launcher -f $0")
    kernel_spec(server, "broken", "echo 'the broken kernel gives up' >&2; exit 3")
    server.start()
    try:
        began = time.monotonic()
        client = server.connect_kernel(start_kernel(server, "slow"))
        try:
            assert time.monotonic() - began >= 3.5
            reply = client.execute_interactive("print(6 * 7)", timeout=60)
            assert reply["content"]["status"] == "ok"
        finally:
            client.stop_channels()

        with pytest.raises(RuntimeError, match="the kernel died while starting") as failed:
            server.connect_kernel(start_kernel(server, "broken"), timeout=60)
        assert "the broken kernel gives up" in str(failed.value)  # its own output, from the log
    finally:
        server.stop()


def test_a_server_that_cannot_start_shows_its_log_for_both_tries(tmp_path: Path) -> None:
    server = JupyterProcess(tmp_path / "data", tmp_path / "root", extra=("--port=not-a-port",))
    with pytest.raises(RuntimeError, match="while starting") as failed:
        server.start()
    words = str(failed.value)
    assert "--- and once more ---" in words
    assert words.count("not-a-port") >= 2  # each try's own log tail names what went wrong
    assert server.process is None
