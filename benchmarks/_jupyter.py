"""What the server benchmarks share: a Jupyter server with Conch, its API, its event stream.

The server is the tests' own `JupyterProcess` (tests/jupyter_process.py), so there is one way to
start one: `python -m jupyter_server` in a subprocess on a free loopback port, with a token, Conch
enabled, `offline_delay=0`, and every file it writes (data, seal key, runtime, log) inside the
folder given. No provider key from the environment reaches it.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))  # the test doubles live with the tests

from tests.jupyter_process import JupyterProcess  # noqa: E402


@contextlib.contextmanager
def conch_server(folder: Path, *extra: str) -> Iterator[JupyterProcess]:
    """A started Jupyter server with Conch, everything of it under `folder`; stopped after."""
    server = JupyterProcess(folder / "conch", folder / "root", base_url="/", extra=extra)
    server.start()
    try:
        yield server
    finally:
        server.stop()


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
