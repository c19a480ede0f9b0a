"""Someone else's card never decides where your words go (issue 16), end to end: a real Jupyter
server, real a2a-sdk peers that record every request, a scripted model for your Researcher.

An outside agent's name may not clash with one of yours (equal, a start of one another, alike to
the eye); a clash already there (old data, a hand-edited file) gives the mention to your agent,
says so in the chat, and sends nothing outside.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from conch_jupyter.a2a.outside.service import OutsideError
from conch_jupyter.client import AsyncConchClient
from conch_jupyter.widget import SettingsWidget

from ..support.a2a_peers import Peer
from ..support.api import Api, settled
from ..support.scripted_models import Reply, ScriptedModels

pytestmark = pytest.mark.timeout(90)

CYRILLIC_S = "\u0405"  # Ѕ, drawn like the Latin S


async def researcher_on(api: Api, models: ScriptedModels) -> None:
    """Your Researcher, answering through a scripted model that records what it was sent."""
    models.responder = lambda body: Reply(text="Your Researcher here.")
    provider = {"kind": "openai", "model": "m", "base_url": models.openai_url}
    status, _ = await api("PATCH", "agents/researcher", {"provider": provider})
    assert status == 200


async def ask(api: Api, text: str) -> dict[str, Any]:
    _, chat = await api("POST", "conversations", {})
    status, _ = await api("POST", f"conversations/{chat['id']}/messages", {"text": text})
    assert status == 202
    return await settled(api, chat["id"])


def rename_by_hand(conch_dir: Path, outside_id: str, name: str) -> None:
    """What a name kept from before the rule, or a hand edit, leaves in outside.json."""
    path = conch_dir / "agents" / "outside.json"
    stored = json.loads(path.read_text())
    (entry,) = [a for a in stored["agents"] if a["id"] == outside_id]
    entry["name"] = name
    path.write_text(json.dumps(stored))


async def test_a_card_named_researcher_please_cannot_take_your_researchers_words(
    api: Api, models: ScriptedModels, conch_dir: Path
) -> None:
    await researcher_on(api, models)
    with Peer(name="Researcher please", behaviour="echo") as peer:
        # Adding it as its card calls itself is refused in words, naming the clash.
        status, refused = await api("POST", "outside", {"paste": peer.address})
        assert (status, refused["error"]["code"]) == (409, "name_taken"), refused
        assert refused["error"]["message"] == (
            "The card calls this agent “Researcher please”, which starts with the name of your "
            "agent “Researcher”: a mention must say whom it means, so add it again with a name "
            "of its own."
        )
        assert (await api("GET", "outside"))[1] == {"outside": []}

        # The clash is there anyway (added before the rule; the file edited by hand).
        body = {"paste": peer.address, "name": "Acme Helper"}
        status, added = await api("POST", "outside", body)
        assert status == 201, added
        rename_by_hand(conch_dir, added["id"], "Researcher please")
        _, listed = await api("GET", "outside")
        assert [(a["name"], a["clashes_with"]) for a in listed["outside"]] == [
            ("Researcher please", "Researcher")
        ]

        chat = await ask(api, "@Researcher please summarise my notes: secret plans")

    # Your Researcher answered, and was handed the message.
    assert chat["events"][0]["type"] == "round.started"
    assert chat["events"][0]["named"] == ["researcher"]
    assert "round.asking" not in [e["type"] for e in chat["events"]]
    answers = [(m["role"], m.get("agent")) for m in chat["messages"] if m["role"] != "note"]
    assert answers == [("user", None), ("agent", "researcher")]
    assert len(models.requests) == 1
    assert "secret plans" in json.dumps(models.requests[0].json)
    # The chat says where the mention went, and that nothing went out.
    notes = [m["text"] for m in chat["messages"] if m["role"] == "note"]
    assert notes[0].startswith(
        "@Researcher please could mean your agent Researcher or the outside agent “Researcher "
        "please”: it went to Researcher. Nothing of this message was sent outside."
    )
    # The outside agent received nothing at all: no message, no task, not a word.
    assert peer.sends() == []
    assert all("secret" not in json.dumps(r.body) for r in peer.received)
    assert chat["tainted"] is None


@pytest.mark.parametrize(
    ("name", "how", "ours"),
    [
        ("Researcher please", "starts with", "Researcher"),
        ("Writer 2", "starts with", "Writer"),
        ("Writ", None, None),  # not followed by a separator in “Writer”: a name of its own
        ("WRITER", "is", "Writer"),  # case
        ("Ｗｒｉｔｅｒ", "is", "Writer"),  # width
        ("Wrîter", "is", "Writer"),  # an accent
        ("Wri\u034fter", "is", "Writer"),  # an invisible mark
        ("Wr\u0456ter", "looks like", "Writer"),  # a Cyrillic і
    ],
)
async def test_a_name_you_give_follows_the_rule(
    api: Api, name: str, how: str | None, ours: str | None
) -> None:
    with Peer() as peer:
        status, answer = await api("POST", "outside", {"paste": peer.address, "name": name})
        if how is None:
            assert (status, answer["name"]) == (201, name)
            return
        assert (status, answer["error"]["code"]) == (409, "name_taken"), answer
        assert answer["error"]["message"] == (
            f"“{name}” {how} the name of your agent “{ours}”: a mention must say whom it means, "
            "so pick another name."
        )
        assert peer.received == []  # refused before Conch called it


async def test_renaming_an_outside_agent(api: Api, conch_dir: Path) -> None:
    with Peer(behaviour="echo") as peer, Peer(name="Helper Two") as other:
        _, helper = await api("POST", "outside", {"paste": peer.address})
        assert helper["name"] == "Helper"
        for name, status, code in (
            ("Writer please", 409, "name_taken"),  # starts with your Writer
            ("researcher", 409, "name_taken"),
            ("@scout", 400, "invalid_name"),
            ("", 400, "invalid_name"),
        ):
            got, answer = await api("PATCH", f"outside/{helper['id']}", {"name": name})
            assert (got, answer["error"]["code"]) == (status, code), (name, answer)
            assert answer["error"]["message"]
        _, second = await api("POST", "outside", {"paste": other.address})
        got, answer = await api("PATCH", f"outside/{second['id']}", {"name": "HELPER"})
        assert (got, answer["error"]["code"]) == (409, "name_taken")
        assert answer["error"]["message"].startswith("An outside agent is already called “Helper”")
        assert (await api("PATCH", "outside/nobody", {"name": "Scout"}))[0] == 404
        assert (await api("PATCH", f"outside/{helper['id']}", {"nick": "x"}))[0] == 400

        # A name of its own: the id stays, and the new name is how it is mentioned.
        got, renamed = await api("PATCH", f"outside/{helper['id']}", {"name": " Field Scout "})
        assert got == 200, renamed
        assert (renamed["id"], renamed["name"]) == (helper["id"], "Field Scout")
        # Renaming an agent out of a clash gives it its mentions back.
        rename_by_hand(conch_dir, helper["id"], "Writer please")
        assert (await api("GET", f"outside/{helper['id']}"))[1]["clashes_with"] == "Writer"
        _, renamed = await api("PATCH", f"outside/{helper['id']}", {"name": "Field Scout"})
        assert renamed["clashes_with"] is None
        chat = await ask(api, "@Field Scout which trains run on Sunday?")
    assert [[p["text"] for p in r.body["params"]["message"]["parts"]] for r in peer.sends()] == [
        ["@Field Scout which trains run on Sunday?"]
    ]
    assert chat["events"][0]["named"] == [helper["id"]]


async def test_your_agents_cannot_clash_with_an_outside_agent_either(api: Api) -> None:
    with Peer(name="Scout Bot") as peer:
        status, _ = await api("POST", "outside", {"paste": peer.address})
        assert status == 201
    for method, path, name, how in (
        ("POST", "agents", "Scout", "is the start of"),
        ("POST", "agents", "Scout Bot please", "starts with"),
        ("POST", "agents", "scout bot", "is"),
        ("PATCH", "agents/writer", f"{CYRILLIC_S}cout Bot", "looks like"),
    ):
        status, answer = await api(method, path, {"name": name})
        assert (status, answer["error"]["code"]) == (409, "name_taken"), answer
        assert answer["error"]["message"] == (
            f"“{name}” {how} the name of the outside agent “Scout Bot”: a mention must say whom "
            "it means, so pick another name (or rename the outside agent)."
        )
    status, scouts = await api("POST", "agents", {"name": "Scouts"})
    assert (status, scouts["name"]) == (201, "Scouts")
    # Among your own agents: two names that read alike are one name.
    status, answer = await api("POST", "agents", {"name": "Wr\u0456ter"})
    assert (status, answer["error"]["code"]) == (409, "name_taken")


async def test_settings_names_and_renames_an_outside_agent(
    api: Api, jp_http_port: int, jp_base_url: str, jp_auth_header: dict[str, str]
) -> None:
    """The kernel side (the client and Settings) gives the name, and says a clash in words."""
    url = f"http://127.0.0.1:{jp_http_port}{jp_base_url}"
    token = jp_auth_header["Authorization"].split()[-1]
    widget = SettingsWidget("outside", client_factory=lambda: AsyncConchClient(url, token=token))
    widget.send = lambda content, buffers=None: None

    async def act(**content: Any) -> None:
        widget._on_view_message(widget, content, [])
        await widget.acting()

    with Peer(name="Writer") as peer:
        await act(type="outside.add", paste=peer.address)
        assert widget.problem["outside"].startswith("The card calls this agent “Writer”")
        await act(type="outside.add", paste=peer.address, name="Acme Writer")
        assert widget.problem["outside"] == ""
        (added,) = widget.outside
        assert added["name"] == "Acme Writer"
        await act(type="outside.rename", id=added["id"], name="Writer please")
        assert "starts with the name of your agent “Writer”" in widget.problem["outside"]
        await act(type="outside.rename", id=added["id"], name="Acme Scribe")
        assert [a["name"] for a in widget.outside] == ["Acme Scribe"]
    await widget.client().aclose()


async def test_nothing_is_sent_to_a_clashing_outside_agent_even_when_asked_directly(
    api: Api, jp_serverapp: Any, conch_dir: Path
) -> None:
    """The last guard, below the mention rules: the service itself will not send."""
    outside = jp_serverapp.web_app.settings["conch"].outside
    with Peer(behaviour="echo") as peer:
        _, added = await api("POST", "outside", {"paste": peer.address})
        rename_by_hand(conch_dir, added["id"], "Writer please")
        with pytest.raises(OutsideError) as refused:
            await outside.ask(added["id"], "my secret notes", None)
        assert refused.value.code == "name_taken"
        assert refused.value.message == (
            "Writer please was sent nothing: its name clashes with your agent's “Writer”, so "
            "give it a name of its own first."
        )
        assert peer.sends() == []
