#!/usr/bin/env python3
"""The project's two commands, with all their set-up, on a machine that has only Python 3.10+.

    python3 dev.py lab     JupyterLab with Conch on a copy of the demo notebook (offline default)
    python3 dev.py test    the whole test suite (installs what it needs, Chromium included)

Both make a virtual environment in .venv and install the project into it (again only when
pyproject.toml changed), and build the notebook view from js/ (Node 20+ and npm: `npm ci` from
the lock file, then esbuild) when its sources changed. Extra words after `test` go to pytest,
e.g. `python3 dev.py test -k door`; `python3 dev.py test --quick` runs only tests/unit (no
Jupyter server), and `python3 dev.py test tests/server` one kind.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent
VENV = ROOT / ".venv"
BIN = VENV / ("Scripts" if os.name == "nt" else "bin")
PYTHON = BIN / ("python.exe" if os.name == "nt" else "python")
CHROMIUM = Path("/usr/bin/chromium")


def say(text: str) -> None:
    print(f"[conch] {text}", flush=True)


def run(*args: str | Path, **kwargs: object) -> None:
    subprocess.run([str(a) for a in args], check=True, **kwargs)  # type: ignore[call-overload]


# The repository's package.json says "type": "module" (the view's sources are ES modules), and
# Node applies the nearest package.json above a file to it. JupyterLab runs the yarn.js that
# jupyter_builder ships (a CommonJS bundle) at every start (`yarn config`, for the registry), and
# inside .venv/ that file fell under our "module" scope: Node refused it ("Dynamic require of
# "util" is not supported") and JupyterLab printed "Fail to get yarn configuration" and a
# screenful of minified source. A package.json of its own in .venv/ ends our scope there.
VENV_NODE_SCOPE = {
    "description": "Not a Node package: ends the repository's ES-module scope at .venv/ (dev.py)",
    "type": "commonjs",
}


def ensure_node_scope() -> None:
    """The .venv/package.json that lets Node run the CommonJS scripts installed in .venv/."""
    marker = VENV / "package.json"
    wanted = json.dumps(VENV_NODE_SCOPE, indent=2) + "\n"
    if not marker.exists() or marker.read_text() != wanted:
        marker.write_text(wanted)


def ensure_venv(extra: str) -> None:
    if not PYTHON.exists():
        say(f"making a virtual environment in {VENV.name}/")
        venv.EnvBuilder(with_pip=True).create(VENV)
        run(PYTHON, "-m", "pip", "install", "--quiet", "--upgrade", "pip")
    ensure_node_scope()
    stamp = VENV / f".installed-{extra}"
    wanted = hashlib.sha256((ROOT / "pyproject.toml").read_bytes()).hexdigest()
    if stamp.exists() and stamp.read_text() == wanted:
        return
    say(f"installing conch-jupyter[{extra}] into {VENV.name}/ (a few minutes the first time)")
    run(PYTHON, "-m", "pip", "install", "--quiet", "-e", f".[{extra}]", cwd=ROOT)
    stamp.write_text(wanted)


def ensure_view() -> None:
    """The notebook view, built from js/ when its sources are newer than the build."""
    sys.path.insert(0, str(ROOT))
    from hatch_build import build_view

    if build_view():
        say("built the notebook view from js/ into conch_jupyter/widget/static/")


def ensure_chromium() -> None:
    """The browser tests drive Debian's chromium; install it where it is missing and we can."""
    if CHROMIUM.exists():
        return
    if shutil.which("apt-get") and hasattr(os, "geteuid") and os.geteuid() == 0:
        say("installing Debian's chromium for the browser tests")
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        run("apt-get", "update", "-qq", env=env)
        run("apt-get", "install", "-y", "-qq", "chromium", env=env)
    else:
        say(
            "chromium is missing and cannot be installed here (needs root and apt-get): "
            "the browser tests will say so and be skipped"
        )


# Where `dev.py lab` works: a copy of the demo (running it changes it: outputs, answers), so
# the tracked notebooks/demo.ipynb stays as it is. Kept between runs; delete it for a fresh one.
WORK = ROOT / ".conch-lab"


def lab_command(args: list[str], *, root: bool) -> list[str]:
    """`jupyter lab` on the copy of the demo; as root too (Jupyter asks for --allow-root then),
    without the update check's news."""
    command = [
        str(BIN / "jupyter"),
        "lab",
        "--ServerApp.root_dir=" + str(WORK),
        "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
    ]
    if root:
        command.append("--allow-root")
    return [*command, "demo.ipynb", *args]


def lab(args: list[str]) -> int:
    ensure_venv("lab,chat")  # both faces: the notebook's chat and Jupyter Chat's .chat rooms
    ensure_view()
    WORK.mkdir(exist_ok=True)
    demo = WORK / "demo.ipynb"
    if not demo.exists():
        shutil.copyfile(ROOT / "notebooks" / "demo.ipynb", demo)
        say(f"copied notebooks/demo.ipynb to {WORK.name}/demo.ipynb: the repository stays as it is")
    say(f"starting JupyterLab with Conch on {WORK.name}/demo.ipynb (the offline agents)")
    root = hasattr(os, "geteuid") and os.geteuid() == 0
    return subprocess.call(lab_command(args, root=root), cwd=WORK)


# `python3 dev.py test --quick`: the tests that need no Jupyter server, for the edit loop.
QUICK = ["tests/unit", "-q", "-x"]
# The rest runs in two processes (pytest-xdist): the browser and live tests in one lane, every
# other module whole in the other (tests/conftest.py's `lane`). On two cores that takes the
# suite from some 25 minutes to under 20; `-n 0` runs it in one process.
LANES = ["-n", "2", "--dist", "loadscope"]


def test(args: list[str]) -> int:
    ensure_venv("test")
    ensure_view()
    if "--quick" in args:
        args = [*QUICK, *(a for a in args if a != "--quick")]
    else:
        ensure_chromium()
        if not any(a == "-n" or a.startswith(("-n=", "--numprocesses")) for a in args):
            args = [*LANES, *args]
    code = subprocess.call([str(PYTHON), "-m", "pytest", *args], cwd=ROOT)
    if code == 5:
        say("pytest collected no tests: that is a failure here")
        return 1
    return code


def main() -> int:
    commands = {"lab": lab, "test": test}
    if len(sys.argv) < 2 or sys.argv[1] not in commands:
        print(__doc__)
        return 2
    return commands[sys.argv[1]](sys.argv[2:])


if __name__ == "__main__":
    sys.exit(main())
