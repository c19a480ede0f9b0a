"""The REST API under {base_url}conch/api/: thin HTTP adapters over the services.

Each handler parses (pydantic), calls a service and serialises; errors are base.py's one JSON
shape, and bad input never becomes a 500. Requests are authenticated by Jupyter (token, or cookie
+ XSRF) or by the kernel key in X-Conch-Kernel-Key, which is good here and nowhere else, and
here only to read, to make a chat and write in it, and to stop a round (`kernel_writes`; every
kernel holds that key, and so does every piece of code an agent runs). Saying yes, changing a
chat's mode, and interrupting or restarting the kernel when an agent's code did not stop are the
user's own. A message the kernel key posts is kept as sent from the kernel (`via`).
"""

from __future__ import annotations

import asyncio
import json
from typing import Any, ClassVar

from jupyter_server.auth.decorator import authorized
from tornado import web
from tornado.iostream import StreamClosedError

from ..agents.agent_store import Agent
from ..coding.rules import KNOWN_AGENTS, command_refusal, found_agents
from .base import KERNEL_USER, ApiError, ConchHandler
from .bodies import (
    AgentIn,
    AgentPatch,
    ConversationIn,
    ConversationPatch,
    MessageIn,
    ProviderIn,
    ToolAnswer,
)
from .services import ConchServices

# A comment line every so often keeps proxies from closing an idle event stream.
KEEPALIVE_SECONDS = 15.0


AGENTS_SETTINGS = ("add, change or remove agents", "Settings (%conch agents)")


def _public(conch: ConchServices, agent: Agent) -> dict[str, Any]:
    """The owner's view of an agent; a coding agent's also says whether it started (its card
    in Settings): `acp: {started, problem}`, or null before its first turn."""
    data = agent.to_public()
    if agent.provider.kind == "acp":
        data["acp"] = conch.coding.card(agent.id)
    return data


def _may_run(provider: ProviderIn) -> None:
    """An ACP agent's command is checked where it is added (and again before each start)."""
    if provider.kind == "acp":
        refusal = command_refusal(provider.command or "", provider.args or ())
        if refusal:
            raise ApiError(400, "invalid", refusal)


class AgentsHandler(ConchHandler):
    users_own = AGENTS_SETTINGS

    @web.authenticated
    @authorized
    def get(self) -> None:
        self.reply({"agents": [_public(self.conch, a) for a in self.conch.agents.list()]})

    @web.authenticated
    @authorized
    def post(self) -> None:
        body = self.body(AgentIn)
        _may_run(body.provider)
        agent = self.conch.agents.create(
            name=body.name,
            persona=body.persona,
            instructions=body.instructions,
            provider=body.provider.model_dump(exclude={"api_key", "env"}),
            price=body.price.model_dump() if body.price else None,
            api_key=body.provider.api_key,
            acp_env=body.provider.env,
        )
        self.reply(_public(self.conch, agent), 201)


class AgentHandler(ConchHandler):
    users_own = AGENTS_SETTINGS

    @web.authenticated
    @authorized
    def get(self, agent_id: str) -> None:
        agent = self.conch.agents.get(agent_id)
        self.reply(_public(self.conch, agent))

    @web.authenticated
    @authorized
    def patch(self, agent_id: str) -> None:
        body = self.body(AgentPatch)
        if body.provider is not None:
            _may_run(body.provider)
        changes: dict[str, Any] = {
            k: v
            for k, v in body.model_dump(exclude={"provider"}).items()
            if k in body.model_fields_set
        }
        if body.provider is not None:
            changes["provider"] = body.provider.model_dump(exclude={"api_key", "env"})
            if "api_key" in body.provider.model_fields_set:
                changes["api_key"] = body.provider.api_key or ""
            if "env" in body.provider.model_fields_set:
                changes["acp_env"] = body.provider.env or {}
        agent = self.conch.agents.update(agent_id, **changes)
        self.reply(_public(self.conch, agent))

    @web.authenticated
    @authorized
    def delete(self, agent_id: str) -> None:
        self.conch.agents.delete(agent_id)
        self.set_status(204)
        self.finish()


class CodingAgentsFoundHandler(ConchHandler):
    """`GET /acp/found`: the coding agents Settings can add (the known ones found on PATH)."""

    users_own = AGENTS_SETTINGS

    @web.authenticated
    @authorized
    def get(self) -> None:
        known = [
            {"label": k.label, "command": k.command, "args": list(k.args), "about": k.about}
            for k in KNOWN_AGENTS
        ]
        self.reply({"found": found_agents(), "known": known})


class ConversationsHandler(ConchHandler):
    kernel_writes = frozenset({"POST"})  # this_chat() and %conch make the notebook's chat

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
    async def post(self) -> None:
        body = self.body(ConversationIn) if self.request.body else ConversationIn()
        opened = self.conch.store.create_conversation(title=body.title, path=body.path)
        conversation = await opened
        self.reply(self.conch.rounds.conversation_json(conversation.id), 201)


class ConversationHandler(ConchHandler):
    users_own = ("change how a chat runs code", "the chat's header")

    @web.authenticated
    @authorized
    def get(self, conversation_id: str) -> None:
        self.reply(self.conch.rounds.conversation_json(conversation_id))

    @web.authenticated
    @authorized
    async def patch(self, conversation_id: str) -> None:
        body = self.body(ConversationPatch)
        await self.conch.tools.set_mode(conversation_id, body.mode)
        self.reply(self.conch.rounds.conversation_json(conversation_id))


class ToolAnswerHandler(ConchHandler):
    """The user's yes or no to a call that is asking."""

    users_own = ("answer a call", "the chat")

    @web.authenticated
    @authorized
    def post(self, conversation_id: str, call_id: str) -> None:
        body = self.body(ToolAnswer)
        self.conch.rounds.conversation_json(conversation_id)  # 404 for no such chat
        self.conch.tools.answer(conversation_id, call_id, body.run)  # 409 once not asking
        self.reply({"call_id": call_id, "run": body.run})


class KernelActionHandler(ConchHandler):
    """The user's Interrupt again or Restart kernel, offered while an agent's code that Stop
    interrupted still runs (the chat's `stuck`); 409 in words when nothing is stuck."""

    users_own = ("interrupt or restart the kernel", "the chat")

    @web.authenticated
    @authorized
    async def post(self, conversation_id: str, action: str) -> None:
        tools = self.conch.tools  # KernelActionRefused (409) when there is nothing to act on
        if action == "interrupt":
            answer = {"interrupted": True, "stuck": await tools.interrupt_again(conversation_id)}
        else:
            await tools.restart_kernel(conversation_id)
            answer = {"restarted": True, "stuck": tools.stuck(conversation_id)}
        self.reply(answer)


class MessagesHandler(ConchHandler):
    kernel_writes = frozenset({"POST"})

    @web.authenticated
    @authorized
    async def post(self, conversation_id: str) -> None:
        body = self.body(MessageIn)
        via = "kernel" if self.current_user is KERNEL_USER else None
        message = await self.conch.rounds.post(conversation_id, body.text, via=via)
        self.reply({"message_id": message.id}, 202)


class StopHandler(ConchHandler):
    kernel_writes = frozenset({"POST"})

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

    # Nothing is here to refuse: the kernel key hears the same 404 as anyone.
    kernel_writes: ClassVar[frozenset[str]] = frozenset({"POST", "PATCH", "PUT", "DELETE"})

    def _nothing(self, *args: str) -> None:
        raise ApiError(404, "not_found", f"There is nothing at {self.request.path}.")

    get = post = patch = put = delete = web.authenticated(authorized(_nothing))


def api_routes() -> list[tuple[str, type[ConchHandler]]]:
    chat = r"conch/api/conversations/(?P<conversation_id>[A-Za-z0-9_\-]{1,64})"
    return [
        (r"conch/api/agents", AgentsHandler),
        (r"conch/api/agents/(?P<agent_id>[^/]{1,100})", AgentHandler),
        (r"conch/api/acp/found", CodingAgentsFoundHandler),
        (r"conch/api/conversations", ConversationsHandler),
        (chat, ConversationHandler),
        (chat + r"/messages", MessagesHandler),
        (chat + r"/round/stop", StopHandler),
        (chat + r"/events", EventsHandler),
        (chat + r"/tools/(?P<call_id>[A-Za-z0-9_\-]{1,64})", ToolAnswerHandler),
        (chat + r"/kernel/(?P<action>interrupt|restart)", KernelActionHandler),
    ]


# Last among conch/api/ routes (app.py puts it there).
API_NOT_FOUND = (r"conch/api(?:/.*)?", NotFoundHandler)
