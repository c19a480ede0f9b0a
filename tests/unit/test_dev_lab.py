"""`python3 dev.py lab` (issue 23, item 9): JupyterLab on a copy of the demo, never on the
tracked notebooks/demo.ipynb; as root it passes --allow-root itself."""

from __future__ import annotations

import importlib.util
import json
import logging
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]


def dev() -> ModuleType:
    spec = importlib.util.spec_from_file_location("dev", ROOT / "dev.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("dev", module)
    spec.loader.exec_module(module)
    return module


def test_the_lab_opens_a_copy_of_the_demo_outside_the_tracked_files() -> None:
    module = dev()
    command = module.lab_command(module.LAB, ["--port=9999"], root=False)
    assert f"--ServerApp.root_dir={module.WORK}" in command
    # The printed address is the demo's (so it opens the demo with --no-browser too).
    assert "--LabApp.default_url=/lab/tree/demo.ipynb" in command
    assert command[-1] == "--port=9999"
    assert "--allow-root" not in command
    assert module.WORK != ROOT / "notebooks"
    # Its JupyterLab is its own venv's, never the tests': collaboration, which the lab installs,
    # changes what every Jupyter server in that venv does.
    assert command[0] == str(module.LAB.bin / "jupyter")
    assert module.LAB.path != module.TESTS.path
    # The copy and the lab's venv are ignored by git: running the demo leaves `git status` clean.
    for made in (module.WORK / "demo.ipynb", module.LAB.path / "pyvenv.cfg"):
        ignored = subprocess.run(["git", "check-ignore", "-q", str(made)], cwd=ROOT, check=False)
        assert ignored.returncode == 0, made


def test_as_root_it_asks_for_allow_root_itself() -> None:
    assert "--allow-root" in dev().lab_command(dev().LAB, [], root=True)


def test_what_pip_installed_is_said_only_when_it_installed_something() -> None:
    """pip installs the project itself again each time (in place): that is no news."""
    names = dev().installed_names
    assert names({"install": [{"metadata": {"name": "conch-jupyter", "version": "0.1"}}]}) == []
    assert names({"install": []}) == []
    report = {
        "install": [
            {"metadata": {"name": "conch_jupyter"}},
            {"metadata": {"name": "pycrdt"}},
            {"metadata": {"name": "jupyter-collaboration"}},
        ]
    }
    assert names(report) == ["jupyter-collaboration", "pycrdt"]


NODE = shutil.which("node")
needs_node = pytest.mark.skipif(NODE is None, reason="Node is not installed here")


@needs_node
def test_the_venv_ends_the_repositorys_es_module_scope(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A CommonJS script inside .venv/ under a "type": "module" package.json (ours) fails in
    Node until dev.py gives .venv/ a package.json of its own: the cause of JupyterLab's
    "Fail to get yarn configuration" screen at start (jupyter_builder's yarn.js)."""
    assert NODE is not None
    (tmp_path / "package.json").write_text(json.dumps({"type": "module"}))
    venv = tmp_path / ".venv"
    script = venv / "lib" / "tool.js"
    script.parent.mkdir(parents=True)
    script.write_text('const util = require("util"); console.log(util.format("%s", "ran"));\n')

    def node() -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [NODE, str(script)], capture_output=True, text=True, check=False, timeout=60
        )

    before = node()
    assert before.returncode != 0
    assert "require is not defined" in before.stderr
    module = dev()
    module.ensure_node_scope(module.Env(venv))
    after = node()
    assert after.returncode == 0, after.stderr
    assert after.stdout.strip() == "ran"
    module.ensure_node_scope(module.Env(venv))  # again: unchanged, no error
    assert json.loads((venv / "package.json").read_text())["type"] == "commonjs"


@needs_node
def test_jupyterlab_reads_the_yarn_configuration_without_an_error() -> None:
    """What JupyterLab 4.6 runs at import (labapp's get_app_version -> AppOptions.registry ->
    commands._yarn_config): in the environment dev.py makes it logs no error."""
    from jupyterlab import commands

    if Path(sys.prefix).resolve() == (ROOT / ".venv").resolve():
        dev().ensure_node_scope(dev().TESTS)  # what dev.py does before every lab / test run
    logger = logging.getLogger("test_dev_lab.yarn")
    records: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record)

    logger.addHandler(Keep(level=logging.ERROR))
    config = commands._yarn_config(logger)
    assert [r.getMessage()[:200] for r in records] == []
    assert isinstance(config["yarn config"], dict)
