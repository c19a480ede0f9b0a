"""Two Jupyter servers on loopback: one pairs its Researcher, the other pastes and asks it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from ..support.jupyter_process import JupyterProcess, until

pytestmark = pytest.mark.timeout(180)


@pytest.fixture
def servers(tmp_path: Path) -> Iterator[tuple[JupyterProcess, JupyterProcess]]:
    home = JupyterProcess(tmp_path / "home-data", tmp_path / "home-root", base_url="/user/ann/")
    away = JupyterProcess(tmp_path / "away-data", tmp_path / "away-root", base_url="/user/bob/")
    try:
        home.start()
        away.start()
        yield home, away
    finally:
        home.stop()
        away.stop()


def test_a_paired_agent_answers_another_server(
    servers: tuple[JupyterProcess, JupyterProcess],
) -> None:
    home, away = servers
    with home.client() as http:
        r = http.post(home.api("pairings"), json={"agents": ["researcher"], "remote": False})
        assert r.status_code == 201, r.text
        pairing = r.json()
    paste = pairing["paste"]
    assert paste.startswith("Conch pairing for Researcher\n")
    assert f"\nAddress: {home.url}a2a/researcher/\n" in paste

    with away.client() as http:
        r = http.post(away.api("outside"), json={"paste": paste})
        # Its own Researcher is there already: the paired one needs a name of its own.
        assert (r.status_code, r.json()["error"]["code"]) == (409, "name_taken"), r.text
        r = http.post(away.api("outside"), json={"paste": paste, "name": "Home Researcher"})
        assert r.status_code == 201, r.text
        outside = r.json()
        assert outside["name"] == "Home Researcher"
        assert outside["has_key"] is True
        assert pairing["key"] not in r.text
        chat = http.post(away.api("conversations"), json={}).json()["id"]
        question = "@Home Researcher what would you look at first?"
        r = http.post(away.api(f"conversations/{chat}/messages"), json={"text": question})
        assert r.status_code == 202
        done = until(
            lambda: (c := http.get(away.api(f"conversations/{chat}")).json())["busy"] is False and c
        )
    answers = [m for m in done["messages"] if m["role"] == "outside"]
    assert len(answers) == 1, done["messages"]
    assert "offline" in answers[0]["text"].lower()
    assert "Researcher" in answers[0]["text"]
    assert done["tainted"] == {"kind": "person", "by": "Home Researcher"}

    # "What it said", on the home side: the question as it came, and the answer.
    with home.client() as http:
        chats = http.get(home.api(f"pairings/{pairing['id']}/chats")).json()["chats"]
        assert len(chats) == 1
        peer_chat = http.get(home.api(f"conversations/{chats[0]['id']}")).json()
        assert [c["id"] for c in http.get(home.api("conversations")).json()["conversations"]] == []
    said = [(m["role"], m["text"]) for m in peer_chat["messages"]]
    assert said[0] == ("outside", question)
    assert said[-1][0] == "agent"
    assert said[-1][1] == answers[0]["text"]
    assert peer_chat["tainted"] is not None

    # Revoking on the home side shuts the door at once; the away side says so in words.
    with home.client() as http:
        assert http.delete(home.api(f"pairings/{pairing['id']}")).status_code == 204
    with away.client() as http:
        r = http.post(
            away.api(f"conversations/{chat}/messages"), json={"text": "@Home Researcher again?"}
        )
        assert r.status_code == 202
        done = until(
            lambda: (c := http.get(away.api(f"conversations/{chat}")).json())["busy"] is False and c
        )
        assert [m["role"] for m in done["messages"]].count("outside") == 1
        assert done["messages"][-1]["role"] == "note"
        assert "Home Researcher did not answer" in done["messages"][-1]["text"]
        listed = http.get(away.api("outside")).json()["outside"]
        assert listed[0]["last_problem"]
