"""The door's agent card, pure: one card that A2A 1.0 and 0.3 clients both read at the
well-known places, where nothing says which version the caller speaks; and for a caller that asked
for the card by a method, the card in that method's version alone (GetExtendedAgentCard: 1.0,
agent/getAuthenticatedExtendedCard: 0.3).

The one card is built the way the reference SDK (a2a-sdk 1.x) serves an agent that declares a 0.3
interface too: the 1.0 card, its interfaces listing the same JSON-RPC endpoint for 1.0 and 0.3,
with the 0.3 card's members merged in where 1.0 has no member of that name (`url`,
`preferredTransport`, `protocolVersion`, `additionalInterfaces`, `security`, and the 0.3 words of
the security scheme). A 1.0 client reads the 1.0 members and ignores the rest; a 0.3 client the
other way round. The description is the agent's persona, never its private instructions.
"""

from __future__ import annotations

from typing import Any

from ... import __version__
from ...core.text import clean_text


def _skill(name: str) -> dict[str, Any]:
    return {
        "id": "conversation",
        "name": f"Talk with {name}",
        "description": (
            f"{name} answers in words only: no tools, no files, nothing of its owner's beyond "
            "the conversation."
        ),
        "tags": ["conversation"],
    }


def _description(name: str, persona: str) -> str:
    about = " ".join(clean_text(persona, 2_000).split())
    return about or f"{name}, an agent of a Conch user."


KEY_WORDS = "The key from the pairing its owner made."


def agent_card(*, name: str, persona: str, endpoint: str) -> dict[str, Any]:
    """The card at the well-known places, for both versions: the 1.0 card with the 0.3 card's
    members merged in where 1.0 has none of that name."""
    card = agent_card_v1(name=name, persona=persona, endpoint=endpoint)
    old = agent_card_v03(name=name, persona=persona, endpoint=endpoint)
    card["securitySchemes"]["bearer"].update(old["securitySchemes"]["bearer"])
    return {**card, **{key: old[key] for key in _V03_ONLY}}


# The 0.3 card's members that a 1.0 card has no member of that name for.
_V03_ONLY = (
    "url",
    "preferredTransport",
    "protocolVersion",
    "additionalInterfaces",
    "security",
    "supportsAuthenticatedExtendedCard",
)


def agent_card_v1(*, name: str, persona: str, endpoint: str) -> dict[str, Any]:
    """The card in A2A 1.0's shape alone, for GetExtendedAgentCard: the caller asked in 1.0, and
    strict validators reject a member 1.0 does not have."""
    return {
        "name": name,
        "description": _description(name, persona),
        "version": __version__,
        # The same endpoint answers both versions: the A2A-Version header says which is asked.
        "supportedInterfaces": [
            {"url": endpoint, "protocolBinding": "JSONRPC", "protocolVersion": "1.0"},
            {"url": endpoint, "protocolBinding": "JSONRPC", "protocolVersion": "0.3"},
        ],
        # The extended card is the same card; declaring it lets a client ask for it.
        "capabilities": {"streaming": False, "pushNotifications": False, "extendedAgentCard": True},
        "securitySchemes": {
            "bearer": {"httpAuthSecurityScheme": {"scheme": "Bearer", "description": KEY_WORDS}}
        },
        "securityRequirements": [{"schemes": {"bearer": {}}}],
        "defaultInputModes": ["text/plain"],
        "defaultOutputModes": ["text/plain"],
        "skills": [_skill(name)],
    }


def agent_card_v03(*, name: str, persona: str, endpoint: str) -> dict[str, Any]:
    """The same card in A2A 0.3's shape, for a caller that asked with a 0.3 method name."""
    return {
        "name": name,
        "description": _description(name, persona),
        "version": __version__,
        "url": endpoint,
        "preferredTransport": "JSONRPC",
        "protocolVersion": "0.3",
        "additionalInterfaces": [{"url": endpoint, "transport": "JSONRPC"}],
        "capabilities": {"streaming": False, "pushNotifications": False},
        "securitySchemes": {
            "bearer": {"type": "http", "scheme": "Bearer", "description": KEY_WORDS}
        },
        "security": [{"bearer": []}],
        "defaultInputModes": ["text/plain"],
        "defaultOutputModes": ["text/plain"],
        "skills": [_skill(name)],
        "supportsAuthenticatedExtendedCard": True,
    }
