"""What the reading tools say: a notebook and a kernel's variables as text for a model.

Pure (no I/O): the notebook as last saved (nbformat's JSON) with the inputs the kernel ran since,
and the rows `list_variables` gets back, each turned into plain text. Pictures are one-line
mentions; outputs keep their text. The caller cuts the whole to the output bound.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

# One output or cell source is cut here already, so one huge cell cannot hide all the others.
PIECE_LIMIT = 2_000


def notebook_text(path: str, notebook: dict[str, Any], ran: Sequence[str] | str) -> str:
    """The saved cells with their text outputs, then what the kernel ran that is not saved.

    `ran` is the kernel's input history this session, or words saying why it is not known.
    """
    cells = notebook.get("cells") or []
    lines = [f"Notebook {path} as last saved: {len(cells)} cells."]
    saved: set[str] = set()
    for number, cell in enumerate(cells, 1):
        kind = cell.get("cell_type", "code")
        source = _text(cell.get("source", ""))
        count = cell.get("execution_count")
        head = f"[{number}] {kind}" + (f", In [{count}]" if count else "")
        lines += ["", f"{head}:", _cut(source) or "(empty)"]
        if kind == "code":
            saved.add(source.strip())
            shown = "".join(_output(o) for o in cell.get("outputs") or [])
            if shown.strip():
                lines += ["Output:", _cut(shown.rstrip("\n"))]
    if isinstance(ran, str):
        lines += ["", ran]
        return "\n".join(lines)
    since = [code for code in ran if code.strip() and code.strip() not in saved]
    if since:
        lines += ["", f"Since the last save, the kernel also ran {len(since)} inputs:"]
        for code in since:
            lines += ["", _cut(code)]
    else:
        lines += ["", "The kernel has run nothing beyond the saved cells."]
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
