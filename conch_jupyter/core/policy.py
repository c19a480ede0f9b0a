"""An administrator's policy: what a hub's admin locks for every user's Conch
(`c.ConchApp.policy`, a dict in the server's config, which no request can change).

Pure: `parse_policy` reads the config into a `Policy` (BadPolicy, in words naming the key, for
anything it cannot read), and one decision function per key says whether a thing may be made,
changed or used, raising `PolicyRefused` (code `policy`, 403) with words that end "set by your
administrator". The API calls them where a thing is made or changed; the services call the same
functions where a thing made before the policy is used (an agent's turn, an outside call, a
request at the door), so it stops with the same words and nothing is deleted.

Keys (DESIGN.md, "Cost in sight, and an administrator's policy"):

  modes            the modes a chat may be in: a non-empty list of "ask", "auto", "read"
  max_chat_usd     the highest limit a chat may have; the default limit is capped by it
  max_monthly_usd  the highest monthly budget; the configured budget is capped by it
  door             false: no pairings at all (true, the default, locks nothing)
  door_remote      false: no pairing from another computer (true locks nothing)
  outside_hosts    false, or the host names (no port) outside agents may live at
  providers        {"kinds": [...], "base_urls": [...]}: a base URL is allowed when it equals
                   one listed, trailing slash aside
  acp              false, or the `command` values coding agents over ACP may run
  mcp              false, or {"commands": [...], "urls": [...]}: the MCP servers you may add
                   (a stdio server by its program, exactly as given; an HTTP one by its URL's
                   origin, scheme://host:port); a list left out allows none of its kind
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from .errors import ConchError

BY_ADMIN = "set by your administrator."
MODES = ("ask", "auto", "read")
MODE_NAMES = {"ask": "Ask", "auto": "Auto", "read": "Read"}
# The most careful first: a chat kept in a mode the policy now forbids runs in the first of
# these that it allows.
CAREFUL_FIRST = ("read", "ask", "auto")
PROVIDER_KINDS = ("openai", "anthropic", "offline", "acp")
KIND_OFF = {
    "openai": "OpenAI-compatible models are off",
    "anthropic": "Anthropic models are off",
    "offline": "The offline model is off",
    "acp": "Coding agents over ACP are off",
}
KEYS = (
    "modes",
    "max_chat_usd",
    "max_monthly_usd",
    "door",
    "door_remote",
    "outside_hosts",
    "providers",
    "acp",
    "mcp",
)
_HOST = re.compile(
    r"^(?=.{1,253}$)[a-z0-9_]([a-z0-9_-]{0,61}[a-z0-9_])?(\.[a-z0-9_]([a-z0-9_-]{0,61}[a-z0-9_])?)*$"
)
_IPV6 = re.compile(r"^[0-9a-f:.]+$")


class PolicyRefused(ConchError):
    """Something the administrator's policy does not allow, in words ending "set by your
    administrator" (code `policy`, 403: asking again will not help, and the user cannot
    change it)."""

    status = 403

    def __init__(self, words: str) -> None:
        super().__init__("policy", f"{words}: {BY_ADMIN}")


class BadPolicy(ConchError):
    """c.ConchApp.policy cannot be read: its words name the key and say what it takes. Raised
    while the server starts, so Conch never runs under a policy it misread (code
    `bad_policy`; never answered to a request)."""

    status = 500

    def __init__(self, words: str) -> None:
        super().__init__("bad_policy", f"c.ConchApp.policy: {words}")


@dataclass(frozen=True)
class Policy:
    """What is locked; None (or True for the door's two) where the policy says nothing."""

    modes: tuple[str, ...] | None = None
    max_chat_usd: float | None = None
    max_monthly_usd: float | None = None
    door: bool = True
    door_remote: bool = True
    outside_hosts: tuple[str, ...] | None = None  # () is false: no outside agents at all
    kinds: tuple[str, ...] | None = None
    base_urls: tuple[str, ...] | None = None
    acp: tuple[str, ...] | None = None  # () is false: no coding agents over ACP
    # Your MCP servers: None allows any; else the programs and the URL origins allowed
    # (`mcp: false` is both empty).
    mcp_commands: tuple[str, ...] | None = None
    mcp_urls: tuple[str, ...] | None = None

    @property
    def locked(self) -> dict[str, Any]:
        """What GET /policy answers under "locked": each key the policy locks, as JSON."""
        out: dict[str, Any] = {}
        if self.modes is not None:
            out["modes"] = list(self.modes)
        if self.max_chat_usd is not None:
            out["max_chat_usd"] = self.max_chat_usd
        if self.max_monthly_usd is not None:
            out["max_monthly_usd"] = self.max_monthly_usd
        if not self.door:
            out["door"] = False
        if not self.door_remote:
            out["door_remote"] = False
        if self.outside_hosts is not None:
            out["outside_hosts"] = list(self.outside_hosts) or False
        if self.kinds is not None or self.base_urls is not None:
            providers: dict[str, list[str]] = {}
            if self.kinds is not None:
                providers["kinds"] = list(self.kinds)
            if self.base_urls is not None:
                providers["base_urls"] = list(self.base_urls)
            out["providers"] = providers
        if self.acp is not None:
            out["acp"] = list(self.acp) or False
        if self.mcp_commands is not None and self.mcp_urls is not None:
            if not self.mcp_commands and not self.mcp_urls:
                out["mcp"] = False
            else:
                out["mcp"] = {"commands": list(self.mcp_commands), "urls": list(self.mcp_urls)}
        return out


NO_POLICY = Policy()


# --- reading the config --------------------------------------------------------------------


def parse_policy(raw: Mapping[str, Any] | None) -> Policy:
    """The policy a config dict says, or BadPolicy naming what is wrong."""
    if raw is None:
        return NO_POLICY
    if not isinstance(raw, Mapping):
        raise BadPolicy(f"must be a dict of keys to values, not {_kind(raw)}.")
    unknown = [str(k) for k in raw if k not in KEYS]
    if unknown:
        raise BadPolicy(
            f"unknown key {', '.join(repr(k) for k in sorted(unknown))}; the keys are "
            f"{', '.join(KEYS)}."
        )
    providers = raw.get("providers")
    kinds, base_urls = _providers(providers) if "providers" in raw else (None, None)
    return Policy(
        modes=_modes(raw["modes"]) if "modes" in raw else None,
        max_chat_usd=_usd("max_chat_usd", raw["max_chat_usd"]) if "max_chat_usd" in raw else None,
        max_monthly_usd=(
            _usd("max_monthly_usd", raw["max_monthly_usd"]) if "max_monthly_usd" in raw else None
        ),
        door=_flag("door", raw.get("door", True)),
        door_remote=_flag("door_remote", raw.get("door_remote", True)),
        outside_hosts=_hosts(raw["outside_hosts"]) if "outside_hosts" in raw else None,
        kinds=kinds,
        base_urls=base_urls,
        acp=_commands(raw["acp"]) if "acp" in raw else None,
        **_mcp(raw["mcp"]) if "mcp" in raw else {},
    )


def _kind(value: object) -> str:
    if value is None:
        return "None"
    if isinstance(value, bool):
        return str(value).lower()
    return f"a {type(value).__name__} ({value!r:.60})"


def _strings(key: str, value: object, what: str) -> list[str]:
    if isinstance(value, str | bytes) or not isinstance(value, Iterable):
        raise BadPolicy(f"{key} must be a list of {what}, not {_kind(value)}.")
    items = list(value)
    for item in items:
        if not isinstance(item, str) or not item.strip():
            raise BadPolicy(f"{key} must be a list of {what}; {_kind(item)} is not one.")
    return [item.strip() for item in items]


def _modes(value: object) -> tuple[str, ...]:
    modes = _strings("modes", value, 'modes ("ask", "auto", "read")')
    if not modes:
        raise BadPolicy('modes must name at least one mode ("ask", "auto", "read").')
    for mode in modes:
        if mode not in MODES:
            raise BadPolicy(f'modes: {mode!r} is no mode; the modes are "ask", "auto", "read".')
    return tuple(m for m in MODES if m in modes)


def _usd(key: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise BadPolicy(f"{key} must be a number of US dollars, not {_kind(value)}.")
    if value < 0:
        raise BadPolicy(f"{key} must be zero or more, not {value}.")
    return float(value)


def _flag(key: str, value: object) -> bool:
    if not isinstance(value, bool):
        raise BadPolicy(f"{key} must be false (or true, which locks nothing), not {_kind(value)}.")
    return value


def normal_host(host: str) -> str:
    """A host name as the policy compares it: lower case, no trailing dot, no brackets."""
    return host.strip().lower().rstrip(".").removeprefix("[").removesuffix("]")


def _hosts(value: object) -> tuple[str, ...]:
    if value is False:
        return ()
    if value is True:
        raise BadPolicy("outside_hosts must be false or a list of host names, not true.")
    names = _strings("outside_hosts", value, "host names (or false)")
    hosts = []
    for name in names:
        host = normal_host(name)
        if not (_HOST.match(host) or (":" in host and _IPV6.match(host))):
            raise BadPolicy(
                f"outside_hosts: {name!r} is not a host name (a name such as agents.example.org,"
                " without scheme, port, path or wildcard)."
            )
        hosts.append(host)
    return tuple(dict.fromkeys(hosts))


def normal_url(url: str) -> str:
    """A base URL as the policy compares it: trailing slashes aside, scheme and host in lower
    case."""
    url = url.strip().rstrip("/")
    scheme, sep, rest = url.partition("://")
    host, slash, path = rest.partition("/")
    return f"{scheme.lower()}{sep}{host.lower()}{slash}{path}"


def _providers(value: object) -> tuple[tuple[str, ...] | None, tuple[str, ...] | None]:
    if not isinstance(value, Mapping):
        raise BadPolicy(
            f'providers must be a dict with "kinds", "base_urls" or both, not {_kind(value)}.'
        )
    unknown = [str(k) for k in value if k not in ("kinds", "base_urls")]
    if unknown:
        raise BadPolicy(
            f"providers: unknown key {', '.join(repr(k) for k in sorted(unknown))}; its keys are"
            ' "kinds" and "base_urls".'
        )
    if not value:
        raise BadPolicy('providers must say "kinds", "base_urls" or both.')
    kinds = None
    if "kinds" in value:
        named = _strings("providers.kinds", value["kinds"], "provider kinds")
        for kind in named:
            if kind not in PROVIDER_KINDS:
                raise BadPolicy(
                    f"providers.kinds: {kind!r} is no provider kind; the kinds are "
                    f"{', '.join(PROVIDER_KINDS)}."
                )
        kinds = tuple(k for k in PROVIDER_KINDS if k in named)
    urls = None
    if "base_urls" in value:
        listed = _strings("providers.base_urls", value["base_urls"], "base URLs")
        for url in listed:
            if not re.match(r"^https?://[^/\s]+", url):
                raise BadPolicy(
                    f"providers.base_urls: {url!r} is not an address (it must begin with "
                    "http:// or https://)."
                )
        urls = tuple(dict.fromkeys(normal_url(u) for u in listed))
    return kinds, urls


def _commands(value: object) -> tuple[str, ...]:
    if value is False:
        return ()
    if value is True:
        raise BadPolicy("acp must be false or a list of the commands allowed, not true.")
    return tuple(dict.fromkeys(_strings("acp", value, "commands (or false)")))


def url_origin(url: str) -> str | None:
    """An http(s) URL's origin as the policy compares it (scheme://host:port, lower case, the
    default port written out); None for anything else."""
    match = re.match(r"^(https?)://([^/?#@\s]+)", url.strip(), re.IGNORECASE)
    if match is None:
        return None
    scheme, host = match.group(1).lower(), match.group(2).lower()
    if not re.search(r":\d+$", host) or host.endswith("]"):
        host = f"{host}:{443 if scheme == 'https' else 80}"
    return f"{scheme}://{host}"


def _mcp(value: object) -> dict[str, tuple[str, ...]]:
    if value is False:
        return {"mcp_commands": (), "mcp_urls": ()}
    if not isinstance(value, Mapping):
        raise BadPolicy(
            f'mcp must be false or a dict with "commands", "urls" or both, not {_kind(value)}.'
        )
    unknown = [str(k) for k in value if k not in ("commands", "urls")]
    if unknown:
        raise BadPolicy(
            f"mcp: unknown key {', '.join(repr(k) for k in sorted(unknown))}; its keys are"
            ' "commands" and "urls".'
        )
    commands = _strings("mcp.commands", value.get("commands", []), "programs")
    urls = []
    for url in _strings("mcp.urls", value.get("urls", []), "URLs"):
        origin = url_origin(url)
        if origin is None:
            raise BadPolicy(f"mcp.urls: {url!r} is not an http:// or https:// address.")
        urls.append(origin)
    return {
        "mcp_commands": tuple(dict.fromkeys(commands)),
        "mcp_urls": tuple(dict.fromkeys(urls)),
    }


# --- the decisions -------------------------------------------------------------------------


def _listed(items: Iterable[str]) -> str:
    return ", ".join(items)


def check_mode(policy: Policy, mode: str) -> None:
    """Whether a chat may be put in `mode`."""
    if policy.modes is not None and mode not in policy.modes:
        allowed = _listed(MODE_NAMES[m] for m in policy.modes)
        raise PolicyRefused(
            f"{MODE_NAMES.get(mode, mode)} is off on this server (the modes allowed: {allowed})"
        )


def effective_mode(policy: Policy, mode: str) -> str:
    """The mode a chat kept in `mode` runs in: its own while allowed, else the most careful
    mode the policy allows (the kept mode comes back if the policy lifts)."""
    if policy.modes is None or mode in policy.modes:
        return mode
    return next(m for m in CAREFUL_FIRST if m in policy.modes)


def mode_words(policy: Policy, mode: str) -> str | None:
    """What a chat's header adds when its kept mode is not allowed; None when it is."""
    if effective_mode(policy, mode) == mode:
        return None
    shown = MODE_NAMES[effective_mode(policy, mode)]
    kept = MODE_NAMES.get(mode, mode)
    return f"{kept} is off on this server, so this chat runs in {shown}: {BY_ADMIN}"


def cap_chat_limit(policy: Policy, usd: float | None) -> float | None:
    """A chat's limit (None: none) as the policy caps it: at most max_chat_usd."""
    top = policy.max_chat_usd
    if top is None:
        return usd
    return top if usd is None else min(usd, top)


def cap_monthly_budget(policy: Policy, usd: float | None) -> float | None:
    """The monthly budget (None: none) as the policy caps it: at most max_monthly_usd."""
    top = policy.max_monthly_usd
    if top is None:
        return usd
    return top if usd is None else min(usd, top)


def check_chat_limit(policy: Policy, usd: float | None) -> None:
    """Whether a chat's limit may be set to `usd` (None: no limit)."""
    top = policy.max_chat_usd
    if top is not None and (usd is None or usd > top):
        raise PolicyRefused(f"A chat's limit can be at most ${top:.2f} on this server")


def check_monthly_budget(policy: Policy, usd: float | None) -> None:
    """Whether the monthly budget may be set to `usd` (None: no budget)."""
    top = policy.max_monthly_usd
    if top is not None and (usd is None or usd > top):
        raise PolicyRefused(f"The monthly budget can be at most ${top:.2f} on this server")


DOOR_WORDS = "The door is closed on this server, so no agent can be let in"
DOOR_REMOTE_WORDS = "The door is closed to other computers on this server"


def check_door(policy: Policy) -> None:
    """Whether pairings may be made, or a pairing's key used at the door."""
    if not policy.door:
        raise PolicyRefused(DOOR_WORDS)


def check_door_remote(policy: Policy, remote: bool = True) -> None:
    """Whether a pairing may be for other computers (`remote`), or used from one."""
    if remote and not policy.door_remote:
        raise PolicyRefused(DOOR_REMOTE_WORDS)


def check_outside_host(policy: Policy, host: str) -> None:
    """Whether Conch may contact an outside agent at `host` (a host name, without port)."""
    hosts = policy.outside_hosts
    if hosts is None:
        return
    if not hosts:
        raise PolicyRefused("Outside agents are off on this server")
    if normal_host(host) not in hosts:
        shown = host if len(host) <= 80 else host[:79] + "…"
        raise PolicyRefused(
            f"Outside agents at {shown} are not allowed on this server (the hosts allowed: "
            f"{_listed(hosts)})"
        )


def check_provider(
    policy: Policy, kind: str, base_url: str | None = None, command: str | None = None
) -> None:
    """Whether an agent may use a provider of `kind` at `base_url` (the address it really
    uses: its own, or its kind's default; None for kinds that call no address), and, for an
    ACP coding agent, run `command`."""
    if policy.kinds is not None and kind not in policy.kinds:
        allowed = _listed(policy.kinds) or "none"
        off = KIND_OFF.get(kind, f"The provider kind {kind[:40]!r} is off")
        raise PolicyRefused(f"{off} on this server (the provider kinds allowed: {allowed})")
    if kind == "acp":
        check_acp_command(policy, command or "")
        return
    urls = policy.base_urls
    if urls is not None and base_url is not None and normal_url(base_url) not in urls:
        raise PolicyRefused(
            f"The model address {base_url[:200]} is not allowed on this server (the "
            f"addresses allowed: {_listed(urls)})"
        )


def check_acp_command(policy: Policy, command: str) -> None:
    """Whether a coding agent over ACP may run `command`."""
    commands = policy.acp
    if commands is None:
        return
    if not commands:
        raise PolicyRefused("Coding agents over ACP are off on this server")
    if command not in commands:
        raise PolicyRefused(
            f"The coding agent {command[:200]!r} is not allowed on this server (the commands "
            f"allowed: {_listed(commands)})"
        )


def check_mcp_server(policy: Policy, *, command: str | None = None, url: str | None = None) -> None:
    """Whether one of your MCP servers may be added or started: a stdio server by its program
    (`command`, exactly as given), an HTTP one by its URL's origin."""
    if policy.mcp_commands is None or policy.mcp_urls is None:
        return
    if not policy.mcp_commands and not policy.mcp_urls:
        raise PolicyRefused("Your own MCP servers are off on this server")
    if url is not None:
        origin = url_origin(url) or url[:200]
        if origin not in policy.mcp_urls:
            allowed = _listed(policy.mcp_urls) or "none"
            raise PolicyRefused(
                f"The MCP server at {origin} is not allowed on this server (the addresses"
                f" allowed: {allowed})"
            )
        return
    if (command or "") not in policy.mcp_commands:
        allowed = _listed(policy.mcp_commands) or "none"
        raise PolicyRefused(
            f"The MCP server program {(command or '')[:200]!r} is not allowed on this server"
            f" (the programs allowed: {allowed})"
        )
