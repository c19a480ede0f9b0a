"""A real Jupyter server with Conch in a child process, for tests that restart or kill it."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class JupyterProcess:
    """`jupyter server` with Conch, on loopback, with a token; start, kill and start again."""

    def __init__(
        self,
        data_dir: Path,
        root_dir: Path,
        *,
        base_url: str = "/a%40b/",
        python: str = sys.executable,
        extra: tuple[str, ...] = (),
    ) -> None:
        self.data_dir = data_dir
        self.root_dir = root_dir
        self.base_url = base_url
        self.python = python
        self.extra = extra
        self.token = "t" + os.urandom(12).hex()
        self.port = 0
        self.process: subprocess.Popen[bytes] | None = None
        self.log_path = root_dir / "jupyter-server.log"

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}{self.base_url}"

    def api(self, path: str) -> str:
        return f"{self.url}conch/api/{path.lstrip('/')}"

    def client(self, **kwargs: Any) -> httpx.Client:
        kwargs.setdefault("timeout", 10)
        return httpx.Client(
            headers={"Authorization": f"token {self.token}"}, trust_env=False, **kwargs
        )

    def start(self, timeout: float = 60.0) -> None:
        self.root_dir.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        env = {
            k: v
            for k, v in os.environ.items()
            if k
            not in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "CONCH_SERVER_URL", "CONCH_KERNEL_KEY")
        }
        # Keep the child's Jupyter files inside the test's folder, not the user's home.
        home = self.root_dir / ".jupyter-home"
        env.update(
            JUPYTER_PLATFORM_DIRS="1",
            JUPYTER_CONFIG_DIR=str(home / "config"),
            JUPYTER_DATA_DIR=str(home / "data"),
            JUPYTER_RUNTIME_DIR=str(home / "runtime"),
        )
        command = [
            self.python,
            "-m",
            "jupyter_server",
            f"--port={self.port}",
            "--port-retries=0",
            "--ip=127.0.0.1",
            "--no-browser",
            "--allow-root",
            f"--ServerApp.base_url={self.base_url}",
            f"--ServerApp.root_dir={self.root_dir}",
            f"--IdentityProvider.token={self.token}",
            "--ServerApp.jpserver_extensions={'conch_jupyter': True}",
            f"--ConchApp.data_dir={self.data_dir}",
            "--ConchApp.offline_delay=0",
            "--ConchApp.retry_delay=0.05",
            *self.extra,
        ]
        log = self.log_path.open("ab")
        self.process = subprocess.Popen(
            command, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=self.root_dir
        )
        log.close()
        deadline = time.monotonic() + timeout
        with self.client() as http:
            while time.monotonic() < deadline:
                if self.process.poll() is not None:
                    raise RuntimeError(f"jupyter server exited:\n{self.log()}")
                try:
                    if http.get(self.api("agents")).status_code == 200:
                        return
                except httpx.HTTPError:
                    pass
                time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"jupyter server did not answer in {timeout} s:\n{self.log()}")

    def kill(self) -> None:
        """SIGKILL: no shutdown hooks run, as in a crash or a power cut of the process."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(10)
        self.process = None

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)
        self.process = None

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""


def until(check: Callable[[], Any], timeout: float = 15.0) -> Any:
    """Poll `check` until it returns something truthy, and return that; fail after `timeout`."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out after {timeout} s")
