"""A2A on the wire, once, for both directions: the client that calls outside agents and the door.

A2A 1.0 (ProtoJSON: camelCase, enums by proto name, defaults omitted) is what we speak; 0.3 is
read, and answered when a caller used its method names. Whatever comes in from elsewhere is
parsed leniently into small dataclasses (Outcome, CardInfo) with the text cleaned and cut; what we
send is built by the functions here, so a 1.0 object never carries a 0.3 field.

Facts: ../shared/A2A.md (A2A v1.0.1 specification, v0.3.0 for the older names).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from ..talk import clean_text

Version = Literal["1.0", "0.3"]
VERSION_HEADER = "A2A-Version"

# --- task states -------------------------------------------------------------------------

STATES_V03 = {
    "TASK_STATE_SUBMITTED": "submitted",
    "TASK_STATE_WORKING": "working",
    "TASK_STATE_COMPLETED": "completed",
    "TASK_STATE_FAILED": "failed",
    "TASK_STATE_CANCELED": "canceled",
    "TASK_STATE_REJECTED": "rejected",
    "TASK_STATE_INPUT_REQUIRED": "input-required",
    "TASK_STATE_AUTH_REQUIRED": "auth-required",
}
STATES_V1 = {v: k for k, v in STATES_V03.items()}
TERMINAL = frozenset(
    {"TASK_STATE_COMPLETED", "TASK_STATE_FAILED", "TASK_STATE_CANCELED", "TASK_STATE_REJECTED"}
)
INTERRUPTED = frozenset({"TASK_STATE_INPUT_REQUIRED", "TASK_STATE_AUTH_REQUIRED"})


def state_v1(state: object) -> str:
    """Either version's name for a state, as 1.0 names it ("" when it is not a state)."""
    if not isinstance(state, str):
        return ""
    if state in STATES_V03:
        return state
    return STATES_V1.get(state.lower(), "")


# --- JSON-RPC ----------------------------------------------------------------------------


class ErrorCode:
    PARSE = -32700
    INVALID_REQUEST = -32600
    METHOD_NOT_FOUND = -32601
    INVALID_PARAMS = -32602
    INTERNAL = -32603
    TASK_NOT_FOUND = -32001
    TASK_NOT_CANCELABLE = -32002
    PUSH_NOT_SUPPORTED = -32003
    UNSUPPORTED_OPERATION = -32004
    CONTENT_TYPE_NOT_SUPPORTED = -32005
    INVALID_AGENT_RESPONSE = -32006
    EXTENDED_CARD_NOT_CONFIGURED = -32007
    VERSION_NOT_SUPPORTED = -32009


REASONS = {
    ErrorCode.PARSE: "PARSE_ERROR",
    ErrorCode.INVALID_REQUEST: "INVALID_REQUEST",
    ErrorCode.METHOD_NOT_FOUND: "METHOD_NOT_FOUND",
    ErrorCode.INVALID_PARAMS: "INVALID_PARAMS",
    ErrorCode.INTERNAL: "INTERNAL_ERROR",
    ErrorCode.TASK_NOT_FOUND: "TASK_NOT_FOUND",
    ErrorCode.TASK_NOT_CANCELABLE: "TASK_NOT_CANCELABLE",
    ErrorCode.PUSH_NOT_SUPPORTED: "PUSH_NOTIFICATION_NOT_SUPPORTED",
    ErrorCode.UNSUPPORTED_OPERATION: "UNSUPPORTED_OPERATION",
    ErrorCode.CONTENT_TYPE_NOT_SUPPORTED: "CONTENT_TYPE_NOT_SUPPORTED",
    ErrorCode.INVALID_AGENT_RESPONSE: "INVALID_AGENT_RESPONSE",
    ErrorCode.EXTENDED_CARD_NOT_CONFIGURED: "EXTENDED_AGENT_CARD_NOT_CONFIGURED",
    ErrorCode.VERSION_NOT_SUPPORTED: "VERSION_NOT_SUPPORTED",
}

RequestId = str | int | None


class RpcRequest(BaseModel):
    """A JSON-RPC 2.0 request envelope (the method and params are checked after it)."""

    model_config = ConfigDict(extra="forbid")
    jsonrpc: Literal["2.0"]
    method: str = Field(min_length=1, max_length=100)
    id: str | int | None = None
    params: dict[str, Any] | None = None


def rpc_result(request_id: RequestId, result: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "result": result}


def rpc_error(request_id: RequestId, code: int, message: str) -> dict[str, Any]:
    info = {
        "@type": "type.googleapis.com/google.rpc.ErrorInfo",
        "reason": REASONS.get(code, "ERROR"),
        "domain": "a2a-protocol.org",
    }
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "error": {"code": code, "message": message, "data": [info]},
    }


# --- messages and tasks we build ---------------------------------------------------------


def new_id() -> str:
    return str(uuid.uuid4())


def text_parts(text: str, version: Version) -> list[dict[str, Any]]:
    return [{"kind": "text", "text": text}] if version == "0.3" else [{"text": text}]


def message(
    text: str,
    *,
    role: Literal["user", "agent"],
    version: Version,
    context_id: str | None = None,
    task_id: str | None = None,
    message_id: str | None = None,
) -> dict[str, Any]:
    out: dict[str, Any] = {
        "messageId": message_id or new_id(),
        "role": role if version == "0.3" else f"ROLE_{role.upper()}",
        "parts": text_parts(text, version),
    }
    if version == "0.3":
        out["kind"] = "message"
    if context_id:
        out["contextId"] = context_id
    if task_id:
        out["taskId"] = task_id
    return out


def task(
    *,
    task_id: str,
    context_id: str,
    state: str,
    version: Version,
    reply: str | None = None,
    status_text: str | None = None,
    history: list[dict[str, Any]] | None = None,
    timestamp: str | None = None,
) -> dict[str, Any]:
    """A task object: the reply (if any) as an artifact; a refusal's words as the status message."""
    status: dict[str, Any] = {"state": STATES_V03[state] if version == "0.3" else state}
    if status_text:
        status["message"] = message(
            status_text, role="agent", version=version, context_id=context_id, task_id=task_id
        )
    if timestamp:
        status["timestamp"] = timestamp
    out: dict[str, Any] = {"id": task_id, "contextId": context_id, "status": status}
    if reply is not None:
        out["artifacts"] = [
            {"artifactId": f"{task_id}-reply", "name": "reply", "parts": text_parts(reply, version)}
        ]
    if history:
        out["history"] = history
    if version == "0.3":
        out["kind"] = "task"
    return out


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


class WireError(ValueError):
    """An answer that is not A2A: the words say what is wrong with it."""


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
    return value[:200] if isinstance(value, str) and value else None


def message_text(raw: Any) -> str | None:
    """The text of a message someone sent us (either version); None if it is not one."""
    if not isinstance(raw, dict) or not isinstance(raw.get("parts"), list):
        return None
    texts = [p.get("text") for p in raw["parts"] if isinstance(p, dict)]
    if not texts or not all(isinstance(t, str) for t in texts):
        return None
    return "\n".join(t for t in texts if isinstance(t, str))
