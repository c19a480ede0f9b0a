"""No MCP server process outlives the Jupyter server (issue 39): a real `jupyter server` with
Conch starts your stdio MCP server (the `mcp` SDK's FastMCP; that its children end with it is
tests/server/test_mcp_servers.py's), and when Jupyter stops (SIGTERM, as a hub or a terminal's
Ctrl-C ends it) the whole process group is gone. Which processes run is read from /proc."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

from ..support.jupyter_process import JupyterProcess
from ..support.mcp_servers import stdio_body

pytestmark = pytest.mark.timeout(120)


def running_in_group(pgid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if stat[0] != "Z" and int(stat[2]) == pgid:
            found.append(int(entry.name))
    return found


def group_of(pid: int) -> int:
    return int((Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split())[2])


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_stopping_jupyter_ends_every_mcp_server_group(tmp_path: Path) -> None:
    marks = tmp_path / "marks"
    server = JupyterProcess(tmp_path / "data", tmp_path / "root")
    (tmp_path / "root").mkdir()
    try:
        server.start()
        with server.client() as http:
            made = http.post(server.api("mcp-servers"), json=stdio_body("demo", marks))
            assert made.status_code == 201, made.text
            tested = http.post(server.api(f"mcp-servers/{made.json()['id']}/test")).json()
            assert tested["running"], tested
        # The server's leader: the process started with the script and the marks folder.
        leaders = [
            int(p.name)
            for p in Path("/proc").iterdir()
            if p.name.isdigit() and str(marks) in _cmdline(p)
        ]
        assert leaders, "the MCP server is not running"
        pgid = group_of(leaders[0])
        assert pgid == leaders[0]  # a process group of its own
        assert running_in_group(pgid)
    finally:
        server.stop()
    deadline = time.monotonic() + 20
    while running_in_group(pgid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert running_in_group(pgid) == []


def _cmdline(entry: Path) -> str:
    try:
        return (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""
