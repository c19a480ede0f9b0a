"""agents.py: name rules, ids, the stored file, keys kept sealed and never shown."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from conch_jupyter.agents.agent_store import AgentError, AgentStore, check_name
from conch_jupyter.core.files import StoreError
from conch_jupyter.core.names import slug_of
from conch_jupyter.core.sealed import SealedFile
from conch_jupyter.providers.base import Price, ProviderConfig

from ..support.api import Clock

KEY = "sk-test-0a1b2c3d-agents-secret"
OFFLINE = {"kind": "offline", "model": "scripted"}


@pytest.fixture
def data(tmp_path: Path) -> Path:
    return tmp_path / "conch"


def make_store(data: Path) -> AgentStore:
    sealed = SealedFile(data / "models.secrets.json", data.parent / "conch-seal.key")
    return AgentStore(data / "agents" / "agents.json", sealed, Clock())


@pytest.fixture
def store(data: Path) -> AgentStore:
    return make_store(data)


# -- names ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("given", "kept"),
    [
        ("Writer", "Writer"),
        ("  Writer  ", "Writer"),
        ("名前", "名前"),
        ("Zoë", "Zoë"),
        ("Zoe\u0308", "Zoë"),  # decomposed, kept composed (NFC)
        ("हिन्दी", "हिन्दी"),  # combining marks inside a word
        ("Dr. Who", "Dr. Who"),
        ("a_b-c.d", "a_b-c.d"),
        ("3PO", "3PO"),
        ("x" * 40, "x" * 40),
    ],
)
def test_valid_names(given: str, kept: str) -> None:
    assert check_name(given) == kept


@pytest.mark.parametrize(
    ("given", "words"),
    [
        ("", "Give the agent a name."),
        ("   ", "Give the agent a name."),
        ("x" * 41, "at most 40 characters long (this one has 41)"),
        ("@x", "“@” is not allowed"),
        ("Writer 🙂", "“🙂” is not allowed"),
        ("a/b", "“/” is not allowed"),
        ("tab\tbed", "U+0009 is not allowed"),
        ("-x", "must start with a letter or a digit"),
        (".x", "must start with a letter or a digit"),
        ("_x", "must start with a letter or a digit"),
        ("\u0308x", "must start with a letter or a digit"),
    ],
)
def test_invalid_names(given: str, words: str) -> None:
    with pytest.raises(AgentError) as caught:
        check_name(given)
    assert caught.value.code == "invalid_name"
    assert words in caught.value.message


def test_names_are_unique_ignoring_case(store: AgentStore) -> None:
    store.create("Writer", provider=OFFLINE)
    with pytest.raises(AgentError) as caught:
        store.create("  wRITER ", provider=OFFLINE)
    assert caught.value.code == "name_taken"
    assert caught.value.message == (
        "An agent named “Writer” already exists (names are compared ignoring case, width, "
        "accents and invisible characters, and by how they look)."
    )


@pytest.mark.parametrize(
    ("name", "slug"),
    [("Writer", "writer"), ("Dr. Who", "dr-who"), ("a _.- b", "a-b"), ("名前", "名前")],
)
def test_slug_of(name: str, slug: str) -> None:
    assert slug_of(name) == slug


def test_ids_are_made_unique_and_survive_a_rename(store: AgentStore) -> None:
    assert store.create("Writer 2", provider=OFFLINE).id == "writer-2"
    assert store.create("Writer", provider=OFFLINE).id == "writer"
    renamed = store.update("writer", name="Scribe")
    assert (renamed.id, renamed.name) == ("writer", "Scribe")
    assert store.create("Writer", provider=OFFLINE).id == "writer-3"
    assert store.create("writer.", provider=OFFLINE).id == "writer-4"


# -- create, read, update, delete -----------------------------------------------------------------


def test_create_and_read_back(store: AgentStore, data: Path) -> None:
    made = store.create(
        "Writer",
        persona="Turns notes into prose.",
        instructions="Be brief.",
        provider={"kind": "openai", "model": "gpt-4.1", "base_url": "https://api.example/v1"},
        price={"input_per_mtok": 2.0, "output_per_mtok": 8.0},
        api_key=KEY,
    )
    again = make_store(data).get("writer")
    assert again == made
    assert made.price == Price(2.0, 8.0)
    assert made.provider == ProviderConfig("openai", "gpt-4.1", "https://api.example/v1")
    assert made.provider.api_key is None
    assert made.has_key
    assert store.api_key("writer") == KEY
    assert store.provider_for("writer").api_key == KEY
    assert [a.id for a in store.list()] == ["writer"]


def test_the_stored_file(store: AgentStore, data: Path) -> None:
    store.create("Writer", provider=OFFLINE, api_key=KEY)
    path = data / "agents" / "agents.json"
    stored = json.loads(path.read_text())
    assert stored["version"] == 1
    assert [a["id"] for a in stored["agents"]] == ["writer"]
    assert KEY not in path.read_text()
    assert KEY.encode() not in (data / "models.secrets.json").read_bytes()
    if os.name != "nt":
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700


def test_public_views_never_show_a_key(store: AgentStore) -> None:
    made = store.create(
        "Writer",
        persona="p",
        instructions="private",
        provider={**OFFLINE, "api_key": KEY},  # the HTTP body's shape
    )
    assert store.api_key("writer") == KEY
    public = made.to_public()
    assert set(public) == {
        "id",
        "name",
        "persona",
        "instructions",
        "provider",
        "price",
        "has_key",
        "created",
        "mcp",
    }
    assert public["provider"] == {"kind": "offline", "model": "scripted", "base_url": None}
    assert public["has_key"] is True
    assert made.to_public(False)["has_key"] is False
    assert made.card_view() == {"id": "writer", "name": "Writer", "persona": "p"}
    for shown in (json.dumps(public), json.dumps(made.card_view()), repr(made), repr(store)):
        assert KEY not in shown
    assert "private" not in json.dumps(made.card_view())


@pytest.mark.parametrize(
    ("fields", "words"),
    [
        ({"persona": "x" * 2001}, "at most 2,000 characters (this one has 2,001)"),
        ({"instructions": "x" * 20_001}, "at most 20,000 characters"),
        ({"provider": {"kind": "gemini"}}, "provider.kind"),
        ({"provider": {"kind": "openai", "base_url": "ftp://x"}}, "must start with http"),
        ({"price": {"input_per_mtok": -1, "output_per_mtok": 0}}, "greater than or equal to 0"),
        ({"price": {"input_per_mtok": float("inf")}}, "finite"),
        ({"provider": None}, "Say which provider"),
    ],
)
def test_invalid_fields(store: AgentStore, fields: dict[str, object], words: str) -> None:
    create = {"name": "Writer", "provider": OFFLINE, **fields}
    with pytest.raises(AgentError) as caught:
        store.create(**create)  # type: ignore[arg-type]
    assert caught.value.code == "invalid"
    assert words in caught.value.message
    assert store.list() == []


def test_limits_are_inclusive(store: AgentStore) -> None:
    made = store.create("Writer", "p" * 2000, "i" * 20_000, provider=OFFLINE)
    assert len(made.persona) == 2000


def test_update(store: AgentStore) -> None:
    store.create("Writer", provider=OFFLINE, api_key=KEY)
    store.create("Researcher", provider=OFFLINE)
    changed = store.update("writer", persona="new", instructions="now", price=Price(1, 2))
    assert (changed.persona, changed.instructions, changed.price) == ("new", "now", Price(1, 2))
    assert store.update("writer", name="WRITER").name == "WRITER"  # its own name, other case
    with pytest.raises(AgentError) as caught:
        store.update("writer", name="researcher")
    assert caught.value.code == "name_taken"
    with pytest.raises(AgentError) as caught:
        store.update("writer", name="@")
    assert caught.value.code == "invalid_name"
    assert store.update("writer", price=None).price is None
    assert store.update("writer", provider={"model": "v2"}).provider.model == "v2"
    assert store.api_key("writer") == KEY  # same provider, key kept
    with pytest.raises(AgentError) as caught:
        store.update("writer", id="other")
    assert caught.value.code == "invalid"
    with pytest.raises(AgentError) as caught:
        store.update("nobody", persona="x")
    assert caught.value.code == "not_found"
    assert store.get("writer").name == "WRITER"


def test_update_keys(store: AgentStore) -> None:
    store.create("Writer", provider={"kind": "openai", "model": "m"}, api_key=KEY)
    assert store.update("writer", api_key=None).has_key
    assert not store.update("writer", api_key="").has_key
    assert store.update("writer", api_key=" new-key\n").has_key
    assert store.api_key("writer") == "new-key"
    # A key must not follow the agent to another provider or address unless given again.
    assert not store.update("writer", provider={"kind": "anthropic"}).has_key
    store.update("writer", provider={"base_url": "https://a.example"}, api_key=KEY)
    assert store.has_key("writer")
    assert not store.update("writer", provider={"base_url": "https://b.example"}).has_key
    updated = store.update("writer", provider={"base_url": "", "api_key": "k2"})
    assert updated.provider.base_url is None
    assert store.api_key("writer") == "k2"


def test_delete_removes_the_key_and_a_new_agent_starts_without_one(store: AgentStore) -> None:
    store.create("Writer", provider=OFFLINE, api_key=KEY)
    store.delete("writer")
    assert store.list() == []
    assert store.api_key("writer") is None
    with pytest.raises(AgentError) as caught:
        store.delete("writer")
    assert caught.value.code == "not_found"
    with pytest.raises(AgentError):
        store.get("writer")
    assert not store.create("Writer", provider=OFFLINE).has_key


def test_ensure_defaults_only_on_the_first_start(store: AgentStore, data: Path) -> None:
    provider = ProviderConfig("openai", "gpt-4.1-mini", api_key=KEY)
    made = store.ensure_defaults(provider)
    assert [a.name for a in made] == ["Researcher", "Writer"]
    assert [a.id for a in store.list()] == ["researcher", "writer"]
    assert "sources" in made[0].persona
    assert "prose" in made[1].persona
    assert all(a.provider.model == "gpt-4.1-mini" and a.has_key for a in made)
    for agent in made:
        store.delete(agent.id)
    assert make_store(data).ensure_defaults(provider) == []  # the file exists, with no agents
    assert store.list() == []


# -- hand edits -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ('{"version": 1,\n "agents": [\n  oops]}', "is not valid JSON (line 3)"),
        ('{"version": 2, "agents": []}', "version"),
        (
            '{"version": 1, "agents": [{"id": "x", "name": "@x", "provider": {"kind": "offline"},'
            ' "created": 1}]}',
            "“@” is not allowed",
        ),
        (
            '{"version": 1, "agents": [{"id": "Not A Slug", "name": "x",'
            ' "provider": {"kind": "offline"}, "created": 1}]}',
            "is not an agent id",
        ),
    ],
)
def test_a_broken_hand_edit_is_named_and_never_overwritten(
    store: AgentStore, data: Path, text: str, words: str
) -> None:
    path = data / "agents" / "agents.json"
    path.parent.mkdir(parents=True)
    path.write_text(text)
    for attempt in (store.list, lambda: store.create("Writer", provider=OFFLINE)):
        with pytest.raises(StoreError) as caught:
            attempt()
        assert str(path) in str(caught.value)
        assert words in str(caught.value)
    assert store.ensure_defaults(ProviderConfig("offline")) == []
    assert path.read_text() == text


def test_duplicates_in_a_hand_edit_are_named(store: AgentStore, data: Path) -> None:
    store.create("Writer", provider=OFFLINE)
    store.create("Scribe", provider=OFFLINE)
    path = data / "agents" / "agents.json"
    stored = json.loads(path.read_text())
    stored["agents"][1]["name"] = "WRITER"
    path.write_text(json.dumps(stored))
    with pytest.raises(StoreError, match="two agents are named"):
        store.list()


def test_fields_this_version_does_not_know_survive_a_write(store: AgentStore, data: Path) -> None:
    store.create("Writer", provider=OFFLINE)
    path = data / "agents" / "agents.json"
    stored = json.loads(path.read_text())
    stored["note"] = "kept"
    stored["agents"][0]["colour"] = "teal"
    path.write_text(json.dumps(stored))
    store.update("writer", persona="changed")
    store.create("Scribe", provider=OFFLINE)
    again = json.loads(path.read_text())
    assert again["note"] == "kept"
    assert again["agents"][0]["colour"] == "teal"
    assert again["agents"][0]["persona"] == "changed"


def test_a_name_with_spaces_around_in_the_file_is_trimmed(store: AgentStore, data: Path) -> None:
    path = data / "agents" / "agents.json"
    path.parent.mkdir(parents=True)
    path.write_text(
        '{"version": 1, "agents": [{"id": "writer", "name": " Writer ",'
        ' "provider": {"kind": "offline"}, "created": 1}]}'
    )
    assert store.get("writer").name == "Writer"


def test_a_hand_edit_is_seen_at_once_despite_the_read_cache(store: AgentStore, data: Path) -> None:
    store.create("Writer", persona="short", provider={"kind": "offline"})
    assert store.get("writer").persona == "short"
    path = data / "agents" / "agents.json"
    stored = json.loads(path.read_text())
    stored["agents"][0]["persona"] = "edited by hand"
    path.write_text(json.dumps(stored))
    assert store.get("writer").persona == "edited by hand"
    store.update("writer", persona="x")
    assert store.get("writer").persona == "x"
