"""The tool loop inside the one turn routine (rounds/turn.py): billed over all its requests,
bounded by the driver's spend check, and never run for a turn that was offered no tools."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from conch_jupyter.notebook.rules import NOTEBOOK_TOOLS
from conch_jupyter.notebook.service import NotebookTools
from conch_jupyter.rounds.turn import Reply

from ..support.scripted_models import Reply as Scripted
from ..support.scripted_models import ScriptedModels
from . import test_turn
from .test_turn import Room, cancelled_mid_reply, on, turn

pytestmark = pytest.mark.timeout(60)
store, room = test_turn.store, test_turn.room  # the fixtures: a real store, Turns, a chat


def with_tools(room: Room) -> Room:
    tools = NotebookTools(store=room.store, hub=room.turns.hub, kernels=None)
    return replace(room, turns=replace(room.turns, notebook=tools))


def tool_states(room: Room) -> list[Any]:
    return [m.tool for m in room.store.messages(room.chat) if m.role == "tool"]


async def test_the_loop_is_one_reply_billed_over_all_its_requests(
    room: Room, models: ScriptedModels
) -> None:
    room = with_tools(room)
    models.script(
        Scripted(text="Reading. ", tool_calls=(("read_notebook", {}),), usage=(3, 2)),
        Scripted(text="Done.", usage=(5, 1)),
    )
    writer = on(models, room)
    reply = await room.turns.take(turn(room, writer, tools=NOTEBOOK_TOOLS), Reply())
    assert reply.text == "Reading. Done."
    assert [t["state"] for t in tool_states(room)] == ["ran"]
    (entry,) = room.store.spend_entries(room.chat)
    assert (entry.input_tokens, entry.output_tokens, entry.estimated) == (8, 3, False)
    assert entry.usd == 8 + 2 * 3
    assert [m.role for m in room.store.messages(room.chat)] == ["tool", "agent"]
    assert "tools" in models.requests[1].json


async def test_the_spend_check_ends_the_loop_before_another_request(
    room: Room, models: ScriptedModels
) -> None:
    room = with_tools(room)
    models.script(Scripted(tool_calls=(("read_notebook", {}),), usage=(3, 2)), Scripted("never"))
    writer = on(models, room)
    seen: list[float] = []

    def check(cost: float) -> str | None:
        seen.append(cost)
        return "the round's spending limit"

    await room.turns.take(turn(room, writer, tools=NOTEBOOK_TOOLS, spend_check=check), Reply())
    assert seen == [7.0]
    assert len(models.requests) == 1
    assert [t["state"] for t in tool_states(room)] == ["ran"]  # the call still has its answer


async def test_a_turn_offered_no_tools_runs_none_it_is_sent(
    room: Room, models: ScriptedModels
) -> None:
    room = with_tools(room)
    # A model (or a server pretending to be one) sends a tool call nobody offered it.
    models.script(Scripted(text="Hi.", tool_calls=(("run_code", {"code": "x = 1"}),)))
    writer = on(models, room)
    reply = await room.turns.take(turn(room, writer), Reply())  # the door's way: no tools
    assert reply.text == "Hi."
    assert "tools" not in models.requests[0].json
    assert tool_states(room) == []
    assert len(models.requests) == 1


async def test_a_loop_stopped_mid_request_bills_what_came_before_and_an_estimate(
    room: Room, models: ScriptedModels
) -> None:
    room = with_tools(room)
    words = [f"word{i} " for i in range(100)]
    models.script(
        Scripted(tool_calls=(("list_variables", {}),), usage=(3, 2)),
        Scripted(chunks=words, delay_per_chunk=0.05),
    )
    writer = on(models, room)
    reply = await cancelled_mid_reply(room, turn(room, writer, tools=NOTEBOOK_TOOLS))
    (entry,) = room.store.spend_entries(room.chat)
    assert entry.estimated is True
    assert entry.input_tokens > 3  # the first request's 3, plus the cut one's estimate
    assert entry.output_tokens == 2 + -(-len(reply.text) // 4)
