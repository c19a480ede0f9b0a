"""The stored shape of `<data_dir>/agents/agents.json`: your agents as the file holds them.

Pydantic, because the file is an edge and people may edit it by hand: a file that does not read
is an error naming it (core/files.py), never silently replaced. Fields a later Conch adds survive a
rewrite by this one. The agents as the rest of Conch sees them are agents.py.
"""

from __future__ import annotations

from typing import Annotated, Literal

import pydantic

from ..core.names import slug_of, trimmed_name
from ..providers.base import ProviderKind

PERSONA_MAX = 2_000
INSTRUCTIONS_MAX = 20_000


def _stored_id(value: str) -> str:
    if slug_of(value) != value or len(value) > 60:
        raise ValueError(f"“{value}” is not an agent id (lowercase words joined by “-”).")
    return value


def _at_most(limit: int) -> pydantic.AfterValidator:
    def check(value: str) -> str:
        if len(value) > limit:
            raise ValueError(f"at most {limit:,} characters (this one has {len(value):,})")
        return value

    return pydantic.AfterValidator(check)


def _web_address(value: str | None) -> str | None:
    if not value or not value.strip():
        return None
    if not value.startswith(("http://", "https://")):
        raise ValueError("The provider's address must start with http:// or https://.")
    return value.strip()


_Dollars = Annotated[float, pydantic.Field(ge=0, allow_inf_nan=False)]


COMMAND_MAX = 1_000
ARGS_MAX = 64


def _program(value: str) -> str:
    value = value.strip()
    if len(value) > COMMAND_MAX or "\0" in value or "\n" in value:
        raise ValueError("The command must be one program's name or path, on one line.")
    return value


def _arguments(value: list[str]) -> list[str]:
    if len(value) > ARGS_MAX or any(len(a) > COMMAND_MAX or "\0" in a for a in value):
        raise ValueError(f"At most {ARGS_MAX} arguments, each one line of text.")
    return value


class StoredProvider(pydantic.BaseModel):
    kind: ProviderKind
    model: Annotated[str, pydantic.BeforeValidator(lambda v: "" if v is None else v)] = ""
    base_url: Annotated[str | None, pydantic.AfterValidator(_web_address)] = None
    # An ACP agent's program and arguments (its env is sealed, never in this file).
    command: Annotated[str, pydantic.AfterValidator(_program)] = ""
    args: Annotated[list[str], pydantic.AfterValidator(_arguments)] = []

    @pydantic.model_validator(mode="after")
    def _acp_has_a_command(self) -> StoredProvider:
        if self.kind == "acp" and not self.command:
            raise ValueError(
                "An ACP agent needs the command that starts it (for example claude-agent-acp)."
            )
        if self.kind != "acp" and (self.command or self.args):
            raise ValueError("Only an ACP agent has a command to run.")
        return self


class StoredPrice(pydantic.BaseModel):
    input_per_mtok: _Dollars = 0.0  # dollars per million tokens
    output_per_mtok: _Dollars = 0.0


MCP_SERVERS_MAX = 32


def _server_ids(value: list[str]) -> list[str]:
    if len(value) > MCP_SERVERS_MAX or any(not v or len(v) > 100 for v in value):
        raise ValueError(f"mcp names at most {MCP_SERVERS_MAX} MCP servers, by their ids.")
    return list(dict.fromkeys(value))


class StoredAgent(pydantic.BaseModel):
    # Fields a later Conch adds survive a rewrite by this one.
    model_config = pydantic.ConfigDict(extra="allow")

    id: Annotated[str, pydantic.AfterValidator(_stored_id)]
    name: Annotated[str, pydantic.AfterValidator(trimmed_name)]
    persona: Annotated[str, _at_most(PERSONA_MAX)] = ""
    instructions: Annotated[str, _at_most(INSTRUCTIONS_MAX)] = ""
    provider: StoredProvider
    price: StoredPrice | None = None
    created: float
    # The ids of your MCP servers whose tools this agent's turns are offered (none by default).
    mcp: Annotated[list[str], pydantic.AfterValidator(_server_ids)] = []


class AgentsFile(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="allow")

    version: Literal[1]
    agents: list[StoredAgent] = []

    @pydantic.model_validator(mode="after")
    def _unique(self) -> AgentsFile:
        ids: set[str] = set()
        names: set[str] = set()
        for agent in self.agents:
            if agent.id in ids:
                raise ValueError(f"two agents have the id “{agent.id}”")
            if agent.name.casefold() in names:
                raise ValueError(f"two agents are named “{agent.name}” (ignoring case)")
            ids.add(agent.id)
            names.add(agent.name.casefold())
        return self
