#!/usr/bin/env python3
"""The project's two commands, with all their set-up, on a machine that has only Python 3.10+.

    python3 dev.py lab     JupyterLab with Conch on a copy of the demo notebook (offline default)
                           and Jupyter's collaboration (the demo's last section needs it)
    python3 dev.py test    the whole test suite (installs what it needs, Chromium included)

Each makes a virtual environment of its own and installs the project into it (again only when
pyproject.toml changed): .venv for the tests, .venv-lab for JupyterLab, whose collaboration
(jupyter-collaboration) would change what the tests' Jupyter servers do. Both build the notebook
view from js/ (Node 20+ and npm: `npm ci` from the lock file, then esbuild) when its sources
changed. Extra words after `test` go to pytest,
e.g. `python3 dev.py test -k door`; `python3 dev.py test --quick` runs only tests/unit (no
Jupyter server), and `python3 dev.py test tests/server` one kind.

Two more, for the docs (both in .venv, the tests' venv, which holds the docs' tools):

    python3 dev.py docs    the docs site from docs/, strict (a warning fails), into docs/_build/
    python3 dev.py shots   the pictures the README and the docs show, made in chromium on the
                           offline agents, into docs/_static/shots/ (docs/shots.py says which)
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
from typing import Any

ROOT = Path(__file__).resolve().parent


class Env:
    """A virtual environment dev.py makes and installs the project into. (No dataclass: the
    tests load dev.py from its file, outside sys.modules, where a dataclass cannot be made.)"""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.bin = path / ("Scripts" if os.name == "nt" else "bin")
        self.python = self.bin / ("python.exe" if os.name == "nt" else "python")


# Two, not one: `dev.py lab` installs Jupyter's collaboration (the demo's last section), and a
# Jupyter server started where it is installed serves notebooks through its shared document, so
# tests written for a Jupyter without it would pass or fail by which command ran first.
TESTS = Env(ROOT / ".venv")
LAB = Env(ROOT / ".venv-lab")
CHROMIUM = Path("/usr/bin/chromium")


def say(text: str) -> None:
    print(f"[conch] {text}", flush=True)


def run(*args: str | Path, **kwargs: object) -> None:
    subprocess.run([str(a) for a in args], check=True, **kwargs)  # type: ignore[call-overload]


# The repository's package.json says "type": "module" (the view's sources are ES modules), and
# Node applies the nearest package.json above a file to it. JupyterLab runs the yarn.js that
# jupyter_builder ships (a CommonJS bundle) at every start (`yarn config`, for the registry), and
# inside a venv here that file fell under our "module" scope: Node refused it ("Dynamic require
# of "util" is not supported") and JupyterLab printed "Fail to get yarn configuration" and a
# screenful of minified source. A package.json of its own in each venv ends our scope there.
VENV_NODE_SCOPE = {
    "description": "Not a Node package: ends the repository's ES-module scope here (dev.py)",
    "type": "commonjs",
}


def ensure_node_scope(env: Env) -> None:
    """The package.json in a venv that lets Node run the CommonJS scripts installed there."""
    marker = env.path / "package.json"
    wanted = json.dumps(VENV_NODE_SCOPE, indent=2) + "\n"
    if not marker.exists() or marker.read_text() != wanted:
        marker.write_text(wanted)


def ensure_venv(env: Env, extra: str) -> None:
    """The project installed in `env` with these extras ("lab,live"), again only when
    pyproject.toml changed; what was installed is said only when something was."""
    made = not env.python.exists()
    if made:
        say(f"making a virtual environment in {env.path.name}/")
        venv.EnvBuilder(with_pip=True).create(env.path)
        run(env.python, "-m", "pip", "install", "--quiet", "--upgrade", "pip")
    ensure_node_scope(env)
    stamp = env.path / f".installed-{extra}"
    wanted = hashlib.sha256((ROOT / "pyproject.toml").read_bytes()).hexdigest()
    if stamp.exists() and stamp.read_text() == wanted:
        return
    if made:
        say(f"installing conch-jupyter[{extra}] into {env.path.name}/ (a few minutes)")
    report = env.path / ".pip-report.json"
    run(
        env.python,
        "-m",
        "pip",
        "install",
        "--quiet",
        "--report",
        report,
        "-e",
        f".[{extra}]",
        cwd=ROOT,
    )
    installed = installed_names(json.loads(report.read_text()))
    report.unlink()
    if installed and not made:
        say(f"installed into {env.path.name}/: {', '.join(installed)}")
    stamp.write_text(wanted)


def installed_names(report: dict[str, Any]) -> list[str]:
    """What pip's --report says it installed, but the project itself (pip installs it again
    each time, in place: nothing new)."""
    names = [str(item["metadata"]["name"]) for item in report.get("install", [])]
    return sorted(n for n in names if n.replace("_", "-").lower() != "conch-jupyter")


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


def lab_command(env: Env, args: list[str], *, root: bool) -> list[str]:
    """`env`'s `jupyter lab` on the copy of the demo, whose address is the one printed (so it
    opens the demo with --no-browser too); as root too (Jupyter asks for --allow-root then),
    without the update check."""
    command = [
        str(env.bin / "jupyter"),
        "lab",
        "--ServerApp.root_dir=" + str(WORK),
        "--LabApp.default_url=/lab/tree/demo.ipynb",
        "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
    ]
    if root:
        command.append("--allow-root")
    return [*command, *args]


# JupyterLab's settings defaults for every user of .venv's JupyterLab: no "get notified about
# official Jupyter news?" prompt over the demo.
NO_NEWS = {"@jupyterlab/apputils-extension:notification": {"fetchNews": "false"}}


# Run in .venv on the demo's new copy: the kernel's own words for itself (its kernelspec and
# language_info), which JupyterLab writes into a notebook as its kernel starts, marking it
# changed where they differ (as the demo opened); then Jupyter's signature, so it opens trusted.
MAKE_AT_HOME = """
import json, subprocess, sys
from ipykernel.ipkernel import IPythonKernel
from jupyter_client.kernelspec import KernelSpecManager
path = sys.argv[1]
with open(path, encoding="utf-8") as f:
    book = json.load(f)
spec = KernelSpecManager().get_kernel_spec("python3")
book["metadata"]["kernelspec"] = {
    "display_name": spec.display_name, "language": spec.language, "name": "python3"}
book["metadata"]["language_info"] = IPythonKernel.language_info
with open(path, "w", encoding="utf-8") as f:
    f.write(json.dumps(book, indent=1, ensure_ascii=False) + "\\n")
subprocess.run([sys.executable, "-m", "jupyter", "trust", path], check=True, capture_output=True)
"""


def prepare_lab(env: Env) -> Path:
    """The demo's copy (made the first time), opening neither "not trusted" nor changed with
    `env`'s kernel; and `env`'s JupyterLab's news prompt off (its overrides.json)."""
    WORK.mkdir(exist_ok=True)
    demo = WORK / "demo.ipynb"
    if not demo.exists():
        shutil.copyfile(ROOT / "notebooks" / "demo.ipynb", demo)
        run(env.python, "-c", MAKE_AT_HOME, demo)
        say(f"copied notebooks/demo.ipynb to {WORK.name}/demo.ipynb: the repository stays as it is")
    overrides = env.path / "share" / "jupyter" / "lab" / "settings" / "overrides.json"
    kept = json.loads(overrides.read_text()) if overrides.exists() else {}
    if {**kept, **NO_NEWS} != kept:
        overrides.parent.mkdir(parents=True, exist_ok=True)
        overrides.write_text(json.dumps({**kept, **NO_NEWS}, indent=2) + "\n")
    return demo


def lab(args: list[str]) -> int:
    # live: the demo's last section (an agent adds a cell and runs it); chat: Conch's agents in
    # every Jupyter Chat .chat document too
    ensure_venv(LAB, "lab,live,chat")
    ensure_view()
    prepare_lab(LAB)
    say(f"starting JupyterLab with Conch on {WORK.name}/demo.ipynb (the offline agents)")
    root = hasattr(os, "geteuid") and os.geteuid() == 0
    return subprocess.call(lab_command(LAB, args, root=root), cwd=WORK)


# `python3 dev.py test --quick`: the tests that need no Jupyter server, for the edit loop, in two
# processes (the view's JS tests, half a minute, beside the rest): about a minute, not 1:15.
QUICK = ["tests/unit", "-q", "-x", "-n", "2", "--dist", "loadscope"]
# The rest runs in two processes (pytest-xdist): the browser and live tests in one lane, every
# other module whole in the other (tests/conftest.py's `lane`). On two cores that takes the
# suite from some 25 minutes to under 20; `-n 0` runs it in one process.
LANES = ["-n", "2", "--dist", "loadscope"]


def test(args: list[str]) -> int:
    ensure_venv(TESTS, "test")
    ensure_view()
    if "--quick" in args:
        args = [*QUICK, *(a for a in args if a != "--quick")]
    else:
        ensure_chromium()
        if not any(a == "-n" or a.startswith(("-n=", "--numprocesses")) for a in args):
            args = [*LANES, *args]
    code = subprocess.call([str(TESTS.python), "-m", "pytest", *args], cwd=ROOT)
    if code == 5:
        say("pytest collected no tests: that is a failure here")
        return 1
    return code


# The docs site, as `python3 dev.py docs` and tests/unit/test_docs.py build it: strict (-W: a
# warning fails; --keep-going: all of them said first), nitpicky (-n), and from scratch each time
# (-E), since Sphinx says a warning only when it reads that page again.
DOCS = ROOT / "docs"
DOCS_BUILT = DOCS / "_build" / "html"


def docs_command(python: Path, source: Path, out: Path) -> list[str]:
    strict = ["-W", "--keep-going", "-n", "-E", "-q"]
    return [str(python), "-m", "sphinx", *strict, "-b", "html", str(source), str(out)]


def docs(args: list[str]) -> int:
    ensure_venv(TESTS, "test")
    code = subprocess.call([*docs_command(TESTS.python, DOCS, DOCS_BUILT), *args], cwd=ROOT)
    if code == 0:
        say(f"built the docs into {DOCS_BUILT.relative_to(ROOT)}/ (open index.html)")
    return code


def shots(args: list[str]) -> int:
    """Every picture the README and the docs show, made again (docs/shots.py)."""
    ensure_venv(TESTS, "test")
    ensure_view()
    ensure_chromium()
    say("making the pictures: JupyterLab on the offline agents, in chromium (a minute or two)")
    return subprocess.call([str(TESTS.python), str(DOCS / "shots.py"), *args], cwd=ROOT)


def main() -> int:
    commands = {"lab": lab, "test": test, "docs": docs, "shots": shots}
    if len(sys.argv) < 2 or sys.argv[1] not in commands:
        print(__doc__)
        return 2
    return commands[sys.argv[1]](sys.argv[2:])


if __name__ == "__main__":
    sys.exit(main())
