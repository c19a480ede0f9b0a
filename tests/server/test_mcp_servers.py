"""Your MCP servers, end to end: a real Jupyter server with Conch, the `mcp` SDK's own FastMCP
servers (tests/support/mcp_servers.py) over stdio and over Streamable HTTP on loopback, and a
scripted model calling their tools in the OpenAI wire format. What a tool really did is read from
the server's own marks on disk, never from Conch; whether a process still runs, from /proc."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from conch_jupyter.server_ext.services import ConchServices

from ..support.api import Api, settled, wait_for
from ..support.mcp_servers import INJECTION, SCRIPT, stdio_body
from ..support.scripted_models import Reply, ScriptedModels

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def conch(jp_serverapp: Any) -> ConchServices:
    services: ConchServices = jp_serverapp.web_app.settings["conch"]
    return services


@pytest.fixture
def marks(tmp_path: Path) -> Path:
    return tmp_path / "marks"


def live_members(pgid: int) -> list[int]:
    """The processes of a process group that still run (a zombie waiting to be reaped ran out)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if stat[0] != "Z" and int(stat[2]) == pgid:
            found.append(int(entry.name))
    return found


async def add_server(api: Api, body: dict[str, Any]) -> dict[str, Any]:
    status, made = await api("POST", "mcp-servers", body)
    assert status == 201, made
    return dict(made)


async def tool_agent(api: Api, models: ScriptedModels, servers: list[str]) -> str:
    body = {
        "name": "Researcher2",
        "provider": {"kind": "openai", "model": "m", "base_url": models.openai_url},
        "mcp": servers,
    }
    status, made = await api("POST", "agents", body)
    assert status == 201, made
    assert made["mcp"] == servers
    return str(made["id"])


async def chat(api: Api, mode: str) -> str:
    status, made = await api("POST", "conversations", {})
    assert status == 201
    if mode != "ask":
        assert (await api("PATCH", f"conversations/{made['id']}", {"mode": mode}))[0] == 200
    return str(made["id"])


async def say(api: Api, chat_id: str, text: str = "@Researcher2 look it up") -> None:
    assert (await api("POST", f"conversations/{chat_id}/messages", {"text": text}))[0] == 202


async def asking(api: Api, chat_id: str) -> dict[str, Any]:
    async def check() -> list[dict[str, Any]]:
        return list((await api("GET", f"conversations/{chat_id}"))[1]["asking"])

    found: list[dict[str, Any]] = await wait_for(check, 30)
    assert len(found) == 1, found
    return found[0]


def tool_lines(chat: dict[str, Any]) -> list[tuple[str, str]]:
    return [(m["tool"], m["state"]) for m in chat["messages"] if m["role"] == "tool"]


def tool_outputs(chat: dict[str, Any]) -> list[str]:
    return [m["output"] for m in chat["messages"] if m["role"] == "tool"]


def offered(models: ScriptedModels, at: int = 0) -> set[str]:
    return {t["function"]["name"] for t in models.requests[at].json["tools"]}


def call(name: str, **arguments: Any) -> tuple[str, dict[str, Any]]:
    return (f"demo__{name}", arguments)


# --- the API -------------------------------------------------------------------------------


async def test_servers_are_added_listed_changed_and_removed_with_sealed_values(
    api: Api, marks: Path, conch: ConchServices
) -> None:
    body = stdio_body("demo", marks, env={"DEMO_TOKEN": "s3cret-value"})
    made = await add_server(api, body)
    assert made["name"] == "demo"
    assert made["transport"] == "stdio"
    assert made["command"] == sys.executable
    assert made["args"] == body["args"]
    assert made["env_names"] == ["DEMO_TOKEN"]
    assert made["header_names"] == []
    assert (made["tools"], made["started"], made["problem"]) == ([], None, None)
    listed = (await api("GET", "mcp-servers"))[1]["servers"]
    assert [s["id"] for s in listed] == [made["id"]]
    everything = json.dumps([listed, (await api("GET", f"mcp-servers/{made['id']}"))[1]])
    assert "s3cret-value" not in everything
    # Sealed on disk: the value is in no file of the data folder in plain form.
    for path in conch.data_dir.rglob("*"):
        if path.is_file():
            assert b"s3cret-value" not in path.read_bytes(), path
    # Test starts it and lists its tools, with their annotations.
    status, tested = await api("POST", f"mcp-servers/{made['id']}/test")
    assert status == 200, tested
    tools = {t["name"]: t for t in tested["tools"]}
    assert tools["lookup"]["annotations"] == {"readOnlyHint": True, "openWorldHint": False}
    assert tools["note"]["annotations"] == {}
    assert tested["started"] is not None
    assert tested["problem"] is None
    assert tested["running"]
    # A rename keeps the id; a name taken (case aside) is 409; bad bodies are 400 in words.
    status, renamed = await api("PATCH", f"mcp-servers/{made['id']}", {"name": "demo2"})
    assert status == 200
    assert renamed["name"] == "demo2"
    assert renamed["env_names"] == ["DEMO_TOKEN"]
    status, taken = await api("POST", "mcp-servers", stdio_body("DEMO2", marks))
    assert status == 409
    assert taken["error"]["code"] == "name_taken"
    for bad in (
        {"name": "has space", "transport": "stdio", "command": "x"},
        {"name": "a__b", "transport": "stdio", "command": "x"},
        {"name": "conch-notebook", "transport": "stdio", "command": "x"},
        {"name": "ok", "transport": "stdio"},
        {"name": "ok", "transport": "http", "url": "ftp://example.org"},
        {"name": "ok", "transport": "stdio", "command": "x", "url": "http://a"},
        {"name": "ok", "transport": "carrier-pigeon"},
        {"name": "ok", "transport": "http", "url": "http://a", "headers": {"X": "a\nb"}},
    ):
        status, answer = await api("POST", "mcp-servers", bad)
        assert status == 400, (bad, answer)
        assert answer["error"]["message"]
    status, answer = await api("POST", "mcp-servers", "not json{")
    assert status == 400
    # An agent names servers that exist.
    status, answer = await api("POST", "agents", {"name": "X", "mcp": ["mcp_nope"]})
    assert status == 400
    assert "no MCP server" in answer["error"]["message"]
    agent = await api("POST", "agents", {"name": "Y", "mcp": [made["id"]]})
    assert agent[0] == 201
    assert agent[1]["mcp"] == [made["id"]]
    # A change ends the running server; Test starts it again.
    assert conch.mcp_servers.connection(made["id"]) is None
    assert (await api("POST", f"mcp-servers/{made['id']}/test"))[1]["running"]
    pgid = conch.mcp_servers.connection(made["id"]).pgid  # type: ignore[union-attr]
    assert pgid
    assert live_members(pgid)
    assert (await api("DELETE", f"mcp-servers/{made['id']}"))[0] == 204
    assert live_members(pgid) == []  # the whole group ended with the DELETE
    assert (await api("GET", f"mcp-servers/{made['id']}"))[0] == 404
    assert (await api("GET", "agents/y"))[1]["mcp"] == []  # no agent is offered it any more


async def test_the_kernel_key_reads_servers_and_changes_none(
    api: Api, marks: Path, http_server_client: Any, jp_base_url: str
) -> None:
    made = await add_server(api, stdio_body("demo", marks))

    async def as_kernel(method: str, path: str, body: Any = None) -> tuple[int, Any]:
        response = await http_server_client.fetch(
            f"{jp_base_url}conch/api/{path}",
            method=method,
            body=json.dumps(body) if method in ("POST", "PATCH") else None,
            headers={"X-Conch-Kernel-Key": os.environ["CONCH_KERNEL_KEY"]},
            raise_error=False,
        )
        return response.code, json.loads(response.body) if response.body else None

    assert (await as_kernel("GET", "mcp-servers"))[0] == 200
    assert (await as_kernel("GET", f"mcp-servers/{made['id']}"))[0] == 200
    for method, path, body in (
        ("POST", "mcp-servers", stdio_body("other", marks)),
        ("PATCH", f"mcp-servers/{made['id']}", {"command": "/bin/sh"}),
        ("POST", f"mcp-servers/{made['id']}/test", {}),
        ("DELETE", f"mcp-servers/{made['id']}", None),
    ):
        status, answer = await as_kernel(method, path, body)
        assert status == 403, (method, path)
        assert answer["error"]["code"] == "only_the_user", (method, path)
        assert "Settings → Tools" in answer["error"]["message"]
    [kept] = (await api("GET", "mcp-servers"))[1]["servers"]
    assert kept["name"] == "demo"
    assert kept["command"] == sys.executable


# --- the rule, in each mode -----------------------------------------------------------------


async def test_read_reads_and_refuses_every_change(
    api: Api, models: ScriptedModels, marks: Path
) -> None:
    server = await add_server(api, stdio_body("demo", marks))
    await tool_agent(api, models, [server["id"]])
    models.script(
        Reply(
            tool_calls=(
                call("lookup", key="pi"),
                call("drop_table", table="users"),
                call("note", text="hi"),
            )
        ),
        Reply(text="Pi is 3.14159."),
    )
    chat_id = await chat(api, "read")
    await say(api, chat_id)
    done = await settled(api, chat_id, 60)
    assert {"demo__lookup", "demo__drop_table", "demo__note", "read_notebook"} <= offered(models)
    assert tool_lines(done) == [
        ("demo__lookup", "ran"),
        ("demo__drop_table", "refused"),
        ("demo__note", "refused"),
    ]
    assert not (marks / "dropped").exists()
    assert not (marks / "noted").exists()
    looked = tool_outputs(done)[0]
    assert "3.14159" in looked
    assert 'MCP server "demo"' in looked
    assert "```" in looked
    assert done["tainted"] is None  # a closed-world read brings in no one's words
    # The model was shown each result in its provider's own format.
    results = [m for m in models.requests[1].json["messages"] if m["role"] == "tool"]
    assert "Read mode" in results[1]["content"]


async def test_ask_waits_for_yes_shows_the_arguments_and_no_never_runs(
    api: Api, models: ScriptedModels, marks: Path
) -> None:
    server = await add_server(api, stdio_body("demo", marks))
    await tool_agent(api, models, [server["id"]])
    models.script(
        Reply(tool_calls=(call("drop_table", table="users"),)),
        Reply(text="Asked."),
        Reply(tool_calls=(call("drop_table", table="orders"),)),
        Reply(text="Dropped."),
    )
    chat_id = await chat(api, "ask")
    await say(api, chat_id)
    entry = await asking(api, chat_id)
    assert entry["tool"] == "demo__drop_table"
    assert entry["server"] == "demo"
    assert json.loads(entry["code"]) == {"table": "users"}
    assert not (marks / "dropped").exists()  # it waits
    answer = f"conversations/{chat_id}/tools/{entry['call_id']}"
    assert (await api("POST", answer, {"run": False}))[0] == 200
    await settled(api, chat_id, 60)
    assert not (marks / "dropped").exists()
    await say(api, chat_id)
    entry = await asking(api, chat_id)
    assert json.loads(entry["code"]) == {"table": "orders"}
    assert (await api("POST", f"conversations/{chat_id}/tools/{entry['call_id']}", {"run": True}))[
        0
    ] == 200
    done = await settled(api, chat_id, 60)
    assert (marks / "dropped").read_text() == "orders"
    assert tool_lines(done) == [("demo__drop_table", "skipped"), ("demo__drop_table", "ran")]
    ended = [e for e in done["events"] if e["type"] == "tool.ended"]
    assert [e["state"] for e in ended] == ["skipped", "ran"]


async def test_an_unannotated_tool_taints_like_any_open_world_one(
    api: Api, models: ScriptedModels, marks: Path
) -> None:
    """MCP's defaults: a tool that says nothing may change anything, anywhere. It is a change
    (Auto lets it pass while untainted) and what it gives back is someone else's words."""
    server = await add_server(api, stdio_body("demo", marks))
    await tool_agent(api, models, [server["id"]])
    models.script(
        Reply(tool_calls=(call("note", text="first"), call("note", text="second"))),
        Reply(text="Noted once."),
    )
    chat_id = await chat(api, "auto")
    await say(api, chat_id)
    entry = await asking(api, chat_id)  # the second asks: the first's result tainted the chat
    assert json.loads(entry["code"]) == {"text": "second"}
    await api("POST", f"conversations/{chat_id}/tools/{entry['call_id']}", {"run": False})
    done = await settled(api, chat_id, 60)
    assert tool_lines(done) == [("demo__note", "ran"), ("demo__note", "skipped")]
    assert done["tainted"] == {"kind": "tool", "by": "demo__note"}
    assert (marks / "noted").read_text() == "first"


async def test_an_open_world_read_taints_and_then_every_change_asks_in_every_mode(
    api: Api, models: ScriptedModels, marks: Path
) -> None:
    server = await add_server(api, stdio_body("demo", marks))
    await tool_agent(api, models, [server["id"]])
    models.script(
        # Auto, untainted: a closed-world change passes, and the page is fetched.
        Reply(
            tool_calls=(call("drop_table", table="first"), call("fetch_page", url="https://x.test"))
        ),
        Reply(text="Fetched."),
        # Auto, tainted now: the page's words asked for drop_table; it asks, and so does a fetch.
        Reply(tool_calls=(call("drop_table", table="users"),)),
        Reply(text="Asked you."),
    )
    chat_id = await chat(api, "auto")
    await say(api, chat_id)
    done = await settled(api, chat_id, 60)
    assert tool_lines(done) == [("demo__drop_table", "ran"), ("demo__fetch_page", "ran")]
    assert (marks / "dropped").read_text() == "first"
    assert done["tainted"] == {"kind": "tool", "by": "demo__fetch_page"}
    [event] = [e for e in done["events"] if e["type"] == "chat.tainted"]  # said live, once
    assert (event["kind"], event["by"]) == ("tool", "demo__fetch_page")
    assert done["mode_words"] == "Asking again: what one of your tools brought in is in this chat."
    page = tool_outputs(done)[1]
    assert INJECTION in page
    assert "Untrusted" in page
    assert 'MCP server "demo"' in page
    await say(api, chat_id)
    entry = await asking(api, chat_id)
    assert entry["tool"] == "demo__drop_table"
    await api("POST", f"conversations/{chat_id}/tools/{entry['call_id']}", {"run": False})
    await settled(api, chat_id, 60)
    assert (marks / "dropped").read_text() == "first"
    # Tainted, in Read: the open-world read is refused, a closed-world read still passes.
    assert (await api("PATCH", f"conversations/{chat_id}", {"mode": "read"}))[0] == 200
    models.script(
        Reply(tool_calls=(call("fetch_page", url="https://y.test"), call("lookup", key="e"))),
        Reply(text="Read what I could."),
    )
    await say(api, chat_id)
    done = await settled(api, chat_id, 60)
    assert tool_lines(done)[-2:] == [("demo__fetch_page", "refused"), ("demo__lookup", "ran")]
    # Tainted, in Ask: the open-world read asks.
    assert (await api("PATCH", f"conversations/{chat_id}", {"mode": "ask"}))[0] == 200
    models.script(Reply(tool_calls=(call("fetch_page", url="https://z.test"),)), Reply(text="k"))
    await say(api, chat_id)
    entry = await asking(api, chat_id)
    assert entry["tool"] == "demo__fetch_page"
    assert json.loads(entry["code"]) == {"url": "https://z.test"}
    await api("POST", f"conversations/{chat_id}/tools/{entry['call_id']}", {"run": False})
    await settled(api, chat_id, 60)


# --- robust and bounded ---------------------------------------------------------------------


async def test_a_crash_costs_the_turn_its_tools_in_words_never_the_round(
    api: Api, models: ScriptedModels, marks: Path, conch: ConchServices
) -> None:
    server = await add_server(api, stdio_body("demo", marks))
    await tool_agent(api, models, [server["id"]])
    models.script(
        Reply(tool_calls=(call("spawn_child"), call("crash"), call("lookup", key="pi"))),
        Reply(text="The server crashed; I answer without it."),
    )
    chat_id = await chat(api, "read")
    await say(api, chat_id)
    done = await settled(api, chat_id, 60)
    assert tool_lines(done) == [
        ("demo__spawn_child", "ran"),
        ("demo__crash", "failed"),
        ("demo__lookup", "refused"),
    ]
    crashed, lost = tool_outputs(done)[1:]
    assert "stopped answering" in crashed
    assert "gone for this turn" in crashed
    assert "broke during this turn" in lost
    replies = [m["text"] for m in done["messages"] if m["role"] == "agent"]
    assert replies == ["The server crashed; I answer without it."]
    child = int((marks / "child").read_text())
    row = (await api("GET", f"mcp-servers/{server['id']}"))[1]
    assert "stopped answering" in row["problem"]
    assert not row["running"]
    assert not Path(f"/proc/{child}").exists() or "Z" in Path(f"/proc/{child}/stat").read_text()
    # The next turn starts it again.
    models.script(Reply(tool_calls=(call("lookup", key="e"),)), Reply(text="e is 2.71828."))
    await say(api, chat_id)
    done = await settled(api, chat_id, 60)
    assert tool_lines(done)[-1] == ("demo__lookup", "ran")
    assert (await api("GET", f"mcp-servers/{server['id']}"))[1]["problem"] is None


async def test_a_hanging_call_is_cancelled_at_the_server_at_its_deadline(
    api: Api, models: ScriptedModels, marks: Path, conch: ConchServices
) -> None:
    conch.mcp_servers.call_seconds = 1.0
    server = await add_server(api, stdio_body("demo", marks))
    await tool_agent(api, models, [server["id"]])
    models.script(Reply(tool_calls=(call("hang"),)), Reply(text="It hung."))
    chat_id = await chat(api, "read")
    await say(api, chat_id)
    done = await settled(api, chat_id, 60)
    assert tool_lines(done) == [("demo__hang", "timeout")]
    assert "did not answer within 1 seconds" in tool_outputs(done)[0]
    ended = [e for e in done["events"] if e["type"] == "tool.ended"]
    assert ended[-1]["state"] == "timeout"

    async def cancelled() -> bool:
        return (marks / "hang-cancelled").exists()

    await wait_for(cancelled, 20)  # the server was told: notifications/cancelled


async def test_stop_cancels_a_call_in_flight(api: Api, models: ScriptedModels, marks: Path) -> None:
    server = await add_server(api, stdio_body("demo", marks))
    await tool_agent(api, models, [server["id"]])
    models.script(Reply(tool_calls=(call("hang"),)), Reply(text="never asked"))
    chat_id = await chat(api, "read")
    await say(api, chat_id)

    async def started() -> bool:
        return (marks / "hang-started").exists()

    await wait_for(started, 30)
    assert (await api("POST", f"conversations/{chat_id}/round/stop"))[0] == 200
    done = await settled(api, chat_id, 30)
    assert tool_lines(done) == [("demo__hang", "skipped")]
    assert "cancelled at the server" in tool_outputs(done)[0]

    async def cancelled() -> bool:
        return (marks / "hang-cancelled").exists()

    await wait_for(cancelled, 20)


async def test_a_server_that_wont_start_or_hangs_at_start_loses_its_tools_in_words(
    api: Api, models: ScriptedModels, marks: Path, conch: ConchServices
) -> None:
    conch.mcp_servers.start_seconds = 8.0  # the good one starts well within it, even under load
    missing = await add_server(
        api, {"name": "missing", "transport": "stdio", "command": "no-such-mcp-program"}
    )
    hangs = await add_server(api, stdio_body("slow", marks, env={"HANG_ON_START": "1"}))
    babbles = await add_server(
        api,
        {
            "name": "babble",
            "transport": "stdio",
            "command": sys.executable,
            "args": ["-c", "print('hello, I am not MCP', flush=True); import time; time.sleep(60)"],
        },
    )
    good = await add_server(api, stdio_body("demo", marks))
    await tool_agent(api, models, [missing["id"], hangs["id"], babbles["id"], good["id"]])
    models.script(Reply(tool_calls=(call("lookup", key="pi"),)), Reply(text="Only demo worked."))
    chat_id = await chat(api, "read")
    await say(api, chat_id)
    done = await settled(api, chat_id, 90)
    notes = [m["text"] for m in done["messages"] if m["role"] == "note"]
    assert any("missing" in n and "not found" in n for n in notes), notes
    assert any("slow" in n and "did not answer within 8 seconds" in n for n in notes), notes
    assert any("babble" in n for n in notes), notes
    assert tool_lines(done) == [("demo__lookup", "ran")], (tool_outputs(done), notes)
    names = offered(models)
    assert "demo__lookup" in names
    assert not any(n.startswith(("slow__", "babble__")) for n in names)
    for server in (missing, hangs, babbles):
        row = (await api("GET", f"mcp-servers/{server['id']}"))[1]
        assert row["problem"], row
        assert not row["running"], row
    replies = [m["text"] for m in done["messages"] if m["role"] == "agent"]
    assert replies == ["Only demo worked."]


async def test_list_changed_is_followed_and_server_stop_ends_every_group(
    api: Api, models: ScriptedModels, marks: Path, conch: ConchServices
) -> None:
    server = await add_server(api, stdio_body("demo", marks))
    await tool_agent(api, models, [server["id"]])
    models.script(
        Reply(tool_calls=(call("add_tool"), call("spawn_child"))),
        Reply(text="Added."),
        Reply(tool_calls=(call("late"),)),
        Reply(text="Late ran."),
    )
    chat_id = await chat(api, "read")
    await say(api, chat_id)
    await settled(api, chat_id, 60)
    await say(api, chat_id)
    done = await settled(api, chat_id, 60)
    assert "demo__late" not in offered(models, 0)
    assert "demo__late" in offered(models, 2)
    assert tool_lines(done)[-1] == ("demo__late", "ran")
    connection = conch.mcp_servers.connection(server["id"])
    assert connection is not None
    assert connection.pgid
    pgid = connection.pgid
    assert len(live_members(pgid)) == 2  # the server and the child it left behind
    await conch.mcp_servers.close()  # what the Jupyter server's stop does
    assert live_members(pgid) == []


# --- over Streamable HTTP ------------------------------------------------------------------


@pytest.fixture
def web_mcp(marks: Path) -> Iterator[str]:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    process = subprocess.Popen(
        [sys.executable, str(SCRIPT), "http", str(port), str(marks)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        for _ in range(400):
            try:
                socket.create_connection(("127.0.0.1", port), 0.2).close()
                break
            except OSError:
                if process.poll() is not None:
                    raise RuntimeError("the MCP test server did not start") from None
                asyncio.run(asyncio.sleep(0.05))
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.terminate()
        process.wait(10)


async def test_over_streamable_http_read_reads_and_ask_asks(
    api: Api, models: ScriptedModels, marks: Path, web_mcp: str
) -> None:
    body = {"name": "web", "transport": "http", "url": web_mcp, "headers": {"X-Key": "hdr-1"}}
    server = await add_server(api, body)
    assert server["url"] == web_mcp
    assert server["header_names"] == ["X-Key"]
    assert "hdr-1" not in json.dumps((await api("GET", "mcp-servers"))[1])
    await tool_agent(api, models, [server["id"]])
    models.script(
        Reply(tool_calls=(("web__lookup", {"key": "pi"}), ("web__drop_table", {"table": "t"}))),
        Reply(text="Read."),
        Reply(tool_calls=(("web__drop_table", {"table": "t2"}),)),
        Reply(text="Dropped."),
    )
    chat_id = await chat(api, "read")
    await say(api, chat_id)
    done = await settled(api, chat_id, 60)
    assert tool_lines(done) == [("web__lookup", "ran"), ("web__drop_table", "refused")]
    assert "3.14159" in tool_outputs(done)[0]
    assert not (marks / "dropped").exists()
    assert (await api("PATCH", f"conversations/{chat_id}", {"mode": "ask"}))[0] == 200
    await say(api, chat_id)
    entry = await asking(api, chat_id)
    assert entry["tool"] == "web__drop_table"
    await api("POST", f"conversations/{chat_id}/tools/{entry['call_id']}", {"run": True})
    await settled(api, chat_id, 60)
    assert (marks / "dropped").read_text() == "t2"


# --- the door's guests never get any ---------------------------------------------------------


async def test_the_doors_guests_are_offered_no_mcp_tool(
    api: Api, models: ScriptedModels, marks: Path, jp_http_port: int, jp_base_url: str
) -> None:
    from .test_door_server import call, pair, text_message

    server = await add_server(api, stdio_body("demo", marks))
    agent = await tool_agent(api, models, [server["id"]])
    models.script(Reply(text="Words only."))
    made = await pair(api, agent)
    url = f"http://127.0.0.1:{jp_http_port}{jp_base_url}a2a/{agent}"
    _, answer = await call(url, made["key"], "SendMessage", text_message("Use your tools.", "k"))
    assert answer["result"]["task"]["artifacts"][0]["parts"] == [{"text": "Words only."}]
    [request] = models.requests
    assert not request.json.get("tools")  # no tool at all, an MCP server's least of all
    row = (await api("GET", f"mcp-servers/{server['id']}"))[1]
    assert row["started"] is None  # not even started for a guest
