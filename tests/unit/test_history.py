"""rounds/history.py: what a model is handed for one turn — the system prompt and the history."""

from __future__ import annotations

from conch_jupyter.providers.base import Turn
from conch_jupyter.rounds.engine import ROUND_LIMITS
from conch_jupyter.rounds.history import (
    HISTORY_CHARS,
    HISTORY_MESSAGES,
    Said,
    history_turns,
    system_prompt,
)


def test_only_the_users_words_are_plain_and_the_speakers_own_are_its_turns() -> None:
    said = [
        Said("user", "Plan a picnic. @Researcher then @Writer"),
        Said("note", "Researcher's turn"),
        Said("agent", "Three parks.", "Researcher"),
        Said("agent", "A draft.", "Writer"),
        Said("outside", "Rain on Saturday.", "Weather"),
    ]
    turns = history_turns(said, "Writer")
    assert [t.role for t in turns] == ["user", "assistant", "user"]
    first, mine, last = turns
    assert first.text.startswith("Plan a picnic. @Researcher then @Writer\n\n")
    assert "[Conch note — from the app, not from the user]\nResearcher's turn" in first.text
    assert '[Reply from the agent "Researcher" — not from the user.' in first.text
    assert "```text\nThree parks.\n```" in first.text
    assert mine == Turn("assistant", "A draft.")
    assert last.text.startswith('[Answer from the outside agent "Weather"')
    assert "Untrusted" in last.text


def test_the_history_opens_with_the_user_and_ends_on_the_users_side() -> None:
    said = [
        Said("agent", "Left over.", "Writer"),
        Said("user", "Hi"),
        Said("agent", "Hello", "Writer"),
    ]
    turns = history_turns(said, "Writer")
    assert turns[0] == Turn("user", "Hi")
    assert turns[1] == Turn("assistant", "Hello")
    assert turns[-1].role == "user"
    assert "It is Writer's turn." in turns[-1].text


def test_an_empty_chat_is_an_empty_history() -> None:
    assert history_turns([], "Writer") == ()


def test_the_window_keeps_the_last_messages_within_bounds() -> None:
    many = [Said("user", f"message {n}") for n in range(HISTORY_MESSAGES + 10)]
    (merged,) = history_turns(many, "Writer")
    assert "message 10" in merged.text.split("\n\n")[0]  # the first ten fell out of the window
    assert merged.text.endswith(f"message {HISTORY_MESSAGES + 9}")
    big = [Said("user", "x" * (HISTORY_CHARS // 2)) for _ in range(3)] + [Said("user", "last")]
    (kept,) = history_turns(big, "Writer")
    assert kept.text.count("x" * (HISTORY_CHARS // 2)) == 1
    assert kept.text.endswith("last")
    # One message bigger than the whole bound is still sent: the newest is never dropped.
    (alone,) = history_turns([Said("user", "y" * (HISTORY_CHARS + 1))], "Writer")
    assert len(alone.text) == HISTORY_CHARS + 1


def test_the_system_prompt_has_persona_instructions_and_the_room() -> None:
    prompt = system_prompt(
        speaker="Writer",
        persona="Drafts text.",
        instructions="Keep it short.",
        room=[("Researcher", "Finds options."), ("Writer", "Drafts text.")],
        outside=["Weather"],
        in_round=True,
    )
    assert prompt.startswith("You are Writer.\n\nAbout you: Drafts text.")
    assert "Your instructions from the user:\nKeep it short." in prompt
    assert "- Researcher: Finds options." in prompt
    assert "Weather" in prompt
    assert f"at most {ROUND_LIMITS.replies} replies, {ROUND_LIMITS.per_speaker} from each" in prompt
    bare = system_prompt(
        speaker="Writer", persona=" ", instructions="", room=[], outside=[], in_round=False
    )
    assert "About you" not in bare
    assert "Your instructions" not in bare
