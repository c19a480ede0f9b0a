"""What a call to the door means, pure: JSON-RPC read in steps, and tasks on the wire.

A body becomes a Call, or a Refusal whose words say what is wrong, in this order:

0. the content type must be application/json (-32005), the body UTF-8 JSON (-32700);
1. the envelope: one JSON-RPC 2.0 request object, no batch (-32600);
2. the method: known (-32601), offered (streaming: UnsupportedOperation -32004; push
   configuration: PushNotificationNotSupported -32003), and of the A2A version the `A2A-Version`
   header names (missing means 0.3; anything but 1.0 and 0.3 is -32009);
3. the params: the method's shape, strictly typed (-32602) (params.py);
4. the message: words from a user; a part of another media type is ContentTypeNotSupported
   (-32005).

Answers are built with a2a/wire.py (and card.py): a 0.3 name gets a 0.3 answer.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from pydantic import BaseModel, ValidationError

from ...core.errors import ConchError
from ...core.files import describe_validation_error
from ...core.nesting import JSON_DEPTH, nests_deeper
from ...core.text import clean_text
from ...store.rows import DoorTask
from ..wire import (
    METHODS,
    REASONS,
    STATES_V03,
    VERSION_HEADER,
    ErrorCode,
    Op,
    RequestId,
    RpcRequest,
    Version,
    message,
    rpc_error,
    task,
)
from .params import ListParams, NoParams, SendParams, TaskParams, plain_task_params

Params = SendParams | TaskParams | ListParams | NoParams

_PARAMS: dict[Op, type[BaseModel]] = {
    "send": SendParams,
    "get": TaskParams,
    "cancel": TaskParams,
    "list": ListParams,
    "card": NoParams,
}
PAGE_SIZE = 50


class Refusal(ConchError):
    """A call the door answers with a JSON-RPC error; `words` (its message) are for the caller.

    `rpc_code` is the JSON-RPC number the caller reads (ErrorCode); `code` is its A2A name in
    lower case (`task_not_found`). A JSON-RPC error travels in a 200 answer, so that is its
    `status`. `reason` and `metadata` go into the error's ErrorInfo for reasons that are Conch's
    own.
    """

    status = 200

    def __init__(
        self,
        rpc_code: int,
        words: str,
        *,
        reason: str | None = None,
        metadata: dict[str, str] | None = None,
        request_id: RequestId = None,
    ) -> None:
        super().__init__(REASONS.get(rpc_code, "error").lower(), words)
        self.rpc_code, self.words = rpc_code, words
        self.reason, self.metadata = reason, metadata
        self.request_id = request_id

    def answer(self, request_id: RequestId = None) -> dict[str, Any]:
        known = self.request_id if self.request_id is not None else request_id
        return rpc_error(
            known, self.rpc_code, self.words, reason=self.reason, metadata=self.metadata
        )


@dataclass(frozen=True)
class Call:
    id: RequestId
    op: Op
    version: Version
    params: Params


def version_of(header: str | None) -> Version | None:
    """The A2A version a request's header names; a missing one is 0.3. None: not one we speak."""
    raw = (header or "").strip()
    if not raw:
        return "0.3"
    parts = raw.split(".")
    if len(parts) not in (2, 3) or not all(p.isascii() and p.isdigit() for p in parts):
        return None
    major, minor = int(parts[0]), int(parts[1])
    return "1.0" if (major, minor) == (1, 0) else "0.3" if (major, minor) == (0, 3) else None


def _no_constants(name: str) -> None:
    raise ValueError(f"{name} is not JSON")


# Made once: json.loads with any option builds a new decoder (and its scanner) on every call.
_DECODER = json.JSONDecoder(parse_constant=_no_constants)


def _request_id(data: dict[str, Any]) -> RequestId:
    value = data.get("id")
    # bool is an int to Python, but never a JSON-RPC id.
    return value if isinstance(value, str | int) and not isinstance(value, bool) else None


_ENVELOPE = frozenset(("jsonrpc", "method", "id", "params"))


def _plain_method(data: dict[str, Any]) -> str | None:
    """The method of an envelope RpcRequest (strict) takes as it is, read with plain lookups:
    what nearly every call sends (a method of ours, an ASCII or number id). None: anything
    else, for RpcRequest to judge and find the words (it refuses a lone surrogate, say)."""
    method = data.get("method")
    request_id = data.get("id")
    if (
        data.get("jsonrpc") == "2.0"
        and type(method) is str
        and method in METHODS
        and (
            request_id is None
            or type(request_id) is int
            or (type(request_id) is str and request_id.isascii())
        )
        and type(data.get("params")) in (dict, list, type(None))
        and data.keys() <= _ENVELOPE
    ):
        return method
    return None


def read_call(body: bytes, content_type: str | None, version_header: str | None) -> Call:
    """The call a request body holds; raises Refusal (with the request's id when known)."""
    if (content_type or "").split(";")[0].strip().lower() != "application/json":
        raise Refusal(
            ErrorCode.CONTENT_TYPE_NOT_SUPPORTED,
            "The door takes JSON-RPC sent as application/json.",
        )
    try:
        data = _DECODER.decode(body.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        raise Refusal(ErrorCode.PARSE, "The body is not valid JSON.") from None
    if nests_deeper(data):
        # Nothing after this walks a deeper value (validation, copying, storing): no stack runs out.
        raise Refusal(
            ErrorCode.INVALID_REQUEST,
            f"The request nests deeper than {JSON_DEPTH} levels: send a flatter one.",
            request_id=_request_id(data) if isinstance(data, dict) else None,
        )
    if isinstance(data, list):
        raise Refusal(ErrorCode.INVALID_REQUEST, "Batch requests are not taken: send one call.")
    if not isinstance(data, dict):
        raise Refusal(ErrorCode.INVALID_REQUEST, "A JSON-RPC request is a JSON object.")
    request_id = _request_id(data)
    params = data.get("params")
    method = _plain_method(data)
    if method is not None:
        return _call(request_id, method, params, version_header)
    try:
        envelope = {k: v for k, v in data.items() if k != "params"}
        method = RpcRequest.model_validate(envelope, strict=True).method
        if params is not None and not isinstance(params, dict | list):
            raise ValueError("params must be an object")
    except (ValidationError, ValueError) as error:
        words = (
            describe_validation_error(error) if isinstance(error, ValidationError) else str(error)
        )
        raise Refusal(
            ErrorCode.INVALID_REQUEST,
            f"Not a JSON-RPC 2.0 request ({words}).",
            request_id=request_id,
        ) from None
    return _call(request_id, method, params, version_header)


def _call(request_id: RequestId, method: str, params: Any, version_header: str | None) -> Call:
    def refuse(code: int, words: str) -> Refusal:
        return Refusal(code, words, request_id=request_id)

    entry = METHODS.get(method)
    if entry is None:
        shown = " ".join(clean_text(method, 60).split())
        raise refuse(ErrorCode.METHOD_NOT_FOUND, f"There is no method “{shown}” here.")
    op, version = entry
    if op == "stream":
        raise refuse(
            ErrorCode.UNSUPPORTED_OPERATION,
            "Streaming is not offered here: send SendMessage (or message/send) and the answer "
            "comes back in one go.",
        )
    if op == "push":
        raise refuse(
            ErrorCode.PUSH_NOT_SUPPORTED,
            "Push notifications are not offered here: the answer comes back in the reply.",
        )
    asked = version_of(version_header)
    if asked is None:
        shown = clean_text(version_header or "", 20)
        raise refuse(
            ErrorCode.VERSION_NOT_SUPPORTED,
            f"A2A version “{shown}” is not spoken here: send {VERSION_HEADER}: 1.0 (or 0.3).",
        )
    if asked != version:
        said = f"{VERSION_HEADER}: {version_header}" if version_header else f"no {VERSION_HEADER}"
        raise refuse(
            ErrorCode.VERSION_NOT_SUPPORTED,
            f"{method} is an A2A {version} method, but the request says {said} (A2A {asked}).",
        )
    if isinstance(params, list):
        raise refuse(ErrorCode.INVALID_PARAMS, "params must be an object of named members.")
    if op in ("get", "cancel"):
        plain = plain_task_params(params)
        if plain is not None:
            return Call(request_id, op, version, plain)
    try:
        parsed = _PARAMS[op].model_validate(params or {})
    except ValidationError as error:
        raise refuse(
            ErrorCode.INVALID_PARAMS, f"Invalid params: {describe_validation_error(error)}."
        ) from None
    assert isinstance(parsed, Params)
    return Call(request_id, op, version, parsed)


# --- what a message says ------------------------------------------------------------------------


def message_words(params: SendParams, version: Version) -> str:
    """The text of a message to one of our agents; raises Refusal if it is not words from a user."""
    role = "user" if version == "0.3" else "ROLE_USER"
    if params.message.role != role:
        raise Refusal(ErrorCode.INVALID_PARAMS, f"A message to the agent has the role {role}.")
    texts = []
    for part in params.message.parts:
        media = part.get("mediaType")
        words_only = media is None or (isinstance(media, str) and media.startswith("text/"))
        if "text" not in part or not words_only:
            raise Refusal(
                ErrorCode.CONTENT_TYPE_NOT_SUPPORTED,
                "This agent takes words only: send text parts, no files or data.",
            )
        if not isinstance(part["text"], str):
            raise Refusal(ErrorCode.INVALID_PARAMS, "Invalid params: a part's text must be text.")
        texts.append(part["text"])
    text = "\n".join(texts)
    if not text.strip():
        raise Refusal(ErrorCode.INVALID_PARAMS, "The message has no words in it.")
    return text


# --- tasks on the wire --------------------------------------------------------------------------


def iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, tz=timezone.utc).isoformat().replace("+00:00", "Z")


def task_json(
    door_task: DoorTask,
    version: Version,
    *,
    history_length: int | None = None,
    artifacts: bool = True,
) -> dict[str, Any]:
    """A door task as A2A shows it: the caller's message as history, the reply as an artifact."""
    asked = message(
        door_task.asked,
        role="user",
        version=version,
        context_id=door_task.context_id,
        task_id=door_task.id,
        message_id=door_task.asked_id,
    )
    history = [asked] if history_length is None or history_length > 0 else []
    return task(
        task_id=door_task.id,
        context_id=door_task.context_id,
        state=door_task.state,
        version=version,
        reply=door_task.reply if artifacts else None,
        status_text=door_task.words,
        history=history,
        timestamp=iso(door_task.updated),
    )


@dataclass(frozen=True)
class ListQuery:
    context_id: str | None
    state: str | None
    limit: int
    offset: int
    updated_after: float | None


def list_query(params: ListParams) -> ListQuery:
    """ListTasks' filters and page, checked; raises Refusal for one this door cannot follow."""
    state = params.status
    if state == "TASK_STATE_UNSPECIFIED" or not state:
        state = None
    elif state not in STATES_V03:
        raise Refusal(ErrorCode.INVALID_PARAMS, "Invalid params: status is not an A2A task state.")
    token = params.page_token or "0"
    if not (token.isascii() and token.isdigit() and len(token) <= 9):
        raise Refusal(
            ErrorCode.INVALID_PARAMS, "Invalid params: that pageToken is not one of ours."
        )
    after = None
    if params.status_timestamp_after:
        try:
            moment = datetime.fromisoformat(params.status_timestamp_after.replace("Z", "+00:00"))
        except ValueError:
            raise Refusal(
                ErrorCode.INVALID_PARAMS,
                "Invalid params: statusTimestampAfter is not a timestamp.",
            ) from None
        after = (moment if moment.tzinfo else moment.replace(tzinfo=timezone.utc)).timestamp()
    return ListQuery(params.context_id, state, params.page_size or PAGE_SIZE, int(token), after)


def list_json(tasks: list[dict[str, Any]], query: ListQuery, total: int) -> dict[str, Any]:
    end = query.offset + len(tasks)
    return {
        "tasks": tasks,
        "nextPageToken": str(end) if end < total else "",
        "pageSize": query.limit,
        "totalSize": total,
    }
