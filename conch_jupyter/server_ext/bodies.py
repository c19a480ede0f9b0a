"""The request bodies the REST API accepts, validated at the edge (unknown fields refused).

Text that people read (a message, a name, a persona, instructions, a title, a label) is cleaned as
it enters (`Text`: core.text.clean_text, after the length is checked): no control, invisible or
reordering characters reach the store or a model. A body holding a lone surrogate is not read at
all (pydantic's JSON parser refuses it, and `_words` in base.py says so).
"""

from __future__ import annotations

import math
from typing import Annotated, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    field_validator,
    model_validator,
)

from ..core.text import clean_text
from ..store.rows import Mode

Text = Annotated[str, AfterValidator(clean_text)]


class Body(BaseModel):
    model_config = ConfigDict(extra="forbid", str_strip_whitespace=False)


class ProviderIn(Body):
    kind: Literal["openai", "anthropic", "offline", "acp"]
    model: str = Field(default="", max_length=200)
    base_url: str | None = Field(default=None, max_length=2000)
    api_key: str | None = Field(default=None, max_length=500)
    # An ACP coding agent: the program, its arguments, and its environment (sealed, like a key).
    command: str | None = Field(default=None, max_length=1000)
    args: list[Annotated[str, Field(max_length=1000)]] | None = Field(default=None, max_length=64)
    env: dict[str, Annotated[str, Field(max_length=10_000)]] | None = None

    @field_validator("base_url")
    @classmethod
    def _http_only(cls, value: str | None) -> str | None:
        if value is not None and value and not value.startswith(("http://", "https://")):
            raise ValueError("base_url must start with http:// or https://")
        return value or None


class PriceIn(Body):
    input_per_mtok: float = Field(ge=0)
    output_per_mtok: float = Field(ge=0)

    @field_validator("input_per_mtok", "output_per_mtok")
    @classmethod
    def _finite(cls, value: float) -> float:
        if not math.isfinite(value):
            raise ValueError("a price must be a finite number")
        return value


class AgentIn(Body):
    name: Text = Field(max_length=200)
    persona: Text = Field(default="", max_length=2_000)
    instructions: Text = Field(default="", max_length=20_000)
    provider: ProviderIn = ProviderIn(kind="offline")
    price: PriceIn | None = None
    mcp: list[Annotated[str, Field(min_length=1, max_length=100)]] = Field(
        default=[], max_length=32
    )


class AgentPatch(Body):
    name: Text | None = Field(default=None, max_length=200)
    persona: Text | None = Field(default=None, max_length=2_000)
    instructions: Text | None = Field(default=None, max_length=20_000)
    provider: ProviderIn | None = None
    price: PriceIn | None = None
    mcp: list[Annotated[str, Field(min_length=1, max_length=100)]] | None = Field(
        default=None, max_length=32
    )


class ConversationIn(Body):
    title: Text = Field(default="", max_length=200)
    # The notebook's path under the server's root, as Jupyter's own APIs spell it.
    path: str | None = Field(default=None, max_length=1000)

    @field_validator("path")
    @classmethod
    def _a_path_under_the_root(cls, value: str | None) -> str | None:
        if value is None or not value.strip():
            return None
        parts = value.split("/")
        if value.startswith("/") or "\\" in value or "\0" in value or ".." in parts:
            raise ValueError("path must be a notebook's path under the server's root")
        return value


def _finite(value: float | None) -> float | None:
    if value is not None and not math.isfinite(value):
        raise ValueError("a limit must be a finite number of dollars")
    return value


Dollars = Annotated[float | None, AfterValidator(_finite)]


class ConversationPatch(Body):
    """The chat's mode, its own spending limit (`limit_usd`; null: the default), or both."""

    mode: Mode | None = None
    limit_usd: Dollars = None

    @model_validator(mode="after")
    def _something(self) -> ConversationPatch:
        if not self.model_fields_set:
            raise ValueError("give mode or limit_usd")
        if "mode" in self.model_fields_set and self.mode is None:
            raise ValueError("mode must be ask, auto or read")
        return self


class BudgetPatch(Body):
    """The month's budget (`monthly_usd`; null: the server's default)."""

    monthly_usd: Dollars


class ToolAnswer(Body):
    run: StrictBool


class HandedTake(Body):
    """A cell waiting in answered() asks for its kernel's next approved run."""

    proof: str = Field(min_length=64, max_length=64)
    wait: float = Field(default=10.0, ge=0, le=30)


class HandedGive(Body):
    """What the handed run printed (its start, cut by the kernel), its whole length, whether it
    raised."""

    proof: str = Field(min_length=64, max_length=64)
    output: str = Field(max_length=200_000)
    total: int = Field(ge=0)
    failed: StrictBool


class MessageIn(Body):
    text: Text = Field(min_length=1, max_length=16_000)

    @field_validator("text")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("the message is empty")
        return value
