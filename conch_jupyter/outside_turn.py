"""An outside agent's turn in a round: the user's message sent, and what came back kept.

Owns what happens once a round asks an outside agent (the driver, service.py, says
`round.asking` and may cancel this on Stop): only the words of the user's message go out, with
the chat's own A2A contextId for that agent; an answer is stored as an `outside` message with a
`peer.message` event and taints the chat (someone else's words are in it from now on, so Auto
asks again before each run: the guard after reading); a task state that is not a plain answer,
or a failure after the agent did answer, is said in a note. What the round does next is the
engine's (rounds.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .a2a.outside.service import OutsideAgents, OutsideError
from .hub import Hub
from .store import Store

# What an outside agent's task state means for you, when it is not a plain answer.
OUTSIDE_STATE_WORDS = {
    "TASK_STATE_INPUT_REQUIRED": "{name} needs more from you: mention it again to answer.",
    "TASK_STATE_AUTH_REQUIRED": (
        "{name} asks to be authorised, which Conch cannot do for it: check its key in Settings."
    ),
    "TASK_STATE_FAILED": "{name} says its task failed.",
    "TASK_STATE_REJECTED": "{name} turned the request down.",
    "TASK_STATE_CANCELED": "{name}'s task was canceled.",
}


@dataclass
class OutsideTurns:
    """Asks outside agents for the round driver: one call, and what it leaves in the chat."""

    store: Store
    hub: Hub
    outside: OutsideAgents

    async def ask(
        self, conversation_id: str, outside_id: str, name: str, text: str, turn: int
    ) -> str | None:
        """Send `text` (the user's message, nothing else of the chat) to the outside agent and
        keep what it answers. Words when nothing came back at all (the round ends in error,
        never as if it had answered); None when it answered, in words or in a state."""
        context_id = self.store.context_id(conversation_id, outside_id)
        try:
            outcome = await self.outside.ask(outside_id, text, context_id)
        except OutsideError as error:
            failed = f"{name} did not answer: {error.message}"
            if not error.answered:
                return failed
            self._note(conversation_id, failed)
            return None
        if outcome.context_id:
            self.store.set_context_id(conversation_id, outside_id, outcome.context_id)
        if outcome.text:
            place = {"turn": turn, "handed_by": None}
            said = self.store.add_message(
                conversation_id, "outside", outcome.text, agent=outside_id, round=place
            )
            self._publish(conversation_id, {**said.to_json(), "name": name})
            event = self.store.add_event(
                conversation_id, "peer.message", {"agent": outside_id, "text": outcome.text}
            )
            self.hub.publish(conversation_id, {"type": "event", "event": event.to_json()})
            # Someone else's words are in the chat from now on.
            self.store.set_taint(conversation_id, {"kind": "person", "by": name})
        words = OUTSIDE_STATE_WORDS.get(outcome.state)
        if words:
            self._note(conversation_id, words.format(name=name))
        return None

    def _note(self, conversation_id: str, text: str) -> None:
        note = self.store.add_message(conversation_id, "note", text)
        self._publish(conversation_id, note.to_json())

    def _publish(self, conversation_id: str, message: dict[str, Any]) -> None:
        self.hub.publish(conversation_id, {"type": "message", "message": message})
