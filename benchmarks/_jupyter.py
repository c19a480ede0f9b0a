"""What the server benchmarks share: a Jupyter server with Conch, its API, its event stream.

The server is the tests' own `JupyterProcess` (tests/support/jupyter_process.py), so there is one
way to start one: `python -m jupyter_server` in a subprocess on a free loopback port, with a token,
Conch enabled, `offline_delay=0`, and every file it writes (data, seal key, runtime, log) inside the
folder given. No provider key from the environment reaches it.

The server runs the conch_jupyter of this checkout, whatever the venv's editable install points
at, or of the checkout named by CONCH_BENCH_SERVER_CODE (how "before" numbers are measured on an
older commit); benchmarks/ is on its path too, for _floor.py.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx

# Run as `python -m benchmarks.…` from the checkout, so the checkout comes first on the path
# (before a dependency's own top-level `tests` package: confusables ships one).
from tests.support.jupyter_process import JupyterProcess

REPO = Path(__file__).resolve().parent.parent


def server_code() -> Path:
    """The checkout whose conch_jupyter the benchmark's Jupyter servers run."""
    return Path(os.environ.get("CONCH_BENCH_SERVER_CODE") or REPO).resolve()


def server_code_line() -> str:
    """Which conch_jupyter the server ran: the checkout, its commit, + for changes on top."""
    folder = server_code()

    def git(*words: str) -> str:
        done = subprocess.run(
            ["git", "-C", str(folder), *words], capture_output=True, text=True, timeout=10
        )
        return done.stdout.strip()

    try:
        head, changed = git("rev-parse", "--short", "HEAD"), git("status", "--porcelain", ".")
    except (OSError, subprocess.SubprocessError):
        head, changed = "not a git checkout", ""
    mark = "+" if any(line.endswith(".py") for line in changed.splitlines()) else ""
    return f"the Jupyter server ran conch_jupyter at {head}{mark} ({folder.name})"


@contextlib.contextmanager
def conch_server(folder: Path, *extra: str) -> Iterator[JupyterProcess]:
    """A started Jupyter server with Conch, everything of it under `folder`; stopped after."""
    here = Path(__file__).resolve().parent
    path = [str(server_code()), str(here), os.environ.get("PYTHONPATH", "")]
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in path if p)  # the child inherits it
    server = JupyterProcess(folder / "conch", folder / "root", base_url="/", extra=extra)
    server.start()
    try:
        yield server
    finally:
        server.stop()


def enable_floor(folder: Path) -> None:
    """Load _floor.py (the floor and the profiler switch) into the server conch_server(folder)
    starts: enabled the way an installed extension is (the server's config dir, see
    JupyterProcess), since the command line's jpserver_extensions already names Conch."""
    enabled = folder / "root/.jupyter-home/config/jupyter_server_config.d/_floor.json"
    enabled.parent.mkdir(parents=True, exist_ok=True)
    enabled.write_text(json.dumps({"ServerApp": {"jpserver_extensions": {"_floor": True}}}))


def profile(server: JupyterProcess, key: str, action: str, path: Path | None = None) -> None:
    """Start or stop (writing pstats to `path`) cProfile in the server, through _floor.py;
    `key` is any pairing's door key."""
    query = f"?path={path}" if path else ""
    with httpx.Client(trust_env=False, timeout=60) as http:
        answer = http.post(
            f"{server.url}bench-floor/profile/{action}{query}",
            headers={"Authorization": f"Bearer {key}"},
        )
        answer.raise_for_status()


def api_client(server: JupyterProcess, **kwargs: Any) -> httpx.AsyncClient:
    """An async client for conch/api/ with the server's token."""
    kwargs.setdefault("timeout", httpx.Timeout(30.0))
    return httpx.AsyncClient(
        base_url=f"{server.url}conch/api/",
        headers={"Authorization": f"token {server.token}"},
        trust_env=False,
        **kwargs,
    )


async def checked(response: httpx.Response, status: int) -> Any:
    """The response's JSON (None when empty); raises unless it came with `status`."""
    if response.status_code != status:
        await response.aread()
        raise RuntimeError(
            f"{response.request.url} answered {response.status_code}: {response.text}"
        )
    return response.json() if response.content else None


async def sse_events(lines: AsyncIterator[str]) -> AsyncIterator[tuple[str, str]]:
    """(event name, data) from a server-sent-event stream; enough for Conch's and OpenAI's."""
    kind, data = "message", ""
    async for line in lines:
        if not line:
            if data:
                yield kind, data
            kind, data = "message", ""
        elif line.startswith("event:"):
            kind = line[6:].strip()
        elif line.startswith("data:"):
            data += line[5:].strip()
