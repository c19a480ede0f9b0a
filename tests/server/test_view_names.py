"""The @ picker compares names as the server does (issue 16): js/mentions.js's key and clash rule
against core/names.py's, and the roster that tells the view which outside agent clashes with one
of yours (a real Jupyter server, a real a2a-sdk peer, a hand-edited file), read by the view's
timeline (js/timeline.js, the only one: the kernel passes the roster on raw) into the entries
the picker may offer.
"""

from __future__ import annotations

import asyncio
import json
import unicodedata
from pathlib import Path
from typing import Any

import httpx
import pytest

from conch_jupyter.core.names import clash, name_key

from ..support.a2a_peers import Peer
from ..support.api import Api
from ..unit.test_view_js import _node, _run
from .test_outside_names import rename_by_hand

pytestmark = pytest.mark.timeout(90)

NAMES = [
    "Researcher",
    "researcher",
    "ＲＥＳＥＡＲＣＨＥＲ",  # full width
    "Reséarcher",  # a precomposed accent
    "Rese\u0301archer",  # a combining one
    "Re\u200bsearcher",  # a zero-width space
    "Re\u00adsearcher",  # a soft hyphen
    "Re\u2060searcher\ufeff",  # a word joiner, a byte-order mark
    "Reseаrcher",  # a Cyrillic а: a look-alike, not the same key
    "Researcher  please",
    "Straße",
    "STRASSE",
    "ΣΟΦΟΣ",
    "σοφος",
    "Data Bot",
    "data-bot",
    "ﬁnder",  # a ligature
    "Ⅻ Scout",  # a Roman numeral
    "écrivain",
    "Écrivain 2",
    "Ἀθηνᾶ",
    "Ǆemal",
    "İstanbul",
    "Ꭰ Cherokee",
    "東京 Bot",
    "한국어",
]

KEYS_IN_NODE = """
import { clashes, nameKey } from "./js/mentions.js";
let text = "";
for await (const chunk of process.stdin) text += chunk;
const { names, pairs } = JSON.parse(text);
console.log(JSON.stringify({
  keys: names.map(nameKey),
  clashes: pairs.map(([a, b]) => clashes(a, b)),
}));
"""

# names.clash's words when the names clash by key (the rest are look-alikes, the server's to see).
BY_KEY = {"is", "starts with", "is the start of"}


def _in_node(script: str, data: object) -> object:
    ran = _run(_node(), "--input-type=module", "-e", script, stdin=json.dumps(data))
    assert ran.returncode == 0, ran.stderr[-3000:]
    return json.loads(ran.stdout)


def test_the_picker_keys_names_as_the_server_does() -> None:
    pairs = (
        [
            ("Researcher please", "Researcher"),
            ("Research", "research-desk"),
            ("RESEARCHER.bot", "Re\u200bsearcher"),
            ("Researchers", "Researcher"),
            ("Writer", "Ghostwriter"),
            ("Reseаrcher", "Researcher"),  # alike to the eye only: not by key
            ("ﬁnder", "Finder 2"),
            ("Straße", "strasse"),
        ]
        + [(a, b) for a in NAMES[:9] for b in NAMES[:9]]
    )
    got = _in_node(KEYS_IN_NODE, {"names": NAMES, "pairs": pairs})
    assert isinstance(got, dict)
    assert got["keys"] == [name_key(n) for n in NAMES]
    assert got["clashes"] == [clash(a, b) in BY_KEY for a, b in pairs]
    # The cases differ where they should: the rule is not trivially true or false.
    assert len(set(got["keys"])) < len(NAMES)
    assert True in got["clashes"]
    assert False in got["clashes"]


EVERY_CHARACTER_IN_NODE = """
import { nameKey } from "./js/mentions.js";
let text = "";
for await (const chunk of process.stdin) text += chunk;
const vanish = /^[\\p{Default_Ignorable_Code_Point}\\p{Mn}\\p{Me}]$/u;
console.log(JSON.stringify(JSON.parse(text).map((code) => {
  const ch = String.fromCodePoint(code);
  return [nameKey(`A${ch}b`), vanish.test(ch)];
})));
"""


def _vanishes(ch: str) -> bool:
    """Whether core/names.py drops `ch` from a key (invisible, or a mark), by this Python."""
    return unicodedata.category(ch) in ("Mn", "Me") or name_key(f"a{ch}b") == "ab"


def test_every_character_keys_as_the_server_keys_it() -> None:
    """Each assigned character, inside a name, keys alike in the view and the server; except where
    this Node's and this Python's Unicode versions disagree on what a character is."""
    codes = [c for c in range(0x110000) if unicodedata.category(chr(c)) not in ("Cn", "Cs", "Co")]
    got = _in_node(EVERY_CHARACTER_IN_NODE, codes)
    assert isinstance(got, list)
    differ, drifted = [], []
    for code, (key, vanishes_in_node) in zip(codes, got, strict=True):
        ch = chr(code)
        if key != name_key(f"A{ch}b"):
            # Unicode moved it between versions (a mark become a letter, or one newly invisible).
            drift = vanishes_in_node != _vanishes(ch) and unicodedata.category(ch)[0] in "MC"
            (drifted if drift else differ).append(f"U+{code:04X} {unicodedata.name(ch, '?')}")
    assert differ == []
    assert len(drifted) < 50, drifted


MENTIONS_IN_NODE = """
import { ChatState } from "./js/timeline.js";
import { offered } from "./js/mentions.js";
let text = "";
for await (const chunk of process.stdin) text += chunk;
const state = new ChatState();
state.take(JSON.parse(text));
const all = state.names.mentions();
console.log(JSON.stringify({ all, offered: offered(all, "") }));
"""


def test_the_view_offers_entries_from_a_roster() -> None:
    roster = {
        "agents": [{"id": "researcher", "name": "Researcher"}, {"id": "writer", "name": "Writer"}],
        "outside": [
            {"id": "helper", "name": "Helper", "clashes_with": None},
            {"id": "researcher-please", "name": "Researcher please", "clashes_with": "Researcher"},
            {"id": "wr", "name": "Wr\u0456ter", "clashes_with": "Writer"},
        ],
    }
    chat = {"messages": [], "events": [], "roster": roster}
    got = _in_node(MENTIONS_IN_NODE, {"type": "snapshot", "conversation": chat})
    assert isinstance(got, dict)
    assert got["all"] == [
        {"name": "Researcher", "outside": False},
        {"name": "Writer", "outside": False},
        {"name": "Helper", "outside": True, "clashes_with": None},
        {"name": "Researcher please", "outside": True, "clashes_with": "Researcher"},
        {"name": "Wr\u0456ter", "outside": True, "clashes_with": "Writer"},
    ]
    assert [m["name"] for m in got["offered"]] == ["Researcher", "Writer", "Helper"]


async def test_the_roster_names_the_agent_of_yours_an_outside_agent_clashes_with(
    api: Api, conch_dir: Path
) -> None:
    with Peer(name="Helper") as peer, Peer(name="Scout") as scout:
        status, helper = await api("POST", "outside", {"paste": peer.address})
        assert status == 201, helper
        status, _ = await api("POST", "outside", {"paste": scout.address})
        assert status == 201
    _, chat = await api("POST", "conversations", {})
    # A hand edit gives the outside agent a name that looks like your Researcher's.
    rename_by_hand(conch_dir, helper["id"], "Reseаrcher")
    _, read = await api("GET", f"conversations/{chat['id']}")
    assert read["roster"]["outside"] == [
        {"id": helper["id"], "name": "Reseаrcher", "clashes_with": "Researcher"},
        {"id": "scout", "name": "Scout", "clashes_with": None},
    ]
    got = _in_node(MENTIONS_IN_NODE, {"type": "snapshot", "conversation": read})
    assert isinstance(got, dict)
    assert got["all"][2:] == [
        {"name": "Reseаrcher", "outside": True, "clashes_with": "Researcher"},
        {"name": "Scout", "outside": True, "clashes_with": None},
    ]


async def test_every_followed_chat_hears_names_added_renamed_and_removed(
    api: Api, jp_http_port: int, jp_base_url: str, jp_auth_header: Any
) -> None:
    """Issue 23, item 2: an agent added in Settings reaches every open view at once (a `roster`
    item on each followed chat's stream), and so do a rename and a removal."""
    _, first = await api("POST", "conversations", {})
    _, second = await api("POST", "conversations", {})
    base = f"http://127.0.0.1:{jp_http_port}{jp_base_url}conch/api/conversations"

    async def rosters(chat_id: str, changes: int, out: list[list[str]]) -> None:
        async with (
            httpx.AsyncClient(headers=jp_auth_header, timeout=10) as http,
            http.stream("GET", f"{base}/{chat_id}/events") as response,
        ):
            async for line in response.aiter_lines():
                if line.startswith("data:"):
                    item = json.loads(line[5:])
                    if item["type"] == "roster":
                        out.append([a["name"] for a in item["roster"]["agents"]])
                        if len(out) == changes:
                            return
                    elif item["type"] == "snapshot":
                        out.append([])  # following now

    heard: tuple[list[list[str]], list[list[str]]] = ([], [])
    followers = [
        asyncio.create_task(rosters(chat["id"], 4, seen))
        for chat, seen in zip((first, second), heard, strict=True)
    ]
    while not all(heard):  # both streams are open
        await asyncio.sleep(0.02)
    status, fox = await api("POST", "agents", {"name": "Fox"})
    assert status == 201
    await api("PATCH", f"agents/{fox['id']}", {"name": "Foxglove"})
    await api("DELETE", f"agents/{fox['id']}")
    await asyncio.wait_for(asyncio.gather(*followers), 10)
    for seen in heard:
        assert seen[1:] == [
            ["Researcher", "Writer", "Fox"],
            ["Researcher", "Writer", "Foxglove"],
            ["Researcher", "Writer"],
        ]
