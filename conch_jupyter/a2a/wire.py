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
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

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


# --- calling an outside agent ------------------------------------------------------------

METHODS: dict[Version, dict[str, str]] = {
    "1.0": {"send": "SendMessage", "get": "GetTask", "cancel": "CancelTask"},
    "0.3": {"send": "message/send", "get": "tasks/get", "cancel": "tasks/cancel"},
}


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
    a working task is polled, so a slow agent never holds one HTTP request open for minutes."""
    msg = message(
        text,
        role="user",
        version=version,
        context_id=context_id,
        task_id=task_id,
        message_id=message_id,
    )
    config = {"returnImmediately": True} if version == "1.0" else {"blocking": False}
    return {"message": msg, "configuration": config}


class RpcFault(Exception):
    """A JSON-RPC error answer; `message` is the other side's words, cleaned and cut."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message


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


# --- what a paired agent sends the door --------------------------------------------------

ID_LIMIT = 200


def _plain_id(value: str) -> str:
    # Ids are echoed back and stored: no control, invisible or reordering characters, no spaces.
    if not value or value != clean_text(value, ID_LIMIT) or any(c.isspace() for c in value):
        raise ValueError(f"must be 1 to {ID_LIMIT} visible characters without spaces")
    return value


PlainId = Annotated[str, AfterValidator(_plain_id)]


class _Params(BaseModel):
    # Strict: a number where text belongs is a wrong type, not something to convert. Members we
    # do not know are ignored, as A2A asks of servers, so a newer caller's extras do no harm.
    model_config = ConfigDict(extra="ignore", strict=True, alias_generator=to_camel)


class InMessage(_Params):
    message_id: PlainId
    role: str = Field(max_length=20)
    parts: list[dict[str, Any]] = Field(min_length=1, max_length=100)
    context_id: PlainId | None = None
    task_id: PlainId | None = None


class SendParams(_Params):
    """SendMessage (1.0) and message/send (0.3)."""

    message: InMessage
    configuration: dict[str, Any] | None = None
    metadata: dict[str, Any] | None = None


class TaskParams(_Params):
    """GetTask/CancelTask (1.0), tasks/get and tasks/cancel (0.3)."""

    id: PlainId
    history_length: int | None = Field(default=None, ge=0)


class ListParams(_Params):
    """ListTasks (1.0 only)."""

    context_id: PlainId | None = None
    status: str | None = Field(default=None, max_length=40)
    page_size: int | None = Field(default=None, ge=0, le=100)
    page_token: str | None = Field(default=None, max_length=20)
    history_length: int | None = Field(default=None, ge=0)
    status_timestamp_after: str | None = Field(default=None, max_length=40)
    include_artifacts: bool | None = None


class NoParams(_Params):
    """GetExtendedAgentCard and its 0.3 name take nothing."""
