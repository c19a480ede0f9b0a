"""A real Jupyter server with Conch in a child process, for tests that restart or kill it, and
a ready client for a kernel that server started.

Start-up deadlines are long and explicit on purpose: CI runs the suite on a small machine that
other work shares, where a server or a kernel can take many seconds to come up. A start that
fails says why, with the tail of the server's log (a kernel's own output lands there too).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from queue import Empty
from typing import Any

import httpx
from jupyter_client.blocking import BlockingKernelClient

# How long a server or a kernel may take to start before a test gives up on it.
START_DEADLINE = 120.0


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

    def start(self, timeout: float = START_DEADLINE, ready: str = "conch/api/agents") -> None:
        """Start the server and wait until Conch's API answers (`ready`: the path under the
        base URL that answers 200 once up; Jupyter's own "api/status" for a server where Conch
        is not expected to load).

        A server that exits while starting is started once more, on a new port: the port is
        picked free here and bound by the child later, and another process may take it between.
        """
        try:
            self._start_once(timeout, ready)
        except ExitedEarly as first:
            try:
                self._start_once(timeout, ready)
            except ExitedEarly as second:
                raise RuntimeError(f"{first}\n--- and once more ---\n{second}") from None

    def _start_once(self, timeout: float, ready: str) -> None:
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
        started_at = self.log_path.stat().st_size if self.log_path.exists() else 0
        log = self.log_path.open("ab")
        self.process = subprocess.Popen(
            command, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=self.root_dir
        )
        log.close()
        deadline = time.monotonic() + timeout
        with self.client() as http:
            while time.monotonic() < deadline:
                code = self.process.poll()
                if code is not None:
                    self.process = None
                    tail = self.log_tail(started_at)
                    raise ExitedEarly(f"jupyter server exited ({code}) while starting:\n{tail}")
                try:
                    if http.get(self.url + ready).status_code == 200:
                        return
                except httpx.HTTPError:
                    pass
                time.sleep(0.1)
        self.stop()
        raise RuntimeError(
            f"jupyter server did not answer in {timeout:g} s:\n{self.log_tail(started_at)}"
        )

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

    def configure(self, config: dict[str, Any]) -> None:
        """Write the server's config file (jupyter_server_config.json, where an image keeps
        it), read at the next start."""
        folder = self.root_dir / ".jupyter-home" / "config"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "jupyter_server_config.json").write_text(json.dumps(config))

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def log_tail(self, since: int = 0, lines: int = 60) -> str:
        """The last lines the server (and its kernels) wrote, from byte `since` of the log on."""
        if not self.log_path.exists():
            return "(no log)"
        with self.log_path.open("rb") as log:
            log.seek(since)
            text = log.read().decode(errors="replace")
        return "\n".join(text.splitlines()[-lines:]) or "(the log is empty)"

    def kernel_state(self, kernel_id: str) -> str:
        """What the server says of one of its kernels: its execution state, or "gone"."""
        try:
            with self.client() as http:
                answer = http.get(f"{self.url}api/kernels/{kernel_id}")
        except httpx.HTTPError as error:
            return f"unknown (the server did not answer: {error})"
        if answer.status_code == 404:
            return "gone"
        return str(answer.json().get("execution_state", "unknown"))

    def connect_kernel(
        self, kernel_id: str, timeout: float = START_DEADLINE
    ) -> BlockingKernelClient:
        """A client for a kernel this server started, returned once the kernel answers."""

        def state() -> str:
            if self.process is None or self.process.poll() is not None:
                raise RuntimeError(f"jupyter server exited:\n{self.log_tail()}")
            return self.kernel_state(kernel_id)

        runtime = self.root_dir / ".jupyter-home" / "runtime"
        return ready_kernel(runtime / f"kernel-{kernel_id}.json", state, self.log_tail, timeout)


@contextmanager
def notebook_session(
    server: JupyterProcess, path: str
) -> Iterator[tuple[str, BlockingKernelClient]]:
    """A kernel the server starts for a notebook's session, as JupyterLab starts one (with the
    name too: the kernel's JPY_SESSION_NAME is then the full path on disk, the kernel's folder
    joined with the name, not the API's path), and a client for it once it answers: (kernel id,
    client). The channels are stopped and the session ended after."""
    with server.client() as http:
        answer = http.post(
            f"{server.url}api/sessions",
            json={"path": path, "name": path, "type": "notebook", "kernel": {"name": "python3"}},
        )
    assert answer.status_code == 201, f"{answer.text}\n{server.log_tail()}"
    session = answer.json()
    try:
        client = server.connect_kernel(session["kernel"]["id"])
        try:
            yield session["kernel"]["id"], client
        finally:
            client.stop_channels()
    finally:
        with server.client() as http:
            http.delete(f"{server.url}api/sessions/{session['id']}")


@contextmanager
def running_jupyter(root: Path, offline_delay: float) -> Iterator[JupyterProcess]:
    """A Jupyter server with Conch in its own process, data in root/data and notebooks in
    root/root, its offline agents `offline_delay` seconds a word; stopped after."""
    extra = (f"--ConchApp.offline_delay={offline_delay}",)
    process = JupyterProcess(root / "data", root / "root", extra=extra)
    process.start()
    try:
        yield process
    finally:
        process.stop()


def ready_kernel(
    connection_file: Path,
    state: Callable[[], str],
    log_tail: Callable[[], str],
    timeout: float = START_DEADLINE,
) -> BlockingKernelClient:
    """A client for a kernel a server started, returned once the kernel answers.

    Not jupyter_client's wait_for_ready: a client made from a connection file judges the kernel
    by its heartbeat, and a kernel still importing on a loaded machine misses the heartbeat's
    one-second window, so wait_for_ready says "Kernel died before replying to kernel_info" of a
    kernel that is only slow. Here the server, which owns the kernel's process, says whether it
    is still alive: `state` is what the server says of the kernel ("dead" and "gone" end the
    wait), and `log_tail` the server's last words, shown when the kernel does not come up.
    """
    client = BlockingKernelClient(connection_file=str(connection_file))
    client.load_connection_file()
    client.start_channels(hb=False)
    deadline = time.monotonic() + timeout
    try:
        while not _answered_kernel_info(client):
            said = state()
            if said in ("dead", "gone"):
                raise RuntimeError(
                    f"the kernel died while starting (the server says: {said}):\n{log_tail()}"
                )
            if time.monotonic() > deadline:
                raise RuntimeError(
                    f"the kernel did not answer in {timeout:g} s (the server says: {said}):\n"
                    + log_tail()
                )
        while _drained(client):
            pass  # what the kernel said while starting is not the first cell's output
    except BaseException:
        client.stop_channels()
        raise
    return client


class ExitedEarly(RuntimeError):
    """The server's process ended before it answered."""


def _answered_kernel_info(client: BlockingKernelClient) -> bool:
    # As jupyter_client does: a reply on shell, and then something on IOPub, which proves that
    # IOPub is connected too (until it is, the kernel's output would be lost).
    client.kernel_info()
    try:
        reply = client.get_shell_msg(timeout=1)
    except Empty:
        return False
    if reply["msg_type"] != "kernel_info_reply":
        return False
    return _drained(client)


def _drained(client: BlockingKernelClient) -> bool:
    """Whether a message was waiting on IOPub (it is taken off)."""
    try:
        client.get_iopub_msg(timeout=0.2)
    except Empty:
        return False
    return True


def until(check: Callable[[], Any], timeout: float = 15.0) -> Any:
    """Poll `check` until it returns something truthy, and return that; fail after `timeout`."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out after {timeout} s")
