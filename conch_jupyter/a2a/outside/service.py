"""Outside agents as a service: adding one from a paste, asking one, and Repair everything.

Owns what happens between a person's action and the wire: an agent is added from a paste (its
card read through the guard, its endpoint on the card's host, its name fit for @mentions; the
list itself is listing.py), renamed, and asked (`ask`, the one call the round driver makes).

Names: someone else's card must never decide where your words go. An outside agent's name, the
card's or the one you give it, may not clash with one of your agents' names (names.clash: equal,
a start of one another, or alike to the eye): that is refused in words, and you name it.

What an outside agent is sent: exactly the text `ask` is given, as one ROLE_USER message, with the
chat's contextId for it and, when it asked for input in that context, the task id it asked in.
Nothing else of the chat.

An agent that never answered (no connection, an HTTP error, a timeout, an answer that is not A2A)
raises OutsideError; one that answered without words (a failed or rejected task, a sign-in asked
for, no text) raises it with `answered` set.

Signed cards (signatures.py): a card whose signature does not check out is refused at paste; the
key a card was signed with is pinned then. An agent with a pinned key has its card read again
before each ask, and one whose signature no longer checks out, or that shows another key or none,
is not called — its words say why, on the chat and its row — until a repair reads a card that
checks out with the pinned key, or the user accepts the key it now shows (`repair_one(…,
accept_key=True)`, the user's own request).

Healing: a passing failure is tried once more after `retry_delay`; a 1.0 agent that does not know
SendMessage (-32601, or -32009 for the version) is asked the 0.3 way and remembered as 0.3. Every
failure becomes the agent's last problem, in words that never quote the agent (they may be shown
in the chat as Conch's own note), and a success clears it. Stop cancels the wait and tells the
agent (CancelTask) for the task it knows. Not thread-safe: the server's event loop is the caller.
"""

from __future__ import annotations

import asyncio
import builtins
import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

from ...core.deadlines import duration, within
from ...core.names import clashes, first_clash, same_name, slug_of, trimmed_name
from ...core.policy import NO_POLICY, Policy, PolicyRefused, check_outside_host
from ...core.sealed import SealedFile
from ..reading import Outcome, parse_outcome
from ..wire import ErrorCode, Op, Version, WireError, new_id, send_params
from .cards import Found, find_agent
from .client import UNKNOWN_METHOD, A2AClient, CallFailed, Limits
from .guard import Guard, Home, Refused
from .listing import (
    OutsideAgent,
    OutsideError,
    OutsideList,
    StoredOutside,
    fit_name,
    pinning_fields,
    unique_name,
)
from .paste import PasteError, read_paste
from .signatures import Pinning, accepted, after_read

__all__ = ["OutsideAgent", "OutsideAgents", "OutsideError"]

ANY_KEY: Any = object()  # repair_one: accept whichever key the card shows
_RESERVED_IDS = frozenset({"repair"})  # /outside/repair is a path of its own
_STATE_PROBLEMS = {
    "TASK_STATE_AUTH_REQUIRED": ("auth_required", "wants you to sign in with it first"),
    "TASK_STATE_FAILED": ("failed", "could not do it (its task failed)"),
    "TASK_STATE_REJECTED": ("rejected", "turned the request down"),
    "TASK_STATE_CANCELED": ("canceled", "canceled the task"),
}


class OutsideAgents:
    """The service the handlers and the round driver use; one per server, on its event loop.

    `guard` decides where Conch may connect (tests give it a fake resolver); `limits`, the
    delays and `poll_limit` are the bounds (a card in 10 s, a call in 30 s, an answer in two
    minutes); `cancel_timeout` is how long Stop waits for the agent to hear CancelTask.
    """

    def __init__(
        self,
        data_dir: Path,
        secrets: SealedFile,
        *,
        taken_names: Callable[[], set[str]],
        clock: Callable[[], float],
        guard: Guard | None = None,
        limits: Limits | None = None,
        retry_delay: float = 1.0,
        poll_interval: float = 1.0,
        poll_limit: float = 120.0,
        cancel_timeout: float = 3.0,
        policy: Policy = NO_POLICY,
    ) -> None:
        self.policy = policy  # the administrator's: which hosts outside agents may live at
        self._list = OutsideList(Path(data_dir) / "agents" / "outside.json", secrets)
        self.path = self._list.path
        self._taken = taken_names
        self._clock = clock
        self._guard = guard or Guard()
        self._limits = limits or Limits()
        self.retry_delay, self.poll_interval = retry_delay, poll_interval
        self.poll_limit, self.cancel_timeout = poll_limit, cancel_timeout
        # (agent id, contextId) → the task that asked for input there; a restart forgets it.
        self._waiting: dict[tuple[str, str], str] = {}
        self._background: set[asyncio.Task[None]] = set()

    def __repr__(self) -> str:
        return f"OutsideAgents({str(self.path)!r})"

    def list(self) -> builtins.list[OutsideAgent]:
        """The outside agents, each marked with the agent of yours its name clashes with, if any
        (names kept from before the rule, or written by hand)."""
        agents = self._list.list()
        found = clashes(tuple(sorted(self._taken())), tuple(a.name for a in agents))
        if not found:
            return agents
        return [dataclasses.replace(a, clashes_with=found.get(a.name)) for a in agents]

    def get(self, outside_id: str) -> OutsideAgent:
        self._list.get(outside_id)  # "not found", in words
        return next(a for a in self.list() if a.id == outside_id)

    def remove(self, outside_id: str) -> None:
        self._list.remove(outside_id)
        self._waiting = {k: v for k, v in self._waiting.items() if k[0] != outside_id}

    async def add(self, paste: str, name: str | None = None) -> OutsideAgent:
        """Add the agent a paste points to, named `name` or else as its card calls itself."""
        if name is not None:  # a name that cannot be is refused before anything is called
            self._free_name(name, self._list.read().agents)
        try:
            pasted = read_paste(paste)
        except PasteError as e:
            raise OutsideError("invalid_paste", str(e)) from None
        host = pasted.address.raw_host.decode("ascii")[:80]
        # 403 `policy` before anything is looked up or called: a host the administrator's
        # policy does not allow is never contacted.
        check_outside_host(self.policy, pasted.address.raw_host.decode("ascii"))
        try:
            home = await self._guard.home_of(pasted.address)
            async with self._client(home, pasted.key) as client:
                found = await find_agent(client, pasted.address)
        except Refused as e:
            raise OutsideError("refused", f"Conch will not call {host}: {e.reason}.") from None
        except httpx.ConnectError as e:  # the name was not found
            raise OutsideError("unreachable", f"Conch {e}.") from None
        except CallFailed as e:
            raise OutsideError(e.code, f"{host} {e.words}.") from None
        if found.signed.problem is not None:
            raise OutsideError(
                "bad_signature",
                f"The card at {host} is signed, but its signature {found.signed.problem}; Conch "
                "did not add it.",
            )
        card, card_url, endpoint = found.card, found.found_at, found.endpoint
        file = self._list.read()  # afresh: the list may have changed while the card was read
        if any(a.endpoint == str(endpoint) for a in file.agents):
            raise OutsideError("exists", f"The agent at {host} is already an outside agent.")
        if name is not None:  # again: the lists may have changed while the card was read
            name = self._free_name(name, file.agents)
        else:
            base = fit_name(card.name) or fit_name(pasted.name or "") or fit_name(host)
            name = unique_name(base or "Outside agent", {a.name for a in file.agents})
            self._clear_of_yours(
                name,
                f"The card calls this agent “{name}”, which",
                "add it again with a name of its own",
            )
        agent_id = unique_name(slug_of(name), {a.id for a in file.agents} | _RESERVED_IDS, "-")
        stored = StoredOutside(
            id=agent_id,
            name=name,
            address=str(pasted.address),
            card_url=str(card_url),
            endpoint=str(endpoint),
            version=card.version,
            home=home,
            claim=card.claim(),
            created=self._clock(),
            **pinning_fields(Pinning(found.signed.key)),
        )
        self._list.append(file, stored, pasted.key)
        return self.get(agent_id)

    def rename(self, outside_id: str, name: str) -> OutsideAgent:
        """Give an outside agent a name of your choosing; its id stays."""
        self.get(outside_id)
        self._list.update(
            outside_id, name=self._free_name(name, self._list.read().agents, outside_id)
        )
        return self.get(outside_id)

    def _free_name(self, name: str, agents: builtins.list[StoredOutside], keep: str = "") -> str:
        """A name you give: trimmed, fit to be a name, clear of yours, unlike any other's."""
        try:
            name = trimmed_name(name)
        except ValueError as e:
            raise OutsideError("invalid_name", str(e)) from None
        self._clear_of_yours(name, f"“{name}”", "pick another name")
        for other in agents:
            if other.id != keep and same_name(other.name, name):
                raise OutsideError(
                    "name_taken",
                    f"An outside agent is already called “{other.name}” (names are compared "
                    "ignoring case, width, accents and invisible characters, and by how they "
                    "look): pick another name.",
                )
        return name

    def _clear_of_yours(self, name: str, said: str, then: str) -> None:
        hit = first_clash(name, sorted(self._taken()))
        if hit:
            raise OutsideError(
                "name_taken",
                f"{said} {hit[1]} the name of your agent “{hit[0]}”: a mention must say whom it "
                f"means, so {then}.",
            )

    # -- asking ----------------------------------------------------------------------------

    async def ask(self, outside_id: str, text: str, context_id: str | None) -> Outcome:
        """Send `text`, and only it; the answer once it is done, or OutsideError in words."""
        agent = self.get(outside_id)
        if agent.clashes_with:  # the last guard: mentions of it go to yours (rounds/mentions.py)
            raise OutsideError(
                "name_taken",
                f"{agent.name} was sent nothing: its name clashes with your agent's "
                f"“{agent.clashes_with}”, so give it a name of its own first.",
            )
        try:  # an agent kept from before the policy: not contacted, said in words
            check_outside_host(self.policy, httpx.URL(agent.endpoint).raw_host.decode("ascii"))
        except PolicyRefused as refused:
            words = f"{agent.name} was not contacted: {refused.message}"
            raise OutsideError("policy", words) from None
        if agent.signed or agent.key_change or agent.signature_problem:
            agent = await self._card_still_signed(agent)
        key = self._list.key(outside_id)
        waiting = self._waiting.get((outside_id, context_id)) if context_id else None
        try:
            outcome = await within(
                self.poll_limit, self._exchange(agent, key, text, context_id, waiting)
            )
        except asyncio.TimeoutError:
            words = f"did not answer within {duration(self.poll_limit)}"
            raise self._problem(agent, "timeout", words) from None
        except CallFailed as e:
            raise self._problem(agent, e.code, e.words) from None
        if outcome.context_id:
            self._waiting.pop((outside_id, outcome.context_id), None)
            if outcome.state == "TASK_STATE_INPUT_REQUIRED" and outcome.task_id:
                self._waiting[(outside_id, outcome.context_id)] = outcome.task_id
        if outcome.state in _STATE_PROBLEMS:
            raise self._problem(agent, *_STATE_PROBLEMS[outcome.state], answered=True)
        if outcome.state == "TASK_STATE_COMPLETED" and not outcome.text.strip():
            words = "answered with nothing Conch can show (no text)"
            raise self._problem(agent, "empty", words, answered=True)
        self._list.update(outside_id, last_problem=None)
        return outcome

    async def _exchange(
        self,
        agent: OutsideAgent,
        key: str | None,
        text: str,
        context_id: str | None,
        waiting: str | None,
    ) -> Outcome:
        endpoint = httpx.URL(agent.endpoint)
        task_id: str | None = None
        version = agent.version
        async with self._client(agent.home, key) as client:
            try:
                try:
                    result, version = await self._send(client, agent, text, context_id, waiting)
                except CallFailed as e:
                    if not waiting or e.rpc_code != ErrorCode.TASK_NOT_FOUND:
                        raise
                    # The task that asked for input is gone there: this is a new question.
                    result, version = await self._send(client, agent, text, context_id, None)
                outcome = _outcome(result)
                task_id = outcome.task_id
                delay = min(0.2, self.poll_interval)
                while not outcome.done:
                    if task_id is None:
                        raise CallFailed("wire", "said it is working but named no task")
                    await asyncio.sleep(delay)
                    delay = self.poll_interval
                    params = {"id": task_id, "historyLength": 0}
                    outcome = _outcome(
                        await self._retrying(client, endpoint, version, "get", params)
                    )
                return outcome
            except asyncio.CancelledError:
                # Stop, or the poll limit: tell the agent too, briefly, then go on stopping.
                if task_id is not None:
                    cancel = asyncio.ensure_future(self._cancel(agent, key, version, task_id))
                    self._background.add(cancel)
                    cancel.add_done_callback(self._background.discard)
                    await asyncio.wait({cancel}, timeout=self.cancel_timeout)
                raise

    async def _send(
        self,
        client: A2AClient,
        agent: OutsideAgent,
        text: str,
        context_id: str | None,
        task_id: str | None,
    ) -> tuple[Any, Version]:
        endpoint, message_id = httpx.URL(agent.endpoint), new_id()  # a retry is the same message

        def params(version: Version) -> dict[str, Any]:
            return send_params(
                text, version=version, context_id=context_id, task_id=task_id, message_id=message_id
            )

        try:
            sent = await self._retrying(
                client, endpoint, agent.version, "send", params(agent.version)
            )
            return sent, agent.version
        except CallFailed as e:
            if agent.version != "1.0" or e.rpc_code not in UNKNOWN_METHOD:
                raise
        sent = await self._retrying(client, endpoint, "0.3", "send", params("0.3"))
        self._list.update(agent.id, version="0.3")  # it answered the 0.3 way: ask it so from now on
        return sent, "0.3"

    async def _retrying(
        self,
        client: A2AClient,
        endpoint: httpx.URL,
        version: Version,
        op: Op,
        params: dict[str, Any],
    ) -> Any:
        try:
            return await client.call(endpoint, version, op, params)
        except CallFailed as e:
            if not e.passing:
                raise
        await asyncio.sleep(self.retry_delay)
        return await client.call(endpoint, version, op, params)

    async def _cancel(
        self, agent: OutsideAgent, key: str | None, version: Version, task: str
    ) -> None:
        try:
            async with self._client(agent.home, key) as client:
                await client.call(httpx.URL(agent.endpoint), version, "cancel", {"id": task})
        except (CallFailed, Refused, asyncio.CancelledError):
            pass  # best effort: the wait is over either way

    async def _card_still_signed(self, agent: OutsideAgent) -> OutsideAgent:
        """Read the card of an agent with a pinned key again before it is asked anything; it
        is not asked (OutsideError) unless its card checks out with that key."""
        try:
            async with self._client(agent.home, self._list.key(agent.id)) as client:
                found = await self._read_card(client, agent)
        except Refused as e:
            raise self._problem(agent, "refused", f"was not called: {e.reason}") from None
        except CallFailed as e:
            words = f"was not called: Conch could not read its card to check it ({e.words})"
            raise self._problem(agent, e.code, words) from None
        pinning = after_read(agent.name, agent.pinning, found.signed)
        self._list.update(agent.id, **pinning_fields(pinning))
        if pinning.problem is not None:
            code = "bad_signature" if pinning.key_change is None else "key_changed"
            raise OutsideError(code, pinning.problem)
        return self.get(agent.id)

    async def _read_card(self, client: A2AClient, agent: OutsideAgent) -> Found:
        pinned = agent.signed.thumbprint if agent.signed else None
        address, card_url = httpx.URL(agent.address), httpx.URL(agent.card_url)
        return await find_agent(client, address, card_url, pinned)

    # -- Repair everything -----------------------------------------------------------------

    async def repair(self) -> builtins.list[OutsideAgent]:
        """Read again the card of each agent with a problem, follow a move on its own host, and
        check that its endpoint answers (GetTask for a made-up task: none of your words)."""
        failing = [a for a in self.list() if a.last_problem or a.signature_problem]
        await asyncio.gather(*(self._repair(a) for a in failing))
        return self.list()

    async def repair_one(
        self, outside_id: str, *, accept_key: bool = False, seen: str | Any | None = ANY_KEY
    ) -> OutsideAgent:
        """Repair one agent; with `accept_key`, first accept the key its card shows now (or its
        being no longer signed) in place of the one pinned — only if it is the key the user was
        shown (`seen`: its thumbprint, None for "not signed"), when that is given. A signature
        that does not check out is never accepted (OutsideError `bad_signature`), nor a key
        other than the one seen (`key_changed`, 409)."""
        agent = self.get(outside_id)
        await self._repair(agent, accept_key=accept_key, seen=seen)
        agent = self.get(outside_id)
        if accept_key and agent.signature_problem is not None:
            if agent.key_change is None:
                raise OutsideError(
                    "bad_signature", f"There is no key to accept: {agent.signature_problem}"
                )
            shown = agent.key_change.thumbprint or None
            raise OutsideError(
                "key_changed",
                f"{agent.name}'s card now shows {_key_words(shown)}, not the "
                f"{_key_words(seen)} you were shown: look at it again before you accept it.",
            )
        return agent

    async def _repair(
        self, agent: OutsideAgent, *, accept_key: bool = False, seen: str | Any | None = ANY_KEY
    ) -> None:
        try:
            async with self._client(agent.home, self._list.key(agent.id)) as client:
                found = await self._read_card(client, agent)
                pinning = after_read(agent.name, agent.pinning, found.signed)
                shown = found.signed.key.thumbprint if found.signed.key else None
                if (
                    accept_key
                    and found.signed.problem is None
                    and (seen is ANY_KEY or seen == shown)
                ):
                    pinning = accepted(found.signed)
                self._list.update(agent.id, **pinning_fields(pinning))
                if pinning.problem is not None:
                    return  # a card Conch does not trust moves nothing: only the words are kept
                version = await client.check(found.endpoint, found.card.version)
        except Refused as e:
            words = f"Conch will not call {agent.name}: {e.reason}."
            self._list.update(agent.id, last_problem=words)
        except CallFailed as e:
            self._list.update(agent.id, last_problem=f"{agent.name} {e.words}.")
        else:
            changes = {
                "endpoint": str(found.endpoint),
                "card_url": str(found.found_at),
                "version": version,
            }
            self._list.update(agent.id, **changes, claim=found.card.claim(), last_problem=None)

    async def aclose(self) -> None:
        for task in list(self._background):
            task.cancel()
        await asyncio.gather(*self._background, return_exceptions=True)

    # -- inside ----------------------------------------------------------------------------

    def _client(self, home: Home, key: str | None) -> A2AClient:
        return A2AClient(self._guard.transport(home, self.policy), key, self._limits)

    def _problem(
        self, agent: OutsideAgent, code: str, words: str, *, answered: bool = False
    ) -> OutsideError:
        error = OutsideError(code, f"{agent.name} {words}.", answered=answered)
        self._list.update(agent.id, last_problem=error.message)
        return error


def _key_words(thumbprint: str | Any | None) -> str:
    if thumbprint is ANY_KEY or thumbprint is None:
        return "no signature" if thumbprint is None else "a key"
    return f"key {str(thumbprint)[:10]}…"


def _outcome(result: Any) -> Outcome:
    try:
        return parse_outcome(result)
    except WireError as e:
        raise CallFailed("wire", f"sent an answer that is not A2A: {e}") from None
