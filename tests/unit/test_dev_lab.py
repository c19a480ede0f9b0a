"""`python3 dev.py lab` (issue 23, item 9): JupyterLab on a copy of the demo, never on the
tracked notebooks/demo.ipynb; as root it passes --allow-root itself."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from types import ModuleType

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
    command = module.lab_command(["--port=9999"], root=False)
    assert f"--ServerApp.root_dir={module.WORK}" in command
    assert command[-2:] == ["demo.ipynb", "--port=9999"]
    assert "--allow-root" not in command
    assert module.WORK != ROOT / "notebooks"
    # The copy is ignored by git: running the demo leaves `git status` clean.
    ignored = subprocess.run(
        ["git", "check-ignore", "-q", str(module.WORK / "demo.ipynb")], cwd=ROOT, check=False
    )
    assert ignored.returncode == 0


def test_as_root_it_asks_for_allow_root_itself() -> None:
    assert "--allow-root" in dev().lab_command([], root=True)
