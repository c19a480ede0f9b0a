"""The REST API under {base_url}conch/api/: thin HTTP adapters over the services.

Each handler parses (pydantic), calls a service and serialises; errors are base.py's one JSON
shape, and bad input never becomes a 500. Requests are authenticated by Jupyter (token, or cookie
+ XSRF) or by the kernel key in X-Conch-Kernel-Key, which is good here and nowhere else, and
here only to read, to make a chat and write in it, to stop a round and to ask to continue one
(`kernel_writes`; every kernel holds that key, and so does every piece of code an agent runs).
Saying yes, continuing a round without asking, changing a
chat's mode, undoing an agent's write to a cell, and interrupting or restarting the kernel when
an agent's code did not stop are the user's own. A message the kernel key posts is kept as sent
from the kernel (`via`).
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
from ..core.policy import BY_ADMIN, check_provider
from ..notebook.kernel import NotebookKernels
from ..providers import address_of
from ..rounds.resume import STORED_KINDS, read_already, stream_opening
from ..store.pages import PAGE_LIMIT, StreamCursor
from .base import KERNEL_USER, ApiError, ConchHandler
from .bodies import (
    AgentIn,
    AgentPatch,
    BudgetPatch,
    ConversationIn,
    ConversationPatch,
    HandedGive,
    HandedTake,
    MessageIn,
    ProviderIn,
    ToolAnswer,
)
from .services import ConchServices

# A comment line every so often keeps proxies from closing an idle event stream.
KEEPALIVE_SECONDS = 15.0


AGENTS_SETTINGS = ("add, change or remove agents", "Settings (%conch agents)")


def allowed_provider(handler: ConchHandler, provider: ProviderIn) -> None:
    """Whether this provider may be used: 403 `policy` for one the administrator's policy does
    not allow (a kind, a base URL, an ACP agent's command); 400 in words for an ACP command
    Conch will not run (checked again before each start)."""
    address = address_of(provider.kind, provider.base_url)
    check_provider(handler.conch.policy, provider.kind, address, provider.command)
    if provider.kind == "acp":
        refusal = command_refusal(provider.command or "", provider.args or ())
        if refusal:
            raise ApiError(400, "invalid", refusal)


def _public(conch: ConchServices, agent: Agent) -> dict[str, Any]:
    """The owner's view of an agent; a coding agent's also says whether it started (its card
    in Settings): `acp: {started, problem}`, or null before its first turn."""
    data = agent.to_public()
    if agent.provider.kind == "acp":
        data["acp"] = conch.coding.card(agent.id)
    return data


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
        allowed_provider(self, body.provider)
        self.conch.mcp_servers.check_ids(body.mcp)
        agent = self.conch.agents.create(
            name=body.name,
            persona=body.persona,
            instructions=body.instructions,
            provider=body.provider.model_dump(exclude={"api_key", "env"}),
            price=body.price.model_dump() if body.price else None,
            api_key=body.provider.api_key,
            acp_env=body.provider.env,
            mcp=body.mcp,
        )
        self.conch.rounds.names_changed()
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
        if body.mcp is not None:
            self.conch.mcp_servers.check_ids(body.mcp)
        changes: dict[str, Any] = {
            k: v
            for k, v in body.model_dump(exclude={"provider"}).items()
            if k in body.model_fields_set
        }
        if body.provider is not None:
            allowed_provider(self, body.provider)
            changes["provider"] = body.provider.model_dump(exclude={"api_key", "env"})
            if "api_key" in body.provider.model_fields_set:
                changes["api_key"] = body.provider.api_key or ""
            if "env" in body.provider.model_fields_set:
                changes["acp_env"] = body.provider.env or {}
        agent = self.conch.agents.update(agent_id, **changes)
        self.conch.rounds.names_changed()
        self.reply(_public(self.conch, agent))

    @web.authenticated
    @authorized
    def delete(self, agent_id: str) -> None:
        self.conch.agents.delete(agent_id)
        self.conch.rounds.names_changed()
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
        mode_of = self.conch.tools.mode_of  # the mode it runs in, under the policy
        limit = self.query_int("limit", PAGE_LIMIT)
        before = self.get_query_argument("before", None)
        if limit is None and before is None:
            listed, next_page = store.list_conversations(), None
        else:
            listed, next_page = store.pages.conversations("user", limit or PAGE_LIMIT, before)
        chats = [
            {**c.to_json(), "mode": mode_of(c), "spent_usd": store.spent(c.id)} for c in listed
        ]
        self.reply({"conversations": chats, "next": next_page})

    @web.authenticated
    @authorized
    async def post(self) -> None:
        body = self.body(ConversationIn) if self.request.body else ConversationIn()
        opened = self.conch.store.create_conversation(title=body.title, path=body.path)
        conversation = await opened
        self.reply(self.conch.rounds.conversation_json(conversation.id), 201)


class ConversationHandler(ConchHandler):
    users_own = ("change how a chat runs code or what it may spend", "the chat's header")

    @web.authenticated
    @authorized
    async def get(self, conversation_id: str) -> None:
        limit, before = self.page()
        if limit is None:  # the whole chat, for existing clients: built without holding the loop
            text, _ = await self.conch.rounds.conversation_text(conversation_id)
            self.reply_text(text)
        else:
            self.reply(self.conch.rounds.conversation_json(conversation_id, limit, before))

    @web.authenticated
    @authorized
    async def patch(self, conversation_id: str) -> None:
        body = self.body(ConversationPatch)
        if body.mode is not None:
            await self.conch.tools.set_mode(conversation_id, body.mode)
        if "limit_usd" in body.model_fields_set:
            await self.conch.rounds.set_limit(conversation_id, body.limit_usd)
        text, _ = await self.conch.rounds.conversation_text(conversation_id)
        self.reply_text(text)


class BudgetHandler(ConchHandler):
    """The month's spend against its budget, by agent; the budget is set in Settings."""

    users_own = ("change the month's budget", "Settings (%conch agents)")

    @web.authenticated
    @authorized
    def get(self) -> None:
        self.reply(self.conch.rounds.month_json())

    @web.authenticated
    @authorized
    async def patch(self) -> None:
        body = self.body(BudgetPatch)
        self.reply(await self.conch.rounds.set_monthly_budget(body.monthly_usd))


class ToolAnswerHandler(ConchHandler):
    """The user's yes or no to a call that is asking."""

    users_own = ("answer a call", "the chat")

    @web.authenticated
    @authorized
    def post(self, conversation_id: str, call_id: str) -> None:
        body = self.body(ToolAnswer)
        self.conch.rounds.live_json(conversation_id)  # 404 for no such chat
        self.conch.tools.answer(conversation_id, call_id, body.run)  # 409 once not asking
        self.reply({"call_id": call_id, "run": body.run})


class ToolUndoHandler(ConchHandler):
    """The user's Undo of an agent's write to a cell (409 `not_undoable` in words when it
    cannot be undone now); event `tool.undone`."""

    users_own = ("undo an agent's change to the notebook", "the chat")

    @web.authenticated
    @authorized
    async def post(self, conversation_id: str, call_id: str) -> None:
        self.conch.rounds.conversation_json(conversation_id)  # 404 for no such chat
        await self.conch.tools.undo(conversation_id, call_id)
        self.reply({"call_id": call_id, "undone": True})


class CellsHandler(ConchHandler):
    """`GET /conversations/{id}/cells`: the chat's notebook's cells in order with who wrote
    each (`{path, where, cells: [{id, type, conch: {agent, name, chat} | null}]}`), for the view's
    marks; the kernel key may read it, like the rest of a chat."""

    @web.authenticated
    @authorized
    async def get(self, conversation_id: str) -> None:
        names = self.conch.rounds.names()
        self.reply(await self.conch.tools.cells(conversation_id, names))  # 404: no such chat


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


class HandedRunsHandler(ConchHandler):
    """The hand-over: a cell of this kernel waiting in `answered()` takes the next run the user
    approved for this kernel ({"run": {"id", "code"}} or {"run": null} after `wait` seconds),
    and runs it itself. The kernel key may ask, with its kernel's proof (an HMAC of the kernel
    id with its own connection key): it only takes code the user approved, exactly as approved,
    for that very kernel; it can approve, widen or change nothing."""

    kernel_writes = frozenset({"POST"})

    @web.authenticated
    @authorized
    async def post(self, kernel_id: str) -> None:
        body = self.body(HandedTake)
        handed = await self._kernels().take(kernel_id, body.proof, body.wait)
        run = None if handed is None else {"id": handed.id, "code": handed.code}
        self.reply({"run": run})

    def _kernels(self) -> NotebookKernels:
        kernels = self.conch.tools.kernels
        if kernels is None:
            raise ApiError(404, "not_found", "This server runs no notebook kernels for Conch.")
        return kernels


class HandedRunHandler(HandedRunsHandler):
    """The waiting cell gives back what the handed run printed: the run's result, bounded as
    any run's."""

    @web.authenticated
    @authorized
    async def post(self, kernel_id: str, run_id: str) -> None:
        body = self.body(HandedGive)
        self._kernels().give(kernel_id, body.proof, run_id, body.output, body.total, body.failed)
        self.reply({"given": True})


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


class ContinueHandler(ConchHandler):
    """`POST …/round/continue`: the user continues the chat's last round, stopped at its bound
    (202 `{named, continues: true}`; 409 `nothing_to_continue` in words). The kernel key may
    only ask: 202 `{asking: call_id}`, and the chat asks the user, whose yes on their own page
    (`POST …/tools/{call_id}`) goes on."""

    kernel_writes = frozenset({"POST"})

    @web.authenticated
    @authorized
    def post(self, conversation_id: str) -> None:
        rounds = self.conch.rounds
        if self.current_user is KERNEL_USER:
            self.reply({"asking": rounds.ask_to_continue(conversation_id)}, 202)
        else:
            self.reply({"named": rounds.continue_round(conversation_id), "continues": True}, 202)


class EventsHandler(ConchHandler):
    place: StreamCursor  # what the stream has delivered
    """Server-sent events: a snapshot of the chat first (whole, or with `?limit=N` a page of
    it), then everything as it happens. Each stored item carries the stream's place as its SSE
    `id`; a stream that resumes from one (`Last-Event-ID`, or `?after=`) gets what it missed
    and the chat's live parts (`resumed`), not the chat again: nothing lost, nothing doubled."""

    @web.authenticated
    @authorized
    async def get(self, conversation_id: str) -> None:
        rounds = self.conch.rounds
        limit, _ = self.page()
        after = self.get_query_argument("after", None) or self.request.headers.get("Last-Event-ID")
        cursor = StreamCursor.parse(after) if after else None  # 400 before the stream opens
        rounds.live_json(conversation_id)  # 404 before the stream opens
        self.set_header("Content-Type", "text/event-stream; charset=utf-8")
        self.set_header("Cache-Control", "no-cache")
        self.set_header("X-Accel-Buffering", "no")
        async with self.conch.hub.follow(conversation_id) as queue:
            try:
                # Follow first, then read: nothing can fall between the two, and what was read
                # and comes again from the queue (stored, then published) is not sent twice.
                opening, seen = stream_opening(rounds, conversation_id, cursor, limit)
                if opening:
                    self.place = StreamCursor(seen.messages, seen.events)
                    await self._send(*opening)
                else:
                    # The whole chat: its live parts and where its log ends are read at once,
                    # the log after, a chunk at a time (the loop is not held); what comes
                    # meanwhile waits in the queue, and what the log holds of it is not sent.
                    text, upto = await rounds.conversation_text(conversation_id)
                    seen, self.place = StreamCursor(*upto), StreamCursor(*upto)
                    self.write(f"id: {seen}\nevent: snapshot\n")
                    self.write(f'data: {{"type": "snapshot", "conversation": {text}}}\n\n')
                    await self.flush()
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
                    fresh = [i for i in items if i is not None and not read_already(i, seen)]
                    await self._send(*fresh)
                    if items[-1] is None:
                        break
            except StreamClosedError:
                return
        self.finish()

    async def _send(self, *items: dict[str, Any]) -> None:
        for item in items:
            place = ""
            if item["type"] in STORED_KINDS:
                self._advance(item)
                place = f"id: {self.place}\n"
            self.write(f"{place}event: {item['type']}\ndata: {json.dumps(item)}\n\n")
        await self.flush()

    def _advance(self, item: dict[str, Any]) -> None:
        if item["type"] == "message":
            self.place.messages = max(self.place.messages, int(item.get("seq") or 0))
        elif item["type"] == "event":
            self.place.events = max(self.place.events, int(item["event"]["seq"]))


class RosterHandler(ConchHandler):
    """`GET /roster`: who can be named now, your agents and outside agents by id and name (an
    outside agent's name that clashes with one of yours names yours: `clashes_with`), for an @
    list outside a chat's own view (Conch's JupyterLab extension in Jupyter Chat)."""

    @web.authenticated
    @authorized
    def get(self) -> None:
        self.reply(self.conch.rounds.roster_json())


class PolicyHandler(ConchHandler):
    """What the administrator locked (c.ConchApp.policy): {"locked": {key: value}}, so a view
    can draw those controls as locked, with the words "set by your administrator"."""

    @web.authenticated
    @authorized
    def get(self) -> None:
        self.reply({"locked": self.conch.policy.locked, "words": BY_ADMIN})


class NotFoundHandler(ConchHandler):
    """Anything else under conch/api/ is a JSON 404, never an HTML page."""

    # Nothing is here to refuse: the kernel key hears the same 404 as anyone.
    kernel_writes: ClassVar[frozenset[str]] = frozenset({"POST", "PATCH", "PUT", "DELETE"})

    def _nothing(self, *args: str) -> None:
        raise ApiError(404, "not_found", f"There is nothing at {self.request.path}.")

    get = post = patch = put = delete = web.authenticated(authorized(_nothing))


def api_routes() -> list[tuple[str, type[ConchHandler]]]:
    chat = r"conch/api/conversations/(?P<conversation_id>[A-Za-z0-9_\-]{1,64})"
    kernel = r"conch/api/kernels/(?P<kernel_id>[A-Za-z0-9\-]{1,64})"
    return [
        (r"conch/api/agents", AgentsHandler),
        (r"conch/api/agents/(?P<agent_id>[^/]{1,100})", AgentHandler),
        (r"conch/api/policy", PolicyHandler),
        (r"conch/api/roster", RosterHandler),
        (r"conch/api/budget", BudgetHandler),
        (r"conch/api/acp/found", CodingAgentsFoundHandler),
        (r"conch/api/conversations", ConversationsHandler),
        (chat, ConversationHandler),
        (chat + r"/messages", MessagesHandler),
        (chat + r"/round/stop", StopHandler),
        (chat + r"/round/continue", ContinueHandler),
        (chat + r"/events", EventsHandler),
        (chat + r"/tools/(?P<call_id>[A-Za-z0-9_\-]{1,64})", ToolAnswerHandler),
        (chat + r"/tools/(?P<call_id>[A-Za-z0-9_\-]{1,64})/undo", ToolUndoHandler),
        (chat + r"/kernel/(?P<action>interrupt|restart)", KernelActionHandler),
        (chat + r"/cells", CellsHandler),
        (kernel + r"/handed", HandedRunsHandler),
        (kernel + r"/handed/(?P<run_id>[a-f0-9]{32})", HandedRunHandler),
    ]


# Last among conch/api/ routes (app.py puts it there).
API_NOT_FOUND = (r"conch/api(?:/.*)?", NotFoundHandler)
