"""The model providers against a scripted model server speaking their real wire formats.

No httpx mocking: every hosted-provider test is a real HTTP exchange on loopback. Async code runs
under `asyncio.run` from plain test functions (pytest-asyncio clashes with pytest-jupyter).
"""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace

import httpx
import pytest

from conch_jupyter.providers import detect_default_provider, make_provider, stream_reply
from conch_jupyter.providers.anthropic import CLOSING_TURN, OPENING_TURN, anthropic_messages
from conch_jupyter.providers.base import (
    ModelRequest,
    ProviderConfig,
    ProviderError,
    TextDelta,
    Turn,
    Usage,
)
from conch_jupyter.providers.offline import (
    LABEL,
    OfflineProvider,
    offline_reply,
    own_part,
    quote,
)
from conch_jupyter.rounds.prompts import quote_agent, quote_note

from ..support.scripted_models import Reply, ScriptedModels

KEY = "sk-test-0123456789abcdef"
REQUEST = ModelRequest(model="gpt-test", system="You are Ada.", turns=(Turn("user", "Hi"),))


@dataclass
class Outcome:
    deltas: list[str] = field(default_factory=list)
    usage: list[Usage] = field(default_factory=list)
    error: ProviderError | None = None
    waits: list[float] = field(default_factory=list)

    @property
    def text(self) -> str:
        return "".join(self.deltas)


def answer(
    config: ProviderConfig,
    request: ModelRequest = REQUEST,
    *,
    env: Mapping[str, str] | None = None,
    read_timeout: float = 60.0,
) -> Outcome:
    """Everything stream_reply yields for one request, the error it ends with, and its waits."""
    out = Outcome()

    async def sleep(seconds: float) -> None:
        out.waits.append(seconds)

    async def main() -> None:
        async with httpx.AsyncClient() as http:
            provider = make_provider(config, http=http, env=env or {}, read_timeout=read_timeout)
            try:
                async for item in stream_reply(provider, request, sleep=sleep, retry_delay=0.25):
                    if isinstance(item, TextDelta):
                        out.deltas.append(item.text)
                    else:
                        out.usage.append(item)
            except ProviderError as error:
                out.error = error

    asyncio.run(main())
    return out


def openai(models: ScriptedModels, model: str = "gpt-test") -> ProviderConfig:
    return ProviderConfig("openai", model, models.openai_url, KEY)


def anthropic(models: ScriptedModels) -> ProviderConfig:
    return ProviderConfig("anthropic", "claude-test", models.anthropic_url, KEY)


def test_openai_text_arrives_in_order_with_usage(models: ScriptedModels) -> None:
    models.script(Reply(chunks=["Hel", "lo, ", "wor", "ld"], usage=(12, 4)))
    out = answer(openai(models))
    assert (out.deltas, out.usage, out.error) == (
        ["Hel", "lo, ", "wor", "ld"],
        [Usage(12, 4)],
        None,
    )


def test_openai_request_is_the_wire_format(models: ScriptedModels) -> None:
    models.script(Reply(text="ok"))
    turns = (Turn("user", "Hi"), Turn("assistant", "Hello"), Turn("user", "Again"))
    answer(openai(models), ModelRequest("gpt-test", "Be brief.", turns, max_tokens=77))
    [sent] = models.requests
    assert (sent.method, sent.path) == ("POST", "/v1/chat/completions")
    assert sent.json == {
        "model": "gpt-test",
        "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Hi"},
            {"role": "assistant", "content": "Hello"},
            {"role": "user", "content": "Again"},
        ],
        "stream": True,
        "stream_options": {"include_usage": True},
        "max_tokens": 77,
    }
    assert sent.headers["authorization"] == f"Bearer {KEY}"
    assert "x-api-key" not in sent.headers


def test_openai_key_is_read_from_the_environment_and_local_servers_need_none(
    models: ScriptedModels,
) -> None:
    models.script(Reply(text="a"), Reply(text="b"))
    local = ProviderConfig("openai", "llama3.2", models.openai_url)
    assert answer(local, replace(REQUEST, model=""), env={"OPENAI_API_KEY": "sk-env"}).text == "a"
    assert answer(local, replace(REQUEST, model="")).text == "b"
    assert [r.headers.get("authorization") for r in models.requests] == ["Bearer sk-env", None]
    assert [r.json["model"] for r in models.requests] == ["llama3.2", "llama3.2"]


def test_openai_without_a_usage_chunk_estimates_usage(models: ScriptedModels) -> None:
    models.script(Reply(text="twelve chars", usage=None))
    # (12 + 2) / 4 and 12 / 4, rounded up, and marked as counted by Conch
    assert answer(openai(models)).usage == [Usage(4, 3, estimated=True)]


@pytest.mark.parametrize(
    ("retry_after", "wait"), [("2", 2.0), (None, 0.25), ("30", 10.0), ("soon", 0.25)]
)
def test_429_then_success_is_retried_once_after_a_wait(
    models: ScriptedModels, retry_after: str | None, wait: float
) -> None:
    models.script(Reply(status=429, retry_after=retry_after), Reply(text="second time"))
    out = answer(openai(models))
    assert (out.text, out.error, out.waits, len(models.requests)) == (
        "second time",
        None,
        [wait],
        2,
    )


def test_500_twice_gives_up_after_one_retry(models: ScriptedModels) -> None:
    models.script(Reply(status=500), Reply(status=500), Reply(text="never sent"))
    out = answer(openai(models))
    assert out.error is not None
    assert out.error.provider_status == 500
    assert out.error.words.startswith("The openai provider is having trouble right now (500).")
    assert (out.text, out.waits, len(models.requests)) == ("", [0.25], 2)


def test_401_is_not_retried_and_never_shows_the_key(models: ScriptedModels) -> None:
    models.script(Reply(status=401), Reply(text="never sent"))
    out = answer(openai(models))
    assert out.error is not None
    assert out.error.words == (
        "The openai provider refused the key (401). Check OPENAI_API_KEY or the agent's key."
    )
    assert KEY not in str(out.error)
    assert (out.waits, len(models.requests)) == ([], 1)


def test_401_without_any_key_says_to_set_one(models: ScriptedModels) -> None:
    models.script(Reply(status=401))
    out = answer(ProviderConfig("anthropic", "claude-test", models.anthropic_url))
    assert out.error is not None
    assert out.error.words == (
        f"The anthropic provider at {models.anthropic_url} needs a key (401) and none is set."
        " Set ANTHROPIC_API_KEY or give the agent a key."
    )


def test_404_names_the_model_and_where_it_was_looked_for(models: ScriptedModels) -> None:
    models.script(Reply(status=404, error_body={"error": {"message": "no such model"}}))
    out = answer(openai(models, model="gpt-x"), replace(REQUEST, model=""))
    assert out.error is not None
    assert len(models.requests) == 1
    assert out.error.words == (
        f"The model 'gpt-x' was not found at {models.openai_url} (404)."
        " The server said: no such model"
    )


def test_a_key_echoed_in_an_error_body_is_masked(models: ScriptedModels) -> None:
    models.script(Reply(status=400, error_body={"error": {"message": f"bad request for {KEY}"}}))
    out = answer(openai(models))
    assert out.error is not None
    assert (
        out.error.words
        == "The openai provider rejected the request (400). The server said: bad request for ***"
    )


def test_a_stream_cut_mid_reply_fails_without_retry(models: ScriptedModels) -> None:
    models.script(Reply(text="one two three four", cut_after=2), Reply(text="never sent"))
    out = answer(openai(models))
    assert out.deltas == ["one", " two"]
    assert out.error is not None
    assert not out.error.passing
    assert (
        out.error.words
        == f"The reply from the openai provider at {models.openai_url} was cut off mid-stream."
    )
    assert len(models.requests) == 1


def test_a_read_timeout_fails_within_the_configured_time(models: ScriptedModels) -> None:
    models.script(Reply(text="slow reply here", delay_per_chunk=2.0))
    started = time.monotonic()
    out = answer(openai(models), read_timeout=0.2)
    assert time.monotonic() - started < 1.5
    assert out.deltas == ["slow"]
    assert out.error is not None
    assert (
        out.error.words
        == f"No answer from the openai provider at {models.openai_url} within 0.2 s."
    )


@pytest.mark.parametrize("config", [openai, anthropic])
def test_a_malformed_chunk_fails(
    models: ScriptedModels, config: Callable[[ScriptedModels], ProviderConfig]
) -> None:
    models.script(Reply(text="a b c", malformed_after=1))
    out = answer(config(models))
    assert out.deltas == ["a"]
    assert out.error is not None
    assert "could not read (malformed data)" in out.error.words


def test_connection_refused_is_retried_once_then_explained() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]  # closed again before use: nothing listens there
    url = f"http://127.0.0.1:{port}/v1"
    out = answer(ProviderConfig("openai", "m", url))
    assert out.error is not None
    assert out.error.passing
    assert out.error.words == f"Could not connect to the openai provider at {url}."
    assert out.waits == [0.25]


def test_stopping_a_reply_closes_its_stream(models: ScriptedModels) -> None:
    models.script(Reply(text="word " * 50, delay_per_chunk=0.02))

    async def main() -> bool:
        async with httpx.AsyncClient() as http:
            replies = stream_reply(make_provider(openai(models), http=http, env={}), REQUEST)
            async for _ in replies:
                break
            await replies.aclose()
            # Still inside the client: the stream must close now, not at shutdown.
            return await asyncio.to_thread(models.wait_closed_early, 1, 2.0)

    assert asyncio.run(main())


def test_anthropic_text_and_usage(models: ScriptedModels) -> None:
    models.script(Reply(chunks=["Bon", "jour"], usage=(25, 9)))
    out = answer(anthropic(models))
    assert (out.deltas, out.usage, out.error) == (["Bon", "jour"], [Usage(25, 9)], None)


def test_anthropic_request_is_the_wire_format(models: ScriptedModels) -> None:
    models.script(Reply(text="ok"))
    turns = (
        Turn("assistant", "I said this."),
        Turn("user", "Ada: one"),
        Turn("user", "Bob: two"),
        Turn("assistant", "Me again"),
        Turn("user", "Over to you"),
    )
    answer(anthropic(models), ModelRequest("claude-test", "Be brief.", turns, max_tokens=50))
    [sent] = models.requests
    assert (sent.method, sent.path) == ("POST", "/v1/messages")
    assert sent.json == {
        "model": "claude-test",
        "max_tokens": 50,
        "system": "Be brief.",
        "messages": [
            {"role": "user", "content": OPENING_TURN},
            {"role": "assistant", "content": "I said this."},
            {"role": "user", "content": "Ada: one\n\nBob: two"},
            {"role": "assistant", "content": "Me again"},
            {"role": "user", "content": "Over to you"},
        ],
        "stream": True,
    }
    assert (sent.headers["x-api-key"], sent.headers["anthropic-version"]) == (KEY, "2023-06-01")
    assert "authorization" not in sent.headers


@pytest.mark.parametrize(
    ("turns", "messages"),
    [
        ((), [("user", OPENING_TURN)]),
        (
            (("assistant", "x"),),
            [("user", OPENING_TURN), ("assistant", "x"), ("user", CLOSING_TURN)],
        ),
        ((("user", "a"), ("user", "  "), ("user", "b")), [("user", "a\n\nb")]),
        (
            (("user", "a"), ("assistant", "b"), ("assistant", "c")),
            [("user", "a"), ("assistant", "b\n\nc"), ("user", CLOSING_TURN)],
        ),
    ],
)
def test_anthropic_turns_alternate_and_start_and_end_with_the_user(
    turns: tuple[tuple[str, str], ...], messages: list[tuple[str, str]]
) -> None:
    got = anthropic_messages(Turn(role, text) for role, text in turns)  # type: ignore[arg-type]
    assert got == [{"role": role, "content": text} for role, text in messages]


def test_anthropic_overloaded_before_any_text_is_retried(models: ScriptedModels) -> None:
    models.script(Reply(text="x", stream_error="overloaded_error"), Reply(text="fine now"))
    out = answer(anthropic(models))
    assert (out.text, out.error, out.waits, len(models.requests)) == ("fine now", None, [0.25], 2)


def test_anthropic_529_twice_gives_up(models: ScriptedModels) -> None:
    models.script(Reply(text="x", stream_error="overloaded_error"), Reply(status=529))
    out = answer(anthropic(models))
    assert out.error is not None
    assert (out.error.provider_status, out.error.passing, len(models.requests)) == (529, True, 2)


def test_anthropic_error_after_text_is_not_retried(models: ScriptedModels) -> None:
    models.script(Reply(text="half a reply", stream_error="overloaded_error", error_after=2))
    out = answer(anthropic(models))
    assert out.deltas == ["half", " a"]
    assert out.error is not None
    assert out.error.words == "The anthropic provider is overloaded right now (overloaded_error)."
    assert len(models.requests) == 1


def test_anthropic_401_words_name_its_variable(models: ScriptedModels) -> None:
    models.script(Reply(status=401))
    out = answer(anthropic(models))
    assert out.error is not None
    assert KEY not in str(out.error)
    assert "refused the key (401). Check ANTHROPIC_API_KEY" in out.error.words


def test_unknown_kind_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown provider kind"):
        make_provider(ProviderConfig("nope"), http=httpx.AsyncClient())  # type: ignore[arg-type]


ROOM = ("Ada", "Bob", "Cy")


def offline_request(
    speaker: str = "Bob", text: str = "Plan a picnic", room: tuple[str, ...] = ROOM
) -> ModelRequest:
    return ModelRequest(
        "", "You are Bob.", (Turn("user", text),), speaker=speaker, room=room, user_text=text
    )


def test_offline_replies_are_deterministic_and_labelled() -> None:
    request = offline_request(text="Plan a  picnic\nfor six")
    reply = offline_reply(request)
    assert reply == offline_reply(request)
    assert reply.startswith(f"{LABEL}\n\n**Bob** on what you wrote:")
    # A question of several lines keeps them, as they were written (issue 32).
    assert "on what you wrote:\n\n> Plan a picnic  \n> for six  \n\n" in reply
    assert offline_reply(replace(request, speaker="Ada")) != reply
    assert reply.count("\n- ") == 3
    # The user's own words are the subject, never "You asked".
    one_line = offline_reply(offline_request(text="Plan a picnic"))
    assert one_line.startswith(f"{LABEL}\n\n**Bob** on “Plan a picnic”:\n\n- ")
    assert "You asked" not in one_line


def test_offline_agents_answer_their_own_part_and_the_next_takes_up_the_last() -> None:
    text = "@Researcher find three options for a tiny dataset, @Writer draft one paragraph"
    room = ("Researcher", "Writer")
    first = offline_reply(offline_request("Researcher", text, room))
    assert "**Researcher** on “find three options for a tiny dataset”:" in first
    points = [line[2:] for line in first.split("\n") if line.startswith("- ")]
    assert len(points) == 3  # "three options"
    assert offline_reply(offline_request("Bob", "two ideas, please")).count("\n- ") == 2
    assert offline_reply(offline_request("Bob", "one idea each")).count("\n- ") == 1
    assert offline_reply(offline_request("Bob", "note number 1")).count("\n- ") == 3
    assert "@" not in first  # nobody asked them to take turns: the engine hands over

    # The Writer is handed the history as the rounds hand it (the Researcher's reply quoted).
    handed = quote_note("Researcher handed over to Writer")
    quoted = [text, quote_note("Researcher's turn"), quote_agent("Researcher", first), handed]
    history = "\n\n".join(quoted)
    request = ModelRequest(
        "", "", (Turn("user", history),), speaker="Writer", room=room, user_text=text
    )
    second = offline_reply(request)
    assert "**Writer** on “draft one paragraph”, building on what **Researcher** said:" in second
    said = [p.rstrip(".") for p in points]
    assert f"Researcher said three things: “{said[0]}”, “{said[1]}” and “{said[2]}”." in second
    assert "\n- " not in second  # one paragraph, in the Researcher's words

    # A reply from before the user's message is no reply of this round.
    earlier = "\n\n".join([quote_agent("Researcher", first), text])
    fresh = ModelRequest(
        "", "", (Turn("user", earlier),), speaker="Writer", room=room, user_text=text
    )
    assert "building on" not in offline_reply(fresh)


@pytest.mark.parametrize(
    ("text", "speaker", "part"),
    [
        ("@Researcher find options, @Writer draft it", "Researcher", "find options"),
        ("@Researcher find options, @Writer draft it.", "Writer", "draft it"),
        (
            "@Researcher and @Writer, take turns on it: one idea each.",
            "Researcher",
            "take turns on it: one idea each",
        ),
        ("Plan a picnic", "Bob", "Plan a picnic"),
        ("@Bob look here, @Writer there, and @Bob here too", "Bob", "look here here too"),
    ],
)
def test_offline_own_part_of_a_message(text: str, speaker: str, part: str) -> None:
    assert own_part(text, speaker, ("Researcher", "Writer", "Bob")) == part


@pytest.mark.parametrize(
    ("speaker", "text", "room", "hand_on"),
    [
        ("Bob", "Please take turns on this", ROOM, "@Cy, over to you."),
        ("Cy", "Let's DEBATE it", ROOM, "@Ada, over to you."),
        ("Ada", "go back and forth", ("Ada", "Ada", "Bob"), "@Bob, over to you."),
        ("Zed", "discuss, all of you", ROOM, "@Ada, over to you."),
        ("Ada", "a ping-pong of ideas", ("Ada",), None),
        ("Ada", "What is two plus two?", ROOM, None),
    ],
)
def test_offline_hands_on_only_when_asked_to_take_turns(
    speaker: str, text: str, room: tuple[str, ...], hand_on: str | None
) -> None:
    reply = offline_reply(offline_request(speaker, text, room))
    if hand_on is None:
        assert "@" not in reply
    else:
        assert reply.endswith(f"\n\n{hand_on}")
        assert reply.count("@") == 1


def test_offline_quote_is_short_clean_and_mentions_no_one() -> None:
    asked = "@Bob please   look at `this` **very**\n" + "long question " * 20
    assert quote(asked).startswith("Bob please look at this very\nlong question")
    assert len(quote(asked)) <= 101
    assert quote("# one\n\n\n>   two  \n") == "one\ntwo"
    assert quote(asked).endswith("question…")
    assert "@" not in offline_reply(offline_request("Ada", asked))
    assert "you did not ask anything" in offline_reply(offline_request("Ada", ""))


def test_offline_streams_word_by_word_with_its_delay() -> None:
    waits: list[float] = []

    async def sleep(seconds: float) -> None:
        waits.append(seconds)

    async def main() -> list[object]:
        provider = OfflineProvider(0.05, sleep=sleep)
        return [item async for item in provider.stream(offline_request())]

    *deltas, usage = asyncio.run(main())
    texts = [d.text for d in deltas if isinstance(d, TextDelta)]
    assert len(texts) == len(deltas) > 20
    assert all(len(t.split()) == 1 for t in texts)
    assert "".join(texts) == offline_reply(offline_request())
    assert waits == [0.05] * len(texts)
    assert usage == Usage(3 + 3, len(texts))  # "You are Bob." + "Plan a picnic"


def test_offline_with_no_delay_streams_line_by_line_and_counts_the_same_words() -> None:
    waits: list[float] = []

    async def sleep(seconds: float) -> None:
        waits.append(seconds)

    async def main(delay: float) -> list[object]:
        return [item async for item in OfflineProvider(delay, sleep=sleep).stream(request)]

    request = offline_request("Bob", "Plan a picnic, take turns")  # it hands on: one more line
    *pieces, usage = asyncio.run(main(0))
    texts = [p.text for p in pieces if isinstance(p, TextDelta)]
    reply = offline_reply(request)
    assert "".join(texts) == reply
    # One piece a line, the blank lines before it included.
    assert [t.strip() for t in texts] == [line for line in reply.split("\n") if line.strip()]
    assert waits == [0]  # still a chance to deliver a Stop
    *_, usage_by_words = asyncio.run(main(0.05))
    assert usage == usage_by_words  # the same reply, the same tokens, however it is cut


def test_offline_needs_no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*_: object) -> None:
        raise AssertionError("the offline provider touched the network")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "getaddrinfo", refuse)

    async def main() -> str:
        http = httpx.AsyncClient()
        await http.aclose()  # any use of a closed client fails
        provider = make_provider(ProviderConfig("offline"), http=http, offline_delay=0)
        items = [item async for item in stream_reply(provider, offline_request())]
        return "".join(i.text for i in items if isinstance(i, TextDelta))

    assert asyncio.run(main()) == offline_reply(offline_request())


def test_detect_prefers_a_key_and_copies_none(models: ScriptedModels) -> None:
    models.ollama_models = ["llama3.2:latest"]
    both = {"OPENAI_API_KEY": KEY, "ANTHROPIC_API_KEY": KEY}
    found = detect_default_provider(both, ollama_url=models.root_url)
    assert found == ProviderConfig("openai", "gpt-4o-mini")
    assert found.api_key is None
    found = detect_default_provider({"ANTHROPIC_API_KEY": KEY}, ollama_url=models.root_url)
    assert found == ProviderConfig("anthropic", "claude-3-5-haiku-latest")
    assert models.requests == []  # with a key there is no need to look for Ollama


def test_detect_finds_a_local_ollama_else_offline(models: ScriptedModels) -> None:
    models.ollama_models = ["llama3.2:latest", "qwen2.5:0.5b"]
    with httpx.Client() as http:
        found = detect_default_provider({"OPENAI_API_KEY": ""}, http, ollama_url=models.root_url)
    assert found == ProviderConfig("openai", "llama3.2:latest", f"{models.root_url}/v1")
    assert [(r.method, r.path) for r in models.requests] == [("GET", "/api/tags")]
    models.ollama_models = []
    assert detect_default_provider({}, ollama_url=models.root_url).kind == "offline"
    models.ollama_models = None  # something else on the port, answering 404
    assert detect_default_provider({}, ollama_url=models.root_url).kind == "offline"


def test_detect_without_ollama_is_offline_and_quick() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    started = time.monotonic()
    found = detect_default_provider({}, ollama_url=f"http://127.0.0.1:{port}")
    assert found == ProviderConfig("offline", "offline")
    assert time.monotonic() - started < 1.0


def test_a_key_that_cannot_be_sent_is_explained_without_showing_it(models: ScriptedModels) -> None:
    pasted = "“sk-smart-quoted”"
    out = answer(ProviderConfig("openai", "m", models.openai_url, pasted))
    assert out.error is not None
    assert out.error.words == (
        "The key for the openai provider has characters no key can have."
        " Check OPENAI_API_KEY or the agent's key."
    )
    assert models.requests == []


def test_a_responder_answers_each_agent_by_its_system_prompt(models: ScriptedModels) -> None:
    models.responder = lambda body: Reply(text=f"Answering as {body['system']}")
    for agent in ("Ada", "Bob"):
        request = ModelRequest("claude-test", agent, (Turn("user", "Hi"),))
        assert answer(anthropic(models), request).text == f"Answering as {agent}"


def test_anthropic_error_event_that_is_not_passing_is_not_retried(models: ScriptedModels) -> None:
    models.script(Reply(text="x", stream_error="invalid_request_error"), Reply(text="never sent"))
    out = answer(anthropic(models))
    assert out.error is not None
    assert out.error.words == (
        "The anthropic provider stopped with an error (invalid_request_error):"
        " scripted invalid_request_error"
    )
    assert (out.error.passing, len(models.requests)) == (False, 1)
