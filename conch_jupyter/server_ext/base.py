"""What every Conch handler shares: the services accessor, the API's one JSON error shape, the
Conch API handler base, and where this server is reached (for addresses handed to others).

Nothing here imports another handler module; handlers.py (the REST API), outside_handlers.py,
pairing_handlers.py and door/http.py build on it, and app.py puts their routes together
(the door's is no route: it goes first in the server's router, door_handlers.install_door).
"""

from __future__ import annotations

import hmac
import json
from http import HTTPStatus
from typing import Any, ClassVar, TypeVar

from jupyter_server.auth.identity import User
from jupyter_server.base.handlers import APIHandler
from pydantic import BaseModel, ValidationError
from tornado import web

from ..core.errors import ConchError
from ..store.pages import PAGE_LIMIT
from .services import ConchServices

B = TypeVar("B", bound=BaseModel)

MAX_BODY_BYTES = 1_000_000
KERNEL_KEY_HEADER = "X-Conch-Kernel-Key"
KERNEL_USER = User(username="conch-kernel", name="Conch kernel client")

INTERNAL_WORDS = "Something went wrong inside Conch; see the server log."


def services_of(handler: web.RequestHandler) -> ConchServices:
    """Conch's services, kept in the tornado settings by ConchApp."""
    services: ConchServices = handler.settings["conch"]
    return services


def error_code(status: int) -> str:
    """An HTTP status as an error code: 405 → "method_not_allowed"."""
    return HTTPStatus(status).phrase.lower().replace(" ", "_")


class ApiError(web.HTTPError, ConchError):
    """An error only the HTTP side knows of (the request itself: its key, its size, its body),
    answered in words: {"error": {"code", "message"}} with `status`. A service's own errors are
    ConchErrors that carry their status themselves; handlers let them through."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(status, log_message=message.replace("%", "%%"))
        # Not ConchError.__init__: tornado fills log_message's %s from self.args, which must
        # stay empty (tornado's __init__ does not call on up the chain either).
        self.code = code
        self.message = message
        self.status = status


# What the kernel key may always do: read.
KERNEL_READS = frozenset({"GET", "HEAD", "OPTIONS"})


class ConchHandler(APIHandler):
    """The API under conch/api/: Jupyter's auth, or the kernel key in X-Conch-Kernel-Key.

    Every kernel holds the kernel key, and so does every piece of code an agent runs there, so
    the key reads, writes in a chat and stops a round, and nothing else (DESIGN.md, "What the
    kernel key may do"). That is decided here, before any handler runs, and refused unless a
    handler says otherwise: a handler lists in `kernel_writes` the methods the key may use
    beyond reading, and says in `users_own` what a refused request would have done and where
    the user does it instead.
    """

    auth_resource = "conch"
    kernel_writes: ClassVar[frozenset[str]] = frozenset()
    users_own: ClassVar[tuple[str, str]] = ("change Conch's settings", "Settings (%conch agents)")

    @property
    def conch(self) -> ConchServices:
        return services_of(self)

    async def prepare(self) -> None:  # type: ignore[override]
        key = self.request.headers.get(KERNEL_KEY_HEADER)
        if key is None:
            await super().prepare()
        else:
            # A kernel's own key: the host and origin checks still run; no cookie is involved,
            # so there is nothing for XSRF to protect.
            if not self.check_host():
                raise web.HTTPError(403)
            if not hmac.compare_digest(key.encode(), self.conch.kernel_key.encode()):
                raise ApiError(403, "bad_kernel_key", "The kernel key is not this server's.")
            self.current_user = self._jupyter_current_user = KERNEL_USER
            if not self.check_origin():
                raise web.HTTPError(404)
            method = self.request.method or ""
            if method not in KERNEL_READS and method not in self.kernel_writes:
                raise only_the_user(*self.users_own)
        if len(self.request.body or b"") > MAX_BODY_BYTES:
            raise ApiError(413, "too_large", "The body is larger than 1 MB.")

    def body(self, model: type[B]) -> B:
        try:
            return model.model_validate_json(self.request.body or b"")
        except ValidationError as error:
            raise ApiError(400, "invalid", _words(error)) from None

    def query_int(self, name: str, most: int) -> int | None:
        """A whole number from the query (`?limit=50`), 0 to `most`; None when not given."""
        text = self.get_query_argument(name, None)
        if text is None:
            return None
        if not text.strip().isdigit() or int(text) > most:
            raise ApiError(400, "invalid", f"{name} must be a whole number from 0 to {most}.")
        return int(text)

    def page(self) -> tuple[int | None, str | None]:
        """A chat's page as the query asks for it (`?limit=N&before=<message id>`)."""
        limit = self.query_int("limit", PAGE_LIMIT)
        before = self.get_query_argument("before", None)
        if before is not None and limit is None:
            raise ApiError(400, "invalid", "before= pages a chat: give limit= with it.")
        return limit, before

    def reply(self, data: Any, status: int = 200) -> None:
        self.reply_text(json.dumps(data), status)

    def reply_text(self, text: str, status: int = 200) -> None:
        """An answer already in JSON text (a long chat, made a chunk at a time)."""
        self.set_status(status)
        self.set_header("Content-Type", "application/json")
        self.finish(text)

    def log_exception(self, typ: Any, value: Any, tb: Any) -> None:
        # Errors we answer in words are not crashes: one line, no traceback (a full disk
        # would otherwise fill the log with the same trace on every request). An ApiError is
        # tornado's HTTPError, which tornado logs in one line itself.
        if isinstance(value, ConchError) and not isinstance(value, web.HTTPError):
            self.log.warning("%s %s: %s", self.request.method, self.request.path, value)
        else:
            super().log_exception(typ, value, tb)

    def write_error(self, status_code: int, **kwargs: Any) -> None:
        """The API's one way of answering an error: a ConchError (whoever raised it) with its
        own status, code and words; tornado's own HTTPError with its status in words; anything
        else, a crash, as 500 `internal` (the details in the log only)."""
        error = kwargs.get("exc_info", (None, None, None))[1]
        if isinstance(error, ConchError):
            status_code, code, message = error.status, error.code, error.message
        elif isinstance(error, web.HTTPError):
            code = error_code(status_code)
            message = error.log_message or HTTPStatus(status_code).phrase
        else:
            code, message = "internal", INTERNAL_WORDS
        self.set_status(status_code)
        self.set_header("Content-Type", "application/json")
        self.finish(json.dumps({"error": {"code": code, "message": message}}))


def only_the_user(doing: str, where: str) -> ApiError:
    """The kernel key's refusal, in words that say where the user does it instead."""
    return ApiError(
        403,
        "only_the_user",
        f"Only you can {doing}: do it in {where} on your own page in JupyterLab or Notebook 7."
        " Code running in a kernel (an agent's included) holds only the kernel key, which"
        " reads, writes in a chat and stops a round.",
    )


def _words(error: ValidationError) -> str:
    first = error.errors()[0]
    where = ".".join(str(p) for p in first["loc"]) or "body"
    if first["type"] == "json_invalid":
        if "surrogate" in first["msg"] or "end of hex escape" in first["msg"]:
            # "\\ud800" alone: JSON's grammar allows it, but it is no character, and no text
            # holding it can be stored.
            return "The body holds a lone surrogate (a \\u escape that is not a character)."
        return "The body is not valid JSON."
    if first["type"] == "extra_forbidden":
        return f"Unknown field: {where}."
    if first["type"] == "missing":
        return f"Missing field: {where}."
    return f"{where}: {first['msg']}."
