"""What a paired agent sends the door, parsed strictly: the params of each method it may call
(in either A2A version), checked after the JSON-RPC envelope and the method (calls.py).
"""

from __future__ import annotations

import functools
import re
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from ...core.text import clean_text

ID_LIMIT = 200
_SPACE = re.compile(r"\s")  # for str patterns, exactly what str.isspace() calls a space


def _plain_id(value: str) -> str:
    # Ids are echoed back and stored: no control, invisible or reordering characters, no spaces.
    if value.isascii() and value.isprintable() and " " not in value and 0 < len(value) <= ID_LIMIT:
        return value  # what nearly every id is, and clean_text changes no printable ASCII
    if not value or value != clean_text(value, ID_LIMIT) or _SPACE.search(value):
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
    """GetTask/CancelTask (1.0), tasks/get and tasks/cancel (0.3). Frozen: one is kept for
    each task a poller asks about (plain_task_params)."""

    model_config = ConfigDict(frozen=True)

    id: PlainId
    history_length: int | None = Field(default=None, ge=0)


def plain_task_params(params: dict[str, Any] | None) -> TaskParams | None:
    """TaskParams as the model reads them, with plain lookups, for what a poller sends again and
    again: a plain id and perhaps a historyLength. None: anything else, for the model to judge
    (and to say what is wrong)."""
    task_id = params.get("id") if params else None
    length = params.get("historyLength") if params else None
    if type(task_id) is not str or not (length is None or (type(length) is int and length >= 0)):
        return None
    try:
        _plain_id(task_id)
    except ValueError:
        return None
    return _task_params(task_id, length)


@functools.lru_cache(maxsize=1024)
def _task_params(task_id: str, history_length: int | None) -> TaskParams:
    return TaskParams.model_construct(id=task_id, history_length=history_length)


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
