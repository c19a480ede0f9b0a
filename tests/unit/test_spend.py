"""rounds/spend.py: what a reply costs in the ledger, and when the chat's limit or month refuses."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path

import pytest

from conch_jupyter.agents.agent_store import Agent
from conch_jupyter.core.policy import Policy, PolicyRefused
from conch_jupyter.providers.base import Price, ProviderConfig, Usage
from conch_jupyter.rounds.engine import Roster, Round, SpendRecorded
from conch_jupyter.rounds.spend import (
    Budget,
    LimitRefused,
    budget_json,
    chat_limit,
    chat_limit_to_set,
    month_limit,
    month_spent_over,
    monthly_budget_to_set,
    record_spend,
    running_refusal,
    turn_refusal,
)
from conch_jupyter.rounds.spend import metered as metered_agent
from conch_jupyter.store.chats import Store

from ..support.api import Clock

NOW = datetime(2024, 3, 15, 12, tzinfo=timezone.utc).timestamp()
PRICE = Price(input_per_mtok=1_000_000, output_per_mtok=2_000_000)  # $1 and $2 a token


def metered(price: Price | None = PRICE) -> Agent:
    return Agent(
        id="writer",
        name="Writer",
        persona="",
        instructions="",
        provider=ProviderConfig("openai", model="m"),
        price=price,
        has_key=False,
        created=0.0,
    )


def coding_agent() -> Agent:
    return Agent(
        id="coder",
        name="Coder",
        persona="",
        instructions="",
        provider=ProviderConfig("acp", command="claude-agent-acp"),
        price=None,
        has_key=False,
        created=0.0,
    )


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    with Store(tmp_path / "conch.sqlite3", Clock(now=NOW)) as opened:
        yield opened


async def test_a_metered_reply_is_billed_from_its_usage(store: Store) -> None:
    chat = (await store.create_conversation()).id
    cost = await record_spend(store, metered(), Usage(3, 2), conversation_id=chat, payer="p_1")
    assert cost == 7
    (entry,) = store.spend_entries(chat)
    assert (entry.usd, entry.input_tokens, entry.output_tokens) == (7, 3, 2)
    assert (entry.agent, entry.payer, entry.estimated) == ("writer", "p_1", False)


async def test_an_estimate_is_marked_in_the_ledger(store: Store) -> None:
    chat = (await store.create_conversation()).id
    await record_spend(store, metered(), Usage(4, 1, estimated=True), conversation_id=chat)
    (entry,) = store.spend_entries(chat)
    assert (entry.usd, entry.estimated) == (6, True)


@pytest.mark.parametrize(("agent", "usage"), [(metered(None), Usage(3, 2)), (metered(), None)])
async def test_nothing_is_billed_without_a_price_or_usage(
    store: Store, agent: Agent, usage: Usage | None
) -> None:
    chat = (await store.create_conversation()).id
    assert await record_spend(store, agent, usage, conversation_id=chat) == 0.0
    assert store.spend_entries(chat) == []


async def test_the_chats_limit_refuses_a_metered_turn_only(store: Store) -> None:
    chat = (await store.create_conversation()).id
    budget = Budget(chat_limit_usd=5.0, monthly_budget_usd=None)
    assert turn_refusal(store, budget, metered(), chat, NOW) is None
    await store.add_spend(5.0, conversation_id=chat)
    refused = turn_refusal(store, budget, metered(), chat, NOW)
    assert refused is not None
    assert "spent $5.00 of its $5.00 limit, so Writer did not answer" in refused.words
    assert refused.limit == "chat"
    assert turn_refusal(store, budget, metered(None), chat, NOW) is None  # unpriced: free
    assert turn_refusal(store, Budget(None, None), metered(), chat, NOW) is None


async def test_the_months_budget_counts_every_chat_and_restarts_each_month(store: Store) -> None:
    budget = Budget(chat_limit_usd=None, monthly_budget_usd=10.0)
    first, second = (await store.create_conversation()).id, (await store.create_conversation()).id
    await store.add_spend(6.0, conversation_id=first)
    assert month_spent_over(store, budget, metered(), NOW) is None
    await store.add_spend(4.0, conversation_id=first)
    assert month_spent_over(store, budget, metered(), NOW) == 10.0
    refused = turn_refusal(store, budget, metered(), second, NOW)
    assert refused is not None
    assert "This month's spending has reached $10.00 of the $10.00 budget" in refused.words
    assert refused.limit == "month"
    assert month_spent_over(store, budget, metered(None), NOW) is None
    april = datetime(2024, 4, 1, tzinfo=timezone.utc).timestamp()
    assert month_spent_over(store, budget, metered(), april) is None


async def test_a_running_turn_ends_once_the_round_the_chat_or_the_month_is_spent(
    store: Store,
) -> None:
    """`running_refusal`: a turn's cost so far (`cost`, not yet in the ledger: a tool loop's
    requests, a coding agent's reports) counts against the round's $1, the chat's limit and the
    month, so a running turn cannot walk around them; the refusal says which, in words."""
    chat = (await store.create_conversation()).id
    roomy = Budget(chat_limit_usd=None, monthly_budget_usd=None)
    rnd = Round(named=["Writer"], roster=Roster(ours=("Writer",)))
    rnd.start()
    rnd.handle(SpendRecorded(0.6))  # the round's earlier replies
    assert running_refusal(store, roomy, metered(), chat, NOW, rnd, 0.39) is None
    refused = running_refusal(store, roomy, metered(), chat, NOW, rnd, 0.4)
    assert refused is not None
    assert refused.limit == "round"
    assert refused.words == (
        "The round reached its $1.00 spending limit ($1.00, Writer's turn $0.40 of it),"
        " so Conch stopped Writer there."
    )
    assert running_refusal(store, roomy, metered(), chat, NOW, None, 0.4) is None  # no round
    # The chat's limit and the month count the turn's cost as pending.
    await store.add_spend(4.0, conversation_id=chat)
    limited = Budget(chat_limit_usd=5.0, monthly_budget_usd=None)
    assert running_refusal(store, limited, metered(), chat, NOW, None, 0.99) is None
    refused = running_refusal(store, limited, metered(), chat, NOW, None, 1.0)
    assert refused is not None
    assert refused.limit == "chat"
    assert refused.words.startswith(
        "This chat reached its $5.00 limit ($5.00, Writer's turn $1.00 of it), so Conch"
        " stopped Writer there. Raise the chat's limit"
    )
    monthly = Budget(chat_limit_usd=None, monthly_budget_usd=4.5)
    refused = running_refusal(store, monthly, metered(), chat, NOW, None, 0.5)
    assert refused is not None
    assert refused.limit == "month"
    assert refused.words.startswith("This month's spending reached its $4.50 budget ($4.50,")
    # A coding agent without a price is held by what it reports, even before the ledger has it.
    coder = coding_agent()
    refused = running_refusal(store, limited, coder, chat, NOW, None, 1.0)
    assert refused is not None
    assert refused.limit == "chat"


async def test_a_coding_agent_that_reports_its_cost_is_refused_like_a_priced_one(
    store: Store,
) -> None:
    """DESIGN.md, "Every dollar of a coding agent counted and bounded": no price, but once the
    ledger holds what it reported, the chat's limit and the month's budget refuse its turn."""
    chat = (await store.create_conversation()).id
    budget = Budget(chat_limit_usd=1.0, monthly_budget_usd=None)
    coder = coding_agent()
    await store.add_spend(1.5, conversation_id=chat, agent="someone-else")
    assert not metered_agent(store, coder)
    assert turn_refusal(store, budget, coder, chat, NOW) is None  # it never reported a cost
    await record_spend(store, coder, None, conversation_id=chat, reported_usd=0.25)
    assert metered_agent(store, coder)
    refused = turn_refusal(store, budget, coder, chat, NOW)
    assert refused is not None
    assert refused.limit == "chat"
    assert "so Coder did not answer" in refused.words
    month = Budget(chat_limit_usd=None, monthly_budget_usd=1.0)
    refused = turn_refusal(store, month, coder, chat, NOW)
    assert refused is not None
    assert refused.limit == "month"
    assert month_spent_over(store, month, coder, NOW) == pytest.approx(1.75)
    # An unpriced model agent with ledger rows of its own is still free.
    assert not metered_agent(store, metered(None))


@pytest.mark.parametrize("check", [chat_limit_to_set, monthly_budget_to_set])
def test_a_limit_to_set_is_dollars_within_bounds(check: object) -> None:
    assert callable(check)
    budget = Budget()
    assert check(budget, None) is None  # back to the server's default
    assert check(budget, 0) == 0.0
    assert check(budget, 2.499) == 2.5  # kept to the cent
    assert check(budget, 10_000) == 10_000.0
    for bad in (-0.01, 10_000.01):
        with pytest.raises(LimitRefused, match=r"must be between \$0 and \$10,000\."):
            check(budget, bad)


async def test_the_administrators_caps_hold_over_what_the_user_sets(store: Store) -> None:
    capped = Budget(5.0, 50.0, policy=Policy(max_chat_usd=2.0, max_monthly_usd=20.0))
    with pytest.raises(PolicyRefused, match=r"at most \$2\.00 .*set by your administrator"):
        chat_limit_to_set(capped, 3.0)
    with pytest.raises(PolicyRefused, match=r"at most \$20\.00 .*set by your administrator"):
        monthly_budget_to_set(capped, 25.0)
    assert chat_limit_to_set(capped, None) is None  # back to the default, which is capped
    assert chat_limit_to_set(capped, 1.5) == 1.5
    chat = (await store.create_conversation()).id
    assert chat_limit(store, capped, chat) == 2.0  # the server's $5 default, capped
    await store.set_chat_limit(chat, 9.0)  # set before the policy came
    assert chat_limit(store, capped, chat) == 2.0
    assert month_limit(store, capped) == 20.0
    await store.add_spend(2.0, conversation_id=chat)
    refused = turn_refusal(store, capped, metered(), chat, NOW)
    assert refused is not None
    assert "set by your administrator" in refused.words


async def test_the_limits_set_by_the_user_win_over_the_servers(store: Store) -> None:
    chat = (await store.create_conversation()).id
    budget = Budget(chat_limit_usd=5.0, monthly_budget_usd=50.0)
    await store.add_spend(1.0, conversation_id=chat)
    assert turn_refusal(store, budget, metered(), chat, NOW) is None
    await store.set_chat_limit(chat, 1.0)
    refused = turn_refusal(store, budget, metered(), chat, NOW)
    assert refused is not None
    assert "spent $1.00 of its $1.00 limit" in refused.words
    shown = budget_json(store, budget, chat, NOW, None)
    assert shown["chat"] == {"spent": 1.0, "limit": 1.0}
    await store.set_chat_limit(chat, None)
    await store.set_monthly_budget(0.5)
    refused = turn_refusal(store, budget, metered(), chat, NOW)
    assert refused is not None
    assert "reached $1.00 of the $0.50 budget" in refused.words
    assert budget_json(store, budget, chat, NOW, None)["month"] == {"spent": 1.0, "limit": 0.5}
    await store.set_monthly_budget(None)
    assert turn_refusal(store, budget, metered(), chat, NOW) is None
