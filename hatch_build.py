"""The view's build: js/ bundled by esbuild into conch_jupyter/widget/static/, and Conch's
JupyterLab extension for Jupyter Chat (js/chat-agents.js) into conch_jupyter/labextension/static/
(a hatch build hook; `npm run build` makes both).

Owns the one way the built view is made, used by the wheel and sdist builds (this hook, so a
wheel always carries the built files), by `python3 dev.py lab|test`, and by the tests when the
built files are missing or older than their sources. The Node dependencies come from the
committed package-lock.json with `npm ci`; nothing is fetched from a CDN at run time.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent
SOURCES = ROOT / "js"
STATIC = ROOT / "conch_jupyter" / "widget" / "static"
# The JupyterLab extension that offers Conch's agents in Jupyter Chat's @ list (its package.json
# is a source; its one script is built).
LABEXTENSION = ROOT / "conch_jupyter" / "labextension"
BUILT = (STATIC / "widget.js", STATIC / "widget.css", LABEXTENSION / "static" / "remoteEntry.js")
LOCK = ROOT / "package-lock.json"
INSTALLED = ROOT / "node_modules" / ".package-lock.json"


def _newest(paths: list[Path]) -> float:
    return max((p.stat().st_mtime for p in paths if p.is_file()), default=0.0)


def view_is_stale() -> bool:
    """Whether the built view is missing or older than anything it is built from."""
    if not all(p.exists() for p in BUILT):
        return True
    sources = [p for p in SOURCES.rglob("*") if "tests" not in p.relative_to(SOURCES).parts]
    return _newest([*sources, ROOT / "package.json", LOCK]) > min(p.stat().st_mtime for p in BUILT)


def ensure_node_modules() -> None:
    """`npm ci` from the lock file, when node_modules is missing or older than the lock."""
    if INSTALLED.exists() and INSTALLED.stat().st_mtime >= LOCK.stat().st_mtime:
        return
    npm = shutil.which("npm")
    if npm is None:
        raise RuntimeError("Building Conch's view needs Node.js 20+ and npm on the PATH.")
    subprocess.run([npm, "ci", "--no-audit", "--no-fund"], cwd=ROOT, check=True)  # noqa: S603


def build_view(*, force: bool = False) -> bool:
    """Build the view if it is stale (or if forced); say whether it was built."""
    if not SOURCES.is_dir():  # an sdist carries the built files and may carry no sources
        return False
    if not force and not view_is_stale():
        return False
    ensure_node_modules()
    npm = shutil.which("npm") or "npm"
    subprocess.run([npm, "run", "build"], cwd=ROOT, check=True)  # noqa: S603
    return True


try:
    from hatchling.builders.hooks.plugin.interface import BuildHookInterface
except ImportError:  # dev.py and the tests use build_view without hatchling installed
    BuildHookInterface = object  # type: ignore[assignment,misc]


class ViewBuildHook(BuildHookInterface):  # type: ignore[misc,valid-type]
    PLUGIN_NAME = "conch-view"

    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        build_view()
        missing = [str(p.relative_to(ROOT)) for p in BUILT if not p.exists()]
        if missing:
            raise RuntimeError(f"The built view is missing: {', '.join(missing)}.")
