"""Every package the product imports is declared: a fresh install never leans on a neighbour's.

conch_jupyter's imports are walked with ast (every `import x` and absolute `from x import y`,
those under `if TYPE_CHECKING` and inside functions too); each top-level module that is neither
the standard library nor conch_jupyter itself must come from a distribution named in
pyproject.toml's [project] dependencies, or, for an optional part, from its extra (OPTIONAL_PARTS:
rooms in Jupyter Chat import jupyterlab-chat, from `conch-jupyter[chat]`, and are loaded only where
it is installed).
"""

from __future__ import annotations

import ast
import importlib.metadata
import sys
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "conch_jupyter"
# An optional part's folder → the extra that brings what it alone imports.
OPTIONAL_PARTS = {"conch_jupyter/chat_rooms/": "chat"}


def imported_modules() -> dict[str, set[str]]:
    """Top-level module name → the files (relative to the repo) that import it."""
    found: dict[str, set[str]] = {}
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            for name in names:
                found.setdefault(name.partition(".")[0], set()).add(str(path.relative_to(ROOT)))
    return found


def third_party(modules: dict[str, set[str]]) -> dict[str, set[str]]:
    return {
        name: files
        for name, files in modules.items()
        if name not in sys.stdlib_module_names and name != "conch_jupyter"
    }


def declared(extra: str | None = None) -> set[str]:
    """The distributions the product depends on; with `extra`, and that extra's."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    lines = [*project["dependencies"], *project["optional-dependencies"].get(extra, [])]
    return {canonicalize_name(Requirement(line).name) for line in lines}


def allowed_for(files: set[str]) -> set[str]:
    """What these files may import from: an optional part's extra too, when all are in it."""
    for folder, extra in OPTIONAL_PARTS.items():
        if all(f.startswith(folder) for f in files):
            return declared(extra)
    return declared()


def test_the_walk_sees_the_imports_the_issue_named() -> None:
    """A guard on the walk itself: it finds imports at the top, in functions and from-imports."""
    seen = third_party(imported_modules())
    assert {"traitlets", "jupyter_core", "jupyter_client", "IPython", "httpx"} <= seen.keys()
    assert "conch_jupyter" not in seen
    assert "json" not in seen


def test_every_imported_package_is_declared() -> None:
    providers = importlib.metadata.packages_distributions()
    undeclared = []
    for module, files in sorted(third_party(imported_modules()).items()):
        wanted = allowed_for(files)
        distributions = {canonicalize_name(d) for d in providers.get(module, [])}
        if not distributions:
            undeclared.append(f"{module} (installed by no distribution here), in {sorted(files)}")
        elif not distributions & wanted:
            undeclared.append(f"{module} (from {sorted(distributions)}), in {sorted(files)}")
    assert not undeclared, "imported but not in [project] dependencies:\n" + "\n".join(undeclared)


def test_an_optional_part_may_use_its_extra_and_nothing_else_may() -> None:
    assert "jupyterlab-chat" in allowed_for({"conch_jupyter/chat_rooms/rooms.py"})
    assert "jupyterlab-chat" not in allowed_for({"conch_jupyter/server_ext/app.py"})
    assert "jupyterlab-chat" not in allowed_for(
        {"conch_jupyter/chat_rooms/rooms.py", "conch_jupyter/server_ext/app.py"}
    )
