"""The environment the live-cell tests build for themselves: a venv with conch-jupyter[live]'s
packages (jupyter-collaboration) beside JupyterLab and the package's own dependencies, made
from nothing by the first test that needs it and cached (tests/interop/tools.py's way). Conch
itself runs there from this checkout (PYTHONPATH), with the view as built here.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from ..interop.tools import python_env

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[2]


def requirements() -> list[str]:
    """The package's dependencies with its `lab`, `live` and `chat` extras, as pyproject.toml
    says, and Notebook 7 as the test extra pins it (the second page)."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extras = project["optional-dependencies"]
    notebook = [r for r in extras["test"] if r.startswith("notebook")]
    return [*project["dependencies"], *extras["lab"], *extras["live"], *extras["chat"], *notebook]


def live_python() -> str:
    if not (ROOT / "conch_jupyter" / "widget" / "static").exists():
        pytest.skip(
            "the view is not built (python -c 'import hatch_build; hatch_build.build_view()')"
        )
    return str(python_env("live", requirements()))


def live_env() -> dict[str, str]:
    """What the live Jupyter's environment adds: this checkout's Conch on its path."""
    return {"PYTHONPATH": str(ROOT)}
