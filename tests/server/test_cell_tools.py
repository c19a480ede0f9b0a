"""Agents that write the notebook, in a real Jupyter server without collaboration (the normal
test venv): a notebook no page has open is written as its file (valid nbformat, ids,
`metadata.conch`), under the mode, checked against what the agent read, and undone through
`POST …/tools/{call_id}/undo` (the user's auth only, event `tool.undone`); a notebook a page
holds open (its kernel's session) is never written, and the refusal says what to install.
The live shared document is tested with jupyter-collaboration in tests/live/."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path
from typing import Any

import nbformat
import pytest

from conch_jupyter.notebook.service import Caller, NotebookTools
from conch_jupyter.providers.base import ToolCall
from conch_jupyter.server_ext.services import ConchServices

from ..support import notebook_kernels
from ..support.api import Api, wait_for
from ..support.notebook_kernels import NotebookKernel, write_notebook

pytestmark = pytest.mark.timeout(120)
kernel = notebook_kernels.kernel  # the fixture: a real ipykernel for work.ipynb (a page's)

ANALYST = Caller("analyst", "Analyst")
GONE = Caller("gone", "Gone")  # an agent not (or no longer) in Settings
BOOK = "draft.ipynb"


def conch_of(serverapp: Any) -> ConchServices:
    services: ConchServices = serverapp.web_app.settings["conch"]
    return services


def tools_of(serverapp: Any) -> NotebookTools:
    return conch_of(serverapp).tools


async def chat_for(serverapp: Any, path: str = BOOK, mode: str = "auto") -> str:
    store = conch_of(serverapp).store
    chat = await store.create_conversation("t", path=path)
    await store.set_mode(chat.id, mode)  # type: ignore[arg-type]
    return chat.id


def saved(root: Path, path: str = BOOK) -> Any:
    book = nbformat.read(root / path, as_version=4)
    nbformat.validate(book)  # every write leaves valid nbformat
    return book


def tool_messages(serverapp: Any, chat_id: str) -> list[dict[str, Any]]:
    store = conch_of(serverapp).store
    return [m.to_json() for m in store.messages(chat_id) if m.role == "tool"]


def events(serverapp: Any, chat_id: str) -> list[dict[str, Any]]:
    return [e.to_json() for e in conch_of(serverapp).store.events(chat_id)]


def cell_ids(root: Path) -> list[str]:
    return [c["id"] for c in saved(root).cells]


@pytest.fixture
def draft(jp_root_dir: Path) -> Path:
    write_notebook(jp_root_dir, BOOK, [("markdown", "# Draft"), ("code", "x = 1")])
    return jp_root_dir


async def test_an_agent_adds_edits_and_deletes_cells_of_a_notebook_no_page_has_open(
    jp_serverapp: Any, draft: Path
) -> None:
    tools, chat = tools_of(jp_serverapp), await chat_for(jp_serverapp)
    first, second = cell_ids(draft)
    read = await tools.call(chat, ANALYST, ToolCall("r", "read_notebook", {}), 0)
    assert f"[2] code, id {second}:" in read  # the text names each cell's id
    added = await tools.call(
        chat,
        ANALYST,
        ToolCall("a", "add_cell", {"cell_type": "code", "source": "y = x + 1", "after": second}),
        1,
    )
    book = saved(draft)
    assert [c.source for c in book.cells] == ["# Draft", "x = 1", "y = x + 1"]
    new = book.cells[2]
    assert new.metadata["conch"] == {"agent": "analyst", "chat": chat}
    assert f"its id is {new.id}" in added  # add_cell's output names the new cell's id
    edited = await tools.call(
        chat, ANALYST, ToolCall("e", "edit_cell", {"cell_id": second, "source": "x = 2"}), 2
    )
    assert "now holds the new source" in edited
    book = saved(draft)
    assert book.cells[1].source == "x = 2"
    assert book.cells[1].metadata["conch"]["agent"] == "analyst"
    # The agent's own write counts as read: it may edit the cell it added at once.
    await tools.call(
        chat, ANALYST, ToolCall("e2", "edit_cell", {"cell_id": new.id, "source": "y = 3"}), 3
    )
    await tools.call(chat, ANALYST, ToolCall("d", "delete_cell", {"cell_id": first}), 4)
    assert [c.source for c in saved(draft).cells] == ["x = 2", "y = 3"]
    messages = tool_messages(jp_serverapp, chat)
    assert [(m["tool"], m["state"], m.get("undo")) for m in messages] == [
        ("read_notebook", "ran", None),
        ("add_cell", "ran", True),
        ("edit_cell", "ran", True),
        ("edit_cell", "ran", True),
        ("delete_cell", "ran", True),
    ]
    assert (messages[2]["cell_id"], messages[2]["old"], messages[2]["new"]) == (
        second,
        "x = 1",
        "x = 2",
    )
    assert (messages[4]["old"], messages[4]["new"]) == ("# Draft", "")


async def test_ask_shows_the_change_and_no_changes_nothing(jp_serverapp: Any, draft: Path) -> None:
    tools, chat = tools_of(jp_serverapp), await chat_for(jp_serverapp, mode="ask")
    _, second = cell_ids(draft)
    call, asking = await read_then_ask_to_edit(tools, chat, second, "x = 9")
    assert {k: asking[0][k] for k in ("tool", "cell_id", "old", "new")} == {
        "tool": "edit_cell",
        "cell_id": second,
        "old": "x = 1",
        "new": "x = 9",
    }
    event = [e for e in events(jp_serverapp, chat) if e["type"] == "tool.asking"][-1]
    assert (event["cell_id"], event["old"], event["new"]) == (second, "x = 1", "x = 9")
    tools.answer(chat, asking[0]["call_id"], False)
    assert "did not let" in await call
    assert saved(draft).cells[1].source == "x = 1"
    add = asyncio.ensure_future(
        tools.call(
            chat, ANALYST, ToolCall("a", "add_cell", {"cell_type": "markdown", "source": "hi"}), 2
        )
    )
    asking = await wait_for(lambda: _now(tools.asking(chat)))
    assert {k: asking[0][k] for k in ("cell_id", "old", "new", "after")} == {
        "cell_id": None,
        "old": "",
        "new": "hi",
        "after": None,
    }
    tools.answer(chat, asking[0]["call_id"], True)
    await add
    assert [c.source for c in saved(draft).cells] == ["# Draft", "x = 1", "hi"]


async def test_a_cell_the_user_changed_while_asking_is_not_overwritten(
    jp_serverapp: Any, draft: Path
) -> None:
    tools, chat = tools_of(jp_serverapp), await chat_for(jp_serverapp, mode="ask")
    _, second = cell_ids(draft)
    call, asking = await read_then_ask_to_edit(tools, chat, second, "x = 9")
    book = saved(draft)
    book.cells[1].source = "x = 1  # the user's own words"
    nbformat.write(book, draft / BOOK)
    tools.answer(chat, asking[0]["call_id"], True)
    words = await call
    assert "changed since you read it" in words
    assert saved(draft).cells[1].source == "x = 1  # the user's own words"
    assert tool_messages(jp_serverapp, chat)[-1]["state"] == "refused"


async def test_read_mode_offers_the_write_tools_and_refuses_each_in_words(
    jp_serverapp: Any, draft: Path
) -> None:
    tools, chat = tools_of(jp_serverapp), await chat_for(jp_serverapp, mode="read")
    before = (draft / BOOK).read_text()
    _, second = cell_ids(draft)
    calls = [
        ToolCall("a", "add_cell", {"cell_type": "code", "source": "boom()"}),
        ToolCall("e", "edit_cell", {"cell_id": second, "source": "boom()"}),
        ToolCall("d", "delete_cell", {"cell_id": second}),
        ToolCall("r", "run_cell", {"cell_id": second}),
    ]
    for n, call in enumerate(calls):
        words = await tools.call(chat, ANALYST, call, n)
        assert "Read mode" in words
    assert (draft / BOOK).read_text() == before
    assert [m["state"] for m in tool_messages(jp_serverapp, chat)] == ["refused"] * 4


async def test_undo_is_the_users_and_restores_each_write(
    jp_serverapp: Any, draft: Path, api: Api, http_server_client: Any, jp_base_url: str
) -> None:
    tools, chat = tools_of(jp_serverapp), await chat_for(jp_serverapp)
    first, second = cell_ids(draft)
    await tools.call(chat, ANALYST, ToolCall("r", "read_notebook", {}), 0)
    await tools.call(
        chat, ANALYST, ToolCall("e", "edit_cell", {"cell_id": second, "source": "x = 5"}), 1
    )
    await tools.call(chat, ANALYST, ToolCall("d", "delete_cell", {"cell_id": first}), 2)
    await tools.call(
        chat, ANALYST, ToolCall("a", "add_cell", {"cell_type": "code", "source": "z = 0"}), 3
    )
    assert [c.source for c in saved(draft).cells] == ["x = 5", "z = 0"]
    edit, delete, add = (m["call_id"] for m in tool_messages(jp_serverapp, chat)[1:])
    # The kernel key cannot undo: only the user's own auth.
    response = await http_server_client.fetch(
        f"{jp_base_url}conch/api/conversations/{chat}/tools/{add}/undo",
        method="POST",
        body=b"",
        headers={"X-Conch-Kernel-Key": os.environ["CONCH_KERNEL_KEY"]},
        raise_error=False,
    )
    assert response.code == 403
    assert "undo an agent's change" in json.loads(response.body)["error"]["message"]
    for call_id in (add, delete, edit):
        status, body = await api("POST", f"conversations/{chat}/tools/{call_id}/undo")
        assert (status, body) == (200, {"call_id": call_id, "undone": True})
    assert [c.source for c in saved(draft).cells] == ["# Draft", "x = 1"]
    assert cell_ids(draft) == [first, second]  # the deleted cell is back, with its own id
    assert "conch" not in saved(draft).cells[1].metadata  # the agent's mark went with its edit
    status, body = await api("POST", f"conversations/{chat}/tools/{add}/undo")
    assert status == 409
    assert body["error"]["code"] == "not_undoable"
    assert "undone already" in body["error"]["message"]
    undone = [e["call_id"] for e in events(jp_serverapp, chat) if e["type"] == "tool.undone"]
    assert undone == [add, delete, edit]
    assert all(m.get("undo") is False for m in tool_messages(jp_serverapp, chat)[1:])
    _, seen = await api("GET", f"conversations/{chat}")
    shown = [m for m in seen["messages"] if m["role"] == "tool"]
    assert [m.get("undo") for m in shown] == [None, False, False, False]


async def test_undo_leaves_a_cell_the_user_changed_since(
    jp_serverapp: Any, draft: Path, api: Api
) -> None:
    tools, chat = tools_of(jp_serverapp), await chat_for(jp_serverapp)
    await tools.call(
        chat, ANALYST, ToolCall("a", "add_cell", {"cell_type": "code", "source": "z = 0"}), 0
    )
    book = saved(draft)
    book.cells[2].source = "z = 0  # kept by the user"
    nbformat.write(book, draft / BOOK)
    call_id = tool_messages(jp_serverapp, chat)[0]["call_id"]
    status, body = await api("POST", f"conversations/{chat}/tools/{call_id}/undo")
    assert status == 409
    assert "changed after the agent wrote it" in body["error"]["message"]
    assert saved(draft).cells[2].source == "z = 0  # kept by the user"


async def test_an_old_notebook_without_cell_ids_gets_them_at_the_first_write(
    jp_serverapp: Any, jp_root_dir: Path
) -> None:
    old = nbformat.v4.new_notebook()
    old.cells = [nbformat.v4.new_code_cell("a = 1"), nbformat.v4.new_code_cell("b = 2")]
    old.nbformat_minor = 4
    for cell in old.cells:
        del cell["id"]
    (jp_root_dir / "old.ipynb").write_text(json.dumps(old))
    tools, chat = tools_of(jp_serverapp), await chat_for(jp_serverapp, path="old.ipynb")
    read = await tools.call(chat, ANALYST, ToolCall("r", "read_notebook", {}), 0)
    assert "id cell-2" in read
    await tools.call(
        chat, ANALYST, ToolCall("e", "edit_cell", {"cell_id": "cell-2", "source": "b = 3"}), 1
    )
    book = saved(jp_root_dir, "old.ipynb")
    assert (book.nbformat, book.nbformat_minor) == (4, 5)
    assert [(c.id, c.source) for c in book.cells] == [("cell-1", "a = 1"), ("cell-2", "b = 3")]


async def test_a_notebook_a_page_holds_open_without_collaboration_is_never_written(
    jp_serverapp: Any, jp_root_dir: Path, kernel: NotebookKernel
) -> None:
    # work.ipynb has a kernel session, as a page that opened it makes: without a shared
    # document, a write to its file would be lost (or lose the user's) at the page's next save.
    tools, chat = tools_of(jp_serverapp), await chat_for(jp_serverapp, path="work.ipynb")
    before = (jp_root_dir / "work.ipynb").read_text()
    read = await tools.call(chat, ANALYST, ToolCall("r", "read_notebook", {}), 0)
    assert "as last saved" in read  # reading still works: the file
    cell = nbformat.reads(before, as_version=4).cells[2]
    for n, call in enumerate(
        [
            ToolCall("a", "add_cell", {"cell_type": "code", "source": "x"}),
            ToolCall("e", "edit_cell", {"cell_id": cell.id, "source": "x"}),
            ToolCall("r", "run_cell", {"cell_id": cell.id}),
        ],
        1,
    ):
        words = await tools.call(chat, ANALYST, call, n)
        assert "the notebook is open in a page" in words
        assert "install conch-jupyter[live]" in words
        assert "Nothing was changed" in words
    assert (jp_root_dir / "work.ipynb").read_text() == before
    assert await kernel.value("'x' in globals()") == "False"


async def read_then_ask_to_edit(
    tools: NotebookTools, chat: str, cell_id: str, source: str
) -> tuple[asyncio.Future[str], list[dict[str, Any]]]:
    """The Analyst reads the notebook, then asks (in Ask) to set a cell's source: the call,
    still waiting for the user's answer, and what the chat now asks."""
    await tools.call(chat, ANALYST, ToolCall("r", "read_notebook", {}), 0)
    edit = ToolCall("e", "edit_cell", {"cell_id": cell_id, "source": source})
    call = asyncio.ensure_future(tools.call(chat, ANALYST, edit, 1))
    asking = await wait_for(lambda: _now(tools.asking(chat)))
    return call, asking


def _now(value: Any) -> Any:
    async def give() -> Any:
        return value or None

    return give()


async def test_the_cells_endpoint_says_who_wrote_each_cell_in_order(
    jp_serverapp: Any, draft: Path, api: Api, http_server_client: Any, jp_base_url: str
) -> None:
    """`GET …/cells`: each cell in order with who wrote it, read by the kernel key too; a
    cell the user undid goes back to no mark; a chat of no notebook has no cells."""
    status, agent = await api(
        "POST", "agents", {"name": "Analyst", "provider": {"kind": "openai", "model": "m"}}
    )
    assert status == 201, agent
    tools, chat = tools_of(jp_serverapp), await chat_for(jp_serverapp)
    caller = Caller(agent["id"], "Analyst")
    first, second = cell_ids(draft)
    await tools.call(chat, caller, ToolCall("r", "read_notebook", {}), 0)
    await tools.call(
        chat, caller, ToolCall("e", "edit_cell", {"cell_id": second, "source": "x = 5"}), 1
    )
    await tools.call(chat, GONE, ToolCall("a", "add_cell", {"cell_type": "code", "source": "z"}), 2)
    added = cell_ids(draft)[2]
    wrote = {"agent": agent["id"], "name": "Analyst", "chat": chat}
    gone = {"agent": "gone", "name": None, "chat": chat}  # no such agent (removed): no name
    status, body = await api("GET", f"conversations/{chat}/cells")
    assert status == 200
    assert body == {
        "path": BOOK,
        "where": "file",
        "cells": [
            {"id": first, "type": "markdown", "conch": None},
            {"id": second, "type": "code", "conch": wrote},
            {"id": added, "type": "code", "conch": gone},
        ],
    }
    response = await http_server_client.fetch(
        f"{jp_base_url}conch/api/conversations/{chat}/cells",
        headers={"X-Conch-Kernel-Key": os.environ["CONCH_KERNEL_KEY"]},
    )
    assert json.loads(response.body) == body  # the kernel key reads it, as the rest of a chat
    edit = tool_messages(jp_serverapp, chat)[1]["call_id"]
    await api("POST", f"conversations/{chat}/tools/{edit}/undo")
    _, body = await api("GET", f"conversations/{chat}/cells")
    assert [c["conch"] for c in body["cells"]] == [None, None, gone]
    # A hand-made mark that is not Conch's shape marks nothing.
    book = saved(draft)
    book.cells[0].metadata["conch"] = "not a mark"
    nbformat.write(book, draft / BOOK)
    _, body = await api("GET", f"conversations/{chat}/cells")
    assert body["cells"][0]["conch"] is None
    status, body = await api("GET", "conversations/nosuchchat/cells")
    assert (status, body["error"]["code"]) == (404, "not_found")
    bare = await conch_of(jp_serverapp).store.create_conversation("no notebook")
    status, body = await api("GET", f"conversations/{bare.id}/cells")
    assert (status, body) == (200, {"path": None, "where": None, "cells": []})
