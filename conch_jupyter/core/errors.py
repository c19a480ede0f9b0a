"""The one error base: every error Conch says no with, to a person or a program, is a ConchError
carrying a `code` for programs, a `message` (its words) for a person, and the HTTP `status` it is
answered with — the same three the API answers with ({"error": {"code", "message"}}).

A class says its status once (`status`, with `statuses` for codes that differ), so one place
turns any ConchError into an answer: ConchHandler.write_error for the API (server_ext/base.py),
and the door's mapping for A2A callers (door/http.py), whose JSON-RPC errors (a2a/door/calls.py
Refusal) carry their JSON-RPC number beside the code. Nothing else maps errors to statuses.

Each side keeps its own subclass name (AgentError, PairingError, OutsideError, NotFound,
StoreError, ApiError, ConchClientError, …), so callers catch what they mean. The few exceptions
that are no ConchError are control flow that never leaves the module that raises it, each saying
why in its docstring; tests/unit/test_errors.py walks every class in the package so no new one slips
past. Nothing here imports anything, so the kernel side can use it as the server side does.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar


class ConchError(Exception):
    """Something that could not be done, said in words (`message`) with a code (`code`) and the
    HTTP status it is answered with (`status`: the class's `statuses` for its code, else the
    class's `status`, unless the raiser gives one).

    `logged`, when given, is what the server's log and `str()` say instead of the words, where
    the owner is told more than the caller (a path, an id).
    """

    status: int = 400  # the caller asked for something that cannot be done
    statuses: ClassVar[Mapping[str, int]] = {}

    def __init__(
        self, code: str, message: str, *, status: int | None = None, logged: str | None = None
    ) -> None:
        super().__init__(message if logged is None else logged)
        self.code = code
        self.message = message
        self.status = status if status is not None else self.statuses.get(code, type(self).status)
