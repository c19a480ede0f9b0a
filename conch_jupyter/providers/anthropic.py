"""The Anthropic Messages API wire format.

Owns what goes on the wire — the URL, headers and body of a streamed `POST /v1/messages`, with
the history reshaped into the alternating user/assistant turns the API demands — and reading the
reply's events back into TextDelta items and one Usage. The HTTP exchange, timeouts, status codes
and retries live in `providers/__init__.py`, shared with OpenAI.

Tools: offered as `tools: [{name, description, input_schema}]`. A call streams as a `tool_use`
content block (content_block_start with its id and name, `input_json_delta` fragments of its
input, content_block_stop), yielded whole at its stop. The loop so far goes back as an assistant
message of `text` and `tool_use` blocks, then a user message of `tool_result` blocks.

Reply stream: message_start (usage.input_tokens), content_block_start, ping,
content_block_delta… (text_delta), content_block_stop, message_delta (usage.output_tokens, a
running total), message_stop. An `error` event may arrive at any point instead.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable
from dataclasses import dataclass
from typing import Any

from ..core.sse import SSEEvent
from .base import (
    ModelRequest,
    ProviderError,
    StreamItem,
    TextDelta,
    ToolCall,
    ToolStep,
    Turn,
    Usage,
    tool_arguments,
)

DEFAULT_BASE_URL = "https://api.anthropic.com"
KEY_ENV = "ANTHROPIC_API_KEY"
API_VERSION = "2023-06-01"
# The API needs a user turn first and rejects an assistant turn last (it would be a prefill).
OPENING_TURN = "(The conversation so far follows.)"
CLOSING_TURN = "(Please continue.)"
# Error types that mean "busy right now"; the same request may well work a moment later.
PASSING_ERRORS = frozenset({"overloaded_error", "api_error", "rate_limit_error"})


@dataclass(frozen=True)
class AnthropicWire:
    base_url: str = DEFAULT_BASE_URL

    @property
    def label(self) -> str:
        return "anthropic"

    @property
    def key_env(self) -> str:
        return KEY_ENV

    @property
    def url(self) -> str:
        return self.base_url.rstrip("/") + "/v1/messages"

    def headers(self, key: str | None) -> dict[str, str]:
        headers = {"accept": "text/event-stream", "anthropic-version": API_VERSION}
        if key:
            headers["x-api-key"] = key
        return headers

    def body(self, request: ModelRequest) -> dict[str, Any]:
        messages: list[dict[str, Any]] = list(anthropic_messages(request.turns))
        for step in request.steps:
            messages += _step_messages(step)
        body: dict[str, Any] = {
            "model": request.model,
            "max_tokens": request.max_tokens,
            "messages": messages,
            "stream": True,
        }
        if request.system:
            body["system"] = request.system
        if request.tools:
            body["tools"] = [
                {"name": t.name, "description": t.description, "input_schema": t.parameters}
                for t in request.tools
            ]
        return body

    async def read_reply(
        self, events: AsyncIterator[SSEEvent], request: ModelRequest
    ) -> AsyncIterator[StreamItem]:
        input_tokens = output_tokens = 0
        calls: dict[int, dict[str, str]] = {}  # tool_use blocks streaming in, by index
        async for event in events:
            message = _message(event)
            kind = message.get("type")
            if kind == "message_start":
                usage = _object(_object(message.get("message")).get("usage"))
                input_tokens = _count(usage.get("input_tokens"))
                output_tokens = _count(usage.get("output_tokens"))
            elif kind == "content_block_start":
                block = _object(message.get("content_block"))
                if block.get("type") == "tool_use":
                    index = _count(message.get("index"))
                    calls[index] = {
                        "id": str(block.get("id") or f"toolu_{index}"),
                        "name": str(block.get("name") or ""),
                        "input": "",
                    }
            elif kind == "content_block_delta":
                delta = _object(message.get("delta"))
                text = delta.get("text")
                partial = delta.get("partial_json")
                # Other deltas (thinking, signatures) are not reply text.
                if delta.get("type") == "text_delta" and isinstance(text, str) and text:
                    yield TextDelta(text)
                elif delta.get("type") == "input_json_delta" and isinstance(partial, str):
                    index = _count(message.get("index"))
                    if index in calls:
                        calls[index]["input"] += partial
            elif kind == "content_block_stop":
                call = calls.pop(_count(message.get("index")), None)
                if call is not None:
                    yield ToolCall(call["id"], call["name"], tool_arguments(call["input"]))
            elif kind == "message_delta":
                usage = _object(message.get("usage"))
                if "output_tokens" in usage:
                    output_tokens = _count(usage["output_tokens"])
            elif kind == "message_stop":
                yield Usage(input_tokens, output_tokens)
                return
            elif kind == "error":
                raise _stream_error(_object(message.get("error")))
            # ping and event types added later carry nothing for us.
        raise ProviderError("The reply from the anthropic provider stopped before it was finished.")


def anthropic_messages(turns: Iterable[Turn]) -> list[dict[str, str]]:
    """The history as strictly alternating turns, starting and ending with the user."""
    messages: list[dict[str, str]] = []
    for turn in turns:
        if not turn.text.strip():
            continue  # the API rejects empty content
        if messages and messages[-1]["role"] == turn.role:
            messages[-1]["content"] += "\n\n" + turn.text
        else:
            messages.append({"role": turn.role, "content": turn.text})
    if not messages or messages[0]["role"] != "user":
        messages.insert(0, {"role": "user", "content": OPENING_TURN})
    if messages[-1]["role"] != "user":
        messages.append({"role": "user", "content": CLOSING_TURN})
    return messages


def _step_messages(step: ToolStep) -> list[dict[str, Any]]:
    """One trip of the tool loop: the model's text and tool_use blocks, then their results."""
    said: list[dict[str, Any]] = [{"type": "text", "text": step.text}] if step.text.strip() else []
    said += [
        {"type": "tool_use", "id": c.id, "name": c.name, "input": c.arguments or {}}
        for c in step.calls
    ]
    results = [
        {"type": "tool_result", "tool_use_id": c.id, "content": r}
        for c, r in zip(step.calls, step.results, strict=True)
    ]
    return [{"role": "assistant", "content": said}, {"role": "user", "content": results}]


def _malformed() -> ProviderError:
    return ProviderError(
        "The anthropic provider sent a reply Conch could not read (malformed data)."
    )


def _message(event: SSEEvent) -> dict[str, Any]:
    try:
        return event.json()
    except ValueError:
        raise _malformed() from None


def _object(value: Any) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise _malformed()
    return value


def _count(value: Any) -> int:
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, int):
        raise _malformed()
    return value


def _stream_error(error: dict[str, Any]) -> ProviderError:
    kind = str(error.get("type") or "unknown_error")
    if kind == "overloaded_error":
        return ProviderError(
            "The anthropic provider is overloaded right now (overloaded_error).", passing=True
        )
    detail = str(error.get("message") or "")[:300]
    words = f"The anthropic provider stopped with an error ({kind})"
    return ProviderError(
        f"{words}: {detail}" if detail else f"{words}.", passing=kind in PASSING_ERRORS
    )
