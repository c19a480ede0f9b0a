"""The chat face's words (chat_rooms/words.py): who wrote a message, Conch's commands, the lines
Conch posts (each sealed on its way in, core/chat_seal.py; tests/unit/test_chat_seal.py), and an
outside agent's words marked as theirs."""

from __future__ import annotations

import pytest
from markdown_it import MarkdownIt

from conch_jupyter.chat_rooms.words import (
    FROM_A_CLIENT,
    FROM_THE_SERVER,
    HOW_TO_ANSWER,
    Command,
    agent_user,
    command_in,
    end_line,
    from_elsewhere,
    how_to_continue,
    initials_of,
    outside_words,
    question_line,
    round_line,
    stopped_reply,
    welcome_line,
    writer_of,
)
from conch_jupyter.core.chat_seal import seal_for_chat


@pytest.mark.parametrize(
    ("action", "message_id", "writer"),
    [
        (FROM_A_CLIENT, "m1", "person"),
        (FROM_THE_SERVER, "m1", "other"),  # a persona, or anyone writing on the server
        (FROM_THE_SERVER, "mine", "ours"),  # known by id, whatever the sender says
        (FROM_A_CLIENT, "mine", "ours"),
        ("client_msg_edited", "m1", None),
        ("server_msg_updated", "m1", None),
    ],
)
def test_who_wrote_a_message_is_read_from_where_it_came_and_conchs_own_ids(
    action: str, message_id: str, writer: str | None
) -> None:
    assert writer_of(action, message_id, {"mine"}) == writer


@pytest.mark.parametrize(
    ("body", "command"),
    [
        ("/stop", Command("stop")),
        ("  /STOP ", Command("stop")),
        ("/allow", Command("allow")),
        ("/deny t_0123abcd", Command("deny", "t_0123abcd")),
        ("/continue", Command("continue")),
        (" /Continue ", Command("continue")),
        ("/continue t_1", None),
        ("please /continue", None),
        ("/allow t_1 please", None),
        ("/stop now", None),
        ("please /stop", None),
        ("@Writer /stop", None),
        ("/stopping", None),
        ("", None),
    ],
)
def test_a_command_is_a_message_that_is_one_and_nothing_else(
    body: str, command: Command | None
) -> None:
    assert command_in(body) == command


def test_bot_users_are_named_by_id_with_initials() -> None:
    assert agent_user("a_12") == "conch-a_12"
    assert initials_of("Researcher") == "R"
    assert initials_of("deep research") == "DR"
    assert initials_of("code_writer-two") == "CW"


def test_a_question_says_who_asks_what_and_how_to_answer() -> None:
    line = question_line(
        {"call_id": "t_1", "name": "Co*der", "title": "run <b>tests</b>", "detail": "pytest ```x"}
    )
    assert line.startswith("**Co\\*der** asks to run \\<b\\>tests\\<\\/b\\> (question `t_1`).")
    assert "\n````\npytest ```x\n````\n" in line  # the detail cannot close its fence
    html = _html(seal_for_chat(line))
    assert "<strong>Co*der</strong> asks to run &lt;\u2060b&gt;tests&lt;/b&gt;" in html
    assert "<pre><code>pytest ```x\n</code></pre>" in html
    assert line.endswith(HOW_TO_ANSWER)
    assert "/allow" in HOW_TO_ANSWER
    assert "/deny" in HOW_TO_ANSWER


def test_the_end_is_one_line_with_what_was_said_first_and_the_cost() -> None:
    words = "Researcher and Writer took turns · 2 replies"
    assert end_line(words, None, None) == words
    assert end_line(words, None, 0.0) == words
    assert end_line(words, "Writer could not answer: 500", 0.01234) == (
        f"Writer could not answer: 500 · {words} · $0.0123"
    )


def _html(markdown: str) -> str:
    return MarkdownIt("commonmark").render(markdown)


def test_an_outside_agents_words_are_marked_and_sealed_no_pictures_and_html_as_text() -> None:
    text = (
        "Here: ![tracker](https://evil.example/p.png) and ![ref][r]\n"
        "<img src=https://evil.example/q.png> <b>bold</b> &amp;\n\n"
        "[r]: https://evil.example/r.png\n"
        "```\n<b>kept as code</b>\n```"
    )
    out = seal_for_chat(outside_words(text, "Weather"))
    html = MarkdownIt("commonmark", {"html": True}).render(out)
    assert "<img" not in html
    assert "<b>" not in html  # raw HTML is text, in code and out
    assert "&lt;\u2060b&gt;bold&lt;\u2060/b&gt;" in html
    assert "&lt;\u2060b&gt;kept as code&lt;\u2060/b&gt;" in html  # the joiner shows nothing
    assert out.startswith("*An outside agent's words (Weather): no pictures, HTML shown as text.*")


def test_an_unclosed_fence_cannot_swallow_the_mark() -> None:
    html = _html(outside_words("```\nopen", "W"))
    assert "<em>An outside agent" in html


def test_a_message_sent_through_the_api_is_shown_as_text() -> None:
    assert seal_for_chat(from_elsewhere("@Writer <img src=x>")) == (
        "*Sent from Conch's view or API:* @Writer <\u2060img src=x>"
    )


@pytest.mark.parametrize(
    ("reason", "limit", "said"),
    [
        ("replies", "round", "`/continue` to go on"),
        ("speaker", "round", "`/continue` to go on"),
        ("loop", "round", "`/continue` to go on"),
        ("spend", "round", "`/continue` to go on"),
        ("spend", "chat", "raise the limit, then `/continue` to go on"),
        ("spend", "month", "raise the limit, then `/continue` to go on"),
        ("done", "round", None),
        ("you", "round", None),
        ("stopped", "round", None),
        ("outside", "round", None),
        ("error", "round", None),
    ],
)
def test_the_end_line_says_how_to_continue_after_a_bound_only(
    reason: str, limit: str, said: str | None
) -> None:
    assert how_to_continue(reason, limit) == said
    words = "Ann and Bob took turns · 5 replies"
    assert end_line(words, None, None, said) == (f"{words} · {said}" if said else words)


def test_the_round_line_says_who_has_the_floor_and_which_reply_of_the_bound() -> None:
    assert round_line("Researcher handed over to Writer", 2, 8) == (
        "Researcher handed over to Writer · 2 of 8"
    )
    assert round_line("Researcher's turn", None, 8) == "Researcher's turn"
    assert "<b>" not in _html(seal_for_chat(round_line("<b>Eve</b>'s turn", 1, 8)))


def test_the_welcome_names_who_can_be_mentioned_and_how_to_stop() -> None:
    line = welcome_line(["Researcher", "Writer", "<i>Eve</i>"])
    assert line.startswith(
        "Conch's agents are in this chat: @Researcher, @Writer, @\\<i\\>Eve\\<\\/i\\>."
    )
    assert "`/stop` stops it at once" in line
    assert "Type `/` for Conch's commands." in line
    assert welcome_line([]).startswith("Conch is in this chat, with no agents yet")


def test_a_stopped_reply_is_marked_on_itself() -> None:
    assert stopped_reply("Half a thought   \n").startswith("Half a thought\n\n*(Stopped here: ")
    assert stopped_reply("") == stopped_reply("  ")
    assert "Stopped here" in stopped_reply("")
    # Cut inside code: the code is closed, so the mark is no code.
    assert "<em>(Stopped here" in _html(stopped_reply("Look:\n~~~\nhalf"))
