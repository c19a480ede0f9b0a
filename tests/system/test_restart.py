"""A restart forgets the round: nothing resumes, nothing said is lost, the chat keeps its agent."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from ..support.jupyter_process import JupyterProcess, until
from ..support.scripted_models import Reply, ScriptedModels

pytestmark = pytest.mark.timeout(180)


@pytest.mark.parametrize("how", ["kill", "stop"])
def test_a_restart_mid_round_forgets_the_round(server: JupyterProcess, how: str) -> None:
    with ScriptedModels() as models:
        calls: list[str] = []

        def respond(body: Any) -> Reply:
            system = body["messages"][0]["content"]
            calls.append(system.split(".")[0])
            if system.startswith("You are Researcher"):
                return Reply(text="Three options. @Writer over to you.")
            return Reply(chunks=[f"slow{i} " for i in range(400)], delay_per_chunk=0.05)

        models.responder = respond
        server.start()
        with server.client() as http:
            for default in ("researcher", "writer"):
                assert http.delete(server.api(f"agents/{default}")).status_code == 204
            for name in ("Researcher", "Writer"):
                provider = {"kind": "openai", "model": "m", "base_url": models.openai_url}
                r = http.post(server.api("agents"), json={"name": name, "provider": provider})
                assert r.status_code == 201, r.text
            chat_id = http.post(server.api("conversations"), json={}).json()["id"]
            r = http.post(
                server.api(f"conversations/{chat_id}/messages"),
                json={"text": "@Researcher find options"},
            )
            assert r.status_code == 202

            def writer_streaming() -> bool:
                """The Writer has the floor and has said its first words (its turn alone is not
                enough: on a busy machine the stop can come before it said any)."""
                chat = http.get(server.api(f"conversations/{chat_id}")).json()
                speaking = bool(chat["round"]) and chat["round"]["speaker"] == "writer"
                return speaking and "slow0" in json.dumps(chat.get("streaming"))

            until(writer_streaming)
            before = http.get(server.api(f"conversations/{chat_id}")).json()

        server.kill() if how == "kill" else server.stop()
        server.start()
        with server.client() as http:
            after = http.get(server.api(f"conversations/{chat_id}")).json()
            assert after["round"] is None
            assert after["busy"] is False
            # Every message stored before the restart is still there, unchanged.
            assert after["messages"][: len(before["messages"])] == before["messages"]
            roles = [m["role"] for m in after["messages"]]
            last = "researcher" if how == "kill" else "writer"
            if how == "kill":
                assert roles == ["user", "note", "agent", "note"]
                assert after["agent"] == "researcher"  # whoever spoke last
            else:
                # A server that stops in order cuts the running reply like Stop does: what was
                # said is kept (and billed), so Writer spoke last.
                assert roles == ["user", "note", "agent", "note", "agent"]
                assert after["messages"][-1]["text"].startswith("slow0 ")
                assert after["agent"] == "writer"
            events = [e["type"] for e in after["events"]]
            assert events == ["round.started"]  # it never ended, and it does not resume
            asked = len(models.requests)
            time.sleep(0.5)
            assert len(models.requests) == asked  # nothing resumed after the restart

            models.responder = lambda body: Reply(text="Here I am.")
            r = http.post(server.api(f"conversations/{chat_id}/messages"), json={"text": "go on"})
            assert r.status_code == 202
            done = until(
                lambda: (
                    (c := http.get(server.api(f"conversations/{chat_id}")).json())["busy"] is False
                    and c
                )
            )
            assert done["messages"][-1]["agent"] == last  # the chat's agent answers on
            assert done["messages"][-1]["text"] == "Here I am."


def test_the_server_log_never_holds_a_key(server: JupyterProcess) -> None:
    server.start()
    with server.client() as http:
        r = http.post(
            server.api("agents"),
            json={"name": "Keyed", "provider": {"kind": "openai", "api_key": "sk-very-secret-9"}},
        )
        assert r.status_code == 201
        assert "sk-very-secret-9" not in r.text
    server.stop()
    assert "sk-very-secret-9" not in server.log()
    data = b"".join(p.read_bytes() for p in server.data_dir.rglob("*") if p.is_file())
    assert b"sk-very-secret-9" not in data
