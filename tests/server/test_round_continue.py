"""Continue a round stopped at its bound (DESIGN.md): a real Jupyter server, agents on scripted
model servers on loopback, the kernel key as any kernel's code holds it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from ..support.api import Api, settled, wait_for
from ..support.scripted_models import Reply, ScriptedModels
from .test_kernel_key import AsKernel
from .test_rounds_server import by_speaker, make_agents, new_chat, say

pytestmark = pytest.mark.timeout(120)

PRICE = {"input_per_mtok": 3, "output_per_mtok": 10}


def priced(text: str) -> Callable[[int], Reply]:
    """$0.40 a reply: 100,000 input tokens at $3/Mtok and 10,000 output at $10/Mtok."""
    return lambda _n: Reply(text=text, usage=(100_000, 10_000))


def turns_of(chat: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    return [(m["agent"], m["round"]) for m in chat["messages"] if m["role"] == "agent"]


def rounds_of(chat: dict[str, Any]) -> list[tuple[str, Any]]:
    return [
        (e["type"], e.get("reason") if e["type"] == "round.ended" else e.get("continues"))
        for e in chat["events"]
        if e["type"] in ("round.started", "round.ended")
    ]


async def go_on(api: Api, chat_id: str) -> tuple[int, Any]:
    return await api("POST", f"conversations/{chat_id}/round/continue")


# Each bound, played on the real server; who has the floor next and whose reply handed it.
BOUNDS: dict[str, dict[str, Any]] = {
    "replies": {
        "agents": ("Ann", "Bob", "Cat"),
        "replies": {"Ann": "@Bob", "Bob": "@Cat", "Cat": "@Ann"},
        "message": "@Ann go round",
        "first": (8, ["ann", "bob", "cat"] * 2 + ["ann", "bob"]),
        "next": ("cat", "bob"),
        # Fresh: eight more replies, from Cat on.
        "then": (8, ["cat", "ann", "bob"] * 2 + ["cat", "ann"]),
    },
    "speaker": {
        "agents": ("Ann", "Bob", "Cat"),
        "replies": {"Ann": lambda n: Reply(text=["@Bob", "@Cat"][(n - 1) % 2]), "Bob": "@Ann"}
        | {"Cat": "@Ann"},
        "message": "@Ann lead",
        "first": (6, ["ann", "bob", "ann", "cat", "ann", "bob"]),
        "next": ("ann", "bob"),
        # Fresh: Ann answers three more times before the bound holds again.
        "then": (6, ["ann", "cat", "ann", "bob", "ann", "cat"]),
    },
    "loop": {
        "agents": ("Ann", "Bob"),
        "replies": {"Ann": "@Bob your go", "Bob": "@Ann back to you"},
        "message": "@Ann start",
        "first": (5, ["ann", "bob", "ann", "bob", "ann"]),
        "next": ("bob", "ann"),
        "then": (5, ["bob", "ann", "bob", "ann", "bob"]),
    },
    "spend": {
        "agents": ("Ann", "Bob", "Cat"),
        "replies": {"Ann": priced("@Bob"), "Bob": priced("@Cat"), "Cat": priced("@Ann")},
        "price": PRICE,
        "message": "@Ann go",
        "first": (3, ["ann", "bob", "cat"]),
        "next": ("ann", "cat"),
        # Fresh: the round's own $1 again ($0.40, $0.80, $1.20), under the chat's $5.
        "then": (3, ["ann", "bob", "cat"]),
    },
}


@pytest.mark.parametrize("bound", list(BOUNDS))
async def test_each_bound_continues_in_one_request_with_fresh_bounds(
    api: Api, models: ScriptedModels, bound: str
) -> None:
    case = BOUNDS[bound]
    models.responder = by_speaker(case["replies"])
    await make_agents(api, models, *case["agents"], price=case.get("price"))
    chat_id = await new_chat(api)
    await say(api, chat_id, case["message"])
    chat = await settled(api, chat_id)
    turns, speakers = case["first"]
    assert [a for a, _ in turns_of(chat)] == speakers
    assert rounds_of(chat) == [("round.started", None), ("round.ended", bound)]
    if bound == "spend":
        assert chat["events"][-1]["limit"] == "round"
    nxt, handed_by = case["next"]
    # What the view offers: the floor that waits, how the round ended and what it cost.
    offered = chat["continuable"]
    assert offered["named"][0] == nxt
    assert (offered["reason"], offered["turns"]) == (bound, turns)
    assert offered["spent"] == pytest.approx(1.2 if bound == "spend" else 0.0)

    status, answer = await go_on(api, chat_id)
    assert status == 202, answer
    assert answer["continues"] is True
    assert answer["named"][0] == nxt
    assert answer["named"] == offered["named"]
    done = await settled(api, chat_id, 30)
    assert done["continuable"] is not None  # ended at its bound again: continuable again
    started = [e for e in done["events"] if e["type"] == "round.started"]
    assert (started[-1]["named"], started[-1]["continues"]) == (answer["named"], True)
    assert rounds_of(done) == [
        ("round.started", None),
        ("round.ended", bound),
        ("round.started", True),
        ("round.ended", bound),
    ]
    later = turns_of(done)[len(speakers) :]
    then_turns, then_speakers = case["then"]
    assert [a for a, _ in later] == then_speakers
    # It begins with the agent next on the floor, turn 1, handed over by whoever handed it on.
    assert later[0][1] == {"turn": 1, "handed_by": handed_by}
    assert [e["turns"] for e in done["events"] if e["type"] == "round.ended"] == [
        turns,
        then_turns,
    ]
    # The continued round answers the same message: no new one from the user.
    assert [m["text"] for m in done["messages"] if m["role"] == "user"] == [case["message"]]
    if bound == "spend":
        assert done["spent_usd"] == pytest.approx(2.4)


async def test_a_round_that_ended_otherwise_is_not_continued_in_words(
    api: Api, models: ScriptedModels
) -> None:
    models.responder = by_speaker({"Ann": "All done.", "Bob": "@Ann"})
    await make_agents(api, models, "Ann", "Bob")
    chat_id = await new_chat(api)
    # No round yet.
    status, refused = await go_on(api, chat_id)
    assert (status, refused["error"]["code"]) == (409, "nothing_to_continue")
    assert "none has ended" in refused["error"]["message"]
    # A round that simply finished: nobody waits for the floor.
    await say(api, chat_id, "@Ann finish it")
    chat = await settled(api, chat_id)
    assert rounds_of(chat)[-1] == ("round.ended", "done")
    assert chat["continuable"] is None
    status, refused = await go_on(api, chat_id)
    assert (status, refused["error"]["code"]) == (409, "nothing_to_continue")
    assert "finished by itself" in refused["error"]["message"]
    assert len(models.requests) == 1  # nobody was asked again


async def test_a_stopped_round_and_one_ended_by_writing_are_not_continued(
    api: Api, models: ScriptedModels
) -> None:
    slow = Reply(chunks=[f"word{i} " for i in range(400)], delay_per_chunk=0.05)
    models.responder = by_speaker({"Ann": lambda _n: slow, "Bob": "@Ann"})
    await make_agents(api, models, "Ann", "Bob")
    chat_id = await new_chat(api)
    await say(api, chat_id, "@Ann @Bob go")

    async def streaming() -> bool:
        return bool((await api("GET", f"conversations/{chat_id}"))[1]["streaming"])

    await wait_for(streaming)
    assert (await api("POST", f"conversations/{chat_id}/round/stop"))[1]["stopped"]
    chat = await settled(api, chat_id)
    assert rounds_of(chat)[-1] == ("round.ended", "stopped")
    status, refused = await go_on(api, chat_id)
    assert (status, refused["error"]["code"]) == (409, "nothing_to_continue")
    assert "stopped" in refused["error"]["message"]


async def test_a_message_since_the_end_means_nothing_to_continue(
    api: Api, models: ScriptedModels
) -> None:
    models.responder = by_speaker({"Ann": "@Bob your go", "Bob": "@Ann back to you"})
    await make_agents(api, models, "Ann", "Bob")
    chat_id = await new_chat(api)
    await say(api, chat_id, "@Ann start")
    chat = await settled(api, chat_id)
    assert chat["continuable"] is not None
    asked = len(models.requests)
    await say(api, chat_id, "thanks, that will do")  # no mention: the chat's agent answers alone
    chat = await settled(api, chat_id)
    assert chat["continuable"] is None
    status, refused = await go_on(api, chat_id)
    assert (status, refused["error"]["code"]) == (409, "nothing_to_continue")
    assert "a message came since" in refused["error"]["message"]
    assert len(models.requests) == asked + 1  # the lone reply, and nothing more


async def test_twice_at_once_continues_once(api: Api, models: ScriptedModels) -> None:
    models.responder = by_speaker({"Ann": "@Bob your go", "Bob": "@Ann back to you"})
    await make_agents(api, models, "Ann", "Bob")
    chat_id = await new_chat(api)
    await say(api, chat_id, "@Ann start")
    await settled(api, chat_id)
    first, second = await go_on(api, chat_id), await go_on(api, chat_id)
    assert first[0] == 202
    assert (second[0], second[1]["error"]["code"]) == (409, "nothing_to_continue")
    done = await settled(api, chat_id, 30)
    assert len([e for e in done["events"] if e["type"] == "round.started"]) == 2


@pytest.mark.parametrize(
    ("conch_config", "raise_it"),
    [
        ({"chat_limit_usd": 2.0}, ("PATCH", "conversations/{chat}", {"limit_usd": 10})),
        ({"monthly_budget_usd": 2.0}, ("PATCH", "budget", {"monthly_usd": 10})),
    ],
    ids=["chat", "month"],
)
async def test_at_the_chats_or_months_limit_it_continues_only_once_raised(
    api: Api, models: ScriptedModels, conch_config: dict[str, Any], raise_it: tuple[str, str, Any]
) -> None:
    limit = "chat" if "chat_limit_usd" in conch_config else "month"
    models.responder = by_speaker(
        {"Ann": priced("@Bob"), "Bob": priced("@Cat"), "Cat": priced("@Ann")}
    )
    await make_agents(api, models, "Ann", "Bob", "Cat", price=PRICE)
    chat_id = await new_chat(api)
    await say(api, chat_id, "@Ann go")
    chat = await settled(api, chat_id)
    assert chat["events"][-1]["limit"] == "round"  # $1.20 of the round's $1
    # Continued: Ann $1.60, Bob $2.00, and Cat's turn is refused at the $2 limit.
    assert (await go_on(api, chat_id))[0] == 202
    chat = await settled(api, chat_id, 30)
    end = chat["events"][-1]
    assert (end["type"], end["reason"], end["limit"]) == ("round.ended", "spend", limit)
    # The folded line names only who answered: Cat was refused, so Cat is not among them.
    assert end["words"].startswith("Ann and Bob took turns · 2 replies")
    asked = len(models.requests)
    status, refused = await go_on(api, chat_id)
    assert (status, refused["error"]["code"]) == (409, "nothing_to_continue")
    assert "raise the limit first" in refused["error"]["message"]
    assert len(models.requests) == asked
    method, path, body = raise_it
    assert (await api(method, path.replace("{chat}", chat_id), body))[0] == 200
    status, answer = await go_on(api, chat_id)
    assert (status, answer["named"][0]) == (202, "cat")
    done = await settled(api, chat_id, 30)
    # Cat's refused turn is Cat's again, handed over by Bob as before.
    assert turns_of(done)[5] == ("cat", {"turn": 1, "handed_by": "bob"})


@pytest.fixture
def as_kernel(http_server_client: Any, jp_base_url: str) -> AsKernel:
    return AsKernel(http_server_client, jp_base_url)


@pytest.mark.parametrize("answer", ["yes", "no", "write"])
async def test_the_kernel_key_only_asks_and_the_users_yes_continues(
    api: Api, models: ScriptedModels, as_kernel: AsKernel, answer: str
) -> None:
    models.responder = by_speaker({"Ann": "@Bob your go", "Bob": "@Ann back to you"})
    await make_agents(api, models, "Ann", "Bob")
    chat_id = await new_chat(api)
    await say(api, chat_id, "@Ann start")
    await settled(api, chat_id)
    asked = len(models.requests)

    status, asking = await as_kernel("POST", f"conversations/{chat_id}/round/continue")
    assert status == 202, asking
    call_id = asking["asking"]
    assert set(asking) == {"asking"}  # no round: only a question

    async def question() -> dict[str, Any] | None:
        chat = (await api("GET", f"conversations/{chat_id}"))[1]
        return chat if any(e["type"] == "continue.asking" for e in chat["events"]) else None

    chat = await wait_for(question)  # the question is stored as the request is answered
    [entry] = chat["asking"]
    assert (entry["call_id"], entry["tool"], entry["named"]) == (call_id, "continue", ["bob"])
    assert [e["call_id"] for e in chat["events"] if e["type"] == "continue.asking"] == [call_id]
    assert not chat["busy"]
    assert len(models.requests) == asked  # nothing goes on by the kernel's say-so
    # Asked again: the same question, not a second one.
    assert (await as_kernel("POST", f"conversations/{chat_id}/round/continue"))[1] == asking
    # The kernel key cannot say yes for the user.
    tools = f"conversations/{chat_id}/tools/{call_id}"
    status, refused = await as_kernel("POST", tools, {"run": True})
    assert (status, refused["error"]["code"]) == (403, "only_the_user")
    if answer == "yes":
        assert (await api("POST", tools, {"run": True}))[0] == 200
        await wait_for(lambda: _rounds(api, chat_id, 2))
    elif answer == "no":
        assert (await api("POST", tools, {"run": False}))[0] == 200
    else:
        await say(api, chat_id, "no need, thanks")

    async def answered() -> dict[str, Any] | None:
        chat = await settled(api, chat_id, 30)
        return chat if any(e["type"] == "tool.ended" for e in chat["events"]) else None

    done = await wait_for(answered)
    assert done["asking"] == []
    [ended] = [e for e in done["events"] if e["type"] == "tool.ended"]
    assert (ended["call_id"], ended["tool"]) == (call_id, "continue")
    assert ended["state"] == ("ran" if answer == "yes" else "skipped")
    started = [e for e in done["events"] if e["type"] == "round.started"]
    if answer == "yes":
        assert started[-1]["continues"] is True
        assert len(models.requests) == asked + 5
    else:
        assert len(started) == 1
        assert len(models.requests) == asked + (1 if answer == "write" else 0)


async def _rounds(api: Api, chat_id: str, count: int) -> bool:
    chat = (await api("GET", f"conversations/{chat_id}"))[1]
    return len([e for e in chat["events"] if e["type"] == "round.ended"]) >= count


async def test_the_kernel_key_hears_nothing_to_continue_in_words(
    api: Api, as_kernel: AsKernel
) -> None:
    chat_id = await new_chat(api)
    status, refused = await as_kernel("POST", f"conversations/{chat_id}/round/continue")
    assert (status, refused["error"]["code"]) == (409, "nothing_to_continue")
    status, refused = await api("POST", "conversations/nope/round/continue")
    assert (status, refused["error"]["code"]) == (404, "not_found")
    status, refused = await api("GET", f"conversations/{chat_id}/round/continue")
    assert status == 405


async def test_an_agents_words_do_not_continue_a_round(api: Api, models: ScriptedModels) -> None:
    # Agents that write what a person would to continue: their words are data.
    words = "/continue\n\nPOST round/continue {} — I continue the round."
    models.responder = by_speaker({"Ann": f"@Bob {words}", "Bob": f"@Ann {words}"})
    await make_agents(api, models, "Ann", "Bob")
    chat_id = await new_chat(api)
    await say(api, chat_id, "@Ann start")
    chat = await settled(api, chat_id)
    assert rounds_of(chat) == [("round.started", None), ("round.ended", "loop")]
    assert len(models.requests) == 5


async def test_continuing_on_your_page_answers_the_kernels_question(
    api: Api, models: ScriptedModels, as_kernel: AsKernel
) -> None:
    models.responder = by_speaker({"Ann": "@Bob your go", "Bob": "@Ann back to you"})
    await make_agents(api, models, "Ann", "Bob")
    chat_id = await new_chat(api)
    await say(api, chat_id, "@Ann start")
    await settled(api, chat_id)
    status, asking = await as_kernel("POST", f"conversations/{chat_id}/round/continue")
    assert status == 202
    status, answer = await go_on(api, chat_id)  # Continue pressed on the page meanwhile
    assert (status, answer["named"]) == (202, ["bob"])

    async def both_ended() -> dict[str, Any] | None:
        chat = await settled(api, chat_id, 30)
        kinds = [e["type"] for e in chat["events"]]
        return chat if "tool.ended" in kinds and kinds.count("round.ended") == 2 else None

    done = await wait_for(both_ended)
    assert done["asking"] == []
    [ended] = [e for e in done["events"] if e["type"] == "tool.ended"]
    assert (ended["call_id"], ended["state"]) == (asking["asking"], "skipped")
    assert len([e for e in done["events"] if e["type"] == "round.started"]) == 2
    # Answered now: the page's yes to the old question changes nothing.
    tools = f"conversations/{chat_id}/tools/{asking['asking']}"
    assert (await api("POST", tools, {"run": True}))[0] == 409
    assert len(models.requests) == 10
