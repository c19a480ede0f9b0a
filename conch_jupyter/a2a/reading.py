"""What an outside agent sends back, read leniently from either A2A version: its answer to a
call (Outcome) and its card (CardInfo), the text cleaned and cut, never trusted.

Facts: ../shared/A2A.md.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..core.text import clean_text
from .wire import INTERRUPTED, TERMINAL, Version, WireError, state_v1

# --- what comes back from an outside agent -----------------------------------------------

ANSWER_TEXT_LIMIT = 16_000


@dataclass(frozen=True)
class Outcome:
    """An outside agent's answer, read leniently from either version and cleaned."""

    state: str  # a 1.0 state name; TASK_STATE_COMPLETED for a bare message
    text: str
    task_id: str | None = None
    context_id: str | None = None

    @property
    def done(self) -> bool:
        return self.state in TERMINAL or self.state in INTERRUPTED


def parse_outcome(result: Any) -> Outcome:
    """SendMessage/GetTask results: {"task": …} / {"message": …} (1.0), or a bare object (0.3)."""
    if not isinstance(result, dict):
        raise WireError("the answer's result is not an object")
    if isinstance(result.get("task"), dict):
        return _task_outcome(result["task"])
    if isinstance(result.get("message"), dict):
        return _message_outcome(result["message"])
    kind = result.get("kind")
    if kind == "message" or ("parts" in result and "status" not in result):
        return _message_outcome(result)
    if kind == "task" or "status" in result:
        return _task_outcome(result)
    raise WireError("the answer holds neither a task nor a message")


def _message_outcome(raw: dict[str, Any]) -> Outcome:
    return Outcome(
        state="TASK_STATE_COMPLETED",
        text=_texts(raw.get("parts")),
        task_id=_str(raw.get("taskId")),
        context_id=_str(raw.get("contextId")),
    )


def _task_outcome(raw: dict[str, Any]) -> Outcome:
    status = raw.get("status")
    if not isinstance(status, dict):
        raise WireError("the task has no status")
    state = state_v1(status.get("state"))
    if not state:
        raise WireError("the task's state is not an A2A task state")
    pieces = []
    artifacts = raw.get("artifacts")
    if isinstance(artifacts, list):
        pieces += [_texts(a.get("parts")) for a in artifacts[:20] if isinstance(a, dict)]
    status_message = status.get("message")
    if isinstance(status_message, dict) and not any(pieces):
        pieces.append(_texts(status_message.get("parts")))
    task_id = _str(raw.get("id"))
    if not task_id:
        raise WireError("the task has no id")
    return Outcome(
        state=state,
        text=clean_text("\n\n".join(p for p in pieces if p), ANSWER_TEXT_LIMIT) if pieces else "",
        task_id=task_id,
        context_id=_str(raw.get("contextId")),
    )


def _texts(parts: Any) -> str:
    if not isinstance(parts, list):
        return ""
    texts = [
        p["text"] for p in parts[:100] if isinstance(p, dict) and isinstance(p.get("text"), str)
    ]
    return clean_text("\n".join(texts), ANSWER_TEXT_LIMIT) if texts else ""


def _str(value: Any) -> str | None:
    # Ids are kept (a contextId is stored with the chat) and sent back: cleaned like the text.
    return (clean_text(value, 200) or None) if isinstance(value, str) else None


# --- an outside agent's card -------------------------------------------------------------

CARD_NAME_LIMIT = 100
CARD_TEXT_LIMIT = 400


@dataclass(frozen=True)
class CardInfo:
    """What Conch takes from an agent card. Everything but the endpoint is the agent's claim."""

    name: str
    description: str
    organization: str
    endpoint: str  # as written on the card: the caller resolves it and checks its host
    version: Version

    def claim(self) -> str:
        said = []
        if self.organization:
            said.append(f"It says it's run by {self.organization}.")
        if self.description:
            end = "" if self.description.endswith((".", "!", "?", "…")) else "."
            said.append(f"It describes itself as “{self.description}”{end}")
        return " ".join(said) or "It says nothing about who runs it."


def _line(value: Any, limit: int) -> str:
    return " ".join(clean_text(value, limit).split()) if isinstance(value, str) else ""


def parse_card(raw: Any) -> CardInfo:
    """A 1.0 card (supportedInterfaces, JSON-RPC first) or a 0.3 one (url, preferredTransport)."""
    if not isinstance(raw, dict):
        raise WireError("the card is not a JSON object")
    endpoint, version = _jsonrpc_interface(raw)
    provider = raw.get("provider")
    return CardInfo(
        name=_line(raw.get("name"), CARD_NAME_LIMIT),
        description=_line(raw.get("description"), CARD_TEXT_LIMIT),
        organization=_line(provider.get("organization"), CARD_NAME_LIMIT)
        if isinstance(provider, dict)
        else "",
        endpoint=endpoint,
        version=version,
    )


def _jsonrpc_interface(raw: dict[str, Any]) -> tuple[str, Version]:
    interfaces = raw.get("supportedInterfaces")
    for entry in interfaces[:20] if isinstance(interfaces, list) else []:
        if not isinstance(entry, dict) or not isinstance(entry.get("url"), str):
            continue
        if str(entry.get("protocolBinding", "")).upper() == "JSONRPC":
            old = str(entry.get("protocolVersion", "")).startswith("0.")
            return entry["url"], "0.3" if old else "1.0"
    if isinstance(raw.get("url"), str):
        if str(raw.get("preferredTransport") or "JSONRPC").upper() == "JSONRPC":
            return raw["url"], "0.3"
        extra = raw.get("additionalInterfaces")
        for entry in extra[:20] if isinstance(extra, list) else []:
            if (
                isinstance(entry, dict)
                and isinstance(entry.get("url"), str)
                and str(entry.get("transport", "")).upper() == "JSONRPC"
            ):
                return entry["url"], "0.3"
    if isinstance(interfaces, list) or isinstance(raw.get("url"), str):
        raise WireError("the card offers no JSON-RPC interface, and Conch speaks A2A over JSON-RPC")
    raise WireError("the card names no interface (neither supportedInterfaces nor url)")
