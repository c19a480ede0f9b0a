"""A Jupyter server extension for the benchmarks only: the floor of the door's stack, and a
profiler switch. Loaded next to Conch in the benchmark's Jupyter server (never shipped).

- `POST {base_url}bench-floor/a2a` and `GET {base_url}bench-floor/card`: a bare tornado
  RequestHandler in the same Jupyter server that checks `Authorization: Bearer <key>` (the key's
  SHA-256 looked up in the set of pairing hashes read from Conch's pairings.json, re-read when the
  file changes) and answers a fixed JSON body. No JSON-RPC, no store: what any handler of this
  stack costs at least, so the door can be read as a multiple of it.
- `POST {base_url}bench-floor/profile/start` and `…/stop?path=<file>`: cProfile over the whole
  server process, written (pstats) to `path` on stop. Guarded by the same bearer check.
"""

from __future__ import annotations

import cProfile
import hashlib
import json
import os
from pathlib import Path
from typing import Any

from tornado import web

_ANSWER = json.dumps(
    {
        "jsonrpc": "2.0",
        "id": 1,
        "result": {"task": {"id": "t", "status": {"state": "TASK_STATE_COMPLETED"}}},
    }
).encode()
_CARD = json.dumps({"name": "Floor", "description": "The stack's floor.", "version": "1"}).encode()


class _Keys:
    """Pairing key hashes from Conch's pairings.json, read again when the file changes."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._stamp: tuple[int, int, int] | None = None
        self._hashes: frozenset[str] = frozenset()

    def knows(self, authorization: str) -> bool:
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            return False
        stamp = (st.st_mtime_ns, st.st_size, st.st_ino)
        if stamp != self._stamp:
            data = json.loads(self.path.read_text())
            self._hashes = frozenset(p["key_sha256"] for p in data.get("pairings", []))
            self._stamp = stamp
        scheme, _, key = authorization.partition(" ")
        if scheme.lower() != "bearer":
            return False
        return hashlib.sha256(key.strip().encode()).hexdigest() in self._hashes


class _Floor(web.RequestHandler):
    keys: _Keys

    def initialize(self, keys: _Keys) -> None:
        self.keys = keys

    def check_xsrf_cookie(self) -> None:
        """A header key, like the door's."""

    def _checked(self) -> bool:
        if self.keys.knows(self.request.headers.get("Authorization", "")):
            return True
        self.set_status(401)
        self.finish(b'{"error": "unauthorized"}')
        return False

    def get(self) -> None:
        if self._checked():
            self.set_header("Content-Type", "application/json")
            self.finish(_CARD)

    def post(self) -> None:
        if self._checked():
            self.set_header("Content-Type", "application/json")
            self.finish(_ANSWER)


class _Profile(_Floor):
    profiler: cProfile.Profile | None = None

    def post(self, action: str) -> None:  # type: ignore[override]
        if not self._checked():
            return
        if action == "start":
            _Profile.profiler = cProfile.Profile()
            _Profile.profiler.enable()
        elif _Profile.profiler is not None:
            _Profile.profiler.disable()
            _Profile.profiler.dump_stats(self.get_argument("path"))
            _Profile.profiler = None
        self.finish(b"{}")


def _jupyter_server_extension_points() -> list[dict[str, Any]]:
    return [{"module": "_floor"}]


def _load_jupyter_server_extension(serverapp: Any) -> None:
    data_dir = Path(serverapp.config["ConchApp"]["data_dir"])
    keys = _Keys(data_dir / "pairings.json")
    base = serverapp.base_url.rstrip("/")
    serverapp.web_app.add_handlers(
        ".*$",
        [
            (f"{base}/bench-floor/a2a", _Floor, {"keys": keys}),
            (f"{base}/bench-floor/card", _Floor, {"keys": keys}),
            (f"{base}/bench-floor/profile/(start|stop)", _Profile, {"keys": keys}),
        ],
    )
