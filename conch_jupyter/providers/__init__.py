"""Model providers: which one an agent gets, the one HTTP exchange, and the one retry policy.

Owns `make_provider` (a ProviderConfig in, a Provider out), `HttpProvider` (the streamed POST
both hosted wire formats share: timeouts, status codes and the words a person reads when it
fails), `stream_reply` (a passing failure before any text is tried once more; nothing else is)
and `detect_default_provider` (what the default agents use on first start).

The wire formats themselves live in `openai.py` and `anthropic.py`; the offline stand-in in
`offline.py`. An API key never appears in an error's words: any echo of it is masked here.
May import: `core`; nothing else of conch_jupyter.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import replace
from typing import Any

import httpx

from ..core.sse import SSEEvent, aiter_events
from ..core.text import clean_json, clean_text
from .anthropic import DEFAULT_BASE_URL as ANTHROPIC_URL
from .anthropic import AnthropicWire
from .base import (
    ChatWire,
    ModelRequest,
    Provider,
    ProviderConfig,
    ProviderError,
    StreamItem,
    TextDelta,
    ToolCall,
    closing_stream,
)
from .offline import OfflineProvider
from .openai import DEFAULT_BASE_URL as OPENAI_URL
from .openai import OpenAIWire

# 529 is Anthropic's "overloaded".
PASSING_STATUSES = frozenset({429, 500, 502, 503, 504, 529})
MAX_RETRY_AFTER = 10.0
OLLAMA_URL = "http://127.0.0.1:11434"
# All a reply may say, its text and its tool calls' arguments together: the largest output
# budgets today are about 64k tokens, some 250,000 characters at four a token, so a reply past
# eight times that is a server gone wrong, not a model answering; it is read no further, and
# said in words. (A run_code call's own bound is far lower: notebook/service.py's CODE_LIMIT.)
REPLY_CHARS = 2_000_000


class HttpProvider:
    """A Provider that streams one reply over HTTP in a ChatWire's format."""

    def __init__(
        self,
        wire: ChatWire,
        *,
        http: httpx.AsyncClient,
        model: str = "",
        api_key: str | None = None,
        env: Mapping[str, str] = os.environ,
        connect_timeout: float = 10.0,
        read_timeout: float = 60.0,
    ) -> None:
        self.wire = wire
        self.model = model
        self._http = http
        self._api_key = api_key
        self._env = env
        self.connect_timeout = connect_timeout
        self.read_timeout = read_timeout

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamItem]:
        # Read at call time, so a key exported after the server started is picked up.
        # Stripped: a key pasted with a trailing newline would otherwise be refused.
        key = (self._api_key or self._env.get(self.wire.key_env) or "").strip() or None
        request = replace(request, model=request.model or self.model)
        timeout = httpx.Timeout(self.read_timeout, connect=self.connect_timeout)
        answered = False
        try:
            async with self._http.stream(
                "POST",
                self.wire.url,
                json=self.wire.body(request),
                headers=self.wire.headers(key),
                timeout=timeout,
            ) as response:
                answered = True
                if not response.is_success:
                    raw = (await response.aread()).decode("utf-8", "replace")
                    raise self._refusal(response, raw, request.model, has_key=bool(key))
                events = aiter_events(response)
                said = 0
                async with closing_stream(self.wire.read_reply(events, request)) as items:
                    async for item in items:
                        clean = _cleaned(item)
                        said += _length(clean)
                        if said > REPLY_CHARS:
                            raise ProviderError(
                                f"The reply from the {self.wire.label} provider ran past"
                                f" {REPLY_CHARS:,} characters; Conch stopped reading it."
                            )
                        yield clean
        except ProviderError as error:
            if key and key in error.words:  # a server echoing the key must not show it
                error.words = error.words.replace(key, "***")
            raise
        except httpx.TimeoutException as error:
            raise ProviderError(self._timeout_words(error)) from None
        except UnicodeEncodeError:
            # Headers are ASCII; a key pasted with typographic quotes or dashes cannot be sent.
            raise ProviderError(
                f"The key for the {self.wire.label} provider has characters no key can have."
                f" Check {self.wire.key_env} or the agent's key."
            ) from None
        except (httpx.NetworkError, httpx.RemoteProtocolError):
            where = f"the {self.wire.label} provider at {self.wire.base_url}"
            if answered:
                raise ProviderError(f"The reply from {where} was cut off mid-stream.") from None
            # Refused or reset before an answer began: the next attempt may well connect.
            raise ProviderError(f"Could not connect to {where}.", passing=True) from None
        except (httpx.HTTPError, httpx.InvalidURL) as error:
            # A bad base URL or proxy: trying again cannot help. The class name says enough,
            # and unlike the message it cannot carry a header.
            raise ProviderError(
                f"Could not talk to the {self.wire.label} provider at {self.wire.base_url}"
                f" ({type(error).__name__}). Check the agent's base URL."
            ) from None

    def _timeout_words(self, error: httpx.TimeoutException) -> str:
        where = f"the {self.wire.label} provider at {self.wire.base_url}"
        if isinstance(error, httpx.ConnectTimeout | httpx.PoolTimeout):
            return f"Could not connect to {where} within {self.connect_timeout:g} s."
        return f"No answer from {where} within {self.read_timeout:g} s."

    def _refusal(
        self, response: httpx.Response, body: str, model: str, *, has_key: bool
    ) -> ProviderError:
        status = response.status_code
        label, base = self.wire.label, self.wire.base_url
        # 401 bodies may echo (part of) the key, so their detail is never shown.
        detail = "" if status == 401 else _error_detail(body)
        said = f" The server said: {detail}" if detail else ""
        if status in (401, 403):
            if has_key:
                words = f"The {label} provider refused the key ({status})."
                words += f" Check {self.wire.key_env} or the agent's key.{said}"
            else:
                words = f"The {label} provider at {base} needs a key ({status}) and none is set."
                words += f" Set {self.wire.key_env} or give the agent a key."
        elif status == 404:
            words = f"The model '{model}' was not found at {base} ({status}).{said}"
        elif status == 429:
            words = f"The {label} provider is limiting requests right now (429).{said}"
        elif status in PASSING_STATUSES:
            words = f"The {label} provider is having trouble right now ({status}).{said}"
        elif status == 400:
            words = f"The {label} provider rejected the request (400).{said}"
        else:
            words = f"The {label} provider answered with an error ({status}).{said}"
        return ProviderError(
            words,
            passing=status in PASSING_STATUSES,
            provider_status=status,
            retry_after=_seconds(response.headers.get("retry-after")),
        )


def _cleaned(item: StreamItem) -> StreamItem:
    """What a model said, as it enters Conch: its text and its tool calls (name and every string
    of the arguments) without control, invisible or unstorable characters (`clean_text`).
    One place for both wire formats, so no text of a model's can stop a turn later."""
    if isinstance(item, TextDelta):
        return TextDelta(clean_text(item.text))
    if isinstance(item, ToolCall):
        return ToolCall(clean_text(item.id), clean_text(item.name), clean_json(item.arguments))
    return item


def _length(item: StreamItem) -> int:
    if isinstance(item, TextDelta):
        return len(item.text)
    if isinstance(item, ToolCall):
        return len(item.name) + len(json.dumps(item.arguments, ensure_ascii=False))
    return 0


def _error_detail(body: str) -> str:
    """The server's own message from an error body (OpenAI, Anthropic and Ollama shapes)."""
    try:
        parsed: Any = SSEEvent(data=body).json()
        error = parsed.get("error", parsed)
        message = error.get("message") if isinstance(error, dict) else error
        text = str(message) if message else body
    except ValueError:
        text = body
    text = " ".join(text.split())
    return text if len(text) <= 300 else text[:300] + "…"


def _seconds(header: str | None) -> float | None:
    # Only the delta-seconds form: the HTTP-date form would need a clock, and no server we
    # speak to sends it.
    try:
        return max(0.0, float(header)) if header else None
    except ValueError:
        return None


async def stream_reply(
    provider: Provider,
    request: ModelRequest,
    *,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    retry_delay: float = 1.0,
) -> AsyncGenerator[StreamItem, None]:
    """The provider's reply; a passing failure before any text is tried once more after a wait."""
    for attempt in (1, 2):
        said_something = False
        try:
            # When our consumer stops (Stop pressed), the provider's HTTP stream closes now.
            async with closing_stream(provider.stream(request)) as items:
                async for item in items:
                    if isinstance(item, TextDelta) and item.text:
                        said_something = True
                    yield item
            return
        except ProviderError as error:
            # Text already shown cannot be taken back, so a second attempt would repeat it.
            if attempt == 2 or said_something or not error.passing:
                raise
            wait = retry_delay if error.retry_after is None else error.retry_after
            await sleep(min(wait, MAX_RETRY_AFTER))


def make_provider(
    config: ProviderConfig,
    *,
    http: httpx.AsyncClient,
    offline_delay: float = 0.03,
    env: Mapping[str, str] | None = None,
    connect_timeout: float = 10.0,
    read_timeout: float = 60.0,
) -> Provider:
    """The Provider for an agent's config. With no api_key, the key is read from `env`."""
    wire: ChatWire
    if config.kind == "offline":
        return OfflineProvider(offline_delay)
    if config.kind == "openai":
        wire = OpenAIWire(config.base_url) if config.base_url else OpenAIWire()
    elif config.kind == "anthropic":
        wire = AnthropicWire(config.base_url) if config.base_url else AnthropicWire()
    else:  # an ACP agent is no model provider: coding/ runs it (rounds/turn.py routes there)
        raise ValueError(f"unknown provider kind {config.kind!r}")
    return HttpProvider(
        wire,
        http=http,
        model=config.model,
        api_key=config.api_key,
        env=os.environ if env is None else env,
        connect_timeout=connect_timeout,
        read_timeout=read_timeout,
    )


def address_of(kind: str, base_url: str | None) -> str | None:
    """The base URL a provider of `kind` really calls: its own, or its kind's default; None
    for a kind that calls no address (the offline model). What an administrator's list of
    allowed base URLs is compared with."""
    defaults = {"openai": OPENAI_URL, "anthropic": ANTHROPIC_URL}
    if kind not in defaults:
        return None
    return base_url or defaults[kind]


def detect_default_provider(
    env: Mapping[str, str],
    http: httpx.Client | None = None,
    *,
    ollama_url: str = OLLAMA_URL,
    probe_timeout: float = 0.5,
) -> ProviderConfig:
    """What the default agents use on first start. Keys stay in the environment, not the config.

    Synchronous on purpose: it runs once while the server extension loads, before the event
    loop starts. `http` is a blocking client for the Ollama probe (one is made if not given).
    """
    if env.get("OPENAI_API_KEY"):
        return ProviderConfig("openai", model="gpt-4o-mini")
    if env.get("ANTHROPIC_API_KEY"):
        return ProviderConfig("anthropic", model="claude-3-5-haiku-latest")
    model = _first_ollama_model(http, ollama_url, probe_timeout)
    if model:
        return ProviderConfig("openai", model=model, base_url=f"{ollama_url}/v1")
    return ProviderConfig("offline", model="offline")


def _first_ollama_model(client: httpx.Client | None, base_url: str, timeout: float) -> str | None:
    try:
        if client is None:
            with httpx.Client() as own:
                response = own.get(f"{base_url}/api/tags", timeout=timeout)
        else:
            response = client.get(f"{base_url}/api/tags", timeout=timeout)
        models = response.json().get("models") if response.is_success else None
        name = models[0].get("name") if isinstance(models, list) and models else None
    except (httpx.HTTPError, ValueError, AttributeError):
        return None  # nothing (usable) listening: not an error, just no Ollama
    return name if isinstance(name, str) and name else None
