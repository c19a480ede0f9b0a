"""A scripted model server on loopback: the test double for hosted models.

Owns speaking the providers' real wire formats — OpenAI's `POST /v1/chat/completions` and
`POST /v1/responses` (the Responses API Codex speaks), Anthropic's `POST /v1/messages` and
Gemini's `streamGenerateContent?alt=sse` as Server-Sent Events (and Gemini's `generateContent`
and `countTokens` as JSON), plus Ollama's `GET /api/tags` and the `HEAD /` Claude Code sends
first — from replies a test queues. It runs its own asyncio loop in a background thread, so sync
tests and tests inside a Jupyter server's loop can both use it. Plain HTTP/1.1 by hand (stdlib
only): one request per connection, streamed bodies chunked, so a cut stream is visible to the
client.
"""

from __future__ import annotations

import asyncio
import contextlib
import http
import json
import re
import threading
from asyncio import StreamReader as Reader
from asyncio import StreamWriter as Writer
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from .jupyter_process import START_DEADLINE

_PIECES = re.compile(r"\s*\S+|\s+$")
_ERROR_TYPES = {400: "invalid_request_error", 401: "authentication_error",
    403: "permission_error", 404: "not_found_error", 429: "rate_limit_error",
    500: "api_error", 529: "overloaded_error"}  # fmt: skip


@dataclass(frozen=True)
class Reply:
    """One scripted answer. `chunks` default to the text cut after each word."""

    text: str = ""
    chunks: list[str] | None = None
    usage: tuple[int, int] | None = (10, 5)  # None: send no usage, like servers that ignore it
    status: int = 200
    error_body: Any = None  # JSON value (or str) for a non-200 answer; a realistic one if None
    delay_per_chunk: float = 0.0
    cut_after: int | None = None  # close the connection after this many text chunks
    retry_after: str | None = None
    stream_error: str | None = None  # an error event (e.g. "overloaded_error") instead of the end
    error_after: int = 0  # … sent after this many text chunks
    malformed_after: int | None = None  # a data line that is not JSON after this many chunks
    # Tool calls after the text, each streamed in the provider's own way: (name, arguments),
    # arguments as a dict (sent as JSON in fragments) or a raw string (sent as it is).
    tool_calls: tuple[tuple[str, dict[str, Any] | str], ...] = ()
    # A search for deferred tools that the client runs (Responses: a `tool_search_call` item,
    # as Codex offers MCP tools behind its `tool_search`): its arguments, after the text.
    tool_search: dict[str, Any] | None = None
    # The Anthropic ids of the tool calls (default `toolu_<n>`): an agent that keeps a turn's
    # history by id needs each call of a turn to have its own.
    tool_ids: tuple[str, ...] = ()

    def pieces(self) -> list[str]:
        return list(self.chunks) if self.chunks is not None else _PIECES.findall(self.text)


@dataclass(frozen=True)
class RecordedRequest:
    method: str
    path: str
    headers: dict[str, str]  # names lower-cased
    json: Any = None

    @property
    def route(self) -> str:
        """The path without its query (Claude Code asks `/v1/messages?beta=true`)."""
        return self.path.partition("?")[0]


_NOTHING_QUEUED = Reply(status=500, error_body={"error": {"message": "scripted: nothing queued"}})


class ScriptedModels:
    """`with ScriptedModels() as models:` — queue replies with `script`, or set `responder`."""

    def __init__(self) -> None:
        self.responder: Callable[[Any], Reply] | None = None
        self.ollama_models: list[str] | None = None  # GET /api/tags answers 404 while None
        self.requests: list[RecordedRequest] = []
        self._replies: deque[Reply] = deque()
        self._closed_early = 0
        self._changed = threading.Condition()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, name="scripted-models", daemon=True)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self.port = 0

    @property
    def root_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def openai_url(self) -> str:
        return f"{self.root_url}/v1"

    @property
    def anthropic_url(self) -> str:
        return self.root_url

    @property
    def closed_early(self) -> int:
        """How many streams the client closed before their end."""
        with self._changed:
            return self._closed_early

    def script(self, *replies: Reply) -> None:
        self._replies.extend(replies)

    def wait_closed_early(self, count: int = 1, timeout: float = 5.0) -> bool:
        with self._changed:
            return self._changed.wait_for(lambda: self._closed_early >= count, timeout)

    def __enter__(self) -> ScriptedModels:
        self._thread.start()
        if not self._ready.wait(START_DEADLINE):
            raise RuntimeError(f"the scripted model server did not start in {START_DEADLINE:g} s")
        return self

    def __exit__(self, *exc: object) -> None:
        if self._loop is not None and self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(5)

    def _run(self) -> None:
        asyncio.run(self._serve())

    async def _serve(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        self.port = server.sockets[0].getsockname()[1]
        self._ready.set()
        await self._stop.wait()
        # No wait_closed(): since 3.12 it waits for open streams, and a slow scripted reply must
        # not hold up the exit. asyncio.run cancels the handlers still running instead.
        server.close()

    async def _handle(self, reader: Reader, writer: Writer) -> None:
        try:
            request = await _read_request(reader)
            self.requests.append(request)
            await self._answer(request, reader, writer)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass  # the client went away; nothing to answer
        finally:
            writer.close()
            with contextlib.suppress(ConnectionError):
                await writer.wait_closed()

    async def _answer(self, request: RecordedRequest, reader: Reader, writer: Writer) -> None:
        if request.method == "HEAD":
            return await _send(writer, 200, "")
        if request.method == "GET" and request.path == "/api/tags":
            if self.ollama_models is None:
                return await _send(writer, 404, {"error": "not found"})
            tags = {"models": [{"name": n, "model": n} for n in self.ollama_models]}
            return await _send(writer, 200, tags)
        gemini = request.route.startswith("/v1beta/models/")
        if gemini and request.route.endswith(":countTokens"):
            return await _send(writer, 200, {"totalTokens": 10})
        if gemini and request.route.endswith(":generateContent"):
            reply = self._next_reply(request.json)
            events = list(_gemini_events(reply, ""))
            body = json.loads(str(events[-1]).removeprefix("data: "))
            chunks = [json.loads(e.removeprefix("data: ")) for e in events if isinstance(e, str)]
            parts = [p for c in chunks for p in c["candidates"][0]["content"]["parts"]]
            body["candidates"][0]["content"]["parts"] = parts
            return await _send(writer, 200, body)
        if request.method != "POST" or (request.route not in _EVENTS and not gemini):
            return await _send(writer, 404, {"error": f"no route {request.path}"})
        anthropic = request.route == "/v1/messages"
        reply = self._next_reply(request.json)
        if reply.status != 200:
            body = reply.error_body
            if body is None:
                body = _error_body(reply.status, request, anthropic)
            headers = {"retry-after": reply.retry_after} if reply.retry_after else {}
            return await _send(writer, reply.status, body, headers)
        await self._stream(reply, request, reader, writer)

    def _next_reply(self, body: Any) -> Reply:
        if self._replies:
            return self._replies.popleft()
        return _NOTHING_QUEUED if self.responder is None else self.responder(body)

    async def _stream(
        self, reply: Reply, request: RecordedRequest, reader: Reader, writer: Writer
    ) -> None:
        writer.write(
            b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
            b"cache-control: no-cache\r\ntransfer-encoding: chunked\r\nconnection: close\r\n\r\n"
        )
        # Reading hits end-of-file when the client closes its side: that is "closed early".
        gone = asyncio.ensure_future(reader.read(1))
        anthropic = request.route == "/v1/messages"
        events = _gemini_events if request.route.startswith("/v1beta/") else _EVENTS[request.route]
        try:
            for step in events(reply, str((request.json or {}).get("model", ""))):
                if isinstance(step, int):  # a marker: `step` text chunks have been sent
                    if step == reply.cut_after:
                        return  # no final empty chunk: the client sees an incomplete body
                    if step == reply.malformed_after:
                        await _chunk(writer, 'data: {"choices": [{"delta": \n\n')
                    if reply.stream_error and step == reply.error_after:
                        await _chunk(writer, _error_event(reply.stream_error, anthropic))
                        break
                    if reply.delay_per_chunk and step:
                        await asyncio.sleep(reply.delay_per_chunk)
                    continue
                if gone.done():
                    raise ConnectionResetError
                await _chunk(writer, step)
            writer.write(b"0\r\n\r\n")
            await writer.drain()
        except ConnectionError:
            with self._changed:
                self._closed_early += 1
                self._changed.notify_all()
        finally:
            gone.cancel()
            with contextlib.suppress(asyncio.CancelledError, ConnectionError):
                await gone


async def _read_request(reader: Reader) -> RecordedRequest:
    head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1")
    start, *lines = head.split("\r\n")
    method, path, _ = start.split(" ", 2)
    fields = (line.partition(":") for line in lines if line)
    headers = {name.strip().lower(): value.strip() for name, _, value in fields}
    raw = await reader.readexactly(int(headers.get("content-length", "0")))
    return RecordedRequest(method, path, headers, json.loads(raw) if raw else None)


async def _send(
    writer: Writer, status: int, body: Any, headers: dict[str, str] | None = None
) -> None:
    data = body.encode() if isinstance(body, str) else json.dumps(body).encode()
    reason = "Overloaded" if status == 529 else http.HTTPStatus(status).phrase
    head = f"HTTP/1.1 {status} {reason}\r\ncontent-type: application/json\r\n"
    head += f"content-length: {len(data)}\r\nconnection: close\r\n"
    head += "".join(f"{k}: {v}\r\n" for k, v in (headers or {}).items())
    writer.write(head.encode() + b"\r\n" + data)
    await writer.drain()


async def _chunk(writer: Writer, text: str) -> None:
    data = text.encode()
    writer.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
    await writer.drain()


def _error_body(status: int, request: RecordedRequest, anthropic: bool) -> Any:
    kind = _ERROR_TYPES.get(status, "api_error")
    message = f"scripted {kind}"
    if status == 401:
        # Like the real services, echo (here: all of) the key, to prove Conch never shows it.
        key = request.headers.get("x-api-key") or request.headers.get("authorization", "")
        message = f"Incorrect API key provided: {key.removeprefix('Bearer ')}"
    if anthropic:
        return {"type": "error", "error": {"type": kind, "message": message}}
    return {"error": {"message": message, "type": kind, "param": None, "code": None}}


def _data(value: Any) -> str:
    """An OpenAI event: a bare `data:` line."""
    return f"data: {value if isinstance(value, str) else json.dumps(value)}\n\n"


def _typed(kind: str, **fields: Any) -> str:
    """An Anthropic event: its name is always its data's `type`."""
    return f"event: {kind}\ndata: {json.dumps({'type': kind, **fields})}\n\n"


def _openai_events(reply: Reply, model: str) -> Iterator[str | int]:
    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
        return {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 0,
                "model": model, "choices": [choice], "usage": None}  # fmt: skip

    yield _data(chunk({"role": "assistant", "content": ""}))
    for i, piece in enumerate(reply.pieces()):
        yield i
        yield _data(chunk({"content": piece}))
    yield len(reply.pieces())
    for index, (name, arguments) in enumerate(reply.tool_calls):
        start = {"index": index, "id": f"call_{index}", "type": "function",
                 "function": {"name": name, "arguments": ""}}  # fmt: skip
        yield _data(chunk({"tool_calls": [start]}))
        for piece in _fragments(arguments):
            yield _data(chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]}))
    yield _data(chunk({}, "tool_calls" if reply.tool_calls else "stop"))
    if reply.usage is not None:
        tokens_in, tokens_out = reply.usage
        usage = {"prompt_tokens": tokens_in, "completion_tokens": tokens_out,
                 "total_tokens": tokens_in + tokens_out}  # fmt: skip
        yield _data({**chunk({}), "choices": [], "usage": usage})
    yield _data("[DONE]")


def _anthropic_events(reply: Reply, model: str) -> Iterator[str | int]:
    tokens_in, tokens_out = reply.usage or (0, 0)
    message: dict[str, Any] = {"id": "msg_1", "type": "message", "role": "assistant",
        "content": [], "model": model, "stop_reason": None, "stop_sequence": None,
        "usage": {"input_tokens": tokens_in, "output_tokens": 1,
                  "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}}  # fmt: skip
    yield _typed("message_start", message=message)
    yield _typed("content_block_start", index=0, content_block={"type": "text", "text": ""})
    yield _typed("ping")
    for i, piece in enumerate(reply.pieces()):
        yield i
        yield _typed("content_block_delta", index=0, delta={"type": "text_delta", "text": piece})
    yield len(reply.pieces())
    yield _typed("content_block_stop", index=0)
    for index, (name, arguments) in enumerate(reply.tool_calls, 1):
        given = reply.tool_ids[index - 1] if index <= len(reply.tool_ids) else None
        block = {"type": "tool_use", "id": given or f"toolu_{index}", "name": name, "input": {}}
        yield _typed("content_block_start", index=index, content_block=block)
        for piece in _fragments(arguments):
            delta = {"type": "input_json_delta", "partial_json": piece}
            yield _typed("content_block_delta", index=index, delta=delta)
        yield _typed("content_block_stop", index=index)
    reason = "tool_use" if reply.tool_calls else "end_turn"
    stop = {"stop_reason": reason, "stop_sequence": None}
    yield _typed("message_delta", delta=stop, usage={"output_tokens": tokens_out})
    yield _typed("message_stop")


def _responses_events(reply: Reply, model: str) -> Iterator[str | int]:
    """OpenAI's Responses API as it streams: typed events, each output item added, its deltas,
    done, and `response.completed` with the whole output and the usage."""
    response: dict[str, Any] = {"id": "resp_1", "object": "response", "created_at": 0,
        "status": "in_progress", "model": model, "output": []}  # fmt: skip
    yield _typed("response.created", response=response, sequence_number=0)
    output: list[dict[str, Any]] = []
    text = "".join(reply.pieces())
    item: dict[str, Any] = {"id": "msg_1", "type": "message", "status": "in_progress",
        "role": "assistant", "content": []}  # fmt: skip
    yield _typed("response.output_item.added", output_index=0, item=item)
    part = {"type": "output_text", "text": "", "annotations": []}
    yield _typed("response.content_part.added", item_id="msg_1", output_index=0,
                 content_index=0, part=part)  # fmt: skip
    for i, piece in enumerate(reply.pieces()):
        yield i
        yield _typed("response.output_text.delta", item_id="msg_1", output_index=0,
                     content_index=0, delta=piece, logprobs=[])  # fmt: skip
    yield len(reply.pieces())
    part = {**part, "text": text}
    yield _typed("response.output_text.done", item_id="msg_1", output_index=0, content_index=0,
                 text=text, logprobs=[])  # fmt: skip
    yield _typed("response.content_part.done", item_id="msg_1", output_index=0,
                 content_index=0, part=part)  # fmt: skip
    item = {**item, "status": "completed", "content": [part]}
    yield _typed("response.output_item.done", output_index=0, item=item)
    output.append(item)
    for index, (name, arguments) in enumerate(reply.tool_calls, 1):
        call: dict[str, Any] = {"id": f"fc_{index}", "type": "function_call",
            "status": "in_progress", "call_id": f"call_{index}", "name": name,
            "arguments": ""}  # fmt: skip
        if "/" in name:  # a tool of a namespace (Codex offers each MCP server's tools in one)
            call["namespace"], call["name"] = name.split("/", 1)
        yield _typed("response.output_item.added", output_index=index, item=call)
        for piece in _fragments(arguments):
            yield _typed("response.function_call_arguments.delta", item_id=call["id"],
                         output_index=index, delta=piece)  # fmt: skip
        whole = "".join(_fragments(arguments))
        yield _typed("response.function_call_arguments.done", item_id=call["id"],
                     output_index=index, arguments=whole)  # fmt: skip
        call = {**call, "status": "completed", "arguments": whole}
        yield _typed("response.output_item.done", output_index=index, item=call)
        output.append(call)
    if reply.tool_search is not None:
        index = len(output)
        search = {"id": "ts_1", "type": "tool_search_call", "status": "in_progress",
            "call_id": "search_1", "execution": "client",
            "arguments": reply.tool_search}  # fmt: skip
        yield _typed("response.output_item.added", output_index=index, item=search)
        search = {**search, "status": "completed"}
        yield _typed("response.output_item.done", output_index=index, item=search)
        output.append(search)
    tokens_in, tokens_out = reply.usage or (0, 0)
    usage = {"input_tokens": tokens_in, "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": tokens_out, "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": tokens_in + tokens_out}  # fmt: skip
    done = {**response, "status": "completed", "output": output, "usage": usage}
    yield _typed("response.completed", response=done)


def _gemini_events(reply: Reply, model: str) -> Iterator[str | int]:
    """Gemini's `streamGenerateContent?alt=sse`: each chunk a whole response with the new parts;
    function calls whole, in the last one, with the finish reason and the usage."""

    def chunk(parts: list[dict[str, Any]], last: bool = False) -> str:
        candidate: dict[str, Any] = {"content": {"parts": parts, "role": "model"}, "index": 0}
        body: dict[str, Any] = {"candidates": [candidate], "modelVersion": "scripted"}
        if last:
            candidate["finishReason"] = "STOP"
            tokens_in, tokens_out = reply.usage or (0, 0)
            body["usageMetadata"] = {"promptTokenCount": tokens_in,
                "candidatesTokenCount": tokens_out,
                "totalTokenCount": tokens_in + tokens_out}  # fmt: skip
        return _data(body)

    pieces = reply.pieces()
    for i, piece in enumerate(pieces):
        yield i
        yield chunk([{"text": piece}])
    yield len(pieces)
    calls = [{"functionCall": {"name": name, "args": args if isinstance(args, dict) else {}}}
             for name, args in reply.tool_calls]  # fmt: skip
    yield chunk(calls or [{"text": ""}], last=True)


_EVENTS: dict[str, Callable[[Reply, str], Iterator[str | int]]] = {
    "/v1/chat/completions": _openai_events,
    "/v1/messages": _anthropic_events,
    "/v1/responses": _responses_events,
}


def _fragments(arguments: dict[str, Any] | str) -> list[str]:
    """A tool call's arguments as the JSON fragments a streaming model sends (three pieces)."""
    text = arguments if isinstance(arguments, str) else json.dumps(arguments)
    third = max(len(text) // 3, 1)
    return [text[i : i + third] for i in range(0, len(text), third)] or [""]


def _error_event(kind: str, anthropic: bool) -> str:
    error = {"type": kind, "message": f"scripted {kind}"}
    return _typed("error", error=error) if anthropic else _data({"error": error})
