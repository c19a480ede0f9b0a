"""Tool calls in both providers' wire formats, streamed, and the tool loop sent back in each
provider's own format — against the scripted model server on loopback (real HTTP)."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from typing import Any

import httpx
import pytest

from conch_jupyter.notebook.rules import NOTEBOOK_TOOLS
from conch_jupyter.providers import REPLY_CHARS, make_provider, stream_reply
from conch_jupyter.providers.base import (
    ModelRequest,
    ProviderConfig,
    ProviderError,
    StreamItem,
    TextDelta,
    ToolCall,
    ToolStep,
    Turn,
    Usage,
    tool_arguments,
)

from ..support.scripted_models import Reply, ScriptedModels

REQUEST = ModelRequest(
    model="m",
    system="You are Analyst.",
    turns=(Turn("user", "look at df"),),
    tools=NOTEBOOK_TOOLS,
)
CODE = {"code": "df.describe()\nprint('ok')"}


def config(models: ScriptedModels, kind: str) -> ProviderConfig:
    url = models.openai_url if kind == "openai" else models.anthropic_url
    return ProviderConfig(kind, "m", url, "k")  # type: ignore[arg-type]


def stream(models: ScriptedModels, kind: str, request: ModelRequest = REQUEST) -> list[StreamItem]:
    async def main() -> list[StreamItem]:
        async with httpx.AsyncClient() as http:
            provider = make_provider(config(models, kind), http=http, env={})
            return [item async for item in stream_reply(provider, request)]

    return asyncio.run(main())


@pytest.mark.parametrize("kind", ["openai", "anthropic"])
def test_tool_calls_stream_in_whole_after_the_text(models: ScriptedModels, kind: str) -> None:
    models.script(
        Reply(
            text="Let me look.",
            tool_calls=(("read_notebook", {}), ("run_code", CODE)),
            usage=(20, 7),
        )
    )
    items = stream(models, kind)
    text = "".join(i.text for i in items if isinstance(i, TextDelta))
    calls = [i for i in items if isinstance(i, ToolCall)]
    assert text == "Let me look."
    assert [(c.name, c.arguments) for c in calls] == [("read_notebook", {}), ("run_code", CODE)]
    assert len({c.id for c in calls}) == 2
    assert items[-1] == Usage(20, 7)


@pytest.mark.parametrize("kind", ["openai", "anthropic"])
def test_arguments_that_are_not_an_object_come_through_as_none(
    models: ScriptedModels, kind: str
) -> None:
    models.script(Reply(text="", tool_calls=(("run_code", '{"code": "x'), ("run_code", "[1]"))))
    calls = [i for i in stream(models, kind) if isinstance(i, ToolCall)]
    assert [c.arguments for c in calls] == [None, None]


@pytest.mark.parametrize("kind", ["openai", "anthropic"])
def test_what_a_model_says_is_cleaned_as_it_enters(models: ScriptedModels, kind: str) -> None:
    """Text and tool arguments with lone surrogates ("\\ud800" is valid JSON), NUL, controls and
    bidi overrides come out clean, in both wire formats; code keeps its tabs and line breaks."""
    raw = '{"code": "a = \'\\ud800x\\u0000\\u202e\'\\n\\tb = 1\\r\\n",'
    raw += ' "\\udfffk\\u0007": ["\\u200b"]}'
    models.script(
        Reply(chunks=["Hi \ud800", "there\x1b[31m\u202e."], tool_calls=(("run_code", raw),))
    )
    items = stream(models, kind)
    text = "".join(i.text for i in items if isinstance(i, TextDelta))
    [call] = [i for i in items if isinstance(i, ToolCall)]
    assert text == "Hi there[31m."
    assert call.arguments == {"code": "a = 'x'\n\tb = 1\n", "k": [""]}


def test_a_reply_past_its_bound_is_read_no_further_and_said_in_words(
    models: ScriptedModels,
) -> None:
    code = "#" * (REPLY_CHARS + 1)
    models.script(Reply(text="Here:", tool_calls=(("run_code", {"code": code}),)))
    with pytest.raises(ProviderError) as refused:
        stream(models, "openai")
    assert refused.value.words == (
        f"The reply from the openai provider ran past {REPLY_CHARS:,} characters;"
        " Conch stopped reading it."
    )


def test_openai_offers_the_tools_and_sends_the_loop_back_in_its_format(
    models: ScriptedModels,
) -> None:
    models.script(Reply(text="done"))
    call = ToolCall("call_0", "run_code", CODE)
    step = ToolStep("Running it.", (call,), ("ok\n",))
    stream(models, "openai", replace(REQUEST, steps=(step,)))
    body: dict[str, Any] = models.requests[-1].json
    assert [t["function"]["name"] for t in body["tools"]] == [
        "read_notebook",
        "list_variables",
        "run_code",
        "add_cell",
        "edit_cell",
        "delete_cell",
        "run_cell",
    ]
    assert body["tools"][2] == {
        "type": "function",
        "function": {
            "name": "run_code",
            "description": NOTEBOOK_TOOLS[2].description,
            "parameters": NOTEBOOK_TOOLS[2].parameters,
        },
    }
    assert body["messages"][-2:] == [
        {
            "role": "assistant",
            "content": "Running it.",
            "tool_calls": [
                {
                    "id": "call_0",
                    "type": "function",
                    "function": {
                        "name": "run_code",
                        "arguments": '{"code": "df.describe()\\nprint(\'ok\')"}',
                    },
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_0", "content": "ok\n"},
    ]


def test_anthropic_offers_the_tools_and_sends_the_loop_back_in_its_format(
    models: ScriptedModels,
) -> None:
    models.script(Reply(text="done"))
    first = ToolCall("toolu_1", "read_notebook", {})
    second = ToolCall("toolu_2", "run_code", None)  # arguments that were not an object
    step = ToolStep("", (first, second), ("the notebook", "Not run: …"))
    stream(models, "anthropic", replace(REQUEST, steps=(step,)))
    body: dict[str, Any] = models.requests[-1].json
    assert body["tools"][0] == {
        "name": "read_notebook",
        "description": NOTEBOOK_TOOLS[0].description,
        "input_schema": NOTEBOOK_TOOLS[0].parameters,
    }
    assert body["messages"] == [
        {"role": "user", "content": "look at df"},
        {
            "role": "assistant",
            "content": [
                {"type": "tool_use", "id": "toolu_1", "name": "read_notebook", "input": {}},
                {"type": "tool_use", "id": "toolu_2", "name": "run_code", "input": {}},
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "toolu_1", "content": "the notebook"},
                {"type": "tool_result", "tool_use_id": "toolu_2", "content": "Not run: …"},
            ],
        },
    ]


@pytest.mark.parametrize("kind", ["openai", "anthropic"])
def test_a_request_without_tools_offers_none(models: ScriptedModels, kind: str) -> None:
    models.script(Reply(text="hi"))
    stream(models, kind, replace(REQUEST, tools=()))
    assert "tools" not in models.requests[-1].json


# --- the offline agents use the tools too, deterministically ---


def offline(request: ModelRequest) -> list[StreamItem]:
    from conch_jupyter.providers.offline import OfflineProvider

    async def main() -> list[StreamItem]:
        return [item async for item in OfflineProvider(0).stream(request)]

    return asyncio.run(main())


def offline_request(text: str, *, turns: tuple[Turn, ...] | None = None) -> ModelRequest:
    return replace(
        REQUEST,
        speaker="Analyst",
        user_text=text,
        turns=turns if turns is not None else (Turn("user", text),),
    )


def test_offline_reads_the_notebook_when_asked_about_it() -> None:
    items = offline(offline_request("What is in my notebook?"))
    [call] = [i for i in items if isinstance(i, ToolCall)]
    assert (call.name, call.arguments) == ("read_notebook", {})
    assert offline(offline_request("What is in my notebook?")) == items  # deterministic


def test_offline_proposes_to_run_a_fenced_python_block() -> None:
    text = "Please try:\n```python\nx = 40 + 2\nprint(x)\n```"
    [call] = [i for i in offline(offline_request(text)) if isinstance(i, ToolCall)]
    assert (call.name, call.arguments) == ("run_code", {"code": "x = 40 + 2\nprint(x)"})
    # In a round, only the first agent the message names proposes it; the others do not.
    named = "@Writer and @Analyst, " + text
    room = ("Analyst", "Writer")
    first = replace(offline_request(named), room=room, speaker="Writer")
    later = replace(offline_request(named), room=room, speaker="Analyst")
    assert [i.name for i in offline(first) if isinstance(i, ToolCall)] == ["run_code"]
    assert not [i for i in offline(later) if isinstance(i, ToolCall)]


def test_offline_calls_nothing_without_tools_or_reason() -> None:
    assert not [i for i in offline(offline_request("hello")) if isinstance(i, ToolCall)]
    no_tools = replace(offline_request("my notebook?"), tools=())
    assert not [i for i in offline(no_tools) if isinstance(i, ToolCall)]


def test_offline_answers_with_what_came_back_and_hands_nothing_on() -> None:
    step = ToolStep("", (ToolCall("offline_1", "run_code", {"code": "1"}),), ("42 @Writer\n",))
    items = offline(replace(offline_request("```python\n1\n```"), steps=(step,)))
    assert not [i for i in items if isinstance(i, ToolCall)]
    text = "".join(i.text for i in items if isinstance(i, TextDelta))
    assert "42 Writer" in text
    assert "@Writer" not in text


def test_the_offline_agent_writes_cells_when_asked() -> None:
    from conch_jupyter.providers.base import ModelRequest, ToolStep
    from conch_jupyter.providers.offline import offline_tool_call

    def ask(text: str, *steps: ToolStep) -> tuple[str, dict[str, Any]] | None:
        request = ModelRequest(
            "m", "s", (), "Researcher", ("Researcher",), text, tools=NOTEBOOK_TOOLS, steps=steps
        )
        found = offline_tool_call(request)
        return None if found is None else (found[0].name, found[0].arguments or {})

    add = "add and run a cell:\n```python\nprint(6 * 7)\n```"
    assert ask(add) == ("add_cell", {"cell_type": "code", "source": "print(6 * 7)"})
    made = ToolStep("", (ToolCall("offline_1", "add_cell", {}),), ("… its id is c-1.",))
    assert ask(add, made) == ("run_cell", {"cell_id": "c-1"})
    ran = ToolStep("", (ToolCall("offline_2", "run_cell", {}),), ("42",))
    assert ask(add, made, ran) is None
    assert ask("add a cell:\n```python\nx = 1\n```", made) is None  # no run asked
    edit = "edit cell c-1:\n```python\nx = 2\n```"
    assert ask(edit) == ("read_notebook", {})
    read = ToolStep("", (ToolCall("offline_1", "read_notebook", {}),), ("Notebook …",))
    assert ask(edit, read) == ("edit_cell", {"cell_id": "c-1", "source": "x = 2"})
    assert ask("delete cell c-1", read) == ("delete_cell", {"cell_id": "c-1"})
    assert ask("run cell c-1") == ("run_cell", {"cell_id": "c-1"})
    assert ask("edit cell c-1 please") is None  # no new text: nothing to write


def test_arguments_nested_past_the_bound_are_no_object_conch_reads() -> None:
    deep = "{" + '"a": {' * 900 + "}" * 901
    assert tool_arguments(deep) is None
    assert tool_arguments('{"a": {"b": [1, 2]}}') == {"a": {"b": [1, 2]}}
