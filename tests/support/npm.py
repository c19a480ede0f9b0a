"""`npm ci` from a committed lock file: how the tests install the Node programs they run (the
hub's proxy, the real ACP adapters) when CI starts from a clean clone. One process installs a
folder at a time (a lock file beside it), so the suite's two processes never install twice."""

from __future__ import annotations

import fcntl
import shutil
import subprocess
from pathlib import Path


def npm_ci(folder: Path, *bins: str) -> str | None:
    """Install `folder`'s lock file into its node_modules unless `bins` are there already from
    this very lock file; None when done, else the reason in words."""
    lock = folder / "package-lock.json"
    stamp = folder / "node_modules" / ".conch-installed"
    with open(folder / ".install-lock", "w") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        wanted = lock.read_text()
        made = all((folder / "node_modules" / ".bin" / b).exists() for b in bins)
        if made and stamp.exists() and stamp.read_text() == wanted:
            return None
        npm = shutil.which("npm")
        if npm is None:
            return f"npm is not installed, so {folder.name} cannot be"
        done = subprocess.run(
            [npm, "ci", "--no-audit", "--no-fund", "--loglevel=error"],
            cwd=folder,
            capture_output=True,
            text=True,
            timeout=900,
            check=False,
        )
        if done.returncode != 0:
            return f"npm ci in {folder.name} failed:\n{done.stdout}\n{done.stderr[-3000:]}"
        stamp.write_text(wanted)
    return None
