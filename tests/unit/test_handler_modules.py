"""The handler modules stand side by side: each builds on base.py, none imports another, and
app.py alone puts their routes together (no import cycle, as issue 10 asked). The door's HTTP
side is the door package's (door/http.py), installed by app.py before Jupyter's router."""

from __future__ import annotations

import ast
from pathlib import Path

import conch_jupyter.server_ext as server_ext

HANDLER_MODULES = {"handlers", "outside_handlers", "pairing_handlers", "mcp_server_handlers"}
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
    assert "install_door" in (FOLDER / "app.py").read_text()
    from conch_jupyter.server_ext.app import routes

    patterns = [pattern for pattern, _ in routes()]
    assert len(patterns) == len(set(patterns))
    # Every route is the API's (the door is no route: install_door), its catch-all last; but
    # the notebook's tools for coding agents (mcp_handler.py: their own bearer keys, like the
    # door's, never Jupyter's auth).
    assert all(p.startswith("conch/api") for p in patterns if p != "conch/mcp")
    assert "conch/mcp" in patterns
    assert patterns[-1] == r"conch/api(?:/.*)?"
