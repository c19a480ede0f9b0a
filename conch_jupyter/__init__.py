"""Conch for Jupyter: several AI agents talking in one notebook chat, bounded and stoppable."""

from __future__ import annotations

from typing import Any

__version__ = "0.1.0"


def _jupyter_server_extension_points() -> list[dict[str, Any]]:
    from .server_ext.app import ConchApp

    return [{"module": "conch_jupyter", "app": ConchApp}]


def load_ipython_extension(ipython: Any) -> None:
    """`%load_ext conch_jupyter`: the %conch and %%conch magics."""
    from .magic import load_ipython_extension as load

    load(ipython)
