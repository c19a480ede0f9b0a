"""House rules that CI holds us to: ruff check, ruff format and mypy --strict are clean."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.timeout(300)


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", *args], cwd=ROOT, capture_output=True, text=True)


def test_ruff_check_is_clean() -> None:
    result = run("ruff", "check", ".")
    assert result.returncode == 0, result.stdout + result.stderr


def test_ruff_format_is_clean() -> None:
    result = run("ruff", "format", "--check", ".")
    assert result.returncode == 0, result.stdout + result.stderr


def test_mypy_strict_is_clean() -> None:
    result = run("mypy", "conch_jupyter")
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_threat_model_names_tests_that_exist() -> None:
    """docs/security.md says which test proves each defence: each one it names must exist.

    A cell names `tests/x.py::test_a`, then `::test_b` for another test in the same file.
    """
    import re

    checked = 0
    for line in (ROOT / "docs" / "security.md").read_text().splitlines():
        path = None
        for where, test in re.findall(r"`(tests/[\w/]+\.py)?(?:::(\w+))?", line):
            path = where or path
            if not test:
                continue
            assert path, f"::{test} names no file: {line}"
            source = (ROOT / path).read_text()
            assert re.search(rf"def {test}\b", source), f"{path}::{test} does not exist"
            checked += 1
    assert checked > 30
