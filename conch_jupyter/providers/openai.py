"""The OpenAI-compatible chat-completions wire format (OpenAI, Ollama, vLLM, LM Studio, llama.cpp).

Owns what goes on the wire — the URL, headers and body of a streamed `POST /chat/completions` —
and reading the reply's events back into TextDelta items and one Usage. The HTTP exchange,
timeouts, status codes and retries live in `providers/__init__.py`, shared with Anthropic.

Reply stream: `data: {chunk}` events whose `choices[0].delta.content` carry text, one chunk
with a `finish_reason`, then (asked for by `stream_options.include_usage`) a chunk with empty
`choices` and the `usage`, then `data: [DONE]`.

Tools: offered as `tools: [{type: "function", function: {name, description, parameters}}]`.
A call streams as `delta.tool_calls: [{index, id, function: {name, arguments}}]` pieces, the
arguments a JSON string in fragments (finish_reason `tool_calls`); each call is yielded whole at
the end. The loop so far goes back as an assistant message with `tool_calls`, then one
`{role: "tool", tool_call_id, content}` message per result.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from ..core.sse import SSEEvent
from .base import (
    ModelRequest,
    ProviderError,
    StreamItem,
    TextDelta,
    ToolCall,
    Usage,
    estimate_usage,
    tool_arguments,
)

DEFAULT_BASE_URL = "https://api.openai.com/v1"
KEY_ENV = "OPENAI_API_KEY"


@dataclass(frozen=True)
class OpenAIWire:
    base_url: str = DEFAULT_BASE_URL

    @property
    def label(self) -> str:
        return "openai"

    @property
    def key_env(self) -> str:
        return KEY_ENV

    @property
    def url(self) -> str:
        return self.base_url.rstrip("/") + "/chat/completions"

    def headers(self, key: str | None) -> dict[str, str]:
        headers = {"accept": "text/event-stream"}
        if key:  # local servers (Ollama, llama.cpp) take no key
            headers["authorization"] = f"Bearer {key}"
        return headers

    def body(self, request: ModelRequest) -> dict[str, Any]:
        messages: list[dict[str, Any]] = [{"role": "system", "content": request.system}]
        messages += [{"role": t.role, "content": t.text} for t in request.turns]
        for step in request.steps:
            calls = [
                {
                    "id": call.id,
                    "type": "function",
                    "function": {"name": call.name, "arguments": json.dumps(call.arguments or {})},
                }
                for call in step.calls
            ]
            messages.append(
                {"role": "assistant", "content": step.text or None, "tool_calls": calls}
            )
            messages += [
                {"role": "tool", "tool_call_id": call.id, "content": result}
                for call, result in zip(step.calls, step.results, strict=True)
            ]
        # OpenAI's newer models refuse `max_tokens` and every OpenAI chat model takes
        # `max_completion_tokens`; compatible servers know only `max_tokens`.
        limit = "max_completion_tokens" if _is_openai_itself(self.base_url) else "max_tokens"
        body: dict[str, Any] = {
            "model": request.model,
            "messages": messages,
            "stream": True,
            "stream_options": {"include_usage": True},
            limit: request.max_tokens,
        }
        if request.tools:
            body["tools"] = [
                {
                    "type": "function",
                    "function": {
                        "name": t.name,
                        "description": t.description,
                        "parameters": t.parameters,
                    },
                }
                for t in request.tools
            ]
        return body

    async def read_reply(
        self, events: AsyncIterator[SSEEvent], request: ModelRequest
    ) -> AsyncIterator[StreamItem]:
        usage: Usage | None = None
        finished = False
        text_length = 0
        calls: dict[int, dict[str, Any]] = {}  # the tool calls streaming in, by index
        async for event in events:
            if event.data == "[DONE]":
                for call in _whole_calls(calls):
                    yield call
                yield usage or estimate_usage(request, text_length)
                return
            chunk = _chunk(event)
            if isinstance(chunk.get("usage"), dict):
                usage = _usage(chunk["usage"])
            choices = chunk.get("choices") or []
            if not isinstance(choices, list):
                raise _malformed()
            for choice in choices:
                if not isinstance(choice, dict) or choice.get("index", 0) != 0:
                    continue  # we ask for one choice; ignore any others
                delta = choice.get("delta") or {}
                content = delta.get("content") if isinstance(delta, dict) else None
                if isinstance(content, str) and content:
                    text_length += len(content)
                    yield TextDelta(content)
                pieces = delta.get("tool_calls") if isinstance(delta, dict) else None
                for piece in pieces if isinstance(pieces, list) else []:
                    _add_call_piece(calls, piece)
                if choice.get("finish_reason"):
                    finished = True
        if finished:
            # Some compatible servers end the body without `[DONE]`; a finish_reason is enough.
            for call in _whole_calls(calls):
                yield call
            yield usage or estimate_usage(request, text_length)
            return
        raise ProviderError("The reply from the openai provider stopped before it was finished.")


def _add_call_piece(calls: dict[int, dict[str, Any]], piece: Any) -> None:
    """Fold one streamed fragment of a tool call into the call it belongs to (by index)."""
    if not isinstance(piece, dict):
        raise _malformed()
    index = piece.get("index", 0)
    if not isinstance(index, int):
        raise _malformed()
    call = calls.setdefault(index, {"id": "", "name": "", "arguments": ""})
    function = piece.get("function") or {}
    if isinstance(piece.get("id"), str):
        call["id"] += piece["id"]
    if isinstance(function, dict):
        if isinstance(function.get("name"), str):
            call["name"] += function["name"]
        if isinstance(function.get("arguments"), str):
            call["arguments"] += function["arguments"]


def _whole_calls(calls: dict[int, dict[str, Any]]) -> list[ToolCall]:
    # Some compatible servers send no id: one is made up, so the result can still answer it.
    return [
        ToolCall(c["id"] or f"call_{i}", c["name"], tool_arguments(c["arguments"]))
        for i, c in sorted(calls.items())
    ]


def _is_openai_itself(base_url: str) -> bool:
    return (urlsplit(base_url).hostname or "").endswith("api.openai.com")


def _malformed() -> ProviderError:
    return ProviderError("The openai provider sent a reply Conch could not read (malformed data).")


def _chunk(event: SSEEvent) -> dict[str, Any]:
    try:
        chunk = event.json()
    except ValueError:
        raise _malformed() from None
    error = chunk.get("error")
    if error is not None:
        # vLLM, Ollama and OpenAI itself report a failure after the stream opened this way.
        message = error.get("message") if isinstance(error, dict) else error
        raise ProviderError(f"The openai provider stopped with an error: {str(message)[:300]}")
    return chunk


def _usage(raw: dict[str, Any]) -> Usage:
    try:
        return Usage(int(raw.get("prompt_tokens") or 0), int(raw.get("completion_tokens") or 0))
    except (TypeError, ValueError):
        raise _malformed() from None
