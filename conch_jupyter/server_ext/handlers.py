"""The REST API under {base_url}conch/api/: thin HTTP adapters over the services.

Each handler parses (pydantic), calls a service and serialises. Errors are one JSON shape,
{"error": {"code", "message"}}, and bad input never becomes a 500. Requests are authenticated by
Jupyter (token, or cookie + XSRF) or by the kernel key in X-Conch-Kernel-Key, which is good here
and nowhere else.
"""

from __future__ import annotations

import asyncio
import hmac
import json
from http import HTTPStatus
from typing import Any, TypeVar

from jupyter_server.auth.decorator import authorized
from jupyter_server.auth.identity import User
from jupyter_server.base.handlers import APIHandler
from pydantic import BaseModel, ValidationError
from tornado import web
from tornado.iostream import StreamClosedError

from ..agents import AgentError
from ..files import StoreError
from ..notebook.service import NotAsking
from ..service import ChatNotFound
from ..store import NotFound
from .bodies import AgentIn, AgentPatch, ConversationIn, ConversationPatch, MessageIn, ToolAnswer
from .services import ConchServices

B = TypeVar("B", bound=BaseModel)

MAX_BODY_BYTES = 1_000_000
KERNEL_KEY_HEADER = "X-Conch-Kernel-Key"
KERNEL_USER = User(username="conch-kernel", name="Conch kernel client")
# A comment line every so often keeps proxies from closing an idle event stream.
KEEPALIVE_SECONDS = 15.0

AGENT_ERROR_STATUS = {"not_found": 404, "name_taken": 409}
ANSWERED_IN_WORDS = (ChatNotFound, NotFound, AgentError, StoreError)


class ApiError(web.HTTPError):
    """An error the API answers in words: {"error": {"code", "message"}}."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(status, log_message=message.replace("%", "%%"))
        self.code = code
        self.message = message


class ConchHandler(APIHandler):
    auth_resource = "conch"

    @property
    def conch(self) -> ConchServices:
        services: ConchServices = self.settings["conch"]
        return services

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
        if len(self.request.body or b"") > MAX_BODY_BYTES:
            raise ApiError(413, "too_large", "The body is larger than 1 MB.")

    def the_users_own(self, doing: str) -> None:
        """Refuse a kernel-key request: every kernel holds that key, and so does every piece of
        code an agent runs; only the user's own Jupyter auth may say yes or change the mode."""
        if self.current_user is KERNEL_USER:
            raise ApiError(403, "only_the_user", f"Only you can {doing}, from your own page.")

    def body(self, model: type[B]) -> B:
        try:
            return model.model_validate_json(self.request.body or b"")
        except ValidationError as error:
            raise ApiError(400, "invalid", _words(error)) from None

    def reply(self, data: Any, status: int = 200) -> None:
        self.set_status(status)
        self.set_header("Content-Type", "application/json")
        self.finish(json.dumps(data))

    def log_exception(self, typ: Any, value: Any, tb: Any) -> None:
        # Errors we answer in words are not crashes: one line, no traceback (a full disk
        # would otherwise fill the log with the same trace on every request).
        if isinstance(value, ANSWERED_IN_WORDS):
            self.log.warning("%s %s: %s", self.request.method, self.request.path, value)
        else:
            super().log_exception(typ, value, tb)

    def write_error(self, status_code: int, **kwargs: Any) -> None:
        error = kwargs.get("exc_info", (None, None, None))[1]
        if isinstance(error, ApiError):
            code, message = error.code, error.message
        elif isinstance(error, ChatNotFound | NotFound):
            status_code, code, message = 404, "not_found", "There is no such chat."
        elif isinstance(error, AgentError):
            status_code = AGENT_ERROR_STATUS.get(error.code, 400)
            code, message = error.code, error.message
        elif isinstance(error, StoreError):
            status_code, code, message = 503, "storage", str(error)
        elif isinstance(error, web.HTTPError):
            code = HTTPStatus(status_code).phrase.lower().replace(" ", "_")
            message = error.log_message or HTTPStatus(status_code).phrase
        else:
            code, message = "internal", "Something went wrong inside Conch; see the server log."
        self.set_status(status_code)
        self.set_header("Content-Type", "application/json")
        self.finish(json.dumps({"error": {"code": code, "message": message}}))


def _words(error: ValidationError) -> str:
    first = error.errors()[0]
    where = ".".join(str(p) for p in first["loc"]) or "body"
    if first["type"] == "json_invalid":
        return "The body is not valid JSON."
    if first["type"] == "extra_forbidden":
        return f"Unknown field: {where}."
    if first["type"] == "missing":
        return f"Missing field: {where}."
    return f"{where}: {first['msg']}."


class AgentsHandler(ConchHandler):
    @web.authenticated
    @authorized
    def get(self) -> None:
        self.reply({"agents": [a.to_public() for a in self.conch.agents.list()]})

    @web.authenticated
    @authorized
    def post(self) -> None:
        body = self.body(AgentIn)
        agent = self.conch.agents.create(
            name=body.name,
            persona=body.persona,
            instructions=body.instructions,
            provider=body.provider.model_dump(exclude={"api_key"}),
            price=body.price.model_dump() if body.price else None,
            api_key=body.provider.api_key,
        )
        self.reply(agent.to_public(), 201)


class AgentHandler(ConchHandler):
    @web.authenticated
    @authorized
    def get(self, agent_id: str) -> None:
        agent = self.conch.agents.get(agent_id)
        self.reply(agent.to_public())

    @web.authenticated
    @authorized
    def patch(self, agent_id: str) -> None:
        body = self.body(AgentPatch)
        changes: dict[str, Any] = {
            k: v
            for k, v in body.model_dump(exclude={"provider"}).items()
            if k in body.model_fields_set
        }
        if body.provider is not None:
            changes["provider"] = body.provider.model_dump(exclude={"api_key"})
            if "api_key" in body.provider.model_fields_set:
                changes["api_key"] = body.provider.api_key or ""
        agent = self.conch.agents.update(agent_id, **changes)
        self.reply(agent.to_public())

    @web.authenticated
    @authorized
    def delete(self, agent_id: str) -> None:
        self.conch.agents.delete(agent_id)
        self.set_status(204)
        self.finish()


class ConversationsHandler(ConchHandler):
    @web.authenticated
    @authorized
    def get(self) -> None:
        store = self.conch.store
        chats = [
            {**c.to_json(), "spent_usd": store.spent(c.id)} for c in store.list_conversations()
        ]
        self.reply({"conversations": chats})

    @web.authenticated
    @authorized
    def post(self) -> None:
        body = self.body(ConversationIn) if self.request.body else ConversationIn()
        conversation = self.conch.store.create_conversation(title=body.title, path=body.path)
        self.reply(self.conch.rounds.conversation_json(conversation.id), 201)


class ConversationHandler(ConchHandler):
    @web.authenticated
    @authorized
    def get(self, conversation_id: str) -> None:
        self.reply(self.conch.rounds.conversation_json(conversation_id))

    @web.authenticated
    @authorized
    def patch(self, conversation_id: str) -> None:
        self.the_users_own("change how a chat runs code")
        body = self.body(ConversationPatch)
        self.conch.tools.set_mode(conversation_id, body.mode)
        self.reply(self.conch.rounds.conversation_json(conversation_id))


class ToolAnswerHandler(ConchHandler):
    """The user's yes or no to a run that is asking."""

    @web.authenticated
    @authorized
    def post(self, conversation_id: str, call_id: str) -> None:
        self.the_users_own("let code run")
        body = self.body(ToolAnswer)
        self.conch.rounds.conversation_json(conversation_id)  # 404 for no such chat
        try:
            self.conch.tools.answer(conversation_id, call_id, body.run)
        except NotAsking:
            raise ApiError(409, "not_asking", "That run is no longer asking.") from None
        self.reply({"call_id": call_id, "run": body.run})


class MessagesHandler(ConchHandler):
    @web.authenticated
    @authorized
    def post(self, conversation_id: str) -> None:
        body = self.body(MessageIn)
        message = self.conch.rounds.post(conversation_id, body.text)
        self.reply({"message_id": message.id}, 202)


class StopHandler(ConchHandler):
    @web.authenticated
    @authorized
    def post(self, conversation_id: str) -> None:
        self.reply({"stopped": self.conch.rounds.stop(conversation_id)})


class EventsHandler(ConchHandler):
    """Server-sent events: a snapshot of the chat first, then everything as it happens."""

    @web.authenticated
    @authorized
    async def get(self, conversation_id: str) -> None:
        rounds = self.conch.rounds
        rounds.conversation_json(conversation_id)  # 404 before the stream opens
        self.set_header("Content-Type", "text/event-stream; charset=utf-8")
        self.set_header("Cache-Control", "no-cache")
        self.set_header("X-Accel-Buffering", "no")
        async with self.conch.hub.follow(conversation_id) as queue:
            try:
                # Follow first, then snapshot: nothing can fall between the two.
                await self._send(
                    {"type": "snapshot", "conversation": rounds.conversation_json(conversation_id)}
                )
                while True:
                    try:
                        item = await asyncio.wait_for(queue.get(), KEEPALIVE_SECONDS)
                    except asyncio.TimeoutError:
                        self.write(": keepalive\n\n")
                        await self.flush()
                        continue
                    if item is None:
                        break
                    # Whatever else is queued already goes in the same write and flush.
                    items: list[dict[str, Any] | None] = [item]
                    while not queue.empty() and items[-1] is not None:
                        items.append(queue.get_nowait())
                    await self._send(*[i for i in items if i is not None])
                    if items[-1] is None:
                        break
            except StreamClosedError:
                return
        self.finish()

    async def _send(self, *items: dict[str, Any]) -> None:
        for item in items:
            self.write(f"event: {item['type']}\ndata: {json.dumps(item)}\n\n")
        await self.flush()


class NotFoundHandler(ConchHandler):
    """Anything else under conch/api/ is a JSON 404, never an HTML page."""

    def _nothing(self, *args: str) -> None:
        raise ApiError(404, "not_found", f"There is nothing at {self.request.path}.")

    get = post = patch = put = delete = web.authenticated(authorized(_nothing))


def handlers() -> list[tuple[str, type[APIHandler]]]:
    # door_handlers builds on this module, so it is imported only when the routes are made.
    from .door_handlers import door_routes
    from .outside_handlers import outside_routes

    chat = r"conch/api/conversations/(?P<conversation_id>[A-Za-z0-9_\-]{1,64})"
    routes: list[tuple[str, type[APIHandler]]] = [
        (r"conch/api/agents", AgentsHandler),
        (r"conch/api/agents/(?P<agent_id>[^/]{1,100})", AgentHandler),
        (r"conch/api/conversations", ConversationsHandler),
        (chat, ConversationHandler),
        (chat + r"/messages", MessagesHandler),
        (chat + r"/round/stop", StopHandler),
        (chat + r"/events", EventsHandler),
        (chat + r"/tools/(?P<call_id>[A-Za-z0-9_\-]{1,64})", ToolAnswerHandler),
        *door_routes(),
        *outside_routes(),
        (r"conch/api(?:/.*)?", NotFoundHandler),
    ]
    return routes
