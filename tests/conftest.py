"""Shared fixtures: a real Jupyter server with Conch loaded under the awkward base_url.

The tests live by kind: unit/ (no Jupyter server), server/ (a real Jupyter server in this
process), system/ (whole Jupyter servers as processes: restarts, crashes, kernels from outside),
browser/ (real JupyterLab and Notebook 7 in chromium), interop/ (other A2A stacks), load/ (load
and the JupyterHub suite); what they share is support/ (which the benchmarks import too)."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from .support.api import Api, Clock
from .support.jupyter_process import JupyterProcess
from .support.scripted_models import ScriptedModels

pytest_plugins = ["pytest_jupyter.jupyter_server"]


def pytest_configure(config: pytest.Config) -> None:
    # The built view (js/ bundled into conch_jupyter/widget/static/) is build output: make it
    # here when it is missing or older than its sources, before any test reads it.
    # With the suite in two processes the first one does it, before the other two start.
    if os.environ.get("PYTEST_XDIST_WORKER"):
        return
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from hatch_build import build_view

    build_view()


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--run-slow",
        action="store_true",
        help="also run the tests marked slow (the full load suites); CONCH_SLOW=1 does the same",
    )


# The kinds that drive chromium: one lane of their own when the suite runs in two (dev.py).
CHROMIUM_KINDS = frozenset({"browser", "live"})


def lane(nodeid: str) -> str:
    """Where a test runs when the suite runs in two processes (pytest-xdist, as `python3 dev.py
    test` runs it): every browser and live test in one lane, one after another (two JupyterLabs
    with chromium at once on two cores would only slow both, and their timings with them), and
    every other module whole (its module-scoped Jupyter servers start once) in the other."""
    path = nodeid.split("::")[0]
    kind = path.split("/")[1] if path.startswith("tests/") else ""
    return "chromium" if kind in CHROMIUM_KINDS else path


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """`--dist loadscope` with our lanes as its scopes. (xdist's own `loadgroup` would do this
    from markers, but it renames nodeids through an attribute pytest 9 no longer reads.)"""
    if config.getvalue("dist") != "loadscope":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class Lanes(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return lane(nodeid)

    return Lanes(config, log)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # The README's test command runs the short version of each long suite; the full ones wait
    # to be asked for, so the whole suite stays within minutes on a small machine.
    if config.getoption("--run-slow") or os.environ.get("CONCH_SLOW") == "1":
        return
    skip = pytest.mark.skip(reason="slow: run with --run-slow or CONCH_SLOW=1")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(autouse=True)
def _no_provider_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    # Tests never reach a hosted model: no key from the machine may leak in.
    for name in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "CONCH_SERVER_URL", "CONCH_KERNEL_KEY"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def models() -> Iterator[ScriptedModels]:
    """A scripted model server on loopback (OpenAI and Anthropic wire formats)."""
    with ScriptedModels() as scripted:
        yield scripted


@pytest.fixture
def server(tmp_path: Path) -> Iterator[JupyterProcess]:
    """A `jupyter server` with Conch in a child process, not yet started (tests kill it)."""
    process = JupyterProcess(tmp_path / "data", tmp_path / "root")
    try:
        yield process
    finally:
        process.stop()


@pytest.fixture
def conch_dir(tmp_path: Path) -> Path:
    return tmp_path / "conch-data"


@pytest.fixture
def conch_config() -> dict[str, Any]:
    """Overrides for c.ConchApp in one test (e.g. spending limits)."""
    return {}


@pytest.fixture
def jp_server_config(conch_dir: Path, conch_config: dict[str, Any]) -> dict[str, Any]:
    return {
        "ServerApp": {"jpserver_extensions": {"conch_jupyter": True}},
        "ConchApp": {
            "data_dir": str(conch_dir),
            "offline_delay": 0.0,
            "retry_delay": 0.05,
            **conch_config,
        },
    }


@pytest.fixture
def api(jp_fetch: Any) -> Api:
    """Call conch/api/… with the Jupyter token; returns (status, parsed JSON or None)."""

    async def call(method: str, path: str, body: Any = None, **kwargs: Any) -> tuple[int, Any]:
        if body is not None and "body" not in kwargs:
            kwargs["body"] = body if isinstance(body, (str, bytes)) else json.dumps(body)
        if method in ("POST", "PATCH", "PUT") and "body" not in kwargs:
            kwargs["body"] = b""
        response = await jp_fetch(
            "conch", "api", *path.strip("/").split("/"), method=method, raise_error=False, **kwargs
        )
        text = response.body.decode() if response.body else ""
        return response.code, json.loads(text) if text else None

    return call
