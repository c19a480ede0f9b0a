"""Private folders, atomic writes and validated reads: the one way Conch puts a file on disk.

Every stored file goes through here. The rules:

- Folders are 0700 and files 0600: the data is one person's, and other accounts on a shared
  machine (a JupyterHub node) have no business reading it.
- A write is atomic: a temp file in the same folder, flushed and fsynced, renamed over the old
  one, then the folder fsynced. A crash or a full disk leaves the old file or the new one, never a
  half of either.
- A file that does not parse or does not have the expected shape is an error that names the file.
  Conch never "repairs" it by writing over it: the person may have edited it by hand and will want
  their text back.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any, TypeVar

import pydantic

from .errors import ConchError

M = TypeVar("M", bound=pydantic.BaseModel)

_LEAVE_IT = "fix or move it away — Conch will not overwrite it"


class StoreError(ConchError):
    """Something stored could not be read or written. The message is words for a person; the
    API answers it 503 `storage` (asking again later may work, once the file is fixed)."""

    status = 503

    def __init__(
        self,
        message: str,
        path: Path | str | None = None,
        *,
        code: str = "storage",
        logged: str | None = None,
    ) -> None:
        super().__init__(code, message, logged=logged)
        self.path = Path(path) if path is not None else None


def ensure_private_dir(path: Path | str) -> Path:
    """Make `path` (and any missing parents) a folder only its owner can open; return it."""
    path = Path(path)
    missing: list[Path] = []
    probe = path
    while not probe.exists():
        missing.append(probe)
        if probe.parent == probe:
            break
        probe = probe.parent
    try:
        for folder in reversed(missing):
            folder.mkdir(mode=0o700, exist_ok=True)
            # mkdir's mode is filtered by the umask; say it outright.
            os.chmod(folder, 0o700)
        if not path.is_dir():
            raise StoreError(f"{path} is not a folder; Conch needs a folder there.", path)
        # An existing folder is tightened too: older versions or a hand-made folder may be 0755.
        if os.stat(path).st_mode & 0o777 != 0o700:
            os.chmod(path, 0o700)
    except OSError as e:
        raise StoreError(f"Could not make the folder {path}: {e.strerror or e}.", path) from e
    return path


def _fsync_dir(folder: Path) -> None:
    # The rename is only durable once the folder entry is; Windows cannot open a folder for this.
    if os.name == "nt":
        return
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write_bytes(path: Path | str, data: bytes) -> None:
    """Replace `path` with `data` in one step (0600); on failure the old file is untouched."""
    path = Path(path)
    folder = path.parent
    if not folder.exists():
        ensure_private_dir(folder)
    tmp_name: str | None = None
    try:
        # mkstemp creates the file 0600 and with a name no other writer can pick.
        fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=folder)
        with os.fdopen(fd, "wb") as f:
            if os.name != "nt":
                os.fchmod(f.fileno(), 0o600)
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp_name, path)
        tmp_name = None
        _fsync_dir(folder)
    except OSError as e:
        raise StoreError(f"Could not save {path}: {e.strerror or e}.", path) from e
    finally:
        if tmp_name is not None:
            # Best effort: the failure being reported is the one that matters.
            with contextlib.suppress(OSError):
                os.unlink(tmp_name)


def atomic_write_json(path: Path | str, obj: Any) -> None:
    """Write `obj` (plain JSON data or a pydantic model) as indented JSON, atomically."""
    if isinstance(obj, pydantic.BaseModel):
        obj = obj.model_dump(mode="json")
    # Serialise before touching the disk, so a value that cannot be written changes nothing.
    text = json.dumps(obj, indent=2, ensure_ascii=False, allow_nan=False) + "\n"
    atomic_write_bytes(path, text.encode("utf-8"))


def describe_validation_error(error: pydantic.ValidationError) -> str:
    """The first problem of a validation error in words, without echoing the stored value."""
    first = error.errors()[0]
    where = ".".join(str(part) for part in first["loc"])
    message = str(first["msg"]).removeprefix("Value error, ")
    return f"{where}: {message}" if where else message


def read_json(path: Path | str, model: type[M]) -> M | None:
    """Read and validate `path` as `model`; None when it does not exist."""
    path = Path(path)
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as e:
        raise StoreError(f"Could not read {path}: {e.strerror or e}.", path) from e
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise StoreError(
            f"{path} is not UTF-8 text (byte {e.start}); {_LEAVE_IT}.",
            path,
        ) from e
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise StoreError(
            f"{path} is not valid JSON (line {e.lineno}): {e.msg}; {_LEAVE_IT}.",
            path,
        ) from e
    try:
        return model.model_validate(data)
    except pydantic.ValidationError as e:
        raise StoreError(
            f"{path} does not hold what Conch expects ({describe_validation_error(e)}); "
            f"{_LEAVE_IT}.",
            path,
        ) from e


Stamp = tuple[int, int, int] | None


def file_stamp(path: Path) -> Stamp:
    """What changes whenever a file is replaced or edited: time, size and inode (None: no file).

    Read caches compare it, so a hand edit is seen at once while unchanged files are not
    parsed (or unsealed) again on every call.
    """
    if path in _MISSING:
        # Looked for again without an exception: a missing file (the sealed keys of someone
        # with no keys yet) is asked about on every door request.
        if not os.access(path, os.F_OK):
            return None
        _MISSING.discard(path)
    try:
        st = os.stat(path)  # pathlib's stat costs twice as much, on every door request
    except FileNotFoundError:
        _MISSING.add(path)
        return None
    return (st.st_mtime_ns, st.st_size, st.st_ino)


_MISSING: set[Path] = set()  # Conch's own files, last seen missing
