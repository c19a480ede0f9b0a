"""core/files.py: private folders, atomic writes, validated reads that never overwrite bad files."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import pydantic
import pytest

from conch_jupyter.core.files import (
    StoreError,
    atomic_write_bytes,
    atomic_write_json,
    ensure_private_dir,
    file_stamp,
    read_json,
)

pytestmark = pytest.mark.skipif(os.name == "nt", reason="POSIX permissions")


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.endswith(".tmp"))


class Settings(pydantic.BaseModel):
    version: int
    name: str


# -- folders --------------------------------------------------------------------------------------


def test_ensure_private_dir_makes_every_missing_folder_0700(tmp_path: Path) -> None:
    made = ensure_private_dir(tmp_path / "a" / "b" / "c")
    assert made == tmp_path / "a" / "b" / "c"
    for folder in (tmp_path / "a", tmp_path / "a" / "b", made):
        assert mode(folder) == 0o700


def test_ensure_private_dir_tightens_an_existing_folder(tmp_path: Path) -> None:
    folder = tmp_path / "conch"
    folder.mkdir()
    os.chmod(folder, 0o755)  # noqa: S103 (the loose folder an older setup may have left)
    ensure_private_dir(folder)
    assert mode(folder) == 0o700


def test_ensure_private_dir_refuses_a_file(tmp_path: Path) -> None:
    (tmp_path / "conch").write_text("not a folder")
    with pytest.raises(StoreError, match="is not a folder") as caught:
        ensure_private_dir(tmp_path / "conch")
    assert caught.value.path == tmp_path / "conch"


# -- writes ---------------------------------------------------------------------------------------


def test_atomic_write_bytes_writes_0600_and_replaces(tmp_path: Path) -> None:
    target = tmp_path / "data.bin"
    target.write_bytes(b"old")
    os.chmod(target, 0o644)
    atomic_write_bytes(target, b"new")
    assert target.read_bytes() == b"new"
    assert mode(target) == 0o600
    assert leftovers(tmp_path) == []


def test_atomic_write_bytes_makes_a_missing_folder_private(tmp_path: Path) -> None:
    target = tmp_path / "new" / "data.bin"
    atomic_write_bytes(target, b"x")
    assert target.read_bytes() == b"x"
    assert mode(target.parent) == 0o700


def test_atomic_write_json_is_indented_with_a_trailing_newline(tmp_path: Path) -> None:
    target = tmp_path / "a.json"
    atomic_write_json(target, {"name": "名前", "list": [1, 2]})
    text = target.read_text(encoding="utf-8")
    assert text.endswith("}\n")
    assert '\n  "name": "名前"' in text
    assert json.loads(text) == {"name": "名前", "list": [1, 2]}


def test_atomic_write_json_takes_a_pydantic_model(tmp_path: Path) -> None:
    target = tmp_path / "a.json"
    atomic_write_json(target, Settings(version=1, name="x"))
    assert read_json(target, Settings) == Settings(version=1, name="x")


@pytest.mark.parametrize("bad", [{"ok": 1, "deep": [1, {"x": object()}]}, {"n": float("nan")}])
def test_a_value_that_cannot_be_written_leaves_the_old_file(tmp_path: Path, bad: object) -> None:
    target = tmp_path / "a.json"
    atomic_write_json(target, {"kept": True})
    before = target.read_bytes()
    with pytest.raises((TypeError, ValueError)):
        atomic_write_json(target, bad)
    assert target.read_bytes() == before
    assert leftovers(tmp_path) == []


def test_a_write_cut_short_by_the_file_size_limit_leaves_the_old_file(tmp_path: Path) -> None:
    """A real short write (EFBIG from RLIMIT_FSIZE, like a full disk) partway through the data."""
    target = tmp_path / "a.json"
    atomic_write_json(target, {"kept": True})
    before = target.read_bytes()
    script = textwrap.dedent(
        f"""
        import resource, signal
        from conch_jupyter.core.files import StoreError, atomic_write_bytes
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        hard = resource.getrlimit(resource.RLIMIT_FSIZE)[1]
        resource.setrlimit(resource.RLIMIT_FSIZE, (4096, hard))
        try:
            atomic_write_bytes({str(target)!r}, b"x" * 100_000)
        except StoreError as e:
            print("StoreError:", e)
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True, timeout=60
    )
    assert done.stdout.startswith("StoreError: Could not save"), done.stdout + done.stderr
    assert str(target) in done.stdout
    assert target.read_bytes() == before
    assert leftovers(tmp_path) == []


def test_a_failing_rename_leaves_no_temp_file(tmp_path: Path) -> None:
    target = tmp_path / "busy"
    target.mkdir()
    (target / "inside").write_text("x")  # a non-empty folder cannot be replaced by a file
    with pytest.raises(StoreError, match="Could not save") as caught:
        atomic_write_bytes(target, b"data")
    assert caught.value.path == target
    assert (target / "inside").read_text() == "x"
    assert leftovers(tmp_path) == []


# -- reads ----------------------------------------------------------------------------------------


def test_read_json_of_a_missing_file_is_none(tmp_path: Path) -> None:
    assert read_json(tmp_path / "nothing.json", Settings) is None


def test_read_json_validates(tmp_path: Path) -> None:
    (tmp_path / "s.json").write_text('{"version": 1, "name": "x"}')
    assert read_json(tmp_path / "s.json", Settings) == Settings(version=1, name="x")


def test_bad_json_names_the_file_and_line_and_is_left_alone(tmp_path: Path) -> None:
    target = tmp_path / "s.json"
    target.write_bytes(b'{\n  "version": 1,\n  "name": oops\n}\n')
    before = target.read_bytes()
    with pytest.raises(StoreError) as caught:
        read_json(target, Settings)
    message = str(caught.value)
    assert message.startswith(f"{target} is not valid JSON (line 3): ")
    assert "Conch will not overwrite it" in message
    assert caught.value.path == target
    assert target.read_bytes() == before


def test_a_wrong_shape_names_the_file_and_the_field(tmp_path: Path) -> None:
    target = tmp_path / "s.json"
    target.write_text('{"version": "one", "name": "x"}')
    with pytest.raises(StoreError) as caught:
        read_json(target, Settings)
    message = str(caught.value)
    assert str(target) in message
    assert "version:" in message
    assert "'one'" not in message  # the stored value is not echoed back


def test_text_that_is_not_utf8_is_an_error(tmp_path: Path) -> None:
    target = tmp_path / "s.json"
    target.write_bytes(b'{"name": "\xff"}')
    with pytest.raises(StoreError, match="is not UTF-8 text"):
        read_json(target, Settings)


def test_a_file_stamp_sees_a_file_come_change_and_go(tmp_path: Path) -> None:
    """A file last seen missing is looked for again (without an exception) on every call, so
    one made since is seen at once; and so is one edited or removed."""
    path = tmp_path / "models.secrets.json"
    assert file_stamp(path) is None
    assert file_stamp(path) is None  # asked again while it is still missing
    path.write_text("{}")
    made = file_stamp(path)
    assert made is not None
    assert made[1] == 2  # its size
    path.write_text('{"a": 1}')
    edited = file_stamp(path)
    assert edited is not None
    assert edited != made
    path.unlink()
    assert file_stamp(path) is None
    path.write_text("{}")
    assert file_stamp(path) is not None
