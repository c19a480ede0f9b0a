"""What a resumed stream leaves out: the queued items its opening already read from the store
(rounds/resume.py), by their places; live items that are never stored always go."""

from __future__ import annotations

import pytest

from conch_jupyter.rounds.resume import message_item, read_already
from conch_jupyter.store.pages import StreamCursor

SEEN = StreamCursor(messages=10, events=4)


@pytest.mark.parametrize(
    ("item", "read"),
    [
        (message_item({"id": "m"}, 10), True),  # the last message the opening held
        (message_item({"id": "m"}, 11), False),  # stored after it
        ({"type": "message", "message": {"id": "m"}}, False),  # no place: a live one, sent
        ({"type": "event", "event": {"seq": 4}}, True),
        ({"type": "event", "event": {"seq": 5}}, False),
        ({"type": "delta", "reply": "r", "text": "x"}, False),  # never stored: always sent
        ({"type": "round", "round": None}, False),
    ],
)
def test_a_queued_item_the_opening_read_is_not_sent_again(item: dict, read: bool) -> None:
    assert read_already(item, SEEN) is read
