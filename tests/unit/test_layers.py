"""The dependency rule between Conch's packages, read from the imports themselves.

    core (leaves) ← store, providers ← agents, a2a, notebook ← coding ← rounds ← door ← server_ext
                                                 notebook ← mcp_servers ← rounds
                                                              rounds ← chat_rooms ← server_ext

and on the kernel side: core ← client_base ← client ← widget ← magic. Each package's
`__init__` says the same in words. A package imports only the packages its row names (and
itself); nothing imports server_ext but the package's own face, which Jupyter loads.
"""

from __future__ import annotations

import ast
from pathlib import Path

import conch_jupyter

ROOT = Path(conch_jupyter.__file__).parent
SERVER_SIDE = {
    "core",
    "store",
    "providers",
    "agents",
    "a2a",
    "notebook",
    "coding",
    "mcp_servers",
    "rounds",
    "door",
}
MAY_IMPORT: dict[str, set[str]] = {
    "core": set(),
    "store": {"core"},
    "providers": {"core"},
    "agents": {"core", "providers"},
    "a2a": {"core", "store"},  # a door task on the wire is read from its stored row
    "notebook": {"core", "store", "providers"},
    "coding": {"core", "store", "agents", "providers", "notebook"},  # ACP coding agents
    # Your MCP servers: their tools under the notebook's one rule.
    "mcp_servers": {"core", "store", "providers", "notebook"},
    "rounds": {"core", "store", "agents", "providers", "a2a", "notebook", "coding", "mcp_servers"},
    "door": {"core", "store", "agents", "providers", "a2a", "rounds"},
    # Rooms in Jupyter Chat: a face beside the REST API's, over the same rounds.
    "chat_rooms": {"core", "store", "agents", "notebook", "rounds"},
    "server_ext": SERVER_SIDE | {"chat_rooms"},
    # The kernel side: what runs in a notebook's kernel.
    "client_base": {"core"},
    "client": {"core", "client_base"},
    "widget": {"client"},
    "magic": {"client", "widget"},
    "__init__": {"magic", "server_ext"},  # Jupyter's entry points
}


def imports_of(path: Path) -> set[str]:
    """The conch_jupyter modules `path` imports, as dotted names under conch_jupyter."""
    parts = path.relative_to(ROOT).with_suffix("").parts
    package = list(parts[:-1])
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - (node.level - 1)] if node.level > 1 else package
                found.add(".".join([*base, *([node.module] if node.module else [])]))
            elif (node.module or "").startswith("conch_jupyter."):
                found.add(node.module.removeprefix("conch_jupyter.") if node.module else "")
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("conch_jupyter."):
                    found.add(alias.name.removeprefix("conch_jupyter."))
    return found


def top(module: str) -> str:
    return module.split(".")[0] if module else "__init__"


def test_every_package_imports_only_what_the_rule_lets_it() -> None:
    seen: set[str] = set()
    for path in ROOT.rglob("*.py"):
        rel = path.relative_to(ROOT)
        mine = rel.parts[0].removesuffix(".py") if len(rel.parts) > 1 else rel.stem
        seen.add(mine)
        assert mine in MAY_IMPORT, f"{rel}: a package the rule does not name"
        for module in imports_of(path):
            other = top(module)
            if other == mine or module == "":
                continue  # the root's own face holds only __version__ (its imports are lazy)
            assert other in MAY_IMPORT[mine], f"{rel} imports {module}: {mine} may not"
            if (mine, other) == ("a2a", "store"):
                assert module == "store.rows", f"{rel}: a2a reads stored rows only ({module})"
    assert seen == set(MAY_IMPORT)


def test_the_root_holds_only_the_kernel_side_and_the_face() -> None:
    modules = {p.stem for p in ROOT.glob("*.py")}
    assert modules == {"__init__", "client", "client_base", "magic"}


def test_every_package_says_what_it_owns_and_what_it_may_import() -> None:
    for init in ROOT.glob("*/__init__.py"):
        words = ast.get_docstring(ast.parse(init.read_text())) or ""
        assert "May import" in words, f"{init}: say what the package owns and may import"
