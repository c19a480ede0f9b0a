"""A real JupyterHub on loopback for tests: configurable-http-proxy in front, a simple local
spawner, a dummy authenticator, and a relay in front of the hub that keeps every byte sent to it.

The proxy comes from npm, pinned by the lock file in tests/support/hub_proxy/, and is installed
there with `npm ci` the first time a test needs it. Every single-user server is
`jupyterhub-singleuser` run by this Python, with its home (and so its Jupyter data dir, where Conch
keeps its data) in the test's folder, and the single-user config in `single_user_config` (read
through JUPYTER_CONFIG_PATH, as a deployment's image would carry it in /etc/jupyter).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import httpx

from .jupyter_process import free_port, until
from .npm import npm_ci

PROXY_DIR = Path(__file__).parent / "hub_proxy"
SERVICE = "conch-test"


def proxy_command() -> Path | str:
    """configurable-http-proxy, installed from the committed lock file when missing; or the
    reason it cannot be."""
    chp = PROXY_DIR / "node_modules" / ".bin" / "configurable-http-proxy"
    problem = npm_ci(PROXY_DIR, chp.name)
    return problem if problem is not None else chp


class Relay:
    """A TCP relay on loopback in front of the hub: everything sent to the hub is kept."""

    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self.port = free_port()
        self._sent = bytearray()
        self._lock = threading.Lock()
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def sent(self) -> bytes:
        with self._lock:
            return bytes(self._sent)

    def start(self) -> None:
        self._thread.start()
        if not self._ready.wait(10):
            raise RuntimeError("the relay in front of the hub did not start")

    def stop(self) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        server = self._loop.run_until_complete(
            asyncio.start_server(self._serve, "127.0.0.1", self.port)
        )
        self._ready.set()
        try:
            self._loop.run_forever()
        finally:
            server.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            hub_reader, hub_writer = await asyncio.open_connection("127.0.0.1", self.target_port)
        except OSError:
            writer.close()
            return
        await asyncio.gather(
            self._pipe(reader, hub_writer, keep=True), self._pipe(hub_reader, writer, keep=False)
        )

    async def _pipe(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, *, keep: bool
    ) -> None:
        try:
            while chunk := await reader.read(65_536):
                if keep:
                    with self._lock:
                        self._sent.extend(chunk)
                writer.write(chunk)
                await writer.drain()
        except (ConnectionError, OSError):
            pass
        finally:
            writer.close()


class JupyterHubProcess:
    """`jupyterhub` with its proxy, in a child process, for users `users`."""

    def __init__(
        self, folder: Path, users: tuple[str, ...], single_user_config: dict[str, Any]
    ) -> None:
        self.folder = folder
        self.users = users
        self.single_user_config = single_user_config
        self.port = free_port()  # the proxy: the hub's public address
        self.hub_port = free_port()
        self.relay = Relay(self.hub_port)
        self.service_token = os.urandom(16).hex()
        self.log_path = folder / "jupyterhub.log"
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def home(self, user: str) -> Path:
        return self.folder / "home" / user

    def data_dir(self, user: str) -> Path:
        """Where Conch keeps this user's data by default: <jupyter data dir>/conch in the home."""
        return self.home(user) / ".local" / "share" / "jupyter" / "conch"

    def start(self, proxy: Path, timeout: float = 120.0) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        config_dir = self.folder / "single-user-config"
        config_dir.mkdir(exist_ok=True)
        config = json.loads(json.dumps(self.single_user_config))
        # Tests may run as root (a container); a deployment's single-user servers do not.
        config.setdefault("ServerApp", {}).setdefault("allow_root", True)
        (config_dir / "jupyter_server_config.json").write_text(json.dumps(config))
        for user in self.users:
            self.home(user).mkdir(parents=True, exist_ok=True)
        settings = {
            "bind_url": self.url,
            "hub_bind_url": f"http://127.0.0.1:{self.hub_port}",
            # Spawners, single-user servers and the proxy reach the hub through the relay.
            "hub_connect_url": f"http://127.0.0.1:{self.relay.port}",
            "proxy": [str(proxy)],
            "proxy_api": f"http://127.0.0.1:{free_port()}",
            "homes": str(self.folder / "home"),
            "python": sys.executable,
            "config_path": str(config_dir),
            "users": list(self.users),
            "service": SERVICE,
            "folder": str(self.folder),
        }
        config = self.folder / "jupyterhub_config.py"
        config.write_text(HUB_CONFIG.format(settings=json.dumps(settings)))
        env = {
            k: v
            for k, v in os.environ.items()
            if k not in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "CONCH_SERVER_URL")
            and k != "CONCH_KERNEL_KEY"
            and not k.startswith("JUPYTER")
        }
        env["CONFIGPROXY_AUTH_TOKEN"] = os.urandom(16).hex()
        env["CONCH_TEST_SERVICE_TOKEN"] = self.service_token
        self.relay.start()
        log = self.log_path.open("ab")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "jupyterhub", "-f", str(config)],
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
            cwd=self.folder,
        )
        log.close()
        deadline = time.monotonic() + timeout
        with httpx.Client(trust_env=False, timeout=5) as http:
            while time.monotonic() < deadline:
                if self.process.poll() is not None:
                    raise RuntimeError(f"jupyterhub exited:\n{self.log()[-6000:]}")
                try:
                    if http.get(f"{self.url}/hub/api/").status_code == 200:
                        return
                except httpx.HTTPError:
                    pass
                time.sleep(0.2)
        self.stop()
        raise RuntimeError(f"jupyterhub did not answer in {timeout} s:\n{self.log()[-6000:]}")

    def hub(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        """The hub's REST API, as the test's admin service."""
        with httpx.Client(trust_env=False, timeout=30) as http:
            return http.request(
                method,
                f"{self.url}/hub/api/{path}",
                headers={"Authorization": f"token {self.service_token}"},
                **kwargs,
            )

    def spawn(self, user: str, timeout: float = 120.0) -> str:
        """Start the user's server; a token of the user's own for it."""
        response = self.hub("POST", f"users/{user}/server")
        assert response.status_code in (201, 202), response.text

        def ready() -> bool:
            model = self.hub("GET", f"users/{user}").json()
            server = model.get("servers", {}).get("")
            return bool(server and server.get("ready"))

        try:
            until(ready, timeout)
        except AssertionError:
            raise AssertionError(f"{user}'s server did not start:\n{self.log()[-6000:]}") from None
        made = self.hub("POST", f"users/{user}/tokens", json={"note": "conch test"})
        assert made.status_code == 201, made.text
        return str(made.json()["token"])

    def user_client(self, user: str, token: str) -> httpx.Client:
        """Calls the user's server through the proxy, with the user's hub token."""
        return httpx.Client(
            base_url=f"{self.url}/user/{user}/",
            headers={"Authorization": f"token {token}"},
            trust_env=False,
            timeout=30,
        )

    def stop(self) -> None:
        pids = self._single_user_pids()
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)
        self.process = None
        for pid in pids:  # the hub stops them; these are what it could not
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        self.relay.stop()

    def _single_user_pids(self) -> list[int]:
        pids = []
        for user in self.users:
            runtime = self.home(user) / ".local" / "share" / "jupyter" / "runtime"
            for info in runtime.glob("jpserver-*.json"):
                try:
                    pids.append(int(json.loads(info.read_text())["pid"]))
                except (OSError, ValueError, KeyError):
                    continue
        return pids

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""


HUB_CONFIG = """\
# Written by tests/support/jupyterhub_process.py for one test run.
import json
import os

s = json.loads({settings!r})
c = get_config()  # noqa: F821
c.JupyterHub.bind_url = s["bind_url"]
c.JupyterHub.hub_bind_url = s["hub_bind_url"]
c.JupyterHub.hub_connect_url = s["hub_connect_url"]
c.JupyterHub.db_url = "sqlite:///" + os.path.join(s["folder"], "jupyterhub.sqlite")
c.JupyterHub.cookie_secret_file = os.path.join(s["folder"], "jupyterhub_cookie_secret")
c.JupyterHub.log_level = "DEBUG"  # every request the hub is sent is in its log
c.ConfigurableHTTPProxy.command = s["proxy"]
c.ConfigurableHTTPProxy.api_url = s["proxy_api"]
c.JupyterHub.authenticator_class = "dummy"
c.Authenticator.allowed_users = set(s["users"])
c.JupyterHub.spawner_class = "simple"
c.SimpleLocalProcessSpawner.home_dir_template = os.path.join(s["homes"], "{{username}}")
c.Spawner.cmd = [s["python"], "-m", "jupyterhub.singleuser"]
c.Spawner.environment = {{"JUPYTER_CONFIG_PATH": s["config_path"]}}
c.Spawner.start_timeout = 120
c.Spawner.http_timeout = 120
c.JupyterHub.services = [
    {{"name": s["service"], "api_token": os.environ["CONCH_TEST_SERVICE_TOKEN"]}}
]
c.JupyterHub.load_roles = [
    {{
        "name": "conch-test",
        "scopes": ["admin:users", "admin:servers", "tokens"],
        "services": [s["service"]],
    }}
]
"""
