"""The handler modules stand side by side: each builds on base.py, none imports another, and
app.py alone puts their routes together (no import cycle, as issue 10 asked)."""

from __future__ import annotations

import ast
from pathlib import Path

import conch_jupyter.server_ext as server_ext

HANDLER_MODULES = {"handlers", "outside_handlers", "pairing_handlers", "door_handlers"}
FOLDER = Path(server_ext.__file__).parent


def local_imports(module: str) -> set[str]:
    """The server_ext modules `module` imports (`from .x import …`)."""
    tree = ast.parse((FOLDER / f"{module}.py").read_text())
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 1:
            if node.module:
                found.add(node.module.split(".")[0])
            else:
                found.update(alias.name for alias in node.names)
    return found


def test_no_handler_module_imports_another() -> None:
    for module in HANDLER_MODULES:
        assert (FOLDER / f"{module}.py").exists(), module
        assert not local_imports(module) & HANDLER_MODULES, module
        assert "base" in local_imports(module), module
    assert not local_imports("base") & (HANDLER_MODULES | {"app"})


def test_app_assembles_every_route() -> None:
    assert local_imports("app") >= HANDLER_MODULES
    from conch_jupyter.server_ext.app import routes

    patterns = [pattern for pattern, _ in routes()]
    assert len(patterns) == len(set(patterns))
    # conch/api's catch-all comes after every conch/api route, and the door's after the door's.
    api = [p for p in patterns if p.startswith("conch/api")]
    assert api[-1] == r"conch/api(?:/.*)?"
    door = [p for p in patterns if not p.startswith("conch/api")]
    assert door[-1] == r"(?:a2a|\.well-known)(?:/.*)?"
