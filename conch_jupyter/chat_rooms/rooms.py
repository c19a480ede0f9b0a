"""ChatRooms: every Jupyter Chat document (`*.chat`) as a Conch room, translating both ways.

In: jupyterlab-chat's ChatManager says when a chat goes live (`opened`) or is freed; for each live
chat Conch registers its bot users (its agents, outside agents and "Conch") and observes the
chat's messages (the WebSocket model's observers; under collaboration, the shared document's array
of messages and its transactions). A person's message (one a client sent through the chat's own
transport while Conch watched) goes to the rounds as the user's words, as the REST API's would;
`/stop`, `/continue`, `/allow` and `/deny` go to Stop, to continuing the round stopped at its
bound, and to the question waiting. Any other new message (another bot's; under collaboration
also one the server wrote or filled in again from the file, whatever sender it names: origin.py
says how that is told) is handed to the rounds as someone else's words: data. Conch's own posts
are known by the message ids it got back, never by sender; after the document was filled again
from the file, Conch finds them again by those ids (and puts back what the file lacked: its bot
users, a post still changing).

Out: Conch follows the room's conversation in the Hub, like an open view, and writes what the
round does into the chat: each reply as its agent's message, streamed in steps (marked on itself
when Stop cut it); an outside agent's answer marked as theirs; from "Conch", one line per round,
changed in place as the floor changes hands and at the end to the round's end, besides its
questions, its other notes and a message sent to the room through the API. A new chat (no message
yet) gets Conch's one welcome line when it first goes live. Every body Conch writes into a chat,
posted, changed or put back after the file was read again, goes through `_post` (a new post)
or `_replace` (a post's whole new body), and each seals it as a whole
(core/chat_seal.py): no picture, no raw HTML, links only http, https and mailto, whoever wrote it.

The room is the conversation kept for the chat file's own id (`metadata.id`), so a rename or a
restart finds it again. Nothing here decides anything of a round: the rounds do (rounds/driver.py).

Observers run inside the chat's own calls (and before `add_message` has returned the new id), so
each message is queued and handled by the room's own task: by then Conch knows its own ids.

The module stays whole past 500 lines: both ways through a room (what comes in, what Conch
writes) share one room's state, its chat, its posts by id and its streaming reply, and a reload
from the file touches both at once. What decides anything lives elsewhere: whose a change is
(origin.py), the words (words.py), the sealing (core/chat_seal.py), the rounds (rounds/).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass, field
from typing import Any

from jupyterlab_chat.models import (
    BaseChatModel,
    ChatMessageAction,
    ChatMessageEvent,
    Message,
    MessageObserver,
    NewMessage,
    User,
)

from ..agents.agent_store import AgentStore
from ..core.chat_seal import seal_for_chat
from ..core.errors import ConchError
from ..notebook.service import NotebookTools
from ..rounds.driver import RoundService
from ..rounds.engine import NO_ROUND_WORDS, ROUND_LIMITS, end_why
from ..store.chats import Store
from ..store.hub import Hub
from .origin import connected_clients, inserted_as, only_from
from .words import (
    CONCH_NAME,
    CONCH_USER,
    STREAM_STEP_SECONDS,
    Command,
    agent_user,
    command_in,
    end_line,
    from_elsewhere,
    how_to_continue,
    initials_of,
    outside_words,
    question_line,
    round_line,
    stopped_reply,
    welcome_line,
    writer_of,
)

log = logging.getLogger(__name__)


@dataclass
class _Stream:
    """A reply streaming into the chat: its chat message, what it shows, what waits for the
    next step."""

    chat_message: str
    sender: str
    time: float
    shown: str
    waiting: str = ""
    step: asyncio.TimerHandle | None = None


@dataclass
class _Posted:
    """One of Conch's posts that it may change later: its chat message and what it shows."""

    chat_message: str
    sender: str
    time: float
    body: str


@dataclass
class _Room:
    """One live chat and what Conch holds of it."""

    chat_id: str
    model: BaseChatModel
    heard: asyncio.Queue[ChatMessageEvent] = field(default_factory=asyncio.Queue)
    ours: set[str] = field(default_factory=set)  # the chat's ids of Conch's own posts
    kept: set[str] = field(default_factory=set)  # Conch's ids of messages that came from here
    conversation_id: str | None = None
    observer: MessageObserver | None = None  # the WebSocket model's
    subscription: Any = None  # a shared document's messages, observed
    committed: Any = None  # a shared document's transactions, observed
    seen: set[str] = field(default_factory=set)  # the chat's ids of messages it has had
    inserted: list[tuple[Message, bool]] = field(default_factory=list)  # (message, bot's?)
    replaced: bool = False  # the transaction under way took messages out
    tasks: list[asyncio.Task[None]] = field(default_factory=list)
    streams: dict[str, _Stream] = field(default_factory=dict)
    round_spent: float | None = None
    said_at_end: str | None = None
    round_limit: int | None = None  # the running round's bound of replies
    round_post: _Posted | None = None  # the running round's one line
    last_reply: _Posted | None = None  # the round's last reply, while no handover follows it
    alive: contextlib.ExitStack = field(default_factory=contextlib.ExitStack)
    held: bool = False  # kept in memory while a round runs (`alive`)


class ChatRooms:
    def __init__(
        self,
        manager: Any,  # jupyterlab_chat.chat_manager.ChatManager
        *,
        store: Store,
        hub: Hub,
        rounds: RoundService,
        agents: AgentStore,
        tools: NotebookTools,
    ) -> None:
        self.manager = manager
        self.store = store
        self.hub = hub
        self.rounds = rounds
        self.agents = agents
        self.tools = tools
        self._rooms: dict[str, _Room] = {}

    def start(self) -> None:
        """Observe the chats as they go live (Conch starts with the server, before any is)."""
        self.manager.observe_chats(self._on_chat_event)
        self.rounds.observe_names(self._names_changed)

    async def close(self) -> None:
        for chat_id in list(self._rooms):
            await self._detach(chat_id)

    # --- the chats' lifetimes ---

    async def _on_chat_event(self, logger: Any, schema_id: str, data: dict[str, Any]) -> None:
        chat_id = str(data.get("chat_id") or "")
        action = data.get("action")
        if action == "opened":
            kept = self._rooms.get(chat_id)
            if kept is not None and kept.model is self.manager.get(chat_id):
                return  # the same chat again (collaboration says so for each new client)
            await self._detach(chat_id)  # a chat opened again is a new model: start afresh
            self._attach(chat_id)
        elif action in ("closed", "deleted"):
            await self._detach(chat_id)

    def _attach(self, chat_id: str) -> None:
        model = self.manager.get(chat_id)
        if model is None or chat_id in self._rooms:
            return
        room = self._rooms[chat_id] = _Room(chat_id, model)
        self._set_users(room)
        self._welcome(room)
        self._observe(room)
        room.tasks.append(asyncio.create_task(self._listen(room), name=f"conch-chat-{chat_id}"))
        kept = self.store.find_chat_room(chat_id)
        if kept is not None:
            room.conversation_id = kept.id
            self._follow(room)

    async def _detach(self, chat_id: str) -> None:
        room = self._rooms.pop(chat_id, None)
        if room is None:
            return
        if room.observer is not None:
            room.model.unobserve_messages(room.observer)
        if room.subscription is not None:
            getattr(room.model, "ymessages").unobserve(room.subscription)  # noqa: B009
        if room.committed is not None:
            getattr(room.model, "ydoc").unobserve(room.committed)  # noqa: B009
        for task in room.tasks:
            task.cancel()
        await asyncio.gather(*room.tasks, return_exceptions=True)
        for stream in room.streams.values():
            if stream.step is not None:
                stream.step.cancel()
        room.alive.close()

    # --- in: what people and other bots write ---

    def _observe(self, room: _Room) -> None:
        ymessages = getattr(room.model, "ymessages", None)
        if ymessages is None:  # the WebSocket model
            room.observer = room.model.observe_messages(room.heard.put_nowait)
            return
        # A shared document (collaboration). jupyterlab-chat 0.25's YChat reports no new message
        # while the document is unsaved (`dirty`), and takes any message whose sender is no bot
        # user as a person's, the file's out-of-band reload included. So Conch reads its shared
        # array of messages itself, and tells who made each change by the transaction's update
        # (origin.py): the array's event comes first, the transaction's at its commit.
        room.seen = {m.id for m in room.model.get_messages()}
        room.subscription = ymessages.observe(lambda event: self._inserted(room, event))
        ydoc = getattr(room.model, "ydoc")  # noqa: B009
        room.committed = ydoc.observe(lambda event: self._committed(room, event))

    def _inserted(self, room: _Room, event: Any) -> None:
        # Called inside the document's transaction: nothing may escape into it.
        try:
            self._read_inserted(room, event)
        except Exception:
            log.exception("Conch: chat %s: a new message could not be read", room.chat_id)

    def _read_inserted(self, room: _Room, event: Any) -> None:
        users = room.model.get_users()
        for change in getattr(event, "delta", ()):
            room.replaced = room.replaced or "delete" in change
            for item in change.get("insert", ()):
                # A Map, or a plain value where YChat moved a message to its server time.
                message = Message(**(item.to_py() if hasattr(item, "to_py") else item))
                sender = users.get(message.sender)
                room.inserted.append((message, sender is not None and bool(sender.bot)))

    def _committed(self, room: _Room, event: Any) -> None:
        """A transaction of the shared document is committed: its new messages are heard, a
        person's only when connected clients made all of the change. Called at the commit,
        where pycrdt lets nothing read the document: only the update is read here."""
        if not room.inserted and not room.replaced:
            return
        inserted, room.inserted = room.inserted, []
        replaced, room.replaced = room.replaced, False
        try:
            awareness = getattr(room.model, "awareness", None)
            states = awareness.states if awareness is not None else {}
            server = getattr(room.model, "ydoc").client_id  # noqa: B009
            from_a_client = only_from(event.update, connected_clients(states, server))
            for message, bot in inserted:
                action = inserted_as(
                    message.id, seen=room.seen, from_a_client=from_a_client, bot_sender=bot
                )
                room.seen.add(message.id)
                if action is not None:
                    heard = ChatMessageEvent(action=ChatMessageAction(action), message=message)
                    room.heard.put_nowait(heard)
            if replaced and not from_a_client:
                asyncio.get_running_loop().call_soon(self._mend, room)
        except Exception:
            log.exception("Conch: chat %s: a change could not be read", room.chat_id)

    async def _listen(self, room: _Room) -> None:
        while True:
            event = await room.heard.get()
            try:
                await self._hear(room, event)
            except ConchError as error:
                self._say(room, error.message)
            except Exception:
                log.exception("Conch: a message in chat %s could not be taken", room.chat_id)
                self._say(room, "Conch could not take that message; see the server log.")

    async def _hear(self, room: _Room, event: ChatMessageEvent) -> None:
        message = event.message
        writer = writer_of(str(event.action.value), message.id, room.ours)
        if writer is None or writer == "ours" or message.deleted or not message.body.strip():
            return
        if writer == "person":
            command = command_in(message.body)
            if command is not None:
                await self._command(room, command)
                return
            conversation_id = await self._conversation(room)
            kept = await self.rounds.post(conversation_id, message.body)
        else:
            conversation_id = await self._conversation(room)
            sender = room.model.get_users().get(message.sender)
            name = (sender.display_name or sender.name) if sender is not None else message.sender
            kept = await self.rounds.keep_words_of_another(conversation_id, name, message.body)
        room.kept.add(kept.id)

    async def _command(self, room: _Room, command: Command) -> None:
        conversation_id = room.conversation_id
        if command.name == "stop":
            if conversation_id is None or not self.rounds.stop(conversation_id):
                self._say(room, "Nothing of Conch's is running here.")
            return
        if command.name == "continue":
            self._continue(room, conversation_id)
            return
        asking = self.tools.asking(conversation_id) if conversation_id is not None else []
        waiting = [str(a["call_id"]) for a in asking]
        if command.call_id is not None:
            call_id = command.call_id
        elif len(waiting) == 1:
            call_id = waiting[0]
        elif not waiting:
            self._say(room, "No question of Conch's is waiting for an answer.")
            return
        else:
            ids = ", ".join(f"`{w}`" for w in waiting)
            self._say(
                room, f"Several questions wait ({ids}): say which, e.g. `/allow {waiting[0]}`."
            )
            return
        assert conversation_id is not None  # a call id was given or found: there is a chat
        self.tools.answer(conversation_id, call_id, command.name == "allow")  # 409 in words

    def _continue(self, room: _Room, conversation_id: str | None) -> None:
        """`/continue` from a person: the room's last round, stopped at its bound, goes on with
        fresh bounds (as Continue in the view); else the rounds' words why not (said by _listen,
        as any ConchError)."""
        if conversation_id is None:
            self._say(room, NO_ROUND_WORDS)
            return
        self.rounds.continue_round(conversation_id)  # NothingToContinueError: 409, in words

    async def _conversation(self, room: _Room) -> str:
        """The room's conversation, made the first time (titled by the file), its path kept
        current (a rename)."""
        path = room.model.get_path()
        kept = self.store.get_conversation(room.conversation_id) if room.conversation_id else None
        if kept is None or kept.chat_file != path:
            kept = await self.store.chat_room(room.chat_id, path)
        if room.conversation_id is None:
            room.conversation_id = kept.id
            self._follow(room)
        return kept.id

    # --- out: what the round does ---

    def _follow(self, room: _Room) -> None:
        assert room.conversation_id is not None
        task = asyncio.create_task(self._show_round(room, room.conversation_id))
        room.tasks.append(task)

    async def _show_round(self, room: _Room, conversation_id: str) -> None:
        while True:
            async with self.hub.follow(conversation_id) as queue:
                while True:
                    item = await queue.get()
                    if item is None:
                        break  # dropped (too far behind) or the server is going away
                    items: list[dict[str, Any] | None] = [item]
                    while not queue.empty() and items[-1] is not None:
                        items.append(queue.get_nowait())
                    self._show(room, [i for i in items if i is not None])
                    if items[-1] is None:
                        break
            # Dropped: follow again (the server going away ends this task with the room).
            await asyncio.sleep(1.0)

    def _show(self, room: _Room, items: list[dict[str, Any]]) -> None:
        for at, item in enumerate(items):
            kind = item.get("type")
            try:
                if kind == "delta":
                    self._delta(room, item)
                elif kind == "message":
                    ends = at + 1 < len(items) and items[at + 1] == {"type": "round", "round": None}
                    self._message(room, item["message"], before_end=ends)
                elif kind == "event":
                    self._event(room, item["event"])
                elif kind == "budget":
                    spent = (item["budget"].get("round") or {}).get("spent")
                    room.round_spent = spent if spent is not None else room.round_spent
                elif kind == "round":
                    self._hold(room, item.get("round") is not None)
                    limit = (item.get("round") or {}).get("limit")
                    room.round_limit = limit if isinstance(limit, int) else room.round_limit
            except Exception:
                log.exception("Conch: chat %s: could not show %s", room.chat_id, kind)

    def _message(self, room: _Room, message: dict[str, Any], *, before_end: bool) -> None:
        if message["id"] in room.kept:
            return  # it came from this chat
        role = message.get("role")
        if role == "agent":
            self._reply_done(room, message)
        elif role == "outside":
            name = str(message.get("name") or message.get("agent") or "An outside agent")
            sender = agent_user(str(message.get("agent")))
            self._post(room, sender, outside_words(str(message["text"]), name))
        elif role == "user":
            self._say(room, from_elsewhere(str(message["text"])))
        elif role == "note" and isinstance(message.get("round"), dict):
            self._floor_changed(room, str(message["text"]), message["round"])
        elif role == "note":
            if before_end:
                room.said_at_end = str(message["text"])  # folded into the end's one line
            else:
                self._say(room, str(message["text"]))

    def _event(self, room: _Room, event: dict[str, Any]) -> None:
        kind = event.get("type")
        if kind == "round.started":
            room.round_spent, room.said_at_end = None, None
            room.round_post, room.last_reply = None, None
        elif kind == "round.ended":
            said, room.said_at_end = room.said_at_end, None
            reason = str(event.get("reason"))
            with contextlib.suppress(ValueError):
                why = end_why(reason, event.get("limit", "round"))  # type: ignore[arg-type]
                if said == f"The round ended: {why}.":
                    said = None  # the folded words say it already
            going_on = how_to_continue(reason, str(event.get("limit", "round")))
            words = str(event.get("words", ""))
            self._round_says(room, end_line(words, said, room.round_spent, going_on))
            if reason == "stopped" and room.last_reply is not None:
                self._change(room, room.last_reply, stopped_reply(room.last_reply.body))
            room.round_spent, room.round_post, room.last_reply = None, None, None
        elif kind in ("tool.asking", "send.asking", "continue.asking"):
            self._say(room, question_line(event))

    def _delta(self, room: _Room, item: dict[str, Any]) -> None:
        reply, text = str(item["reply"]), str(item.get("text", ""))
        stream = room.streams.get(reply)
        if stream is None:
            sender = agent_user(str(item.get("agent")))
            chat_message = self._post(room, sender, text)
            posted = room.model.get_message(chat_message)
            at = posted.time if posted is not None else 0.0
            room.streams[reply] = _Stream(chat_message, sender, at, text)
            return
        stream.waiting += text
        if stream.step is None:
            loop = asyncio.get_running_loop()
            stream.step = loop.call_later(STREAM_STEP_SECONDS, self._step, room, stream)

    def _step(self, room: _Room, stream: _Stream) -> None:
        stream.step = None
        if stream.waiting:
            # The whole reply so far, sealed whole (a piece alone may fool the seal), and whole
            # too because what the chat holds may have been put back from the file meanwhile.
            stream.shown, stream.waiting = stream.shown + stream.waiting, ""
            self._update(room, stream, stream.shown)

    def _reply_done(self, room: _Room, message: dict[str, Any]) -> None:
        text = str(message["text"])
        stream = room.streams.pop(str(message["id"]), None)
        if stream is None:
            sender = agent_user(str(message.get("agent")))
            room.last_reply = self._posted(room, self._post(room, sender, text), sender, text)
            return
        if stream.step is not None:
            stream.step.cancel()
        if text != stream.shown:
            self._update(room, stream, text)
        room.last_reply = _Posted(stream.chat_message, stream.sender, stream.time, text)

    def _floor_changed(self, room: _Room, words: str, place: dict[str, Any]) -> None:
        """A handover: the round's one line says who has the floor now, and which reply of its
        bound this is; the reply before it was whole."""
        room.last_reply = None
        limit = room.round_limit or ROUND_LIMITS.replies
        self._round_says(room, round_line(words, place.get("turn"), limit))

    def _round_says(self, room: _Room, body: str) -> None:
        """The round's one line from Conch: posted at its first handover, changed in place
        after, to its end at the end."""
        if room.round_post is None:
            room.round_post = self._posted(
                room, self._post(room, CONCH_USER, body), CONCH_USER, body
            )
        else:
            self._change(room, room.round_post, body)

    def _welcome(self, room: _Room) -> None:
        """A new chat (no message yet) gets Conch's one welcome line: who can be mentioned,
        and how to stop them. The chat keeps it, so it is never said twice."""
        if room.model.get_messages():
            return
        ours = [a.name for a in self.agents.list()]
        outside = [
            o["name"] for o in self.rounds.roster_json()["outside"] if not o.get("clashes_with")
        ]
        self._say(room, welcome_line([*ours, *outside]))

    def _mend(self, room: _Room) -> None:
        """The shared document was filled again from elsewhere (the file's out-of-band reload),
        which may have taken out Conch's bot users and its posts or put back older words in
        them: the users are set again, and each post still changing is found again by its id and
        shows what Conch shows, or is posted again when the file lacked it."""
        if self._rooms.get(room.chat_id) is not room:
            return  # the chat went away meanwhile
        try:
            self._set_users(room, missing_only=True)
            for stream in room.streams.values():
                stream.chat_message, stream.time = self._found_again(
                    room, stream.chat_message, stream.sender, stream.time, stream.shown
                )
            for post in (room.round_post, room.last_reply):
                if post is not None:
                    post.chat_message, post.time = self._found_again(
                        room, post.chat_message, post.sender, post.time, post.body
                    )
        except Exception:
            log.exception("Conch: chat %s: its posts could not be found again", room.chat_id)

    def _found_again(
        self, room: _Room, chat_message: str, sender: str, time: float, body: str
    ) -> tuple[str, float]:
        """One of Conch's posts after the document was filled again: its id and time, changed
        back to `body` where the chat still has it, else posted again (a new id)."""
        try:
            found = room.model.get_message(chat_message)
        except IndexError:  # YChat's index of ids can be stale after a reload
            found = None
        if found is not None and found.id == chat_message:
            if found.body != seal_for_chat(body) or found.sender != sender:
                self._replace(room, chat_message, found.time, sender, body)
            return chat_message, found.time
        posted = self._post(room, sender, body)
        made = room.model.get_message(posted)
        return posted, made.time if made is not None else time

    # --- the chat's own calls ---

    def _post(self, room: _Room, sender: str, body: str) -> str:
        """A new post of Conch's, sealed. No mention-finding: Conch's words start no one's reply
        (a persona's included)."""
        sealed = NewMessage(body=seal_for_chat(body), sender=sender)
        made = room.model.add_message(sealed, trigger_actions=[])
        posted = str(made)
        room.ours.add(posted)
        return posted

    def _posted(self, room: _Room, chat_message: str, sender: str, body: str) -> _Posted:
        posted = room.model.get_message(chat_message)
        return _Posted(chat_message, sender, posted.time if posted is not None else 0.0, body)

    def _change(self, room: _Room, post: _Posted, body: str) -> None:
        """One of Conch's posts changed in place (it keeps its place and time in the chat),
        sealed; `post.body` keeps what it says before sealing."""
        post.body = body
        self._update(room, post, body)

    def _update(self, room: _Room, post: _Stream | _Posted, body: str) -> None:
        """A post's new body (a streaming reply's whole text so far), sealed as a whole."""
        self._replace(room, post.chat_message, post.time, post.sender, body)

    def _replace(self, room: _Room, chat_message: str, time: float, sender: str, body: str) -> None:
        """The one way Conch changes a post of its own: its whole body, sealed."""
        change = Message(body=seal_for_chat(body), id=chat_message, time=time, sender=sender)
        room.model.update_message(change, append=False)

    def _say(self, room: _Room, text: str) -> None:
        """A line from Conch itself."""
        self._post(room, CONCH_USER, text)

    def _hold(self, room: _Room, running: bool) -> None:
        """Keep a WebSocket chat in memory while a round runs, though its last page closes."""
        keep_alive = getattr(room.model, "keep_alive", None)
        if keep_alive is None:
            return  # a collaborative chat: its memory is the collaboration's to manage
        if running and not room.held:
            room.alive.enter_context(keep_alive())
            room.held = True
        elif not running and room.held:
            room.alive.close()
            room.held = False

    def _names_changed(self) -> None:
        for room in self._rooms.values():
            try:
                self._set_users(room)
            except Exception:
                log.exception("Conch: chat %s: its users could not be set", room.chat_id)

    def _set_users(self, room: _Room, *, missing_only: bool = False) -> None:
        """Conch's agents, outside agents and Conch itself, as the chat's bot users (with
        `missing_only`, only those the chat lacks or holds otherwise)."""
        known = room.model.get_users() if missing_only else {}
        users = [(CONCH_USER, CONCH_NAME)]
        users += [(agent_user(a.id), a.name) for a in self.agents.list()]
        roster = self.rounds.roster_json()
        users += [(agent_user(o["id"]), o["name"]) for o in roster["outside"]]
        for username, name in users:
            user = User(  # type: ignore[no-untyped-call]  # its __init__ takes **kwargs
                username=username,
                name=name,
                display_name=name,
                initials=initials_of(name),
                bot=True,
            )
            if known.get(username) != user:
                room.model.set_user(user)
