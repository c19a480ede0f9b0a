"""What every model provider speaks: a request in, a stream of text deltas and usage out.

The round driver only knows this module. Providers turn a ModelRequest into their wire format,
stream the reply back as TextDelta items, and report token usage once as a Usage item.
A failure is a ProviderError whose words are shown to the user as Conch's note.
"""

from __future__ import annotations

import math
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol, TypeVar

if TYPE_CHECKING:
    from .sse import SSEEvent

ProviderKind = Literal["openai", "anthropic", "offline"]


@dataclass(frozen=True)
class Turn:
    """One message of the history as the model sees it (already labelled by talk.py)."""

    role: Literal["user", "assistant"]
    text: str


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


@dataclass(frozen=True)
class TextDelta:
    text: str


@dataclass(frozen=True)
class Usage:
    input_tokens: int
    output_tokens: int
    # Counted by Conch, not reported by the provider (see estimate_usage): marked in the ledger.
    estimated: bool = False


def estimate_usage(request: ModelRequest, reply_chars: int) -> Usage:
    """An upper-bound guess where the provider reported no usage (a server that ignores
    `include_usage`, a reply cut off by Stop or a deadline): about four characters a token,
    rounded up, for the whole prompt (system and history) and for what was said back. Real
    tokenizers average at least four characters a token on English, so this rarely undercounts.
    """
    asked = len(request.system) + sum(len(t.text) for t in request.turns)
    return Usage(math.ceil(asked / 4), math.ceil(reply_chars / 4), estimated=True)


StreamItem = TextDelta | Usage


class ProviderError(Exception):
    """A reply that could not be had. `words` are for the user; `passing` failures may be retried.

    `retry_after` is the wait in seconds the provider asked for (a Retry-After header), if any.
    """

    def __init__(
        self,
        words: str,
        *,
        passing: bool = False,
        status: int | None = None,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(words)
        self.words = words
        self.passing = passing
        self.status = status
        self.retry_after = retry_after


@dataclass(frozen=True)
class ProviderConfig:
    kind: ProviderKind
    model: str = ""
    base_url: str | None = None
    api_key: str | None = field(default=None, repr=False)


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
