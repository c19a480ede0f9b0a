"""Your agents: the list kept in `<data_dir>/agents/agents.json`, and which model key is whose.

Owns your agents as Conch sees them, their ids (a slug of the name, fixed at creation so chats
and pairings that name an agent keep working after a rename; the name rules are core/names.py), and
the link to each agent's model key (the file's shape is agents/file.py). Keys live only in the
sealed `models.secrets.json` (keyed by agent id), never in agents.json, `to_public()` or a repr;
so does an ACP agent's environment (`<id>:env`, its values as JSON: a coding agent's own API keys),
of which the owner's view shows only the names.

Two views of an agent: `to_public()` is for its owner (it includes the private instructions);
`card_view()` is the most any other agent may see (name and persona).

Not thread-safe: one thread (the Jupyter server's event loop) reads and writes the file.
"""

from __future__ import annotations

import builtins
import dataclasses
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import pydantic

from ..core.errors import ConchError
from ..core.files import (
    Stamp,
    StoreError,
    atomic_write_json,
    describe_validation_error,
    ensure_private_dir,
    file_stamp,
    read_json,
)
from ..core.names import first_clash, same_name, slug_of, trimmed_name
from ..core.sealed import SealedFile
from ..providers.base import Price, ProviderConfig
from .file import AgentsFile, StoredAgent, StoredProvider

_CHANGEABLE = frozenset(
    {"name", "persona", "instructions", "provider", "price", "api_key", "acp_env", "mcp"}
)
ENV_NAME_MAX = 200
ENV_VALUE_MAX = 10_000
ENV_MAX = 64

# The two agents a first start makes, so "@Researcher find options, @Writer draft it" just works.
DEFAULT_AGENTS = (
    ("Researcher", "Finds options and facts, and lays them out with their sources."),
    ("Writer", "Turns notes and findings into clear, readable prose."),
)


class AgentError(ConchError):
    """A request about agents that cannot be done; `message` is a sentence for a person.
    400, but 404 for `not_found` and 409 for `name_taken`."""

    statuses: ClassVar[Mapping[str, int]] = {"not_found": 404, "name_taken": 409}


def check_name(name: object) -> str:
    """The name trimmed and normalised (NFC), or AgentError invalid_name."""
    if not isinstance(name, str):
        raise AgentError("invalid_name", "A name must be text.")
    try:
        return trimmed_name(name)
    except ValueError as e:
        raise AgentError("invalid_name", str(e)) from None


# -- the agents as the rest of Conch sees them ---------------------------------------------------


@dataclass(frozen=True)
class Agent:
    id: str
    name: str
    persona: str
    instructions: str
    provider: ProviderConfig  # never carries the key; see AgentStore.provider_for
    price: Price | None
    created: float
    has_key: bool = False
    mcp: tuple[str, ...] = ()  # the ids of the MCP servers whose tools its turns are offered

    def card_view(self) -> dict[str, Any]:
        """What other agents may see: never the instructions, never the provider's key."""
        return {"id": self.id, "name": self.name, "persona": self.persona}

    def to_public(self, has_key: bool | None = None) -> dict[str, Any]:
        """The owner's view (the HTTP API's Agent): everything but the key itself (and an ACP
        agent's environment but its names)."""
        provider: dict[str, Any] = {
            "kind": self.provider.kind,
            "model": self.provider.model,
            "base_url": self.provider.base_url,
        }
        if self.provider.kind == "acp":
            provider["command"] = self.provider.command
            provider["args"] = list(self.provider.args)
            provider["env_names"] = sorted(self.provider.env or {})
        return {
            **self.card_view(),
            "instructions": self.instructions,
            "provider": provider,
            "price": dataclasses.asdict(self.price) if self.price else None,
            "has_key": self.has_key if has_key is None else has_key,
            "created": self.created,
            "mcp": list(self.mcp),
        }


def _agent(stored: StoredAgent, has_key: bool, env_names: builtins.list[str]) -> Agent:
    price = stored.price
    return Agent(
        id=stored.id,
        name=stored.name,
        persona=stored.persona,
        instructions=stored.instructions,
        provider=ProviderConfig(
            stored.provider.kind,
            stored.provider.model,
            stored.provider.base_url,
            command=stored.provider.command,
            args=tuple(stored.provider.args),
            # The names only: the values stay sealed until provider_for.
            env=dict.fromkeys(env_names, "") if env_names else None,
        ),
        price=Price(price.input_per_mtok, price.output_per_mtok) if price else None,
        created=stored.created,
        has_key=has_key,
        mcp=tuple(stored.mcp),
    )


def _provider_input(
    provider: object, current: StoredProvider | None
) -> tuple[dict[str, Any], str | None]:
    """Provider fields to store (a mapping is merged over `current`) and any key it carried."""
    if isinstance(provider, ProviderConfig):
        return {
            "kind": provider.kind,
            "model": provider.model,
            "base_url": provider.base_url,
            "command": provider.command,
            "args": list(provider.args),
        }, provider.api_key
    if isinstance(provider, Mapping):
        fields = dict(current.model_dump()) if current else {}
        # None means "not given" (a PATCH body's unset field); "" clears base_url.
        fields.update(
            {k: v for k, v in provider.items() if k not in ("api_key", "env") and v is not None}
        )
        if fields.get("kind") != "acp":  # an agent that stops being a coding agent runs nothing
            fields.pop("command", None)
            fields.pop("args", None)
        key = provider.get("api_key")
        return fields, key if isinstance(key, str) else None
    raise AgentError(
        "invalid", "Say which provider the agent uses: openai, anthropic, offline or acp."
    )


def env_secret(agent_id: str) -> str:
    """Where an ACP agent's environment is kept in the sealed file (beside its key's name)."""
    return f"{agent_id}:env"


def checked_env(env: object) -> dict[str, str]:
    """An ACP agent's environment as given (the HTTP body, a hand call), or AgentError."""
    if not isinstance(env, Mapping) or len(env) > ENV_MAX:
        raise AgentError("invalid", f"env must map at most {ENV_MAX} names to text values.")
    out: dict[str, str] = {}
    for name, value in env.items():
        if (
            not isinstance(name, str)
            or not name
            or len(name) > ENV_NAME_MAX
            or "=" in name
            or "\0" in name
            or not name.isprintable()
        ):
            raise AgentError("invalid", "Each env name must be one word without “=”.")
        if not isinstance(value, str) or len(value) > ENV_VALUE_MAX or "\0" in value:
            raise AgentError("invalid", f"The value of {name} must be text (at most 10,000).")
        out[name] = value
    return out


def _price_input(price: object) -> object:
    return dataclasses.asdict(price) if isinstance(price, Price) else price


@dataclass(frozen=True)
class _Known:
    """The agents as the files on disk say now, in order and by id."""

    stamp: tuple[Stamp, Stamp]
    agents: builtins.list[Agent]
    by_id: dict[str, Agent]


class AgentStore:
    """The agents file and the sealed keys.

    Reads are answered from memory while neither file has changed on disk (a hand edit is seen
    at once): a round asks for the agents several times a turn, and each fresh read would parse
    the file and open the sealed keys again.
    """

    def __init__(
        self,
        path: Path | str,
        secrets: SealedFile,
        clock: Callable[[], float],
        *,
        other_names: Callable[[], set[str]] = set,
    ) -> None:
        self.path = Path(path)
        self._secrets = secrets
        self._clock = clock
        # Names taken by outside agents: a mention must say whom it means.
        self._other_names = other_names
        self._cache: _Known | None = None

    def __repr__(self) -> str:
        return f"AgentStore({str(self.path)!r})"

    def _known(self) -> _Known:
        stamp = (file_stamp(self.path), file_stamp(self._secrets.path))
        if self._cache is None or self._cache.stamp != stamp:
            keys = set(self._secrets.names())
            agents = [
                _agent(stored, stored.id in keys, self._env_names(stored.id, keys))
                for stored in self._read().agents
            ]
            self._cache = _Known(stamp, agents, {agent.id: agent for agent in agents})
        return self._cache

    def list(self) -> builtins.list[Agent]:
        return builtins.list(self._known().agents)

    def get(self, agent_id: str) -> Agent:
        found = self._known().by_id.get(agent_id)
        if found is None:
            raise AgentError("not_found", f"There is no agent with the id “{agent_id}”.")
        return found

    def has_key(self, agent_id: str) -> bool:
        return self.get(agent_id).has_key

    def api_key(self, agent_id: str) -> str | None:
        return self._secrets.get(agent_id)

    def provider_for(self, agent_id: str) -> ProviderConfig:
        """The agent's provider with its key filled in: what a model call needs."""
        agent = self.get(agent_id)
        if agent.provider.kind == "offline":
            return agent.provider  # no key to unseal (a file read and a decryption a turn)
        if agent.provider.kind == "acp":
            return dataclasses.replace(agent.provider, env=self._env(agent_id))
        return dataclasses.replace(agent.provider, api_key=self.api_key(agent_id))

    def _env(self, agent_id: str) -> dict[str, str]:
        raw = self._secrets.get(env_secret(agent_id))
        try:
            loaded = json.loads(raw) if raw else {}
        except ValueError:
            loaded = {}
        return {str(k): str(v) for k, v in loaded.items()} if isinstance(loaded, dict) else {}

    def _env_names(self, agent_id: str, keys: set[str]) -> builtins.list[str]:
        return sorted(self._env(agent_id)) if env_secret(agent_id) in keys else []

    def create(
        self,
        name: str,
        persona: str = "",
        instructions: str = "",
        provider: ProviderConfig | Mapping[str, Any] | None = None,
        price: Price | Mapping[str, Any] | None = None,
        api_key: str | None = None,
        acp_env: Mapping[str, str] | None = None,
        mcp: builtins.list[str] | None = None,
    ) -> Agent:
        """Add an agent; its key comes as `api_key` or inside `provider` (the HTTP body), an ACP
        agent's environment as `acp_env` (sealed, like the key)."""
        env = checked_env(acp_env) if acp_env is not None else {}
        file = self._read()
        stored, key = self._build(file, name, persona, instructions, provider, price, api_key)
        if mcp:
            stored = self._validated({**stored.model_dump(), "mcp": mcp})
        file.agents.append(stored)
        self._write(file)
        self._keep_key(stored.id, key or "", rollback=file)
        self._keep_env(stored.id, env, rollback=file)
        return self.get(stored.id)

    def update(self, agent_id: str, **changes: Any) -> Agent:
        """Change some of name, persona, instructions, provider, price, api_key; the id stays.

        `api_key=""` removes the kept key and None leaves it, but a change of provider kind or
        address drops the old key unless a new one comes with it: a key must not follow the
        agent to a server it was not made for.
        """
        unknown = sorted(set(changes) - _CHANGEABLE)
        if unknown:
            raise AgentError("invalid", f"“{unknown[0]}” is not something an agent has to change.")
        file = self._read()
        index = next((i for i, a in enumerate(file.agents) if a.id == agent_id), None)
        if index is None:
            raise AgentError("not_found", f"There is no agent with the id “{agent_id}”.")
        old = file.agents[index]
        fields = old.model_dump()
        key: str | None = changes.get("api_key")
        env = checked_env(changes["acp_env"]) if changes.get("acp_env") is not None else None
        if "name" in changes:
            fields["name"] = self._free_name(file, changes["name"], keep=agent_id)
        for text in ("persona", "instructions"):
            if text in changes:
                fields[text] = changes[text] if changes[text] is not None else ""
        if "provider" in changes:
            fields["provider"], carried = _provider_input(changes["provider"], old.provider)
            key = carried if key is None else key
        if "price" in changes:
            fields["price"] = _price_input(changes["price"])
        if changes.get("mcp") is not None:
            fields["mcp"] = list(changes["mcp"])
        new = self._validated(fields)
        moved = (new.provider.kind, new.provider.base_url) != (
            old.provider.kind,
            old.provider.base_url,
        )
        if key is None and moved:
            key = ""
        # Like a key, an environment must not follow the agent to another program.
        if env is None and (moved or new.provider.command != old.provider.command):
            env = {}
        file.agents[index] = new
        self._write(file)
        if key is not None:
            self._keep_key(agent_id, key)
        if env is not None:
            self._keep_env(agent_id, env)
        return self.get(agent_id)

    def delete(self, agent_id: str) -> None:
        file = self._read()
        kept = [a for a in file.agents if a.id != agent_id]
        if len(kept) == len(file.agents):
            raise AgentError("not_found", f"There is no agent with the id “{agent_id}”.")
        file.agents = kept
        self._write(file)
        # After the agent is gone: a key left by a failure here is orphaned, never misused,
        # because create() clears any key kept under the id it hands out.
        self._secrets.delete(agent_id)
        self._secrets.delete(env_secret(agent_id))
        self._cache = None

    def forget_mcp_server(self, server_id: str) -> None:
        """A removed MCP server is offered to no agent any more."""
        file = self._read()
        changed = False
        for at, agent in enumerate(file.agents):
            if server_id in agent.mcp:
                kept = [s for s in agent.mcp if s != server_id]
                file.agents[at] = self._validated({**agent.model_dump(), "mcp": kept})
                changed = True
        if changed:
            self._write(file)

    def ensure_defaults(self, provider: ProviderConfig) -> builtins.list[Agent]:
        """On the very first start (no agents file yet) add Researcher and Writer."""
        if self.path.exists():
            return []
        file = AgentsFile(version=1)
        for name, persona in DEFAULT_AGENTS:
            stored, _ = self._build(file, name, persona, "", provider, None, None)
            file.agents.append(stored)
        self._write(file)  # One write: both defaults or neither.
        for stored in file.agents:
            self._keep_key(stored.id, provider.api_key or "", rollback=None)
        return [self.get(stored.id) for stored in file.agents]

    # -- inside ------------------------------------------------------------------------------

    def _build(
        self,
        file: AgentsFile,
        name: str,
        persona: str,
        instructions: str,
        provider: object,
        price: object,
        api_key: str | None,
    ) -> tuple[StoredAgent, str | None]:
        name = self._free_name(file, name, keep=None)
        provider_fields, carried = _provider_input(provider, None)
        taken = {a.id for a in file.agents}
        agent_id = base = slug_of(name)
        n = 2
        while agent_id in taken:
            agent_id, n = f"{base}-{n}", n + 1
        fields = {
            "id": agent_id,
            "name": name,
            "persona": persona or "",
            "instructions": instructions or "",
            "provider": provider_fields,
            "price": _price_input(price),
            "created": self._clock(),
        }
        return self._validated(fields), api_key if api_key is not None else carried

    def _free_name(self, file: AgentsFile, name: object, keep: str | None) -> str:
        """`name` checked, or AgentError name_taken: no two of your agents read alike, and none
        clashes with an outside agent (core/names.py)."""
        name = check_name(name)
        for agent in file.agents:
            if agent.id != keep and same_name(agent.name, name):
                raise AgentError(
                    "name_taken",
                    f"An agent named “{agent.name}” already exists (names are compared ignoring "
                    "case, width, accents and invisible characters, and by how they look).",
                )
        hit = first_clash(name, self._other_names())
        if hit:
            raise AgentError(
                "name_taken",
                f"“{name}” {hit[1]} the name of the outside agent “{hit[0]}”: a mention must say "
                "whom it means, so pick another name (or rename the outside agent).",
            )
        return name

    @staticmethod
    def _validated(fields: Mapping[str, Any]) -> StoredAgent:
        try:
            return StoredAgent.model_validate(fields)
        except pydantic.ValidationError as e:
            raise AgentError("invalid", describe_validation_error(e)) from None

    def _keep_key(self, agent_id: str, key: str, rollback: AgentsFile | None = None) -> None:
        """Store (or with "" remove) the agent's key; if that fails, undo a just-made agent."""
        try:
            if key.strip():
                self._secrets.set(agent_id, key.strip())
            else:
                self._secrets.delete(agent_id)
            self._cache = None
        except StoreError:
            if rollback is not None:
                rollback.agents = [a for a in rollback.agents if a.id != agent_id]
                self._write(rollback)
            raise

    def _keep_env(
        self, agent_id: str, env: Mapping[str, str], rollback: AgentsFile | None = None
    ) -> None:
        """Seal (or with {} remove) an ACP agent's environment; undo a just-made agent if not."""
        try:
            if env:
                self._secrets.set(env_secret(agent_id), json.dumps(dict(env)))
            else:
                self._secrets.delete(env_secret(agent_id))
            self._cache = None
        except StoreError:
            if rollback is not None:
                rollback.agents = [a for a in rollback.agents if a.id != agent_id]
                self._write(rollback)
                self._secrets.delete(agent_id)
            raise

    def _read(self) -> AgentsFile:
        return read_json(self.path, AgentsFile) or AgentsFile(version=1)

    def _write(self, file: AgentsFile) -> None:
        self._cache = None
        ensure_private_dir(self.path.parent)
        atomic_write_json(self.path, file.model_dump(mode="json"))
