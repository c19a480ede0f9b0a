"""The kernel-side clients (client.py over client_base.py): both send the same requests, read a
live stream the same way (multi-line data too), and fail in the same words; then both against a
real server."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from conch_jupyter.client import AsyncConchClient, ConchClient, ConchClientError

from ..support.jupyter_process import JupyterProcess, free_port

pytestmark = pytest.mark.timeout(180)

SERVER = "http://conch.test/base/"
Handler = Callable[[httpx.Request], httpx.Response]


def pages_of(pages: Any) -> Any:
    """A blocking client's pages as a list; an async client's, as an awaitable of one."""
    if hasattr(pages, "__aiter__"):

        async def listed() -> list[Any]:
            return [page async for page in pages]

        return listed()
    return list(pages)


def both(handler: Handler) -> tuple[ConchClient, AsyncConchClient]:
    """A blocking and an async client whose every request is answered by `handler`."""
    transport = httpx.MockTransport(handler)
    return (
        ConchClient(SERVER, kernel_key="k", transport=transport),
        AsyncConchClient(SERVER, kernel_key="k", transport=transport),
    )


def run_both(handler: Handler, call: Callable[[Any], Any]) -> tuple[Any, Any]:
    """`call(client)` with each client: (blocking result, async result), or the error raised."""
    sync, async_ = both(handler)

    def outcome(run: Callable[[], Any]) -> Any:
        try:
            return run()
        except ConchClientError as error:
            return (type(error).__name__, error.status, error.code, error.message)

    async def awaited() -> Any:
        async with async_:
            return await call(async_)

    with sync:
        return outcome(lambda: call(sync)), outcome(lambda: asyncio.run(awaited()))


# --- every call, as the API expects it -------------------------------------------------------

CALLS: list[tuple[str, Callable[[Any], Any], str, str, Any, dict[str, Any], Any]] = [
    # (name, call, method, path, body sent, answer, what the call returns)
    (
        "agents",
        lambda c: c.agents(),
        "GET",
        "agents",
        None,
        {"agents": [{"id": "a"}]},
        [{"id": "a"}],
    ),
    (
        "create_agent",
        lambda c: c.create_agent(name="Critic"),
        "POST",
        "agents",
        {"name": "Critic"},
        {"id": "critic"},
        {"id": "critic"},
    ),
    (
        "update_agent",
        lambda c: c.update_agent("a/b", persona="p"),
        "PATCH",
        "agents/a%2Fb",
        {"persona": "p"},
        {"id": "a/b"},
        {"id": "a/b"},
    ),
    ("delete_agent", lambda c: c.delete_agent("x"), "DELETE", "agents/x", None, {}, None),
    (
        "conversations",
        lambda c: c.conversations(),
        "GET",
        "conversations?limit=500",  # the list, read page by page (one here)
        None,
        {"conversations": [], "next": None},
        [],
    ),
    (
        "create_conversation",
        lambda c: c.create_conversation("t", path="a/b.ipynb"),
        "POST",
        "conversations",
        {"title": "t", "path": "a/b.ipynb"},
        {"id": "c1"},
        {"id": "c1"},
    ),
    (
        "conversation",
        lambda c: c.conversation("c 1"),
        "GET",
        "conversations/c%201?limit=500",  # the whole chat, read page by page (one here)
        None,
        {"id": "c 1", "earlier": False},
        {"id": "c 1", "earlier": False, "messages": [], "events": [], "spend": []},
    ),
    (
        "conversation",
        lambda c: c.conversation("c 1", limit=20, before="m 9"),
        "GET",
        "conversations/c%201?limit=20&before=m+9",
        None,
        {"id": "c 1", "earlier": True},
        {"id": "c 1", "earlier": True},
    ),
    (
        "pages",
        lambda c: pages_of(c.pages("c1", size=5)),
        "GET",
        "conversations/c1?limit=5",
        None,
        {"id": "c1", "earlier": False},
        [{"id": "c1", "earlier": False}],
    ),
    ("policy", lambda c: c.policy(), "GET", "policy", None, {"locked": {}}, {"locked": {}}),
    (
        "take_handed",
        lambda c: c.take_handed("k 1", "p", 2.5),
        "POST",
        "kernels/k%201/handed",
        {"proof": "p", "wait": 2.5},
        {"run": None},
        {"run": None},
    ),
    (
        "give_handed",
        lambda c: c.give_handed("k1", "p", "r1", "out", 3, False),
        "POST",
        "kernels/k1/handed/r1",
        {"proof": "p", "output": "out", "total": 3, "failed": False},
        {"given": True},
        {"given": True},
    ),
    (
        "send",
        lambda c: c.send("c1", "hi"),
        "POST",
        "conversations/c1/messages",
        {"text": "hi"},
        {"message_id": "m1"},
        "m1",
    ),
    (
        "stop",
        lambda c: c.stop("c1"),
        "POST",
        "conversations/c1/round/stop",
        None,
        {"stopped": True},
        True,
    ),
    (
        "continue_round",
        lambda c: c.continue_round("c1"),
        "POST",
        "conversations/c1/round/continue",
        None,
        {"asking": "t_1"},
        {"asking": "t_1"},
    ),
    ("outside", lambda c: c.outside(), "GET", "outside", None, {"outside": []}, []),
    (
        "add_outside",
        lambda c: c.add_outside("http://x"),
        "POST",
        "outside",
        {"paste": "http://x"},
        {"id": "o"},
        {"id": "o"},
    ),
    (
        "add_outside",
        lambda c: c.add_outside("http://x", "Helper"),
        "POST",
        "outside",
        {"paste": "http://x", "name": "Helper"},
        {"id": "o"},
        {"id": "o"},
    ),
    (
        "rename_outside",
        lambda c: c.rename_outside("o", "Scout"),
        "PATCH",
        "outside/o",
        {"name": "Scout"},
        {"id": "o", "name": "Scout"},
        {"id": "o", "name": "Scout"},
    ),
    ("delete_outside", lambda c: c.delete_outside("o"), "DELETE", "outside/o", None, {}, None),
    (
        "repair_outside",
        lambda c: c.repair_outside(),
        "POST",
        "outside/repair",
        None,
        {"outside": [{"id": "o"}]},
        [{"id": "o"}],
    ),
    (
        "accept_outside_key",
        lambda c: c.accept_outside_key("o", "thumb"),
        "POST",
        "outside/o/repair",
        {"accept_key": True, "thumbprint": "thumb"},
        {"id": "o", "signed": None},
        {"id": "o", "signed": None},
    ),
    ("pairings", lambda c: c.pairings(), "GET", "pairings", None, {"pairings": []}, []),
    (
        "create_pairing",
        lambda c: c.create_pairing(["w"], remote=True),
        "POST",
        "pairings",
        {"agents": ["w"], "remote": True},
        {"id": "p"},
        {"id": "p"},
    ),
    ("delete_pairing", lambda c: c.delete_pairing("p"), "DELETE", "pairings/p", None, {}, None),
    (
        "pairing_chats",
        lambda c: c.pairing_chats("p"),
        "GET",
        "pairings/p/chats",
        None,
        {"chats": []},
        [],
    ),
]


@pytest.mark.parametrize(("name", "call", "method", "path", "body", "answer", "returns"), CALLS)
def test_each_call_sends_the_same_request_from_both_clients(
    name: str,
    call: Callable[[Any], Any],
    method: str,
    path: str,
    body: Any,
    answer: dict[str, Any],
    returns: Any,
) -> None:
    seen: list[tuple[str, str, Any, str | None]] = []

    def handler(request: httpx.Request) -> httpx.Response:
        sent = json.loads(request.content) if request.content else None
        key = request.headers.get("x-conch-kernel-key")
        seen.append((request.method, request.url.raw_path.decode(), sent, key))
        return httpx.Response(200, json=answer)

    assert run_both(handler, call) == (returns, returns)
    expected = (method, f"/base/conch/api/{path}", body, "k")
    assert seen == [expected, expected]


def test_every_call_of_the_api_is_in_both_clients() -> None:
    def public(cls: type) -> set[str]:
        return {n for n in vars(cls) if not n.startswith("_")} - {"close", "aclose", "do"}

    assert public(ConchClient) == public(AsyncConchClient)
    assert public(ConchClient) - {"follow"} == {name for name, *_ in CALLS}


# --- the live stream ---------------------------------------------------------------------------

# A snapshot whose JSON is spread over two data lines (the standard joins them with a newline),
# a comment, an event that is not ours, and the rest split across chunks.
STREAM = [
    b': keep-alive\n\ndata: {"type": "snapshot",\ndata:  "messages": []}\n\n',
    b"data: not json\n\n",
    b'data: {"type": "delta", "te',
    b'xt": "a\xe2\x80\xa8b"}\r\n\r\n',
]


def test_both_clients_follow_a_stream_with_multi_line_data() -> None:
    async def chunks() -> AsyncIterator[bytes]:
        for chunk in STREAM:
            yield chunk

    def answer(content: Any) -> Handler:
        def handler(request: httpx.Request) -> httpx.Response:
            assert request.url.raw_path == b"/base/conch/api/conversations/c1/events"
            return httpx.Response(
                200, headers={"content-type": "text/event-stream"}, content=content
            )

        return handler

    async def follow(client: AsyncConchClient) -> list[dict[str, Any]]:
        async with client:
            return [item async for item in client.follow("c1")]

    expected = [{"type": "snapshot", "messages": []}, {"type": "delta", "text": "a\u2028b"}]
    sync = ConchClient(SERVER, transport=httpx.MockTransport(answer(iter(STREAM))))
    assert list(sync.follow("c1")) == expected
    async_ = AsyncConchClient(SERVER, transport=httpx.MockTransport(answer(chunks())))
    assert asyncio.run(follow(async_)) == expected


# --- failures, in words ----------------------------------------------------------------------


def test_the_apis_error_and_other_failures_read_the_same_from_both() -> None:
    def refuse(request: httpx.Request) -> httpx.Response:
        error = {"code": "not_found", "message": "No such chat."}
        return httpx.Response(404, json={"error": error})

    expected = ("ConchClientError", 404, "not_found", "No such chat.")
    assert run_both(refuse, lambda c: c.conversation("x")) == (expected, expected)

    def html(request: httpx.Request) -> httpx.Response:
        return httpx.Response(502, text="<html>bad gateway</html>")

    expected = ("ConchClientError", 502, "http_error", "HTTP 502")
    assert run_both(html, lambda c: c.agents()) == (expected, expected)

    def no_list(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json={"agents": "none"})

    expected = ("ConchClientError", 200, "bad_answer", "The server's answer had no agents list.")
    assert run_both(no_list, lambda c: c.agents()) == (expected, expected)

    def not_json(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, text="[1, 2]")

    expected = ("ConchClientError", 200, "bad_answer", "The answer was not JSON.")
    assert run_both(not_json, lambda c: c.conversation("x")) == (expected, expected)


def test_a_server_that_is_not_there_is_said_in_words_by_both() -> None:
    url = f"http://127.0.0.1:{free_port()}/"  # nothing listens there
    sync = ConchClient(url, kernel_key="x", timeout=5)
    with pytest.raises(ConchClientError, match="did not answer") as failed:
        list(sync.follow("c1"))
    assert failed.value.code == "unreachable"

    async def follow() -> None:
        async with AsyncConchClient(url, kernel_key="x", timeout=5) as client:
            with pytest.raises(ConchClientError, match="did not answer"):
                await client.stop("c1")
            with pytest.raises(ConchClientError, match="did not answer"):
                [item async for item in client.follow("c1")]

    asyncio.run(follow())


# --- a real server -----------------------------------------------------------------------------


def test_both_clients_against_a_real_server(tmp_path: Path) -> None:
    """The async client follows a round live while the blocking one writes; the blocking one
    then follows the same chat and starts from a snapshot with the reply in it."""
    server = JupyterProcess(tmp_path / "data", tmp_path / "root")
    server.start()
    try:
        with ConchClient(server.url, token=server.token) as sync:
            chat = sync.create_conversation("both clients")

            async def live() -> list[dict[str, Any]]:
                items: list[dict[str, Any]] = []
                async with AsyncConchClient(server.url, token=server.token) as client:
                    async for item in client.follow(chat["id"]):
                        items.append(item)
                        if len(items) == 1:
                            await asyncio.to_thread(sync.send, chat["id"], "@Writer a line")
                        event = item.get("event") or {}
                        if item["type"] == "event" and event.get("type") == "round.ended":
                            break
                return items

            items = asyncio.run(asyncio.wait_for(live(), 60))
            assert items[0]["type"] == "snapshot"
            assert any(i["type"] == "delta" for i in items)
            replies = [i["message"] for i in items if i["type"] == "message"]
            assert [m["role"] for m in replies if m["role"] != "note"] == ["user", "agent"]

            snapshot = next(iter(sync.follow(chat["id"])))
            assert snapshot["type"] == "snapshot"
            stored = snapshot["conversation"]["messages"]
            assert [m["text"] for m in stored] == [m["text"] for m in replies]

            with pytest.raises(ConchClientError) as failed:
                sync.conversation("no-such-chat")
            assert failed.value.status == 404
            assert failed.value.message
            assert "Traceback" not in failed.value.message
    finally:
        server.stop()
