"""bench_live_cells' first part, run in the live venv (jupyter-collaboration's jupyter_ydoc):
`read_notebook`'s reading and text for a 500-cell notebook, from a live YNotebook through
NotebookDocuments (the tools' own path, the room lookup aside), next to the same notebook read
from its file through Jupyter's FileContentsManager. Prints one JSON line of samples (ns)."""

from __future__ import annotations

import asyncio
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import nbformat
from jupyter_server.services.contents.filemanager import AsyncFileContentsManager
from jupyter_ydoc import YNotebook

from conch_jupyter.notebook.documents import NotebookDocuments
from conch_jupyter.notebook.reading import notebook_text

CELLS = 500


def book() -> Any:
    made = nbformat.v4.new_notebook()
    for n in range(CELLS):
        if n % 5 == 0:
            made.cells.append(nbformat.v4.new_markdown_cell(f"## Part {n}\nSome words about it."))
            continue
        cell = nbformat.v4.new_code_cell(f"values_{n} = [i * {n} for i in range(20)]\nvalues_{n}")
        cell.execution_count = n
        cell.outputs = [
            nbformat.v4.new_output("stream", name="stdout", text=f"row {n}\n" * 3),
            nbformat.v4.new_output(
                "execute_result", data={"text/plain": str(list(range(20)))}, execution_count=n
            ),
        ]
        made.cells.append(cell)
    return made


class Extension:
    """Stands for jupyter_server_ydoc's extension: its get_document(copy=False) answer."""

    def __init__(self, shared: YNotebook) -> None:
        self.shared = shared

    async def get_document(self, **_: Any) -> YNotebook:
        return self.shared


async def main(rounds: int) -> None:
    notebook = book()
    shared = YNotebook()
    shared.set(json.loads(nbformat.writes(notebook)))
    with tempfile.TemporaryDirectory() as folder:
        (Path(folder) / "big.ipynb").write_text(nbformat.writes(notebook))

        async def never_open(path: str) -> bool:
            return False

        contents = AsyncFileContentsManager(root_dir=folder)
        live = NotebookDocuments(
            contents=contents, is_open=never_open, live=lambda: Extension(shared)
        )
        files = NotebookDocuments(contents=contents, is_open=never_open)
        out: dict[str, list[int]] = {"live": [], "file": [], "live_cpu": [], "file_cpu": []}
        for round_ in range(rounds + 3):  # three warm-ups
            for name, documents in (("live", live), ("file", files)):
                started, cpu = time.perf_counter_ns(), time.process_time_ns()
                read = await documents.read("big.ipynb")
                text = notebook_text("big.ipynb", read.cells, [], read.where == "live")
                took, used = time.perf_counter_ns() - started, time.process_time_ns() - cpu
                assert len(read.cells) == CELLS
                assert text
                if round_ >= 3:
                    out[name].append(took)
                    out[f"{name}_cpu"].append(used)
        out["chars"] = [len(text)]
    print(json.dumps(out))


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]) if len(sys.argv) > 1 else 30))
