"""coding/meter.py: a coding agent's turn is billed what its own reports show, per opening."""

from __future__ import annotations

import math

import pytest
from acp import schema

from conch_jupyter.coding.meter import Meter, reported_usd


def usd(amount: float, currency: str = "USD") -> schema.Cost:
    return schema.Cost(amount=amount, currency=currency)


def test_a_turn_is_billed_what_the_cumulative_figure_grew_by() -> None:
    meter = Meter()
    assert [meter.grew(f) for f in (0.30, 0.60, 0.90)] == pytest.approx([0.30, 0.30, 0.30])
    assert meter.grew(0.90) == 0.0  # the same figure again adds nothing


def test_each_opening_starts_its_base_at_zero() -> None:
    """claude-agent-acp's counter starts again for a resumed, loaded or new session: the old
    total is no base for the new opening's reports (a resumed session's turn was billed $0)."""
    meter = Meter()
    assert meter.grew(2.50) == pytest.approx(2.50)
    meter.open()
    assert meter.grew(0.40) == pytest.approx(0.40)
    assert meter.grew(0.70) == pytest.approx(0.30)


def test_a_counter_that_starts_again_unseen_counts_whole() -> None:
    meter = Meter()
    meter.grew(1.00)
    assert meter.grew(0.20) == pytest.approx(0.20)  # never less than its own report shows
    assert meter.grew(0.50) == pytest.approx(0.30)


@pytest.mark.parametrize(
    ("cost", "expected"),
    [
        (None, None),
        (usd(0.25), 0.25),
        (usd(0.25, "usd"), 0.25),
        (usd(0.0), 0.0),
        (usd(1.0, "EUR"), None),
        (usd(-1.0), None),
        (usd(math.inf), None),
        (usd(math.nan), None),
    ],
)
def test_only_a_finite_usd_amount_is_a_cost(
    cost: schema.Cost | None, expected: float | None
) -> None:
    assert reported_usd(cost) == expected
