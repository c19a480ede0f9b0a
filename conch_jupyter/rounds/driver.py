"""RoundService: the async driver that runs rounds in chats, around the pure engine (engine.py).

It owns the I/O a round needs: it stores the user's message, decides who answers (a round when
the message mentions agents, else the chat's agent alone), hands each turn to the turn routine
(turn.py: the model's reply, streamed, kept and billed) or to the outside agent (outside_turn.py:
your message sent, its answer kept), stores notes and events, feeds every outcome to the engine,
and publishes the round live through the Hub. One runner per chat takes the chat's messages in
order, so two messages sent at once are both kept and answered in order, and the user is never
locked out: writing ends a running round after its running reply, and Stop ends it at once,
cancelling the model stream, the outside call, or the agent's run in the kernel.

A round that ended at its own bound can be continued by the user (`continue_round`: a new round,
every bound fresh, from whoever had the floor next; the engine's `continuation` decides whether
it may); with the kernel key it asks the user in the chat first (`ask_to_continue`).

Rounds live in memory only: a restart forgets them, and the chat stays with whoever spoke last.
The module stays whole past 500 lines: one runner per chat takes messages, continued rounds,
Stop and the engine's decisions in one place, and splitting it would spread a chat's live state
over modules that must then share it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from ..a2a.outside.service import OutsideAgents
from ..agents.agent_store import Agent, AgentStore
from ..core.deadlines import settle
from ..core.errors import ConchError
from ..core.files import StoreError
from ..core.names import clashes
from ..notebook.asking import NotAsking
from ..notebook.rules import NOTEBOOK_TOOLS
from ..notebook.service import NotebookTools
from ..store.chats import Conversation, Message, NotFound, Spend, Store
from ..store.hub import Hub
from .engine import (
    Ask,
    Broke,
    Continuation,
    Decision,
    End,
    NothingToContinue,
    NotSent,
    OutsideAnswered,
    ProviderFailed,
    ReplyEnded,
    Roster,
    Round,
    Speak,
    SpendRecorded,
    Stop,
    TurnRefused,
    UserWrote,
    continuation,
    end_event,
    end_why,
)
from .history import HISTORY_MESSAGES, Said, system_prompt
from .live_chat import Continued, LastRound, LiveChat, NextTurn, Room
from .mentions import read_mentions, unclear_note, unknown_mentions, unknown_note
from .outside_turn import OutsideTurns
from .prompts import not_sent_note, outside_refused_note, turn_note
from .snapshot import paged_log, whole_log, whole_log_json
from .spend import (
    Budget,
    budget_json,
    chat_limit_to_set,
    month_json,
    monthly_budget_to_set,
    running_refusal,
    turn_refusal,
)
from .turn import Reply, TurnInput, Turns

log = logging.getLogger(__name__)


class ChatNotFound(NotFound):
    """No chat with that id among those the caller may use (a door chat is not yours to post
    in): 404 `not_found`, as the store's NotFound."""


class NothingToContinueError(ConchError):
    """The chat's last round cannot be continued (now), in words: 409 `nothing_to_continue`."""

    status = 409

    def __init__(self, words: str) -> None:
        super().__init__("nothing_to_continue", words)


class RoundService:
    def __init__(
        self,
        *,
        store: Store,
        agents: AgentStore,
        hub: Hub,
        turns: Turns,
        budget: Budget,
        clock: Callable[[], float],
        outside: OutsideAgents | None = None,
    ) -> None:
        self.store = store
        self.agents = agents
        self.hub = hub
        self.turns = turns
        self.budget = budget
        self.clock = clock
        self.outside = outside
        self.outside_turns = OutsideTurns(store, hub, outside) if outside is not None else None
        # The NotebookTools the turns run calls through: asking, answers and Stop meet there.
        self.tools = turns.notebook or NotebookTools(store=store, hub=hub, kernels=None)
        self._chats: dict[str, LiveChat] = {}
        self._names_observers: list[Callable[[], None]] = []

    # --- what the handlers call ---

    async def post(self, conversation_id: str, text: str, *, via: str | None = None) -> Message:
        """Store the user's message and queue it for an answer; the round it starts runs on.
        `via="kernel"`: it came with the kernel key, so it goes to no outside agent without the
        user's yes in the chat itself."""
        self._require(conversation_id)
        message = await self.store.add_message(conversation_id, "user", text, via=via)
        self._publish_message(message)
        chat = self._chats.setdefault(conversation_id, LiveChat(conversation_id))
        self._wrote_since(chat)
        if chat.round is not None and chat.round.taking_turns:
            chat.round.handle(UserWrote())
        self.tools.skip_asking(conversation_id)  # writing skips what waits for a yes
        chat.inbox.put_nowait(message)
        if chat.runner is None or chat.runner.done():
            chat.runner = asyncio.create_task(self._drain(chat), name=f"conch-chat-{chat.id}")
        return message

    async def keep_words_of_another(self, conversation_id: str, name: str, text: str) -> Message:
        """Another bot's message in a room in Jupyter Chat (a Jupyter AI persona's): kept as
        someone else's words, fenced and labelled for every model as an outside agent's are, and
        the chat marked as holding them. It is data: it answers nothing, starts no round and
        does not end one (only a person's message does)."""
        self._require(conversation_id)
        await self.store.set_taint(conversation_id, {"kind": "person", "by": name})
        message = await self.store.add_message(conversation_id, "outside", text, agent=name)
        self._publish_message(message)
        self._wrote_since(self._chats.setdefault(conversation_id, LiveChat(conversation_id)))
        return message

    def continue_round(self, conversation_id: str) -> list[str]:
        """The user continues the chat's last round, stopped at its bound: a new round, every
        bound fresh, from whoever had the floor next; the ids of the agents on its floor.
        NothingToContinueError (409, in words) when it cannot be continued now. Only the user's
        own request (the page, or the token) comes here: the kernel key asks first."""
        self._require(conversation_id)
        chat = self._chats.setdefault(conversation_id, LiveChat(conversation_id))
        going_on = self._continuation(chat)
        last, chat.last = chat.last, None
        assert last is not None  # a continuation comes only from a last round
        message = last.message
        if chat.asking is not None:  # the kernel's question to continue is answered by this
            with contextlib.suppress(NotAsking):
                self.tools.answer(conversation_id, chat.asking[0], False)
        self._publish_continuable(chat)
        chat.inbox.put_nowait(Continued(going_on, message))
        if chat.runner is None or chat.runner.done():
            chat.runner = asyncio.create_task(self._drain(chat), name=f"conch-chat-{chat.id}")
        room = self._room()
        return [room.id_of(n) for n in going_on.named]

    def ask_to_continue(self, conversation_id: str) -> str:
        """The kernel key asks to continue (every piece of code an agent runs holds it, so it
        may not keep a round going by itself): the chat asks the user (`continue.asking`, listed
        under `asking` as `tool: "continue"`), and only the user's yes there continues the
        round. The call id; NothingToContinueError (409) when there is nothing to continue."""
        self._require(conversation_id)
        chat = self._chats.setdefault(conversation_id, LiveChat(conversation_id))
        going_on = self._continuation(chat)
        if chat.asking is not None and not chat.asking[1].done():
            return chat.asking[0]  # asked already: the same question
        room = self._room()
        named = [room.id_of(n) for n in going_on.named]
        call_id, answered = self.tools.ask_to_continue(conversation_id, named, list(going_on.named))
        task = asyncio.create_task(self._continue_if_yes(chat, answered))
        chat.asking = (call_id, task)
        return call_id

    def continuable_json(self, conversation_id: str) -> dict[str, Any] | None:
        """What the view offers to continue: the last round's floor, how it ended and what it
        cost, while it can be continued; None otherwise. (A chat at its limit is offered it too,
        and the request says to raise the limit first.)"""
        chat = self._chats.get(conversation_id)
        last = chat.last if chat is not None else None
        if last is None or last.wrote_since:
            return None
        decided = continuation(last.end, wrote_since=False)
        if not isinstance(decided, Continuation):
            return None
        room = self._room()
        made: dict[str, Any] = {
            "named": [room.id_of(n) for n in decided.named],
            "reason": last.end.reason,
            "turns": last.end.turns,
            "spent": round(last.spent_usd, 6),
        }
        if last.end.reason == "spend":
            made["limit"] = last.end.limit
        return made

    def stop(self, conversation_id: str) -> bool:
        """End the running round (or lone reply) at once. False when nothing was running."""
        self._require(conversation_id)
        chat = self._chats.get(conversation_id)
        if chat is None or chat.round is None or not chat.round.taking_turns:
            return False
        chat.round.handle(Stop(kept=chat.reply is not None and chat.reply.said_something))
        if self.turns.coding is not None:  # first: its questions then answer `cancelled`
            self.turns.coding.stop(conversation_id)
        self.tools.skip_asking(conversation_id)  # Stop skips what waits for a yes
        if chat.running is not None:
            chat.running.cancel()
        return True

    def round_state(self, conversation_id: str) -> dict[str, Any] | None:
        chat = self._chats.get(conversation_id)
        if chat is None or chat.round is None or not chat.visible or chat.round.ended:
            return None
        return self._snapshot(chat.round)

    def conversation_json(
        self, conversation_id: str, limit: int | None = None, before: str | None = None
    ) -> dict[str, Any]:
        """The chat as the API answers it: whole, or with `limit` a page of its log before the
        message `before` (snapshot.py), always with everything live."""
        # A door chat ("peer") can be read here, from its pairing; never written to or stopped.
        conversation = self._require(conversation_id, origins=("user", "peer"))
        names = self._room().names()

        def message_json(message: Message, cost: Spend | None) -> dict[str, Any]:
            return self.message_json(message, names, cost)

        if limit is None:
            log = whole_log(self.store, conversation_id, message_json)
        else:
            log = paged_log(self.store, conversation_id, message_json, limit, before)
        return {**conversation.to_json(), **log, **self._live_json(conversation)}

    async def conversation_text(self, conversation_id: str) -> tuple[str, tuple[int, int]]:
        """The whole chat as JSON text, as conversation_json() gives it, built a chunk at a time
        so that no chat's length holds the event loop (snapshot.py); and the seqs of the last
        message and event it holds. Its live parts and where its log ends are read together,
        before the first chunk: what is stored or streamed after that comes by the stream."""
        head = json.dumps(self.live_json(conversation_id))
        upto = self.store.pages.last_seqs(conversation_id)
        names = self._room().names()

        def message_json(message: Message, cost: Spend | None) -> dict[str, Any]:
            return self.message_json(message, names, cost)

        log = await whole_log_json(self.store, conversation_id, message_json, upto)
        return f"{head[:-1]}, {log}}}", upto

    def names(self) -> dict[str, str]:
        """Display names by id, as messages carry them (`name`)."""
        return self._room().names()

    def live_json(self, conversation_id: str) -> dict[str, Any]:
        """Everything live of a chat and none of its log: what a stream that resumes sends."""
        conversation = self._require(conversation_id, origins=("user", "peer"))
        return {**conversation.to_json(), **self._live_json(conversation)}

    def _live_json(self, conversation: Conversation) -> dict[str, Any]:
        conversation_id = conversation.id
        room = self._room()
        return {
            "spent_usd": round(self.store.spent(conversation_id), 6),
            "budget": self.budget_json(conversation_id),
            "round": self.round_state(conversation_id),
            "busy": self.busy(conversation_id),
            "continuable": self.continuable_json(conversation_id),
            **self.tools.chat_json(conversation),  # asking, working, mode_words
            # Who is who, so a view needs no other call to name everyone (issue 10).
            "roster": self.roster_json(room),
            "streaming": self.hub.streaming(conversation_id),
        }

    def roster_json(self, room: Room | None = None) -> dict[str, Any]:
        """Your agents and outside agents by id and name; an outside agent's name that clashes
        with one of yours names yours (the @ picker holds it back)."""
        room = room or self._room()
        clashing = clashes(tuple(a.name for a in room.agents), tuple(room.outside))
        return {
            "agents": [{"id": a.id, "name": a.name} for a in room.agents],
            "outside": [
                {"id": i, "name": n, "clashes_with": clashing.get(n)}
                for n, i in room.outside.items()
            ],
        }

    def names_changed(self) -> None:
        """Agents or outside agents were added, renamed or removed: every followed chat hears
        the roster (a `roster` item), so every open view's @ list offers the names at once."""
        self.hub.everyone({"type": "roster", "roster": self.roster_json()})
        for heard in self._names_observers:
            heard()

    def observe_names(self, callback: Callable[[], None]) -> None:
        """Be told when agents or outside agents are added, renamed or removed (another face
        that shows who is there: the rooms in Jupyter Chat), whether or not a chat is followed."""
        self._names_observers.append(callback)

    def busy(self, conversation_id: str) -> bool:
        """Whether the chat is answering (a round or a lone reply), or has messages waiting."""
        chat = self._chats.get(conversation_id)
        return chat is not None and chat.runner is not None and not chat.runner.done()

    def message_json(
        self, message: Message, names: dict[str, str], cost: Spend | None = None
    ) -> dict[str, Any]:
        data = message.to_json()
        if message.agent:
            data["name"] = names.get(message.agent, message.agent)
        if cost is not None:  # a metered reply: its quiet line's tokens and cost
            data["cost"] = {
                "usd": round(cost.usd, 6),
                "input_tokens": cost.input_tokens,
                "output_tokens": cost.output_tokens,
                "estimated": cost.estimated,
            }
        return data

    def budget_json(self, conversation_id: str, rnd: Round | None = None) -> dict[str, Any]:
        """The chat's `budget`: the running round's spend (or `rnd`'s), the chat's and the
        month's, each against its limit (DESIGN.md, "Cost in sight")."""
        if rnd is None:
            chat = self._chats.get(conversation_id)
            now = chat.round if chat is not None and chat.visible else None
            rnd = now if now is not None and now.ended is None else None
        return budget_json(self.store, self.budget, conversation_id, self.clock(), rnd)

    def publish_budget(self, conversation_id: str, rnd: Round | None = None) -> None:
        """The chat's budget to its followers, once a turn has been billed (with its round's
        spend, though the reply ended the round: the folded card may say it) or a limit set."""
        budget = self.budget_json(conversation_id, rnd)
        self.hub.publish(conversation_id, {"type": "budget", "budget": budget})

    def month_json(self) -> dict[str, Any]:
        """`GET /budget`: the month's spend against its budget, and by agent."""
        return month_json(self.store, self.budget, self.clock(), self._room().names())

    async def set_monthly_budget(self, usd: float | None) -> dict[str, Any]:
        """The month's budget, as the user set it in Settings (None: the server's default)."""
        await self.store.set_monthly_budget(monthly_budget_to_set(self.budget, usd))
        return self.month_json()

    async def set_limit(self, conversation_id: str, usd: float | None) -> None:
        """The chat's own spending limit, as the user set it in its header (None: the server's
        default); the next turn goes by it."""
        self._require(conversation_id)
        await self.store.set_chat_limit(conversation_id, chat_limit_to_set(self.budget, usd))
        self.publish_budget(conversation_id)

    async def close(self) -> None:
        """End every runner; used when the server stops. Rounds are not resumed later."""
        tasks = [c.runner for c in self._chats.values() if c.runner and not c.runner.done()]
        tasks += [c.asking[1] for c in self._chats.values() if c.asking and not c.asking[1].done()]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._chats.clear()

    # --- the runner ---

    async def _drain(self, chat: LiveChat) -> None:
        while not chat.inbox.empty():
            item = chat.inbox.get_nowait()
            message = item.message if isinstance(item, Continued) else item
            try:
                if isinstance(item, Continued):
                    await self._continue(chat, item)
                else:
                    await self._answer(chat, item)
            except asyncio.CancelledError:
                raise
            except StoreError as error:
                # Storage refused (a full disk): say it where it can be seen, keep serving.
                log.warning("Conch: chat %s could not be stored: %s", chat.id, error)
                words = f"Conch could not store this answer: {error}"
                await self._end_broken(chat, message, words)
            except Exception:
                log.exception("Conch: answering a message in chat %s failed", chat.id)
                await self._end_broken(
                    chat,
                    message,
                    "Something went wrong inside Conch while answering; see the server log.",
                )
            finally:
                chat.round, chat.running, chat.reply, chat.visible = None, None, None, False
                chat.next = None

    async def _answer(self, chat: LiveChat, message: Message) -> None:
        self.tools.new_message(chat.id)
        room = self._room()
        # A room in Jupyter Chat is shared with people and other bots: a message that names none
        # of Conch's agents is theirs (kept, and it ended any round), and a name Conch does not
        # know may be one of theirs, so it is not remarked on.
        in_chat_room = self._require(chat.id).chat_file is not None
        if not room.agents:
            await self._note(
                chat.id, "You have no agents yet: add one in Settings (or %conch agents)."
            )
            return
        roster = Roster(ours=tuple(a.name for a in room.agents), outside=tuple(room.outside))
        mentions = read_mentions(message.text, roster.ours, roster.outside)
        named = mentions.named
        if in_chat_room and not named:
            return
        if mentions.unclear:  # your agent took a mention an outside agent's name clashes with
            await self._note(chat.id, unclear_note(mentions.unclear))
        unknown = (
            [] if in_chat_room else unknown_mentions(message.text, (*roster.ours, *roster.outside))
        )
        if named:
            chat.round, chat.visible = Round(named=named, roster=roster), True
            if unknown:
                await self._note(chat.id, unknown_note(unknown, None, ""))
        else:
            agent = self._chat_agent(chat.id, room.agents)
            if unknown:  # "@Nobody …": said, not silently sent to the chat's agent
                last = self._require(chat.id).agent == agent.id
                why = "the last to answer in this chat" if last else "your first agent"
                await self._note(chat.id, unknown_note(unknown, agent.name, why))
            chat.round, chat.visible = (
                Round(named=[agent.name], roster=roster, handing_on=False),
                False,
            )
        decision = chat.round.start()
        if chat.visible:
            # After start(), so a Stop while this is stored ends the round it stops.
            await self._event(chat.id, "round.started", {"named": [room.id_of(n) for n in named]})
        await self._play(chat, room, decision, message)

    async def _continue(self, chat: LiveChat, continued: Continued) -> None:
        """A round the user continued: every bound fresh, its floor queue as the last one left
        it, answering the message that began that one."""
        self.tools.new_message(chat.id)
        room = self._room()
        roster = Roster(ours=tuple(a.name for a in room.agents), outside=tuple(room.outside))
        floor = continued.going_on.floor
        named = [w.name for w in floor]
        chat.round, chat.visible = Round(named=named, roster=roster, floor=floor), True
        decision = chat.round.start()
        started = {"named": [room.id_of(n) for n in named], "continues": True}
        await self._event(chat.id, "round.started", started)
        await self._play(chat, room, decision, continued.message)

    async def _play(self, chat: LiveChat, room: Room, decision: Decision, message: Message) -> None:
        """Turn after turn, as the engine decides, to the round's end."""
        while not isinstance(decision, End):
            self._publish_round(chat)
            if isinstance(decision, Ask):
                decision = await self._ask(chat, room, decision, message)
            else:
                decision = await self._speak(chat, room, decision, message)
        await self._finish(chat, decision, message)

    def _continuation(self, chat: LiveChat) -> Continuation:
        """The engine's say on continuing the chat's last round now (under the chat's limit and
        the month's budget, as for the first turn it would give); refused: 409 in words."""
        last = chat.last
        limit_now = None
        if last is not None and last.end.floor:
            first = last.end.floor[0].name
            agent = next((a for a in self._room().agents if a.name == first), None)
            if agent is not None:
                refused = turn_refusal(self.store, self.budget, agent, chat.id, self.clock())
                limit_now = refused.limit if refused is not None else None
        decided = continuation(
            last.end if last is not None else None,
            wrote_since=last is not None and last.wrote_since,
            limit_now=limit_now if limit_now != "round" else None,
            running=self.busy(chat.id),
        )
        if isinstance(decided, NothingToContinue):
            raise NothingToContinueError(decided.words)
        return decided

    async def _continue_if_yes(self, chat: LiveChat, answered: Awaitable[bool]) -> None:
        """The kernel's request to continue, once the user answered it in the chat."""
        try:
            if await answered:
                try:
                    self.continue_round(chat.id)
                except NothingToContinueError as refused:
                    await self._try_note(chat.id, f"Not continued: {refused.message}")
        except StoreError as error:
            log.warning("Conch: chat %s: the question to continue failed: %s", chat.id, error)
        finally:
            chat.asking = None

    def _wrote_since(self, chat: LiveChat) -> None:
        """Someone wrote in the chat: its last round can no longer be continued."""
        if chat.last is not None and not chat.last.wrote_since:
            chat.last.wrote_since = True
            self._publish_continuable(chat)

    def _publish_continuable(self, chat: LiveChat) -> None:
        continuable = self.continuable_json(chat.id)
        self.hub.publish(chat.id, {"type": "continuable", "continuable": continuable})

    def _room(self) -> Room:
        outside = self.outside.list() if self.outside is not None else []
        return Room(self.agents.list(), {o.name: o.id for o in outside})

    def _chat_agent(self, conversation_id: str, agents: list[Agent]) -> Agent:
        current = self._require(conversation_id).agent
        return next((a for a in agents if a.id == current), agents[0])

    async def _speak(self, chat: LiveChat, room: Room, turn: Speak, message: Message) -> Decision:
        rnd = chat.round
        assert rnd is not None
        agent = room.agent(turn.agent)
        ahead, chat.next = chat.next, None
        noted = ahead.note if ahead is not None and ahead.decision is turn else None
        if noted is None:
            refusal = turn_refusal(self.store, self.budget, agent, chat.id, self.clock())
            if refusal:
                return rnd.handle(TurnRefused(agent.name, refusal.words, refusal.limit))
        place = None
        if chat.visible:
            handed_by = room.id_of(turn.handed_by) if turn.handed_by else None
            place = {"turn": turn.turn, "handed_by": handed_by}
            if noted is None:
                await self._note(chat.id, turn_note(agent.name, turn.handed_by), place)
            else:
                self._publish_message(await noted)  # stored with the reply before it
            if rnd.ended is not None:  # stopped while the note was being stored
                return rnd.ended
        reply = chat.reply = Reply()
        taking = self.turns.take(self._turn_input(chat, room, agent, message, place), reply)
        task = asyncio.create_task(taking, name=f"conch-reply-{reply.id}")
        await self._run(chat, task)
        if not task.cancelled():
            task.result()  # a fault inside Conch (a full disk) is raised to the runner
        # Whether it ended, failed or was stopped, the reply is kept and billed (turn.py); after
        # a Stop the engine answers with the End it already decided.
        if reply.failure is not None:
            self._billed(chat, reply)
            words = f"{agent.name} could not answer: {reply.failure}"
            return rnd.handle(ProviderFailed(agent.name, words))
        if reply.refusal is not None:  # a coding turn Conch stopped at a spend bound
            rnd.handle(SpendRecorded(reply.cost))
            self._billed(chat, reply)
            if rnd.ended is not None:  # Stop came first
                return rnd.ended
            return rnd.handle(TurnRefused(agent.name, reply.refusal.words, reply.refusal.limit))
        if chat.next is not None:  # the engine went on as the reply was stored (_ahead)
            self._billed(chat, reply)  # the round counted it there
            if rnd.ended is not None or not isinstance(chat.next.decision, Speak):
                done, chat.next = chat.next, None
                if done.note is not None:  # stored, though a Stop came before its turn
                    self._publish_message(await done.note)
                return rnd.ended or done.decision
            return chat.next.decision
        rnd.handle(SpendRecorded(reply.cost))
        self._billed(chat, reply)
        return rnd.handle(ReplyEnded(agent.name, reply.text))

    def _billed(self, chat: LiveChat, reply: Reply) -> None:
        if reply.cost and chat.visible:  # what it cost is in the ledger: the view's totals too
            self.publish_budget(chat.id, chat.round)

    def _ahead(
        self, chat: LiveChat, room: Room, agent: Agent, reply: Reply
    ) -> asyncio.Task[Message] | None:
        """As a reply of a round is queued to be stored (Turns' ends_with): the engine's next
        step, and when that is another of your agents' turn and no budget refuses it, its note,
        queued right behind the reply so one commit stores both.

        Control inside out, for one commit fewer between two turns. What it buys (issue 22,
        item 4): bench_turn_overhead.py, 40 interleaved pairs against the step put back in
        _speak (the reply committed, the engine, the note committed), on a 2-core machine at
        load 1-7 whose gap was 2-3x the quiet one: the gap 0.9 ms shorter a turn at the median
        of the pairs (95% interval 0.2-2.1 ms; shorter in 28 of 40; medians 7.0 against 8.5
        ms), the server's CPU 0.5 ms less a reply (0.13-0.67). Without it, _speak's own note
        and refusal do it all (benchmarks/README.md, "Inside-out parts")."""
        rnd = chat.round
        if rnd is None or rnd.ended is not None or reply.failure is not None:
            return None
        if reply.refusal is not None:  # stopped at a spend bound: _speak ends the round
            return None
        rnd.handle(SpendRecorded(reply.cost))
        decision = rnd.handle(ReplyEnded(agent.name, reply.text))
        chat.next = NextTurn(decision)
        if not isinstance(decision, Speak):
            return None
        speaker = room.agent(decision.agent)
        # This reply's cost is not in the ledger yet: it is queued with the note.
        if turn_refusal(
            self.store, self.budget, speaker, chat.id, self.clock(), pending=reply.cost
        ):
            return None  # the turn's own check says so, and in words, when it comes
        handed_by = room.id_of(decision.handed_by) if decision.handed_by else None
        place = {"turn": decision.turn, "handed_by": handed_by}
        words = turn_note(speaker.name, decision.handed_by)
        try:
            queued = self.store.add_message(chat.id, "note", words, round=place)
        except StoreError:
            return None  # the turn stores its note itself, and says why it cannot
        note = asyncio.ensure_future(queued)
        # If the round ends without awaiting it (the reply's own commit failed), its error is
        # the runner's to say, not asyncio's "never retrieved".
        note.add_done_callback(lambda done: done.cancelled() or done.exception())
        chat.next = NextTurn(decision, note)
        return note

    async def _ask(self, chat: LiveChat, room: Room, turn: Ask, message: Message) -> Decision:
        """Send the user's message, and nothing else of the chat, to an outside agent."""
        rnd = chat.round
        assert rnd is not None
        assert self.outside_turns is not None  # the engine asks only outside agents that exist
        outside_id = room.id_of(turn.agent)
        await self._event(chat.id, "round.asking", {"agent": outside_id})
        if rnd.ended is not None:  # stopped while the event was being stored
            return rnd.ended
        if message.via is not None:
            # From the kernel, which every piece of code an agent runs holds: nothing leaves
            # until the user says yes to these exact words, in the chat.
            letting = asyncio.create_task(
                self.tools.ask_to_send(chat.id, outside_id, turn.agent, message.text)
            )
            await self._run(chat, letting)
            if rnd.ended is not None:  # Stop, while it asked
                return rnd.ended
            if not letting.result():
                await self._note(chat.id, not_sent_note(turn.agent))
                return rnd.handle(NotSent(turn.agent))
        asking = asyncio.create_task(self.outside_turns.ask(chat.id, outside_id, message.text))
        await self._run(chat, asking)
        if asking.cancelled():  # Stop: the engine answers with its End
            return rnd.handle(OutsideAnswered(turn.agent))
        # Kept here, after the wait: a Stop now cannot leave its words in the chat untainted.
        failed = await self.outside_turns.keep(
            chat.id, outside_id, turn.agent, turn.turn, asking.result()
        )
        if failed is not None:
            log.warning("Conch: chat %s: %s", chat.id, failed)
            return rnd.handle(ProviderFailed(turn.agent, failed))
        return rnd.handle(OutsideAnswered(turn.agent))

    async def _run(self, chat: LiveChat, task: asyncio.Task[Any]) -> None:
        """Wait for the turn or outside call `task`, however it ends: Stop may cancel it
        meanwhile, and the server stopping cancels it with us."""
        chat.running = task
        try:
            await settle(task)
        finally:
            chat.running, chat.reply = None, None

    def _turn_input(
        self,
        chat: LiveChat,
        room: Room,
        agent: Agent,
        message: Message,
        place: dict[str, Any] | None,
    ) -> TurnInput:
        names = room.names()
        history = self.store.messages(chat.id, limit=HISTORY_MESSAGES)
        said = [Said.of(m, names) for m in history]
        system = system_prompt(
            speaker=agent.name,
            persona=agent.persona,
            instructions=agent.instructions,
            room=[(a.name, a.persona) for a in room.agents],
            outside=list(room.outside),
            in_round=chat.visible,
        )
        return TurnInput(
            conversation_id=chat.id,
            agent=agent,
            system=system,
            said=said,
            user_text=message.text,
            room=tuple(a.name for a in room.agents) if chat.visible else (agent.name,),
            place=place,
            # Your agents, in your chats; the door's guests get none, and neither does a room in
            # Jupyter Chat, which has no notebook.
            tools=() if self._require(chat.id).chat_file else NOTEBOOK_TOOLS,
            mcp=agent.mcp,  # the tools of your MCP servers you gave this agent
            spend_check=lambda cost: running_refusal(
                self.store, self.budget, agent, chat.id, self.clock(), chat.round, cost
            ),
            ends_with=(lambda made: self._ahead(chat, room, agent, made)) if chat.visible else None,
        )

    async def _end_broken(self, chat: LiveChat, message: Message, words: str) -> None:
        """A failure inside Conch stopped the answer: the round still ends, with its reason
        (`error`, unless it had already ended for another) in a round.ended event, and the words
        in a note. Each is tried on its own: the store may be what failed."""
        rnd, chat.round = chat.round, None
        await self._try_note(chat.id, words)
        self.hub.publish(chat.id, {"type": "round", "round": None})
        if rnd is None or not chat.visible or rnd.phase == "new":
            return  # a lone reply, or a round that never started: no round to end
        end = rnd.handle(Broke(words))
        chat.last = LastRound(end, message, rnd.spent_usd)  # continued: never (an error)
        try:
            await self._event(chat.id, "round.ended", end_event(end))
        except StoreError:
            log.warning("Conch: chat %s: the round's end was not stored", chat.id)

    async def _finish(self, chat: LiveChat, end: End, message: Message) -> None:
        if chat.visible:  # how it ended, before anything is stored: continuing goes by it
            assert chat.round is not None
            chat.last = LastRound(end, message, chat.round.spent_usd)
        if end.reason == "outside":
            speaker = end.speakers[-1] if end.speakers else "An agent"
            await self._note(chat.id, outside_refused_note(speaker, end.named_outside))
        elif end.words:
            await self._note(chat.id, end.words)
        elif chat.visible and (why := end_why(end.reason, end.limit)):
            await self._note(chat.id, f"The round ended: {why}.")
        elif end.reason == "stopped":
            await self._note(chat.id, "You stopped the reply.")
        self.hub.publish(chat.id, {"type": "round", "round": None})
        if chat.visible:
            await self._event(chat.id, "round.ended", end_event(end))
            if self.continuable_json(chat.id) is not None:  # it was None while the round ran
                self._publish_continuable(chat)
        chat.round = None  # only now: if storing the end failed, _end_broken stores it again

    # --- small pieces ---

    def _require(self, conversation_id: str, origins: tuple[str, ...] = ("user",)) -> Conversation:
        conversation = self.store.get_conversation(conversation_id)
        if conversation is None or conversation.origin not in origins:
            raise ChatNotFound(conversation_id)
        return conversation

    def _snapshot(self, rnd: Round) -> dict[str, Any]:
        room = self._room()
        snap = rnd.snapshot()
        speaker = snap["speaker"]
        return {
            **snap,
            "speaker": room.id_of(speaker) if isinstance(speaker, str) else None,
            "waiting": [room.id_of(n) for n in rnd.waiting],
        }

    def _publish_round(self, chat: LiveChat) -> None:
        self.hub.publish(chat.id, {"type": "round", "round": self.round_state(chat.id)})

    def _publish_message(self, message: Message) -> None:
        name = self._room().names().get(message.agent) if message.agent else None
        self.hub.message(message, name or message.agent)

    async def _try_note(self, conversation_id: str, text: str) -> None:
        """A note about a failure, which may itself fail to be stored: then the log has it."""
        try:
            await self._note(conversation_id, text)
        except StoreError:
            log.warning("Conch: chat %s: %s (not stored)", conversation_id, text)

    async def _note(
        self, conversation_id: str, text: str, place: dict[str, Any] | None = None
    ) -> None:
        note = await self.store.add_message(conversation_id, "note", text, round=place)
        self._publish_message(note)

    async def _event(self, conversation_id: str, kind: str, data: dict[str, Any]) -> None:
        self.hub.event(await self.store.add_event(conversation_id, kind, data))
