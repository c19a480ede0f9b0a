"""Crash safety: SIGKILL mid-round and mid-write, and a full disk — nothing acknowledged is lost."""

from __future__ import annotations

import contextlib
import json
import sqlite3
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from ..support.jupyter_process import JupyterProcess, until
from ..support.scripted_models import Reply, ScriptedModels

pytestmark = pytest.mark.timeout(240)


def assert_data_whole(data_dir: Path) -> None:
    """No half-written row or file: SQLite's own check passes and every JSON file parses."""
    with contextlib.closing(sqlite3.connect(data_dir / "conch.sqlite3")) as db:
        assert db.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    for path in data_dir.rglob("*.json"):
        json.loads(path.read_text())
    assert not [p for p in data_dir.rglob("*") if ".tmp" in p.name]


def test_sigkill_while_a_reply_streams(server: JupyterProcess) -> None:
    with ScriptedModels() as models:
        models.responder = lambda body: Reply(
            chunks=[f"w{i} " for i in range(500)], delay_per_chunk=0.02
        )
        server.start()
        with server.client() as http:
            provider = {"kind": "openai", "model": "m", "base_url": models.openai_url}
            assert http.post(server.api("agents"), json={"name": "Slow", "provider": provider})
            chat = http.post(server.api("conversations"), json={"title": "crash"}).json()["id"]
            acked = http.post(
                server.api(f"conversations/{chat}/messages"), json={"text": "@Slow @Writer go"}
            ).json()["message_id"]
            until(lambda: models.requests)
            time.sleep(0.3)
            before = http.get(server.api(f"conversations/{chat}")).json()
        server.kill()
        assert_data_whole(server.data_dir)
        server.start()
        with server.client() as http:
            after = http.get(server.api(f"conversations/{chat}")).json()
        assert acked in [m["id"] for m in after["messages"]]
        assert after["messages"] == before["messages"]
        assert (after["round"], after["busy"]) == (None, False)
        asked = len(models.requests)
        time.sleep(0.3)
        assert len(models.requests) == asked  # no round resumes


@pytest.mark.parametrize("kill_after", [0.05, 0.3, 0.8])
def test_sigkill_while_messages_are_being_stored(server: JupyterProcess, kill_after: float) -> None:
    server.start()
    with server.client() as http:
        chat = http.post(server.api("conversations"), json={}).json()["id"]
    acked: list[str] = []
    stop = threading.Event()

    def post_many() -> None:
        with server.client(timeout=5) as http:
            while not stop.is_set():
                try:
                    r = http.post(
                        server.api(f"conversations/{chat}/messages"),
                        json={"text": f"note {len(acked)}"},
                    )
                except httpx.HTTPError:
                    return  # the server is gone
                if r.status_code == 202:
                    acked.append(r.json()["message_id"])

    writers = [threading.Thread(target=post_many) for _ in range(3)]
    for w in writers:
        w.start()
    until(lambda: acked)
    time.sleep(kill_after)
    server.kill()
    stop.set()
    for w in writers:
        w.join(10)
    assert acked, "no message was acknowledged before the kill"
    assert_data_whole(server.data_dir)
    server.start()
    with server.client() as http:
        after = http.get(server.api(f"conversations/{chat}")).json()
    stored = {m["id"] for m in after["messages"]}
    assert set(acked) <= stored
    assert (after["round"], after["busy"]) == (None, False)


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 16 MB filesystem of its own, so filling it touches nothing else."""
    mount = tmp_path / "small-disk"
    mount.mkdir()
    made = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=16M", "tmpfs", str(mount)],
        capture_output=True,
        text=True,
    )
    if made.returncode != 0:
        pytest.skip(f"cannot mount a small filesystem here: {made.stderr.strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def fill(disk: Path) -> Path:
    filler = disk / "filler"
    # Unbuffered: a buffered file would try to flush what did not fit when it closes, and how
    # much that is depends on how full the disk already was.
    with filler.open("wb", buffering=0) as out, contextlib.suppress(OSError):
        while True:
            out.write(b"\0" * 65536)
            out.flush()
    return filler


def test_a_full_disk_refuses_writes_in_words_and_damages_nothing(
    tmp_path: Path, small_disk: Path
) -> None:
    server = JupyterProcess(small_disk / "data", tmp_path / "root")
    try:
        server.start()
        with server.client() as http:
            chat = http.post(server.api("conversations"), json={}).json()["id"]
            http.post(server.api(f"conversations/{chat}/messages"), json={"text": "kept"})
            until(lambda: not http.get(server.api(f"conversations/{chat}")).json()["busy"])
            before = http.get(server.api(f"conversations/{chat}")).json()
            agents_before = (server.data_dir / "agents" / "agents.json").read_bytes()
            filler = fill(small_disk)

            r = http.post(server.api(f"conversations/{chat}/messages"), json={"text": "x" * 15_000})
            for _ in range(50):  # SQLite may still have room in pages it holds
                if r.status_code != 202:
                    break
                r = http.post(
                    server.api(f"conversations/{chat}/messages"), json={"text": "x" * 15_000}
                )
            assert r.status_code == 503, r.text
            assert r.json()["error"]["code"] == "storage"
            assert "full" in r.json()["error"]["message"]
            r = http.post(server.api("agents"), json={"name": "Newcomer"})
            assert r.status_code == 503
            assert (server.data_dir / "agents" / "agents.json").read_bytes() == agents_before

            during = http.get(server.api(f"conversations/{chat}")).json()
            assert during["messages"][: len(before["messages"])] == before["messages"]

            filler.unlink()
            r = http.post(server.api(f"conversations/{chat}/messages"), json={"text": "again"})
            assert r.status_code == 202
        server.stop()
        assert_data_whole(server.data_dir)
        server.start()
        with server.client() as http:
            after = http.get(server.api(f"conversations/{chat}")).json()
        assert after["messages"][: len(before["messages"])] == before["messages"]
        assert "again" in [m["text"] for m in after["messages"]]
        assert "Traceback" not in server.log()
    finally:
        server.stop()
