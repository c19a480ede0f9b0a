"""What every model provider speaks: a request in, a stream of text deltas, tool calls and usage
out.

The turn routine (rounds/turn.py) only knows this module. Providers turn a ModelRequest into their
wire format, stream the reply back as TextDelta items, and report token usage once as a Usage
item. A failure is a ProviderError whose words are shown to the user as Conch's note.

Tools: a request may offer tools (`tools`) and carry the tool loop so far (`steps`: what the
model called and what came back, which each wire sends in its provider's own format). A reply
that calls tools yields one ToolCall per call, whole, once its arguments have streamed in.
"""

from __future__ import annotations

import json
import math
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol, TypeVar

from ..core.errors import ConchError
from ..core.nesting import nests_deeper
from ..core.text import clean_text

if TYPE_CHECKING:
    from ..core.sse import SSEEvent

# "acp": a coding agent run as a process that speaks the Agent Client Protocol (coding/); the
# others are model providers this package streams from.
ProviderKind = Literal["openai", "anthropic", "offline", "acp"]


@dataclass(frozen=True)
class Turn:
    """One message of the history as the model sees it (already labelled by rounds/prompts.py)."""

    role: Literal["user", "assistant"]
    text: str


@dataclass(frozen=True)
class ToolSpec:
    """A tool as a model is offered it (each wire wraps it in its provider's format)."""

    name: str
    description: str
    parameters: dict[str, Any]  # a JSON Schema object


@dataclass(frozen=True)
class ToolCall:
    """A model's call of a tool. `arguments` is None when what it sent was not a JSON object."""

    id: str
    name: str
    arguments: dict[str, Any] | None


def tool_arguments(raw: str) -> dict[str, Any] | None:
    """A tool call's streamed arguments as an object; None when they are not a JSON object."""
    if not raw.strip():
        return {}
    try:
        value = json.loads(raw)
    except (ValueError, RecursionError):
        return None
    # Arguments nested past the bound are not an object Conch reads: nothing walks them.
    return value if isinstance(value, dict) and not nests_deeper(value) else None


@dataclass(frozen=True)
class ToolStep:
    """One trip round a tool loop: the model's text and calls, and each call's result (data)."""

    text: str
    calls: tuple[ToolCall, ...]
    results: tuple[str, ...]


@dataclass(frozen=True)
class ModelRequest:
    model: str
    system: str
    turns: tuple[Turn, ...]
    # The speaking agent's name and everyone in the room: only the offline model reads these.
    speaker: str = ""
    room: tuple[str, ...] = ()
    # The user's message this reply belongs to, for the offline model's scripted answer.
    user_text: str = ""
    max_tokens: int = 1024
    tools: tuple[ToolSpec, ...] = ()
    steps: tuple[ToolStep, ...] = ()


@dataclass(frozen=True)
class TextDelta:
    text: str


@dataclass(frozen=True)
class Usage:
    input_tokens: int
    output_tokens: int
    # Counted by Conch, not reported by the provider (see estimate_usage): marked in the ledger.
    estimated: bool = False

    def __add__(self, other: Usage) -> Usage:
        """Two requests' usage together (a tool loop asks the model more than once)."""
        return Usage(
            self.input_tokens + other.input_tokens,
            self.output_tokens + other.output_tokens,
            self.estimated or other.estimated,
        )


def estimate_usage(request: ModelRequest, reply_chars: int) -> Usage:
    """An upper-bound guess where the provider reported no usage (a server that ignores
    `include_usage`, a reply cut off by Stop or a deadline): about four characters a token,
    rounded up, for the whole prompt (system and history) and for what was said back. Real
    tokenizers average at least four characters a token on English, so this rarely undercounts.
    """
    asked = len(request.system) + sum(len(t.text) for t in request.turns)
    # A tool loop's request also carries what was called and what came back.
    asked += sum(len(s.text) + sum(map(len, s.results)) for s in request.steps)
    return Usage(math.ceil(asked / 4), math.ceil(reply_chars / 4), estimated=True)


StreamItem = TextDelta | Usage | ToolCall


class ProviderError(ConchError):
    """A reply that could not be had. `words` are for the user; `passing` failures may be retried.

    Code `provider`, status 502: the model provider, not the caller, failed (the round says the
    words as Conch's note). `provider_status` is the HTTP status the provider answered with, if
    any; `retry_after` the wait in seconds it asked for (a Retry-After header), if any.
    """

    status = 502

    def __init__(
        self,
        words: str,
        *,
        passing: bool = False,
        provider_status: int | None = None,
        retry_after: float | None = None,
    ) -> None:
        # Words for a person, which may carry a server's own (a hostile one's): cleaned, so
        # they can be stored and shown like any other text.
        words = clean_text(words)
        super().__init__("provider", words)
        self.passing = passing
        self.provider_status = provider_status
        self.retry_after = retry_after

    @property
    def words(self) -> str:
        return self.message

    @words.setter
    def words(self, words: str) -> None:
        self.message = words
        self.args = (words,)


@dataclass(frozen=True)
class ProviderConfig:
    kind: ProviderKind
    model: str = ""
    base_url: str | None = None
    api_key: str | None = field(default=None, repr=False)
    # An ACP agent's program and arguments, and the environment it is given on top of Conch's
    # (sealed like a key: filled in only by AgentStore.provider_for, never shown).
    command: str = ""
    args: tuple[str, ...] = ()
    env: dict[str, str] | None = field(default=None, repr=False)


class Provider(Protocol):
    def stream(self, request: ModelRequest) -> AsyncIterator[StreamItem]:
        """Yield TextDelta items as they arrive and one Usage item; raise ProviderError."""
        ...


class ChatWire(Protocol):
    """A hosted model's wire format (openai.py, anthropic.py): what to send, and how to read
    the events that come back. The HTTP exchange around it is shared (`HttpProvider`)."""

    @property
    def label(self) -> str: ...
    @property
    def key_env(self) -> str: ...
    @property
    def base_url(self) -> str: ...
    @property
    def url(self) -> str: ...
    def headers(self, key: str | None) -> dict[str, str]: ...
    def body(self, request: ModelRequest) -> dict[str, Any]: ...
    def read_reply(
        self, events: AsyncIterator[SSEEvent], request: ModelRequest
    ) -> AsyncIterator[StreamItem]: ...


T = TypeVar("T")


@asynccontextmanager
async def closing_stream(items: AsyncIterator[T]) -> AsyncIterator[AsyncIterator[T]]:
    """Iterate a stream and close it on the way out, even when the reader stops early.

    `async for` alone leaves an abandoned async generator open until it is garbage-collected;
    a reply stopped by the user must close its HTTP stream at once.
    """
    try:
        yield items
    finally:
        aclose = getattr(items, "aclose", None)
        if aclose is not None:
            await aclose()


@dataclass(frozen=True)
class Price:
    input_per_mtok: float = 0.0
    output_per_mtok: float = 0.0

    def cost(self, usage: Usage) -> float:
        return (
            usage.input_tokens * self.input_per_mtok + usage.output_tokens * self.output_per_mtok
        ) / 1_000_000
