"""What the reading tools say: a notebook and a kernel's variables as text for a model.

Pure (no I/O): the notebook's cells (as the open pages show them now, or as last saved) with the
inputs the kernel ran that no cell holds, and the rows `list_variables` gets back, each turned
into plain text. Each cell is named by its id, which the cell tools take. Pictures are one-line
mentions; outputs keep their text. The caller cuts the whole to the output bound.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .cells import Cell

# One output or cell source is cut here already, so one huge cell cannot hide all the others.
PIECE_LIMIT = 2_000


def notebook_text(path: str, cells: Sequence[Cell], ran: Sequence[str] | str, live: bool) -> str:
    """The cells with their ids and text outputs, then what the kernel ran that no cell holds.

    `ran` is the kernel's input history this session, or words saying why it is not known;
    `live`: the cells are the shared document's (what every open page shows now).
    """
    how = "as it is now in the open pages (unsaved edits included)" if live else "as last saved"
    lines = [f"Notebook {path} {how}: {len(cells)} cells."]
    saved: set[str] = set()
    for number, cell in enumerate(cells, 1):
        count = cell.execution_count
        head = f"[{number}] {cell.cell_type}, id {cell.id}" + (f", In [{count}]" if count else "")
        conch = cell.metadata.get("conch")
        if isinstance(conch, dict) and conch.get("agent"):
            head += f", written by agent {str(conch['agent'])[:80]}"
        lines += ["", f"{head}:", _cut(cell.source) or "(empty)"]
        if cell.cell_type == "code":
            saved.add(cell.source.strip())
            shown = "".join(_output(o) for o in cell.outputs)
            if shown.strip():
                lines += ["Output:", _cut(shown.rstrip("\n"))]
    if isinstance(ran, str):
        lines += ["", ran]
        return "\n".join(lines)
    since = [code for code in ran if code.strip() and code.strip() not in saved]
    if since:
        where = "Beyond its cells" if live else "Since the last save"
        lines += ["", f"{where}, the kernel also ran {len(since)} inputs:"]
        for code in since:
            lines += ["", _cut(code)]
    else:
        lines += ["", "The kernel has run nothing beyond the notebook's cells."]
    return "\n".join(lines)


def variables_text(rows: Sequence[Sequence[str]]) -> str:
    if not rows:
        return "The kernel holds no variables of the user's yet."
    lines = [f"The kernel holds {len(rows)} variable{'s' if len(rows) != 1 else ''}:"]
    for name, kind, size, shown in rows:
        extra = f", {size}" if size else ""
        lines.append(f"- {name}: {kind}{extra} = {shown}")
    return "\n".join(lines)


def _text(source: Any) -> str:
    return "".join(source) if isinstance(source, list) else str(source)


def _cut(text: str) -> str:
    if len(text) <= PIECE_LIMIT:
        return text
    return text[:PIECE_LIMIT] + f"\n[… {len(text) - PIECE_LIMIT:,} more characters]"


def _output(output: dict[str, Any]) -> str:
    kind = output.get("output_type")
    if kind == "stream":
        return _text(output.get("text", ""))
    if kind == "error":
        return f"{output.get('ename')}: {output.get('evalue')}\n"
    data = output.get("data") or {}
    if any(key.startswith("image/") for key in data):
        return "[a picture]\n"
    text = data.get("text/plain")
    return _text(text) + "\n" if text is not None else ""
