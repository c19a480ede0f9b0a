"""Install test: the working tree, really installed with pip, enables itself and serves.

A fresh venv is made in a temporary folder with this interpreter (`python -m venv`), and the
project goes in with a plain `pip install <repo>` — a real wheel built from the working tree, not
the dev venv's editable copy. Nothing is configured by hand: `jupyter server extension list` must
show `conch_jupyter` enabled by the JSON the wheel put in `<venv>/etc/jupyter/…`, and a real
`jupyter server` from that venv must serve the default agents under an awkward base_url, to the
token only. `pip install -e` is checked the same way.

Slow by nature: the first install fetches jupyter-server and friends (pip's wheel cache helps).
The venv is shared by the module; `Venv.install` switches it between wheel and editable, so the
tests do not depend on their order.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import httpx
import pytest

REPO = Path(__file__).resolve().parents[2]
CONFIG_FILE = "conch_jupyter.json"
# What JupyterHub makes of the user name "a b@c": the space escaped, the @ kept. A raw space
# ("/user/a b/") cannot work in jupyter-server itself: tornado refuses it as a cookie path (500).
BASE_URL = "/user/a%20b@c/"
TOKEN = "install-test-token-8d41"
OLLAMA_PORT = 11434  # where detect_default_provider looks for a local model server

# Nothing from this machine's setup may reach the children: no model keys (the default agents
# must be offline), no leftovers of a running Conch, no other Python or Jupyter paths.
SCRUBBED = (
    "OPENAI_API_KEY",
    "ANTHROPIC_API_KEY",
    "CONCH_SERVER_URL",
    "CONCH_KERNEL_KEY",
    "PYTHONPATH",
    "PYTHONHOME",
    "PYTHONSTARTUP",
    "PYTHONUSERBASE",
    "VIRTUAL_ENV",
    "JUPYTER_CONFIG_DIR",
    "JUPYTER_CONFIG_PATH",
    "JUPYTER_DATA_DIR",
    "JUPYTER_PATH",
    "JUPYTER_RUNTIME_DIR",
    "JUPYTER_PREFER_ENV_PATH",
    "JUPYTER_PLATFORM_DIRS",
    "JUPYTER_NO_CONFIG",
    "JPY_SESSION_NAME",
    "JPY_PARENT_PID",
)
ANSI = re.compile(r"\x1b\[[0-9;]*m")

Mode = Literal["wheel", "editable"]


def _tail(text: str, lines: int = 60) -> str:
    return "\n".join(text.splitlines()[-lines:])


@dataclass
class Venv:
    root: Path
    home: Path  # HOME for jupyter commands, so no user config is read
    mode: Mode | None = None

    @property
    def bin(self) -> Path:
        return self.root / ("Scripts" if os.name == "nt" else "bin")

    @property
    def python(self) -> Path:
        return self.bin / ("python.exe" if os.name == "nt" else "python")

    @property
    def jupyter(self) -> Path:
        return self.bin / ("jupyter.exe" if os.name == "nt" else "jupyter")

    @property
    def config_dir(self) -> Path:
        return self.root / "etc" / "jupyter"

    def env(self, *, isolated: bool) -> dict[str, str]:
        """The children's environment; `isolated` also hides the user's Jupyter folders.

        pip keeps the real HOME: its wheel cache and configuration live there.
        """
        env = {k: v for k, v in os.environ.items() if k not in SCRUBBED}
        env["PATH"] = os.pathsep.join([str(self.bin), env.get("PATH", "")])
        env["VIRTUAL_ENV"] = str(self.root)
        if isolated:
            env["HOME"] = str(self.home)
            env["USERPROFILE"] = str(self.home)
            env["JUPYTER_CONFIG_DIR"] = str(self.home / ".jupyter")
            env["JUPYTER_DATA_DIR"] = str(self.home / "jupyter-data")
            env["JUPYTER_RUNTIME_DIR"] = str(self.home / "jupyter-runtime")
            env["IPYTHONDIR"] = str(self.home / ".ipython")
        return env

    def run(self, *args: str | Path, timeout: float = 120, isolated: bool = True) -> str:
        """Run a command from the venv (cwd outside the repo); its output, or fail with it."""
        done = subprocess.run(
            [str(a) for a in args],
            cwd=self.home,
            env=self.env(isolated=isolated),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        output = done.stdout + done.stderr
        if done.returncode != 0:
            pytest.fail(f"{args} exited {done.returncode}:\n{_tail(output)}")
        return output

    def install(self, mode: Mode) -> None:
        """Install the working tree as a built wheel or editable (a no-op if it already is)."""
        if self.mode == mode:
            return
        target = ["-e", str(REPO)] if mode == "editable" else [str(REPO)]
        self.run(
            self.python,
            "-m",
            "pip",
            "install",
            "--no-input",
            "--progress-bar",
            "off",
            *target,
            timeout=540,
            isolated=False,
        )
        self.mode = mode

    def conch_module(self) -> dict[str, str]:
        """Where the venv imports conch_jupyter from, and the installed version."""
        code = (
            "import json, importlib.metadata as m, conch_jupyter as c; "
            "print(json.dumps({'file': c.__file__, 'version': m.version('conch-jupyter')}))"
        )
        result: dict[str, str] = json.loads(self.run(self.python, "-c", code).splitlines()[-1])
        return result


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory) -> Venv:
    if importlib.util.find_spec("venv") is None or importlib.util.find_spec("ensurepip") is None:
        pytest.skip(f"{sys.executable} has no venv/ensurepip module: cannot make a fresh venv")
    base = tmp_path_factory.mktemp("install")
    home = base / "home"
    home.mkdir()
    made = subprocess.run(
        [sys.executable, "-m", "venv", str(base / "venv")],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    if made.returncode != 0:
        output = made.stdout + made.stderr
        if "ensurepip" in output:
            pytest.skip(f"python -m venv cannot install pip here: {_tail(output, 5)}")
        pytest.fail(f"python -m venv failed:\n{_tail(output)}")
    return Venv(root=base / "venv", home=home)


def _extensions_by_config_dir(output: str) -> dict[Path, str]:
    """`jupyter server extension list` output, cut into one block per "Config dir:"."""
    blocks: dict[Path, str] = {}
    current: Path | None = None
    for line in ANSI.sub("", output).splitlines():
        if line.startswith("Config dir:"):
            current = Path(line.removeprefix("Config dir:").strip()).resolve()
            blocks[current] = ""
        elif current is not None:
            blocks[current] += line + "\n"
    return blocks


def _assert_enabled_by_install(venv: Venv) -> None:
    """The wheel's own config file, in the venv, turns the extension on, and it validates."""
    installed = venv.config_dir / "jupyter_server_config.d" / CONFIG_FILE
    assert installed.is_file(), f"{installed} was not installed"
    source = REPO / "jupyter-config" / "server-config" / CONFIG_FILE
    assert json.loads(installed.read_text()) == json.loads(source.read_text())

    output = venv.run(venv.jupyter, "server", "extension", "list")
    blocks = _extensions_by_config_dir(output)
    block = blocks.get(venv.config_dir.resolve())
    assert block is not None, f"the venv's config dir is not listed:\n{output}"
    version = venv.conch_module()["version"]
    assert re.search(r"^\s*conch_jupyter enabled\s*$", block, re.M), block
    assert re.search(rf"^\s*conch_jupyter {re.escape(version)} OK\s*$", block, re.M), block
    # No other config dir (user, system) is what enables it.
    for where, text in blocks.items():
        if where != venv.config_dir.resolve():
            assert "conch_jupyter" not in text, f"{where} also mentions conch_jupyter:\n{text}"


@pytest.mark.timeout(600)
def test_pip_install_builds_a_wheel_that_enables_the_extension(venv: Venv) -> None:
    venv.install("wheel")
    module = Path(venv.conch_module()["file"]).resolve()
    assert module.is_relative_to(venv.root.resolve()), f"not the installed copy: {module}"
    assert not module.is_relative_to(REPO), f"imported from the working tree: {module}"
    _assert_enabled_by_install(venv)


@pytest.mark.timeout(600)
def test_the_wheel_carries_the_built_view_and_it_loads(venv: Venv) -> None:
    venv.install("wheel")
    code = (
        "import json, pathlib, conch_jupyter.widget as w; "
        "static = pathlib.Path(w.__file__).parent / 'static'; "
        "print(json.dumps({'files': sorted(p.name for p in static.iterdir()), "
        "'esm': str(w.ChatWidget._esm), 'css': str(w.SettingsWidget._css), 'static': str(static)}))"
    )
    found = json.loads(venv.run(venv.python, "-c", code).splitlines()[-1])
    # Only what the build makes, and what anywidget hands the page: the bundle and its CSS.
    assert found["files"] == ["widget.css", "widget.js"]
    static = Path(found["static"])
    assert static.resolve().is_relative_to(venv.root.resolve())
    built = (static / "widget.js").read_text()
    assert found["esm"] == built
    assert ".conch-round" in found["css"]
    assert not re.search(r"^\s*import\s", built, re.M)  # one self-contained module: no CDN
    # It loads: the module imports (outside a browser too) and has anywidget's render.
    node = subprocess.run(
        [
            "node",
            "--input-type=module",
            "-e",
            "const m = await import(process.argv[1]); console.log(typeof m.default.render);",
            (static / "widget.js").as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert (node.returncode, node.stdout.strip()) == (0, "function"), node.stderr
    # Conch's JupyterLab extension for Jupyter Chat's @ list, where JupyterLab finds it.
    lab = venv.root / "share" / "jupyter" / "labextensions" / "conch-jupyter"
    package = json.loads((lab / "package.json").read_text())
    assert package["jupyterlab"]["_build"]["load"] == "static/remoteEntry.js"
    entry = (lab / "static" / "remoteEntry.js").read_text()
    assert "conch:agents" in entry
    assert not re.search(r"^\s*(import|export)\s", entry, re.M)  # a script, not a module


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _listening(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(0.2)
        return sock.connect_ex(("127.0.0.1", port)) == 0


def _stop(process: subprocess.Popen[Any]) -> int:
    """SIGTERM and wait; SIGKILL only if it will not go. The exit code."""
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=30)
    return process.returncode


def _wait_until_up(process: subprocess.Popen[Any], url: str, log: Path) -> None:
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        if process.poll() is not None:
            pytest.fail(f"jupyter server exited {process.returncode}:\n{_tail(log.read_text())}")
        try:
            if httpx.get(url, timeout=2).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.1)
    pytest.fail(f"jupyter server did not answer {url} in 90 s:\n{_tail(log.read_text())}")


@pytest.mark.timeout(600)
def test_installed_server_serves_the_default_agents_to_the_token_only(
    venv: Venv, tmp_path: Path
) -> None:
    venv.install("wheel")
    root = tmp_path / "notebooks"
    root.mkdir()
    data = tmp_path / "conch-data"
    port = _free_port()
    command = [
        str(venv.jupyter),
        "server",
        "--no-browser",
        "--ServerApp.ip=127.0.0.1",
        f"--ServerApp.port={port}",
        "--ServerApp.port_retries=0",
        f"--ServerApp.base_url={BASE_URL}",
        f"--ServerApp.root_dir={root}",
        f"--IdentityProvider.token={TOKEN}",
        f"--ConchApp.data_dir={data}",
    ]
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        command.append("--allow-root")  # containers often run tests as root
    origin = f"http://127.0.0.1:{port}"
    agents_url = f"{origin}{BASE_URL}conch/api/agents"
    log = tmp_path / "server.log"

    with log.open("wb") as sink:
        server = subprocess.Popen(
            command,
            cwd=root,
            env=venv.env(isolated=True),
            stdin=subprocess.DEVNULL,
            stdout=sink,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        _wait_until_up(server, f"{origin}{BASE_URL}api", log)

        answer = httpx.get(agents_url, headers={"Authorization": f"token {TOKEN}"}, timeout=10)
        assert answer.status_code == 200, (
            answer.status_code,
            answer.text[:300],
            _tail(log.read_text()),
        )
        agents = answer.json()["agents"]
        assert sorted(a["name"] for a in agents) == ["Researcher", "Writer"], agents
        if not _listening(OLLAMA_PORT):  # a local Ollama would (rightly) be preferred
            assert {a["provider"]["kind"] for a in agents} == {"offline"}, agents
        assert all(not a["has_key"] for a in agents), agents
        assert (data / "agents" / "agents.json").is_file(), "--ConchApp.data_dir was not used"

        as_query = httpx.get(agents_url, params={"token": TOKEN}, timeout=10)
        assert as_query.status_code == 200, as_query.text

        for headers in ({}, {"Authorization": "token not-the-token"}):
            refused = httpx.get(agents_url, headers=headers, timeout=10)
            assert refused.status_code == 403, (headers, refused.status_code, refused.text)
            assert "Researcher" not in refused.text

        # The same path outside the base_url is nothing.
        stray = httpx.get(f"{origin}/conch/api/agents", params={"token": TOKEN}, timeout=10)
        assert stray.status_code == 404, stray.text
    finally:
        code = _stop(server)

    output = log.read_text()
    assert code == 0, f"jupyter server exited {code} on SIGTERM:\n{_tail(output)}"
    assert "Traceback" not in output, _tail(output, 120)


@pytest.mark.timeout(600)
def test_editable_install_enables_the_extension(venv: Venv) -> None:
    venv.install("editable")
    module = Path(venv.conch_module()["file"]).resolve()
    assert module == REPO / "conch_jupyter" / "__init__.py", module
    _assert_enabled_by_install(venv)
