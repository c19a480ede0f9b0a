"""The door's agent card, pure: A2A 1.0 for the well-known places and GetExtendedAgentCard, and
the same card in 0.3's shape only for a caller that asked with agent/getAuthenticatedExtendedCard.

A 1.0 card never carries a 0.3 field (strict validators reject unknown fields): the two shapes are
built apart. The description is the agent's persona, never its private instructions.
"""

from __future__ import annotations

from typing import Any

from ... import __version__
from ...talk import clean_text


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


def agent_card(*, name: str, persona: str, endpoint: str) -> dict[str, Any]:
    """An A2A 1.0 card: the JSON-RPC endpoint, a bearer key, the persona, one skill."""
    return {
        "name": name,
        "description": _description(name, persona),
        "version": __version__,
        "supportedInterfaces": [
            {"url": endpoint, "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}
        ],
        # The extended card is the same card; declaring it lets a client ask for it.
        "capabilities": {"streaming": False, "pushNotifications": False, "extendedAgentCard": True},
        "securitySchemes": {
            "bearer": {
                "httpAuthSecurityScheme": {
                    "scheme": "Bearer",
                    "description": "The key from the pairing its owner made.",
                }
            }
        },
        "securityRequirements": [{"schemes": {"bearer": {"list": []}}}],
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
        "protocolVersion": "0.3.0",
        "capabilities": {"streaming": False, "pushNotifications": False},
        "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        "security": [{"bearer": []}],
        "defaultInputModes": ["text/plain"],
        "defaultOutputModes": ["text/plain"],
        "skills": [_skill(name)],
        "supportsAuthenticatedExtendedCard": True,
    }
