"""Metered spend: what a reply cost, and whether the chat's limit or the month's budget refuses
the next one. One place for both the round driver and the door's peer answers.

The limits in force: a chat's own limit when the user set one in its header, else the server's
c.ConchApp.chat_limit_usd; the month's budget set in Settings, else c.ConchApp.monthly_budget_usd.
What the user asks to set passes one check each (`chat_limit_to_set`, `monthly_budget_to_set`):
the one place a cap on them goes. `budget_json` is what a view shows of them (DESIGN.md, "Cost in
sight").

Only metered agents are held back: an agent with a price, and a coding agent that reports what
its turns cost (ACP's usage update; DESIGN.md, "Every dollar of a coding agent counted and
bounded"), priced or not. A turn that costs nothing cannot overspend, so the offline default and
unpriced local models always answer. A running turn is checked too (`running_refusal`): a tool
loop before each request, a coding agent at each cost it reports.
"""

from __future__ import annotations

from collections.abc import Generator
from dataclasses import dataclass, field
from typing import Any

from ..agents.agent_store import Agent
from ..core.errors import ConchError
from ..core.policy import (
    BY_ADMIN,
    Policy,
    cap_chat_limit,
    cap_monthly_budget,
    check_chat_limit,
    check_monthly_budget,
)
from ..providers.base import Usage
from ..store.chats import Store, month_start
from ..store.writer import Pending
from .engine import Round, SpendLimit

# The most a chat's limit or the month's budget may be set to from the page: a typo's guard
# (an extra zero or two), not a policy; an administrator's caps come on top (c.ConchApp.policy).
MOST_USD = 10_000.0


@dataclass(frozen=True)
class Budget:
    """The chat's own spending limit and the monthly budget, on top of the round's $1."""

    chat_limit_usd: float | None = 5.0
    monthly_budget_usd: float | None = 50.0
    # The administrator's caps (max_chat_usd, max_monthly_usd) on the defaults and on what the
    # user sets; at a cap the words say who set the limit, not which setting to raise.
    policy: Policy = field(default_factory=Policy)


class LimitRefused(ConchError):
    """A limit the user asked for that cannot be set: 400 `invalid`, in words."""

    status = 400

    def __init__(self, message: str) -> None:
        super().__init__("invalid", message)


def _dollars_to_set(usd: float | None, what: str) -> float | None:
    if usd is None:
        return None
    if usd < 0 or usd > MOST_USD:
        raise LimitRefused(f"{what} must be between $0 and ${MOST_USD:,.0f}.")
    return round(float(usd), 2)


def chat_limit_to_set(budget: Budget, usd: float | None) -> float | None:
    """A chat's own limit as the user asked for it, checked (None: back to the server's default)
    and under the administrator's max_chat_usd. The one check of `PATCH /conversations/{id}
    {"limit_usd"}`."""
    if usd is not None:
        check_chat_limit(budget.policy, usd)
    return _dollars_to_set(usd, "A chat's limit")


def monthly_budget_to_set(budget: Budget, usd: float | None) -> float | None:
    """The month's budget as the user asked for it, checked (None: back to the server's
    default) and under the administrator's max_monthly_usd. The one check of `PATCH /budget
    {"monthly_usd"}`."""
    if usd is not None:
        check_monthly_budget(budget.policy, usd)
    return _dollars_to_set(usd, "The month's budget")


def chat_limit(store: Store, budget: Budget, conversation_id: str) -> float | None:
    """The chat's limit in force: its own when set, else the server's default."""
    chat = store.get_conversation(conversation_id)
    own = chat.limit_usd if chat is not None else None
    return cap_chat_limit(budget.policy, own if own is not None else budget.chat_limit_usd)


def month_limit(store: Store, budget: Budget) -> float | None:
    """The month's budget in force: the one set in Settings, else the server's default."""
    own = store.monthly_budget()
    return cap_monthly_budget(budget.policy, own if own is not None else budget.monthly_budget_usd)


def _spent_and_limit(spent: float, limit: float | None) -> dict[str, float | None]:
    return {"spent": round(spent, 6), "limit": limit}


def budget_json(
    store: Store, budget: Budget, conversation_id: str, now: float, rnd: Round | None
) -> dict[str, Any]:
    """What a view shows of the spend: the running round's against its $1 (None when none
    runs), the chat's against its limit, the month's against its budget (USD; a limit of None:
    none)."""
    return {
        "round": None if rnd is None else _spent_and_limit(rnd.spent_usd, rnd.limits.spend_usd),
        "chat": _spent_and_limit(
            store.spent(conversation_id), chat_limit(store, budget, conversation_id)
        ),
        "month": _spent_and_limit(store.spent_since(month_start(now)), month_limit(store, budget)),
    }


def month_json(store: Store, budget: Budget, now: float, names: dict[str, str]) -> dict[str, Any]:
    """`GET /budget`: the month against its budget, and by agent (named where known)."""
    since = month_start(now)
    return {
        "month": _spent_and_limit(store.spent_since(since), month_limit(store, budget)),
        "by_agent": [
            {"agent": agent, "name": names.get(agent or "", agent), "spent": round(usd, 6)}
            for agent, usd in store.spent_by_agent_since(since)
        ],
    }


def record_spend(
    store: Store,
    agent: Agent,
    usage: Usage | None,
    *,
    conversation_id: str,
    payer: str | None = None,
    message_id: str | None = None,
    reported_usd: float | None = None,
) -> Billed:
    """Put a reply's cost in the ledger (nothing for an unpriced agent): the cost is known at
    once (`.cost`); awaited, it is given once stored. Queued at the call, like every change of
    the store, so it can share a commit with what was queued just before it. Usage that Conch
    estimated (a cut-off reply) is marked as an estimate in the ledger. `reported_usd`: what a
    coding agent said the reply cost (ACP's usage update), billed as it is."""
    if reported_usd is not None:
        # A coding agent that reported its own cost in dollars: that counts, priced or not.
        cost = reported_usd
    elif usage is None or agent.price is None:
        return Billed(0.0, None)
    else:
        cost = agent.price.cost(usage)
    usage = usage or Usage(0, 0)
    stored = store.add_spend(
        cost,
        conversation_id=conversation_id,
        agent=agent.id,
        payer=payer,
        input_tokens=usage.input_tokens,
        output_tokens=usage.output_tokens,
        estimated=usage.estimated,
        message_id=message_id,
    )
    return Billed(cost, stored)


def cost_json(
    agent: Agent, usage: Usage | None, reported_usd: float | None = None
) -> dict[str, Any] | None:
    """A metered reply's tokens and cost, as its quiet line shows them; None when unmetered.
    `reported_usd`: what a coding agent said the reply cost (metered then, priced or not)."""
    if reported_usd is not None:
        return {
            "usd": round(reported_usd, 6),
            "input_tokens": usage.input_tokens if usage is not None else 0,
            "output_tokens": usage.output_tokens if usage is not None else 0,
            "estimated": False,
        }
    if usage is None or agent.price is None:
        return None
    return {
        "usd": round(agent.price.cost(usage), 6),
        "input_tokens": usage.input_tokens,
        "output_tokens": usage.output_tokens,
        "estimated": usage.estimated,
    }


class Billed:
    """A reply's cost, known at once, and (awaited) the same once it is in the ledger."""

    def __init__(self, cost: float, stored: Pending[None] | None) -> None:
        self.cost = cost
        self._stored = stored

    def __await__(self) -> Generator[Any, None, float]:
        if self._stored is not None:
            yield from self._stored.__await__()
        return self.cost


def metered(store: Store, agent: Agent) -> bool:
    """Whether the spend limits hold `agent` back: it has a price, or it is a coding agent that
    has reported what a reply cost (a row of its in the ledger)."""
    if agent.price is not None:
        return True
    return agent.provider.kind == "acp" and store.billed_before(agent.id)


def month_spent_over(
    store: Store,
    budget: Budget,
    agent: Agent,
    now: float,
    pending: float = 0.0,
    *,
    reporting: bool = False,
) -> float | None:
    """This month's spend when it has reached the budget and `agent` is metered (or `reporting`
    a cost now); else None."""
    limit = month_limit(store, budget)
    if limit is None or not (reporting or metered(store, agent)):
        return None
    spent = store.spent_since(month_start(now)) + pending
    return spent if spent >= limit else None


@dataclass(frozen=True)
class Refusal:
    """A turn the chat's own limit or the month's budget refuses: which of them, and the words
    the chat is told."""

    limit: SpendLimit
    words: str


def turn_refusal(
    store: Store,
    budget: Budget,
    agent: Agent,
    conversation_id: str,
    now: float,
    pending: float = 0.0,
    *,
    reporting: bool = False,
) -> Refusal | None:
    """The refusal of a turn the chat's limit or the monthly budget refuses; None to go ahead.

    `pending`: what the running turn has spent and not yet recorded (a tool loop's requests, a
    coding agent's reports); `reporting`: the running turn reported a cost, so it is metered."""
    if not (reporting or metered(store, agent)):
        return None
    limit = chat_limit(store, budget, conversation_id)
    if limit is not None and (spent := store.spent(conversation_id) + pending) >= limit:
        return Refusal(
            "chat",
            f"This chat has spent ${spent:.2f} of its ${limit:.2f} limit, so {agent.name} "
            f"did not answer. {_raise_chat(budget, limit)}",
        )
    month = month_spent_over(store, budget, agent, now, pending, reporting=reporting)
    if month is not None:
        top = month_limit(store, budget) or 0.0
        return Refusal(
            "month",
            f"This month's spending has reached ${month:.2f} of the ${top:.2f} budget, so "
            f"{agent.name} did not answer. {_raise_month(budget, top)}",
        )
    return None


def _raise_chat(budget: Budget, limit: float) -> str:
    if limit == budget.policy.max_chat_usd:
        return f"A chat's limit can be at most ${limit:.2f} on this server: {BY_ADMIN}"
    return "Raise the chat's limit in its header to go on."


def _raise_month(budget: Budget, top: float) -> str:
    if top == budget.policy.max_monthly_usd:
        return f"The monthly budget can be at most ${top:.2f} on this server: {BY_ADMIN}"
    return "Raise the month's budget in Settings (%conch agents) to go on."


def running_refusal(
    store: Store,
    budget: Budget,
    agent: Agent,
    conversation_id: str,
    now: float,
    rnd: Round | None,
    cost: float,
) -> Refusal | None:
    """Whether a running turn that has cost `cost` so far must end: the round's $1, the chat's
    limit and the monthly budget hold for every request of a tool loop and every cost a coding
    agent reports, not only at a turn's start. The words say which bound it reached, and that
    Conch stopped the turn there."""
    if rnd is not None and rnd.spent_usd + cost >= rnd.limits.spend_usd:
        spent = rnd.spent_usd + cost
        top = rnd.limits.spend_usd
        return Refusal(
            "round",
            f"The round reached its ${top:.2f} spending limit (${spent:.2f}, {agent.name}'s "
            f"turn ${cost:.2f} of it), so Conch stopped {agent.name} there.",
        )
    refused = turn_refusal(store, budget, agent, conversation_id, now, pending=cost, reporting=True)
    if refused is None:
        return None
    if refused.limit == "chat":
        top = chat_limit(store, budget, conversation_id) or 0.0
        spent = store.spent(conversation_id) + cost
        what, then = f"This chat reached its ${top:.2f} limit", _raise_chat(budget, top)
    else:
        top = month_limit(store, budget) or 0.0
        spent = store.spent_since(month_start(now)) + cost
        what = f"This month's spending reached its ${top:.2f} budget"
        then = _raise_month(budget, top)
    return Refusal(
        refused.limit,
        f"{what} (${spent:.2f}, {agent.name}'s turn ${cost:.2f} of it), so Conch stopped "
        f"{agent.name} there. {then}",
    )
