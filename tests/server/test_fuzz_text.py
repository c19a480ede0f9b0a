"""No text kills a turn (issue 21, item 3), under hypothesis: lone surrogates, NUL, C0 and C1
controls, bidi and zero-width characters, and huge strings, at every place text enters Conch —
a model's stream (its text and its tool calls' arguments, in both wire formats), a kernel's
output and a notebook's text, an outside agent's answer (a real a2a-sdk peer, and a hand-written
one for what the SDK cannot send), a door message, an API body. Every round ends with a
`round.ended` event and a reason, every door task ends, and the SQLite file holds nothing it
cannot hold (it is read back, every column of every row).
"""

from __future__ import annotations

import json
import os
import re
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conch_jupyter.core.text import clean_json, clean_text
from conch_jupyter.rounds.engine import ROUND_END_WORDS

from ..support.a2a_peers import Answer, Hostile, Peer
from ..support.jupyter_process import JupyterProcess, until
from ..support.scripted_models import Reply, ScriptedModels

pytestmark = pytest.mark.timeout(900)

# Pure cleaning takes many examples; the server-level fuzz a few dozen (each is a round).
EXAMPLES = int(os.environ.get("CONCH_FUZZ_EXAMPLES", "300"))
SERVER_EXAMPLES = int(os.environ.get("CONCH_FUZZ_SERVER_EXAMPLES", "36"))
SLOW = [HealthCheck.function_scoped_fixture, HealthCheck.too_slow, HealthCheck.data_too_large]

HOSTILE = [
    "\ud800", "\udfff", "\udc80", "\x00", "\x07", "\x1b[31m", "\x7f", "\x85", "\x9b", "\r",
    "\u202e", "\u2066", "\u200b", "\u200d", "\ufeff", "\u2028", "\t", "\n", "`", "@",
]  # fmt: skip
pieces = st.sampled_from(HOSTILE) | st.text(max_size=6)


class Huge(str):
    """A huge string with a short repr, so hypothesis can say which one failed."""

    def __repr__(self) -> str:
        return f"Huge({self[:1]!r} * {len(self):,})"


hostile = st.lists(pieces, min_size=1, max_size=12).map("".join) | st.builds(
    lambda piece, times: Huge(piece * times),
    st.sampled_from(["\ud800", "\x00", "\u202e", "a"]),
    st.sampled_from([17_000, 120_000]),
)


def as_json(value: Any) -> bytes:
    """A body as a client sends it: a lone surrogate goes as its \\u escape (httpx's json=
    cannot send one at all)."""
    return json.dumps(value).encode()


JSON = {"Content-Type": "application/json"}
_SURROGATE = re.compile("[\ud800-\udfff]")
# What clean_text never leaves: controls but tab and line feed, zero-width, bidi, surrogates.
_UNSHOWABLE = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\u200b-\u200d\u202a-\u202e\u2060\u2066-\u2069\ufeff\ud800-\udfff]"
)


# --- the cleaning itself -------------------------------------------------------------------


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=SLOW)
@given(text=hostile | st.text())
def test_clean_text_leaves_only_text_that_can_be_stored_and_shown(text: str) -> None:
    cleaned = clean_text(text)
    cleaned.encode("utf-8")  # never a lone surrogate
    assert not _UNSHOWABLE.search(cleaned)
    assert clean_text(cleaned) == cleaned
    assert len(cleaned) <= len(text)
    # Code keeps its shape: tabs and line breaks stay.
    assert cleaned.count("\t") == text.count("\t")


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=SLOW)
@given(
    value=st.recursive(
        st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | hostile,
        lambda inner: st.lists(inner, max_size=3) | st.dictionaries(hostile, inner, max_size=3),
        max_leaves=8,
    )
)
def test_clean_json_cleans_every_string_and_keeps_the_shape(value: Any) -> None:
    cleaned = clean_json(value)
    text = json.dumps(cleaned, ensure_ascii=False)
    text.encode("utf-8")
    assert not _UNSHOWABLE.search(text.replace("\\u", ""))
    if not isinstance(value, dict):  # keys may meet once cleaned
        assert type(cleaned) is type(value) or isinstance(value, str)


# --- every entry point, on a real server ---------------------------------------------------


class World:
    """One server with everything text can come in through, shared by the examples."""

    def __init__(self, root: Path) -> None:
        self.models = ScriptedModels()
        self.server = JupyterProcess(root / "data", root / "root")
        self.peer = Peer(name="Helper", reply="Hello")
        self.stranger_says = "Hello"
        self.stranger = Hostile(self._stranger)
        self.http: httpx.Client
        self.door: dict[str, Any] = {}
        self.kernel_id = ""
        self.asked = 0

    def _stranger(self, method: str, path: str, body: Any) -> Answer:
        """An outside agent that says what the SDK cannot: lone surrogates, in any field."""
        if method == "GET":
            interface = {"url": f"{self.stranger.url}/a2a", "protocolBinding": "JSONRPC",
                         "protocolVersion": "1.0"}  # fmt: skip
            return Answer.json(
                {
                    "name": "Stranger",
                    "description": self.stranger_says,
                    "version": "1",
                    "supportedInterfaces": [interface],
                    "capabilities": {},
                    "defaultInputModes": ["text/plain"],
                    "defaultOutputModes": ["text/plain"],
                    "skills": [],
                }
            )
        said = self.stranger_says
        message = {"messageId": said[:40] or "m", "role": "ROLE_AGENT",
                   "parts": [{"text": said}], "contextId": said[:60]}  # fmt: skip
        return Answer.json({"jsonrpc": "2.0", "id": body.get("id"), "result": {"message": message}})

    def api(self, path: str) -> str:
        return self.server.api(path)

    def start(self) -> None:
        self.models.__enter__()
        self.models.responder = lambda body: Reply(text="Fine.")
        self.peer.__enter__()
        self.stranger.__enter__()
        root = self.server.root_dir
        root.mkdir(parents=True, exist_ok=True)
        write_notebook(root, "Sales")
        self.server.start()
        self.http = self.server.client(timeout=60)
        for name, kind, url in (
            ("Coder", "openai", self.models.openai_url),
            ("Scribe", "anthropic", self.models.anthropic_url),
        ):
            body = {"name": name, "provider": {"kind": kind, "model": "m", "base_url": url}}
            assert self.http.post(self.api("agents"), json=body).status_code == 201
        for paste in (self.peer.address, self.stranger.url):
            added = self.http.post(self.api("outside"), json={"paste": paste})
            assert added.status_code == 201, added.text
        made = self.http.post(self.api("pairings"), json={"agents": ["coder"], "remote": False})
        assert made.status_code == 201, made.text
        self.door = made.json()
        session = self.http.post(
            f"{self.server.url}api/sessions",
            json={"path": "work.ipynb", "type": "notebook", "kernel": {"name": "python3"}},
        )
        self.kernel_id = session.json()["kernel"]["id"]
        self.server.connect_kernel(self.kernel_id).stop_channels()  # once it answers

    def stop(self) -> None:
        self.http.close()
        self.server.stop()
        self.stranger.__exit__()
        self.peer.__exit__()
        self.models.__exit__()

    def chat(self, mode: str = "auto") -> str:
        made = self.http.post(self.api("conversations"), json={"path": "work.ipynb"})
        chat_id = str(made.json()["id"])
        assert self.http.patch(self.api(f"conversations/{chat_id}"), json={"mode": mode}).is_success
        return chat_id

    def say(self, chat_id: str, text: str) -> httpx.Response:
        path = self.api(f"conversations/{chat_id}/messages")
        return self.http.post(path, content=as_json({"text": text}), headers=JSON)

    def settled(self, chat_id: str) -> dict[str, Any]:
        def done() -> dict[str, Any] | None:
            chat: dict[str, Any] = self.http.get(self.api(f"conversations/{chat_id}")).json()
            return None if chat["busy"] else chat

        found: dict[str, Any] = until(done, 90)
        return found

    def send_at_the_door(self, text: str) -> None:
        self.asked += 1
        call = {"jsonrpc": "2.0", "id": self.asked, "method": "SendMessage",
                "params": {"message": {"messageId": f"m-{self.asked}", "role": "ROLE_USER",
                                       "parts": [{"text": text}]}}}  # fmt: skip
        headers = {"Authorization": f"Bearer {self.door['key']}", "A2A-Version": "1.0", **JSON}
        with httpx.Client(trust_env=False, timeout=60) as door:
            answer = door.post(self.door["address"], content=as_json(call), headers=headers)
            said = answer.json()  # always JSON, whatever the status
            if answer.status_code == 413:  # past the door's body limit: refused in words
                assert said["error"]["message"], said
                return
            assert answer.status_code == 200, answer.text
            if "error" in said:  # refused in words (too long, too many): fine, and said
                assert said["error"]["message"], said
                return
            task_id = said["result"]["task"]["id"]

            def ended() -> bool:
                get = {"jsonrpc": "2.0", "id": 0, "method": "GetTask", "params": {"id": task_id}}
                task = door.post(self.door["address"], json=get, headers=headers).json()
                state = task["result"]["status"]["state"]
                return state not in ("TASK_STATE_WORKING", "TASK_STATE_SUBMITTED")

            until(ended, 60)


def write_notebook(root: Path, text: str) -> None:
    cells = [
        {"cell_type": "markdown", "id": "a", "metadata": {}, "source": text},
        {"cell_type": "code", "id": "b", "metadata": {}, "source": "sales = [3, 1, 4]",
         "outputs": [], "execution_count": None},
    ]  # fmt: skip
    notebook = {"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    # json.dumps writes a lone surrogate as its \\u escape, as any JSON file may hold it.
    (root / "work.ipynb").write_text(json.dumps(notebook))


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    made = World(tmp_path_factory.mktemp("text"))
    made.start()
    try:
        yield made
    finally:
        made.stop()
    log = made.server.log()
    assert "Traceback" not in log, log[-3000:]
    assert "Something went wrong inside Conch" not in log


def as_code(text: str) -> str:
    """Code whose run prints `text`, spelled in ASCII (a kernel cannot print a lone surrogate:
    Jupyter's own message packer refuses one, inside the kernel)."""
    printable = _SURROGATE.sub("", text)
    return f"said = ''.join(map(chr, {[ord(c) for c in printable[:4000]]}))\nprint(said * 30)"


ENTRIES = [
    "model text (openai)",
    "model text (anthropic)",
    "run_code arguments (openai)",
    "run_code arguments (anthropic, raw JSON)",
    "kernel output",
    "notebook text",
    "outside answer (a2a-sdk)",
    "outside answer (hand-written)",
    "door message",
    "API body",
]


@settings(max_examples=SERVER_EXAMPLES, deadline=None, suppress_health_check=SLOW)
@given(entry=st.sampled_from(ENTRIES), text=hostile)
def test_no_text_kills_a_turn_and_every_round_ends_with_a_reason(
    world: World, entry: str, text: str
) -> None:
    chat_id = world.chat()
    coder = "@Coder do it"
    if entry == "model text (openai)":
        world.models.script(Reply(chunks=[text[:5], text[5:]]))
    elif entry == "model text (anthropic)":
        world.models.script(Reply(chunks=[text]))
        coder = "@Scribe do it"
    elif entry == "run_code arguments (openai)":
        world.models.script(Reply(text="Running.", tool_calls=(("run_code", {"code": text}),)))
    elif entry == "run_code arguments (anthropic, raw JSON)":
        raw = '{"code": ' + json.dumps(text) + ', "' + json.dumps(text)[1:-1] + '": 1}'
        world.models.script(Reply(tool_calls=(("run_code", raw),)))
        coder = "@Scribe do it"
    elif entry == "kernel output":
        code = as_code(text) + "\nkept = said"
        world.models.script(
            Reply(tool_calls=(("run_code", {"code": code}), ("list_variables", {})))
        )
    elif entry == "notebook text":
        write_notebook(world.server.root_dir, text)
        world.models.script(Reply(tool_calls=(("read_notebook", {}),)))
    elif entry == "outside answer (a2a-sdk)":
        world.peer.reply = _SURROGATE.sub("", text) or "-"  # the SDK cannot send a surrogate
        coder = "@Helper hello"
    elif entry == "outside answer (hand-written)":
        world.stranger_says = text
        coder = "@Stranger hello"
    elif entry == "door message":
        world.send_at_the_door(text)
        coder = ""
    else:
        for path, body in (
            ("conversations", {"title": text}),
            (f"conversations/{chat_id}/messages", {"text": text}),
            ("agents/coder", {"persona": text}),
        ):
            call = world.http.patch if path.startswith("agents") else world.http.post
            answer = call(world.api(path), content=as_json(body), headers=JSON)
            assert answer.status_code in (200, 201, 202, 400), answer.text
            if answer.status_code == 400:
                assert answer.json()["error"]["message"]  # refused in words
        coder = f"@Coder {text[:200]}"
    if coder:
        said = world.say(chat_id, coder)
        assert said.status_code in (202, 400), said.text
    chat = world.settled(chat_id)
    started = [e for e in chat["events"] if e["type"] == "round.started"]
    ended = [e for e in chat["events"] if e["type"] == "round.ended"]
    assert len(ended) == len(started), chat["events"]
    for end in ended:
        assert end["reason"] in ROUND_END_WORDS, end
        assert end["words"], end
    notes = [m["text"] for m in chat["messages"] if m["role"] == "note"]
    assert not any("went wrong inside Conch" in n or "could not store" in n for n in notes)
    assert_the_store_holds_only_text(world.server.data_dir / "conch.sqlite3")


def assert_the_store_holds_only_text(path: Path) -> None:
    """Every value of every row reads back (SQLite's text is UTF-8), and no text stored holds a
    character the cleaning drops: nothing reached the store uncleaned."""
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        tables = [r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        for table in tables:
            for row in db.execute(f"SELECT * FROM {table}"):  # noqa: S608 (names from SQLite)
                for value in row:
                    if isinstance(value, str):
                        assert_text(value, table)
    finally:
        db.close()


def assert_text(value: str, table: str) -> None:
    value.encode("utf-8")
    try:
        decoded: Any = json.loads(value) if value[:1] in "{[" else value
    except ValueError:
        decoded = value
    for text in strings_in(decoded):
        assert not _UNSHOWABLE.search(text), (table, text[:200])


def strings_in(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, list):
        for item in value:
            yield from strings_in(item)
    elif isinstance(value, dict):
        for key, item in value.items():
            yield str(key)
            yield from strings_in(item)


def test_the_fuzz_can_fail() -> None:
    """The store check finds what it looks for: text as it came, before any cleaning."""
    for text in ("a\x00b", "a\u202eb", "\x1b[31m"):
        with pytest.raises(AssertionError):
            assert_text(text, "messages")
        with pytest.raises(AssertionError):
            assert_text(json.dumps({"said": text}), "events")
    with pytest.raises(UnicodeEncodeError):
        assert_text("\ud800", "messages")
    assert_text(clean_text("a\x00b\u202e\ud800\tc\n"), "messages")
