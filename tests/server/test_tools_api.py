"""The HTTP contract of agents that work in the notebook: a chat's path and mode, the `asking`
list, the user's yes or no, and that only the user's own Jupyter auth may give them."""

from __future__ import annotations

import asyncio
import json
import os
from typing import Any

import pytest

from conch_jupyter.notebook.service import Caller
from conch_jupyter.providers.base import ToolCall
from conch_jupyter.server_ext.services import ConchServices

from ..support import notebook_kernels
from ..support.api import Api, wait_for
from ..support.notebook_kernels import NotebookKernel

pytestmark = pytest.mark.timeout(120)
kernel = notebook_kernels.kernel  # the fixture: a real ipykernel for work.ipynb


def conch_of(serverapp: Any) -> ConchServices:
    services: ConchServices = serverapp.web_app.settings["conch"]
    return services


async def as_kernel(
    http_server_client: Any, base_url: str, method: str, path: str, body: Any
) -> tuple[int, Any]:
    """A request made with the kernel key, as code running in any kernel could make it."""
    response = await http_server_client.fetch(
        f"{base_url}conch/api/{path}",
        method=method,
        body=None if body is None else json.dumps(body),
        headers={"X-Conch-Kernel-Key": os.environ["CONCH_KERNEL_KEY"]},
        raise_error=False,
    )
    return response.code, json.loads(response.body) if response.body else None


async def test_a_chat_carries_its_notebook_and_asks_by_default(api: Api) -> None:
    status, chat = await api("POST", "conversations", {"title": "nb", "path": "dir/a.ipynb"})
    assert status == 201
    assert (chat["path"], chat["mode"], chat["asking"], chat["working"]) == (
        "dir/a.ipynb",
        "ask",
        [],
        None,
    )
    assert chat["mode_words"] == "Ask: every run waits for your yes."
    _, plain = await api("POST", "conversations", {})
    assert (plain["path"], plain["mode"]) == (None, "ask")
    _, listed = await api("GET", "conversations")
    assert {c["id"]: c["path"] for c in listed["conversations"]} == {
        chat["id"]: "dir/a.ipynb",
        plain["id"]: None,
    }


@pytest.mark.parametrize("path", ["/etc/passwd", "../up.ipynb", "a/../../b.ipynb", "a\\b", 7])
async def test_a_path_outside_the_root_is_refused_in_words(api: Api, path: Any) -> None:
    status, body = await api("POST", "conversations", {"path": path})
    assert status == 400
    assert body["error"]["code"] == "invalid"


async def test_the_user_changes_the_mode(api: Api) -> None:
    _, chat = await api("POST", "conversations", {})
    for mode, words in (("auto", "Auto:"), ("read", "Read:"), ("ask", "Ask:")):
        status, changed = await api("PATCH", f"conversations/{chat['id']}", {"mode": mode})
        assert status == 200
        assert changed["mode"] == mode
        assert changed["mode_words"].startswith(words)
    _, seen = await api("GET", f"conversations/{chat['id']}")
    assert [e["mode"] for e in seen["events"] if e["type"] == "mode.changed"] == [
        "auto",
        "read",
        "ask",
    ]
    for bad in ({"mode": "yolo"}, {"mode": None}, {}, {"mode": "auto", "title": "x"}):
        status, body = await api("PATCH", f"conversations/{chat['id']}", bad)
        assert status == 400, bad
        assert body["error"]["code"] == "invalid"
    status, _ = await api("PATCH", "conversations/c_nobody", {"mode": "auto"})
    assert status == 404


async def test_auto_after_an_outside_answer_says_why_it_asks(api: Api, jp_serverapp: Any) -> None:
    _, chat = await api("POST", "conversations", {})
    await api("PATCH", f"conversations/{chat['id']}", {"mode": "auto"})
    await conch_of(jp_serverapp).store.set_taint(chat["id"], {"kind": "person", "by": "Oracle"})
    _, seen = await api("GET", f"conversations/{chat['id']}")
    assert seen["mode_words"] == "Asking again: an outside agent's words are in this chat."


async def test_the_kernel_key_cannot_change_the_mode_or_say_yes(
    api: Api, jp_serverapp: Any, http_server_client: Any, jp_base_url: str
) -> None:
    _, chat = await api("POST", "conversations", {})
    chat_path = f"conversations/{chat['id']}"
    status, body = await as_kernel(
        http_server_client, jp_base_url, "PATCH", chat_path, {"mode": "auto"}
    )
    assert status == 403
    assert body["error"]["code"] == "only_the_user"
    status, body = await as_kernel(
        http_server_client, jp_base_url, "POST", f"{chat_path}/tools/t_1", {"run": True}
    )
    assert status == 403
    assert body["error"]["code"] == "only_the_user"
    assert (await api("GET", chat_path))[1]["mode"] == "ask"
    # Nor interrupt or restart the kernel (refused before anything is looked at).
    for action in ("interrupt", "restart"):
        status, body = await as_kernel(
            http_server_client, jp_base_url, "POST", f"{chat_path}/kernel/{action}", {}
        )
        assert (status, body["error"]["code"]) == (403, "only_the_user")
    # The kernel key still reads and writes the chat, as %conch needs.
    status, _ = await as_kernel(http_server_client, jp_base_url, "GET", chat_path, None)
    assert status == 200


async def test_yes_runs_once_and_a_second_answer_is_refused(
    api: Api,
    jp_serverapp: Any,
    kernel: NotebookKernel,
    http_server_client: Any,
    jp_base_url: str,
) -> None:
    _, chat = await api("POST", "conversations", {"path": kernel.path})
    tools = conch_of(jp_serverapp).tools
    call = asyncio.ensure_future(
        tools.call(
            chat["id"],
            Caller("analyst", "Analyst"),
            ToolCall("x", "run_code", {"code": "via_api = 'yes'"}),
            0,
        )
    )

    async def asking() -> list[dict[str, Any]]:
        return list((await api("GET", f"conversations/{chat['id']}"))[1]["asking"])

    [entry] = await wait_for(asking)
    assert entry["code"] == "via_api = 'yes'"
    answer = f"conversations/{chat['id']}/tools/{entry['call_id']}"
    for bad in ({"run": "yes"}, {"run": 1}, {}):
        assert (await api("POST", answer, bad))[0] == 400
    # The kernel key (which the code an agent runs holds) cannot say yes to this real run.
    status, body = await as_kernel(http_server_client, jp_base_url, "POST", answer, {"run": True})
    assert (status, body["error"]["code"]) == (403, "only_the_user")
    assert [a["call_id"] for a in await asking()] == [entry["call_id"]]  # still asking
    assert not call.done()
    assert await kernel.value("'via_api' in globals()") == "False"
    assert await api("POST", answer, {"run": True}) == (
        200,
        {"call_id": entry["call_id"], "run": True},
    )
    await call
    assert await kernel.value("via_api") == "'yes'"
    status, body = await api("POST", answer, {"run": True})
    assert status == 409
    assert body["error"]["code"] == "not_asking"
    assert (await api("POST", f"conversations/{chat['id']}/tools/t_never", {"run": False}))[
        0
    ] == 409
    assert (await api("POST", "conversations/c_nobody/tools/t_never", {"run": False}))[0] == 404
    _, seen = await api("GET", f"conversations/{chat['id']}")
    assert seen["asking"] == []
    [message] = [m for m in seen["messages"] if m["role"] == "tool"]
    assert (message["state"], message["agent"], message["tool"]) == ("ran", "analyst", "run_code")


async def test_a_door_chats_mode_cannot_be_lifted(api: Api, jp_serverapp: Any) -> None:
    store = conch_of(jp_serverapp).store
    door = await store.create_conversation(
        origin="peer", pairing_id="p_1", context_key="a/b", tainted={"kind": "person", "by": "X"}
    )
    status, _ = await api("PATCH", f"conversations/{door.id}", {"mode": "auto"})
    assert status == 404
    assert store.get_conversation(door.id).mode == "ask"  # type: ignore[union-attr]
