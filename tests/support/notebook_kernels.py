"""A real ipykernel for a notebook, started through Jupyter's own session API (as JupyterLab
starts one), and a client of the test's own to look into it over the kernel's channels."""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import nbformat
import pytest
from jupyter_client.session import Session


@dataclass
class NotebookKernel:
    path: str
    kernel_id: str
    client: Any  # the test's own AsyncKernelClient: not the one Conch uses

    async def run(self, code: str, timeout: float = 30.0) -> dict[str, Any]:
        """Run code as the user would (a cell) and return its reply and text output."""
        msg_id = self.client.execute(code)
        out: list[str] = []
        deadline = time.monotonic() + timeout
        while True:
            msg = await self.client.get_iopub_msg(timeout=max(deadline - time.monotonic(), 0.1))
            if msg["parent_header"].get("msg_id") != msg_id:
                continue
            kind, content = msg["header"]["msg_type"], msg["content"]
            if kind == "stream":
                out.append(content["text"])
            elif kind == "execute_result":
                out.append(content["data"].get("text/plain", ""))
            elif kind == "status" and content["execution_state"] == "idle":
                break
        reply = await self.client.get_shell_msg(timeout=timeout)
        return {"status": reply["content"]["status"], "output": "".join(out)}

    async def value(self, expression: str) -> Any:
        """An expression's value in the kernel, read silently over the kernel's channels."""
        msg_id = self.client.execute(
            "", silent=True, store_history=False, user_expressions={"v": expression}
        )
        while True:
            reply = await self.client.get_shell_msg(timeout=30)
            if reply["parent_header"].get("msg_id") == msg_id:
                break
        found = reply["content"]["user_expressions"]["v"]
        if found["status"] != "ok":
            return None
        return found["data"]["text/plain"]


def write_notebook(root: Path, path: str, cells: list[tuple[str, str]]) -> None:
    notebook = nbformat.v4.new_notebook()
    for kind, source in cells:
        make = nbformat.v4.new_code_cell if kind == "code" else nbformat.v4.new_markdown_cell
        notebook.cells.append(make(source))
    (root / path).parent.mkdir(parents=True, exist_ok=True)
    (root / path).write_text(nbformat.writes(notebook))


@asynccontextmanager
async def notebook_kernel(
    jp_fetch: Any, serverapp: Any, path: str = "work.ipynb"
) -> AsyncIterator[NotebookKernel]:
    response = await jp_fetch(
        "api",
        "sessions",
        method="POST",
        body=json.dumps({"path": path, "type": "notebook", "kernel": {"name": "python3"}}),
    )
    session = json.loads(response.body)
    kernel_id = session["kernel"]["id"]
    manager = serverapp.kernel_manager.get_kernel(kernel_id)
    own = Session(key=manager.session.key, signature_scheme=manager.session.signature_scheme)
    client = manager.client(session=own)
    client.start_channels()
    try:
        await client.wait_for_ready(timeout=60)
        yield NotebookKernel(path, kernel_id, client)
    finally:
        client.stop_channels()
        await jp_fetch("api", "sessions", session["id"], method="DELETE")


@contextmanager
def in_loop(loop: Any, opened: AbstractAsyncContextManager[Any]) -> Iterator[Any]:
    """An async context entered and left on the test server's loop (pytest-jupyter's fixtures
    are sync; its tests run on that loop)."""
    value = loop.run_until_complete(opened.__aenter__())
    try:
        yield value
    finally:
        loop.run_until_complete(opened.__aexit__(None, None, None))


@pytest.fixture
def kernel(
    jp_fetch: Any, jp_serverapp: Any, jp_root_dir: Path, jp_asyncio_loop: Any
) -> Iterator[NotebookKernel]:
    write_notebook(
        jp_root_dir,
        "work.ipynb",
        [("markdown", "# Sales"), ("code", "import math\nsales = [3, 1, 4]"), ("code", "sales")],
    )
    with in_loop(jp_asyncio_loop, notebook_kernel(jp_fetch, jp_serverapp)) as opened:
        yield opened
