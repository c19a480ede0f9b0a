"""a2a/outside/signatures.py's pinning, pure: what one read of an outside agent's card does to
the key kept for it, as a table (state before, what the read found → state after)."""

from __future__ import annotations

import pytest

from conch_jupyter.a2a.outside.signatures import (
    NOT_SIGNED,
    CardCheck,
    Key,
    Pinning,
    accepted,
    after_read,
)

OLD, NEW = Key("k1", "old-thumbprint"), Key("k2", "new-thumbprint")
UNSIGNED = CardCheck()
BY_OLD, BY_NEW = CardCheck(OLD, {}), CardCheck(NEW, {})
BAD = CardCheck(problem="does not match the card")


@pytest.mark.parametrize(
    ("kept", "check", "signed", "key_change", "called"),
    [
        (Pinning(), UNSIGNED, None, None, True),  # never signed: nothing to keep
        (Pinning(), BY_NEW, NEW, None, True),  # signed from now on: its key is kept
        (Pinning(), BAD, None, None, False),  # a bad signature is never called
        (Pinning(OLD), BY_OLD, OLD, None, True),
        (Pinning(OLD), BY_NEW, OLD, NEW, False),  # another key: wait for the user
        (Pinning(OLD), UNSIGNED, OLD, NOT_SIGNED, False),  # no longer signed: the same
        (Pinning(OLD), BAD, OLD, None, False),
        (Pinning(OLD, NEW, "waiting"), BY_NEW, OLD, NEW, False),  # still waiting for the user
        (Pinning(OLD, NEW, "waiting"), BY_OLD, OLD, None, True),  # the owner went back
        (Pinning(OLD, None, "bad"), BY_OLD, OLD, None, True),  # fixed: called again
    ],
)
def test_what_a_read_does_to_the_key_kept(
    kept: Pinning, check: CardCheck, signed: Key | None, key_change: Key | None, called: bool
) -> None:
    after = after_read("Helper", kept, check)
    assert (after.signed, after.key_change, after.problem is None) == (signed, key_change, called)
    if not called:
        assert after.problem is not None
        assert after.problem.startswith("Helper is not called: ")


def test_the_words_say_which_keys() -> None:
    changed = after_read("Helper", Pinning(OLD), BY_NEW).problem
    assert changed is not None
    assert f"another key ({NEW.short}) than when you added it ({OLD.short})" in changed
    bad = after_read("Helper", Pinning(OLD), BAD).problem
    assert bad == (
        "Helper is not called: its card is signed, but its signature does not match the card. "
        "Repair it once its owner fixes the card, or remove it."
    )


def test_accepting_keeps_the_key_the_card_shows_now() -> None:
    assert accepted(BY_NEW) == Pinning(NEW)
    assert accepted(UNSIGNED) == Pinning()
