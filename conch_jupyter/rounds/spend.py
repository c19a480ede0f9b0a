"""Metered spend: what a reply cost, and whether the chat's limit or the month's budget refuses
the next one. One place for both the round driver and the door's peer answers.

Only metered agents (with a price) are held back: a turn that costs nothing cannot overspend, so
the offline default and unpriced local models always answer.
"""

from __future__ import annotations

from collections.abc import Generator
from dataclasses import dataclass
from typing import Any

from ..agents.agent_store import Agent
from ..providers.base import Usage
from ..store.chats import Store, month_start
from ..store.writer import Pending
from .engine import Round


@dataclass(frozen=True)
class Budget:
    """The chat's own spending limit and the monthly budget, on top of the round's $1."""

    chat_limit_usd: float | None = 5.0
    monthly_budget_usd: float | None = 50.0


def record_spend(
    store: Store,
    agent: Agent,
    usage: Usage | None,
    *,
    conversation_id: str,
    payer: str | None = None,
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
    )
    return Billed(cost, stored)


class Billed:
    """A reply's cost, known at once, and (awaited) the same once it is in the ledger."""

    def __init__(self, cost: float, stored: Pending[None] | None) -> None:
        self.cost = cost
        self._stored = stored

    def __await__(self) -> Generator[Any, None, float]:
        if self._stored is not None:
            yield from self._stored.__await__()
        return self.cost


def month_spent_over(
    store: Store, budget: Budget, agent: Agent, now: float, pending: float = 0.0
) -> float | None:
    """This month's spend when it has reached the budget and `agent` is metered; else None."""
    limit = budget.monthly_budget_usd
    if agent.price is None or limit is None:
        return None
    spent = store.spent_since(month_start(now)) + pending
    return spent if spent >= limit else None


def turn_refusal(
    store: Store,
    budget: Budget,
    agent: Agent,
    conversation_id: str,
    now: float,
    pending: float = 0.0,
) -> str | None:
    """Words for a turn the chat's limit or the monthly budget refuses; None to go ahead.

    `pending`: what the running turn has spent and not yet recorded (a tool loop's requests)."""
    if agent.price is None:
        return None
    limit = budget.chat_limit_usd
    if limit is not None and (spent := store.spent(conversation_id) + pending) >= limit:
        return (
            f"This chat has spent ${spent:.2f} of its ${limit:.2f} limit, so {agent.name} "
            "did not answer. Raise c.ConchApp.chat_limit_usd to go on."
        )
    month = month_spent_over(store, budget, agent, now, pending)
    if month is not None:
        return (
            f"This month's spending has reached ${month:.2f} of the "
            f"${budget.monthly_budget_usd:.2f} budget, so {agent.name} did not answer. "
            "Raise c.ConchApp.monthly_budget_usd to go on."
        )
    return None


def loop_refusal(
    store: Store,
    budget: Budget,
    agent: Agent,
    conversation_id: str,
    now: float,
    rnd: Round | None,
    cost: float,
) -> str | None:
    """Whether a tool loop that has cost `cost` so far may ask its model again: the round's $1,
    the chat's limit and the monthly budget hold for every request of a turn, not only its first.
    """
    if rnd is not None and rnd.spent_usd + cost >= rnd.limits.spend_usd:
        return "The round reached its spending limit."
    return turn_refusal(store, budget, agent, conversation_id, now, pending=cost)
