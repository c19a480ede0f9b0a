"""What the interop suite needs to run other people's A2A code the way its users run it.

Each implementation runs in a process of its own, installed from its package registry: the
JavaScript SDK from npm (tests/interop/js, with its committed lock file), and every Python
package that cannot share the test venv (another a2a-sdk version, an agent framework) in a venv
of its own. Both are built by the first test that needs them and kept in a cache folder
(`.interop/` at the top of the repository, or CONCH_INTEROP_CACHE), so later runs start at once.
A test is skipped, saying why, only where the implementation cannot be installed here.
"""

from __future__ import annotations

import asyncio
import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).resolve().parent
JS = HERE / "js"
PY = HERE / "py"
INSTALL_SECONDS = 900


def cache_dir() -> Path:
    folder = Path(os.environ.get("CONCH_INTEROP_CACHE") or HERE.parents[1] / ".interop")
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@contextmanager
def _locked(name: str) -> Iterator[None]:
    # Two pytest processes may want the same install at once: one builds, the other waits.
    with open(cache_dir() / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def foreign_env() -> dict[str, str]:
    """The environment for another implementation's programs: none of the test venv's paths
    (pytest-jupyter puts all of sys.path into PYTHONPATH, which would shadow the venv's own)."""
    return {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}


def _tail(output: str) -> str:
    return " | ".join(output.strip().splitlines()[-3:])[-400:]


def node_project() -> Path:
    """tests/interop/js with its node_modules installed from the lock file (`npm ci`)."""
    node, npm = shutil.which("node"), shutil.which("npm")
    if node is None or npm is None:
        pytest.skip("Node.js and npm are not installed, so the JavaScript SDK cannot run")
    with _locked("node"):
        if not (JS / "node_modules" / "@a2a-js" / "sdk" / "package.json").exists():
            done = subprocess.run(
                [npm, "ci", "--no-audit", "--no-fund"],
                cwd=JS,
                capture_output=True,
                text=True,
                timeout=INSTALL_SECONDS,
            )
            if done.returncode != 0:
                pytest.skip(f"npm could not install the JavaScript SDK: {_tail(done.stderr)}")
    return JS


def python_env(name: str, requirements: list[str]) -> Path:
    """The python of a venv holding exactly `requirements`, built once and cached."""
    key = "\n".join([sys.version, *requirements]).encode()
    home = cache_dir() / f"{name}-{hashlib.sha256(key).hexdigest()[:12]}"
    python = home / "bin" / "python"
    ready = home / "ready"
    with _locked(name):
        if not ready.exists():
            shutil.rmtree(home, ignore_errors=True)
            subprocess.run(
                [sys.executable, "-m", "venv", str(home)],
                check=True,
                timeout=120,
                env=foreign_env(),
            )
            done = subprocess.run(
                [str(python), "-m", "pip", "install", "--quiet", *requirements],
                capture_output=True,
                text=True,
                timeout=INSTALL_SECONDS,
                env=foreign_env(),
            )
            if done.returncode != 0:
                shutil.rmtree(home, ignore_errors=True)
                pytest.skip(f"pip could not install {' '.join(requirements)}: {_tail(done.stderr)}")
            ready.write_text("\n".join(requirements) + "\n")
    return python


async def run_json(*command: str, timeout: float = 60) -> Any:
    """Run a program to its end (the test's event loop keeps serving meanwhile); the one JSON
    object it printed last."""
    process = await asyncio.create_subprocess_exec(
        *command,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=foreign_env(),
    )
    try:
        out, err = await asyncio.wait_for(process.communicate(), timeout)
    except asyncio.TimeoutError:
        process.kill()
        await process.wait()
        raise AssertionError(f"{command[:2]} did not finish within {timeout} s") from None
    lines = out.decode().strip().splitlines()
    said = f"{command[:2]} exited {process.returncode}: {err.decode()[-2000:]}"
    assert process.returncode == 0, said
    assert lines, said
    return json.loads(lines[-1])


@dataclass
class Served:
    """A server program started by `serving`: its port, and what it prints afterwards."""

    port: int
    process: asyncio.subprocess.Process

    async def next_said(self, timeout: float = 10) -> Any:
        """The next JSON object the program prints."""
        assert self.process.stdout is not None
        line = await asyncio.wait_for(self.process.stdout.readline(), timeout)
        return json.loads(line)


@asynccontextmanager
async def serving(*command: str, timeout: float = 60) -> AsyncIterator[Served]:
    """Start a server program that prints {"port": N} once it listens; stop it afterwards."""
    process = await asyncio.create_subprocess_exec(
        *command,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=foreign_env(),
    )
    assert process.stdout is not None
    assert process.stderr is not None
    try:
        try:
            line = await asyncio.wait_for(process.stdout.readline(), timeout)
            port = int(json.loads(line)["port"])
        except (asyncio.TimeoutError, ValueError, KeyError):
            process.kill()
            err = (await process.stderr.read()).decode()[-2000:]
            raise AssertionError(f"{command[:2]} did not start: {err}") from None
        yield Served(port, process)
    finally:
        if process.returncode is None:
            process.terminate()
            try:
                await asyncio.wait_for(process.wait(), 10)
            except asyncio.TimeoutError:
                process.kill()
                await process.wait()
