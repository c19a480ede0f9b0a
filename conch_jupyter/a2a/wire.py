"""A2A on the wire, once, for both directions: task states, JSON-RPC, the one method table,
and every message, task and call Conch sends (as the door or as a caller).

A2A 1.0 (ProtoJSON: camelCase, enums by proto name, defaults omitted) is what we speak; 0.3 is
read, and answered when a caller used its method names. What we send is built by the functions
here, so a 1.0 object never carries a 0.3 field. What comes back from an outside agent is read in
reading.py; what a caller sends the door is parsed by params.py.

Facts: ../shared/A2A.md (A2A v1.0.1 specification, v0.3.0 for the older names).
"""

from __future__ import annotations

import uuid
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from ..core.errors import ConchError
from ..core.text import clean_text

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
    # JSON-RPC leaves -32000 to implementations; A2A has no code for "a bound was reached".
    LIMIT_REACHED = -32000


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
    ErrorCode.LIMIT_REACHED: "LIMIT_REACHED",
}
# The ErrorInfo domain of reasons that are Conch's own rather than A2A's.
CONCH_DOMAIN = "conch-jupyter"

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


def rpc_error(
    request_id: RequestId,
    code: int,
    message: str,
    *,
    reason: str | None = None,
    metadata: dict[str, str] | None = None,
) -> dict[str, Any]:
    """An error answer. A `reason` of our own (e.g. "BUSY") is given in Conch's domain."""
    info: dict[str, Any] = {
        "@type": "type.googleapis.com/google.rpc.ErrorInfo",
        "reason": reason or REASONS.get(code, "ERROR"),
        "domain": CONCH_DOMAIN if reason else "a2a-protocol.org",
    }
    if metadata:
        info["metadata"] = metadata
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "error": {"code": code, "message": message, "data": [info]},
    }


# --- methods -----------------------------------------------------------------------------

# What a call asks for. Conch offers neither streaming nor push notifications, but knows their
# names, so the door answers them with A2A's own codes rather than "method not found".
Op = Literal["send", "get", "list", "cancel", "card", "stream", "push"]

# Every method of either version, once: the door reads names with it, the client writes them.
METHODS: dict[str, tuple[Op, Version]] = {
    "SendMessage": ("send", "1.0"),
    "GetTask": ("get", "1.0"),
    "ListTasks": ("list", "1.0"),
    "CancelTask": ("cancel", "1.0"),
    "GetExtendedAgentCard": ("card", "1.0"),
    "SendStreamingMessage": ("stream", "1.0"),
    "SubscribeToTask": ("stream", "1.0"),
    "CreateTaskPushNotificationConfig": ("push", "1.0"),
    "GetTaskPushNotificationConfig": ("push", "1.0"),
    "ListTaskPushNotificationConfigs": ("push", "1.0"),  # the name a2a-sdk 1.3 sends
    "ListTaskPushNotificationConfig": ("push", "1.0"),
    "DeleteTaskPushNotificationConfig": ("push", "1.0"),
    "message/send": ("send", "0.3"),
    "tasks/get": ("get", "0.3"),
    "tasks/cancel": ("cancel", "0.3"),
    "agent/getAuthenticatedExtendedCard": ("card", "0.3"),
    "message/stream": ("stream", "0.3"),
    "tasks/resubscribe": ("stream", "0.3"),
    "tasks/pushNotificationConfig/set": ("push", "0.3"),
    "tasks/pushNotificationConfig/get": ("push", "0.3"),
    "tasks/pushNotificationConfig/list": ("push", "0.3"),
    "tasks/pushNotificationConfig/delete": ("push", "0.3"),
}
_NAMES = {entry: name for name, entry in reversed(METHODS.items())}  # the first name wins


def method_name(op: Op, version: Version) -> str:
    """The name a call goes out under; KeyError for one the version does not have."""
    return _NAMES[(op, version)]


# --- messages and tasks we build ---------------------------------------------------------


# What Conch can show of an answer: words (its Markdown is rendered sealed).
ACCEPTED_OUTPUT_MODES = ("text/plain", "text/markdown")


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
        # Derived from the task, so the same words keep the same id from one read to the next.
        status["message"] = message(
            status_text,
            role="agent",
            version=version,
            context_id=context_id,
            task_id=task_id,
            message_id=f"{task_id}-status",
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


# --- calling an outside agent ------------------------------------------------------------


class WireError(ConchError, ValueError):
    """An answer that is not A2A: the words say what is wrong with it (code `not_a2a`, status
    502: the other side's answer, not the caller, is wrong)."""

    status = 502

    def __init__(self, words: str) -> None:
        super().__init__("not_a2a", words)


def rpc_call(method: str, params: dict[str, Any], request_id: RequestId) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}


def send_params(
    text: str,
    *,
    version: Version,
    context_id: str | None = None,
    task_id: str | None = None,
    message_id: str | None = None,
) -> dict[str, Any]:
    """SendMessage's params: the one message and nothing else. The answer comes back at once and
    a working task is polled, so a slow agent never holds one HTTP request open for minutes.

    The accepted output modes are optional in both versions, but strict 0.3 servers refuse a
    configuration without them."""
    msg = message(
        text,
        role="user",
        version=version,
        context_id=context_id,
        task_id=task_id,
        message_id=message_id,
    )
    wait: dict[str, Any] = {"returnImmediately": True} if version == "1.0" else {"blocking": False}
    config = {"acceptedOutputModes": list(ACCEPTED_OUTPUT_MODES), **wait}
    return {"message": msg, "configuration": config}


class RpcFault(ConchError):
    """A JSON-RPC error answer; `message` is the other side's words, cleaned and cut, and
    `rpc_code` its number (code `rpc`, status 502: the other side said no)."""

    status = 502

    def __init__(self, rpc_code: int, message: str) -> None:
        super().__init__("rpc", message, logged=f"{rpc_code}: {message}")
        self.rpc_code = rpc_code


def rpc_answer(body: Any) -> Any:
    """The result of a JSON-RPC answer; RpcFault for an error answer, WireError for neither."""
    if not isinstance(body, dict):
        raise WireError("the answer is not a JSON-RPC object")
    if "error" in body:
        error = body["error"]
        code = error.get("code") if isinstance(error, dict) else None
        if not isinstance(code, int) or isinstance(code, bool):
            raise WireError("the answer's error has no JSON-RPC error code")
        text = error.get("message")
        words = " ".join(clean_text(text, 200).split()) if isinstance(text, str) else ""
        raise RpcFault(code, words)
    if "result" not in body:
        raise WireError("the answer holds neither a result nor an error")
    return body["result"]
