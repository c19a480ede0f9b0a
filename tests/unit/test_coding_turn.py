"""coding/turn.py and watch.py: a coding agent's running turn ends on the event that ends it."""

from __future__ import annotations

import asyncio
import time

import acp
from acp import schema

from conch_jupyter.coding.turn import ASKED_LIMIT, KEPT_CALLS, CodingTurn, TurnEnd
from conch_jupyter.coding.watch import until_ended, watch_call
from conch_jupyter.notebook.service import Caller


def turn_of(bound: float | None = None, reply_chars: int = 100) -> tuple[CodingTurn, list[str]]:
    said: list[str] = []
    ending: asyncio.Future[TurnEnd] = asyncio.get_running_loop().create_future()
    turn = CodingTurn(
        "c_1",
        Caller("coder", "Coder"),
        said.append,
        lambda usd: bound is not None and usd >= bound,
        0.0,
        ending,
        reply_chars=reply_chars,
    )
    return turn, said


async def test_its_words_stream_until_they_flood_the_reply() -> None:
    turn, said = turn_of(reply_chars=10)
    turn.hear_words("hello")
    turn.hear_words("")
    assert said == ["hello"]
    assert not turn.ending.done()
    turn.hear_words("and more")
    assert said == ["hello"]  # past the bound: not streamed
    assert turn.ending.result() == "flooded"


async def test_the_cost_it_reports_ends_it_at_the_bound_and_the_first_reason_stays() -> None:
    turn, _ = turn_of(bound=1.0)
    for usd in (0.3, 0.3, 0.3):
        turn.add_cost(usd)
    assert not turn.ending.done()
    assert turn.cost_usd is not None
    turn.add_cost(0.3)
    assert turn.ending.result() == "bound"
    assert round(turn.cost_usd, 6) == 1.2
    turn.hear_words("x" * 1000)  # a flood after the bound: the turn ended for the bound
    assert turn.ending.result() == "bound"


async def test_the_watch_ends_it_for_a_change_made_unasked_where_a_question_was_wanted() -> None:
    turn, _ = turn_of()
    report = acp.start_tool_call(
        "t1", "rm -rf build", kind="execute", status="completed", raw_input={"command": "rm -rf b"}
    )
    call = turn.call_of(report, tainted=False)
    watch_call(turn, call, mode="auto", tainted=False)  # an untainted Auto chat: its right
    assert not turn.ending.done()
    watch_call(turn, call, mode="ask", tainted=False)
    assert turn.ending.result() == "unasked"
    assert turn.unasked is call
    assert call.command == "rm -rf b"


async def test_a_read_call_and_a_plan_end_nothing() -> None:
    turn, _ = turn_of()
    call = turn.call_of(acp.start_read_tool_call("r1", "Read data.csv", "data.csv"), tainted=True)
    done = acp.update_tool_call("r1", status="completed", raw_output="3 rows")
    call = turn.call_of(done, tainted=True)
    watch_call(turn, call, mode="read", tainted=True)
    turn.hear_plan(
        [
            acp.plan_entry("read"),
            schema.PlanEntry(content="write", priority="low", status="completed"),
        ]
    )
    assert not turn.ending.done()
    assert (call.kind, call.status, call.output) == ("read", "completed", "3 rows")
    assert turn.plan == ["[ ] read", "[x] write"]


async def test_the_quiet_clock_stops_while_the_user_is_asked_and_then_runs_again() -> None:
    """Quiet periods pass while a question waits, and one whole period more after it is
    answered; then the silent turn ends `quiet` (counted in looks at the question, not time)."""
    turn, _ = turn_of()
    looks: list[bool] = []

    def user_asked() -> bool:
        looks.append(len(looks) < 3)  # asked at the first three looks, then answered
        return looks[-1]

    prompt: asyncio.Future[object] = asyncio.get_running_loop().create_future()
    turn.last_sent = time.monotonic()
    why = await until_ended(
        turn, prompt, quiet_seconds=0.02, clock=time.monotonic, user_asked=user_asked
    )
    assert why == "quiet"
    assert looks == [True, True, True, False, False]


async def test_the_prompts_answer_or_the_turns_event_ends_the_wait_at_once() -> None:
    turn, _ = turn_of(bound=0.5)
    prompt: asyncio.Future[object] = asyncio.get_running_loop().create_future()
    waiting = asyncio.ensure_future(
        until_ended(turn, prompt, quiet_seconds=60.0, clock=lambda: 0.0, user_asked=lambda: False)
    )
    turn.add_cost(0.6)
    assert await waiting == "bound"
    turn, _ = turn_of()
    prompt = asyncio.get_running_loop().create_future()
    waiting = asyncio.ensure_future(
        until_ended(turn, prompt, quiet_seconds=60.0, clock=lambda: 0.0, user_asked=lambda: False)
    )
    prompt.set_result(None)
    assert await waiting is None


async def test_past_what_the_turn_keeps_a_call_never_forgets_it_was_asked() -> None:
    """A flood of calls is counted, not kept; but one asked about past that bound is still
    known as asked when it is reported done: no change made unasked, the turn goes on."""
    turn, _ = turn_of()
    for i in range(KEPT_CALLS):
        turn.call_of(acp.start_tool_call(f"f{i}", "ls", kind="read"), tainted=False)
    raw = {"command": "rm -rf build"}
    asked = turn.call_of(
        acp.start_tool_call("late", "rm", kind="execute", raw_input=raw), tainted=False
    )
    assert "late" not in turn.calls  # past the bound: not kept
    assert turn.ask(asked)
    done = turn.call_of(acp.update_tool_call("late", status="completed"), tainted=False)
    assert done is not asked
    assert done.asked
    watch_call(turn, done, mode="ask", tainted=False)
    assert not turn.ending.done()
    # One never asked about is still a change made unasked.
    other = acp.start_tool_call("later", "rm", kind="execute", status="completed", raw_input=raw)
    watch_call(turn, turn.call_of(other, tainted=False), mode="ask", tainted=False)
    assert turn.ending.result() == "unasked"


async def test_the_questions_a_turn_may_ask_are_bounded_and_each_asked_is_kept() -> None:
    turn, _ = turn_of()
    for i in range(ASKED_LIMIT):
        call = turn.call_of(acp.start_tool_call(f"q{i}", "x", kind="edit"), tainted=False)
        assert turn.ask(call)
    late = turn.call_of(acp.start_tool_call("one-more", "x", kind="edit"), tainted=False)
    assert not turn.ask(late)  # refused (sessions.py answers no), never forgotten as asked
    assert not late.asked
    again = turn.call_of(acp.start_tool_call("q0", "x", kind="edit"), tainted=False)
    assert turn.ask(again)
    assert again.asked


async def test_a_fetch_is_judged_by_the_taint_from_before_it() -> None:
    """A fetch taints the chat as it is announced: it is judged by the taint it found, so the
    first fetch of an untainted chat passes and the next one asks."""
    turn, _ = turn_of()
    first = turn.call_of(acp.start_tool_call("f1", "Fetch", kind="fetch"), tainted=False)
    turn.tainted = True  # its taint, as sessions.py stores it
    assert first.tainted(True) is False
    again = turn.call_of(acp.update_tool_call("f1", status="completed"), tainted=True)
    assert again is first
    assert again.tainted(True) is False
    watch_call(turn, again, mode="ask", tainted=True)
    assert not turn.ending.done()  # done unasked, untainted before it: its right
    second = turn.call_of(acp.start_tool_call("f2", "Fetch", kind="fetch"), tainted=False)
    assert second.tainted(False) is True  # the turn's own fetch came before it
    done = turn.call_of(acp.update_tool_call("f2", status="completed"), tainted=True)
    watch_call(turn, done, mode="auto", tainted=True)
    assert turn.ending.result() == "unasked"
    # Another kind is judged by the taint now.
    edit = turn.call_of(acp.start_tool_call("e1", "Edit", kind="edit"), tainted=False)
    assert edit.tainted(False) is False
    assert edit.tainted(True) is True
