"""An outside agent's turn in a round: the user's message sent, and what came back kept.

Owns what happens once a round asks an outside agent (the driver, rounds/driver.py, says
`round.asking`, runs `ask` as the task Stop may cancel, then hands its result to `keep`):
- `ask` sends only the words of the user's message, with the chat's own A2A contextId for that
  agent, and stores nothing, so a Stop can never cut the keeping below in half;
- `keep` stores what came back: an answer taints the chat first (someone else's words are in it
  from now on, so Auto asks again before each run: the guard after reading), then is stored as an
  `outside` message with a `peer.message` event; input-required, and a failure after the agent
  did answer, are said in a note; an agent that never answered gets words for the round's end.
What the round does next is the engine's (rounds/engine.py).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..a2a.outside.service import OutsideAgents, OutsideError
from ..a2a.reading import Outcome
from ..store.chats import Store
from ..store.hub import Hub

# What an outside agent's answer means for you when it is not the whole story. A task that
# failed, was turned down, canceled, or asks for sign-in never gets here: OutsideAgents.ask
# raises OutsideError for those, and the note says so in its words.
OUTSIDE_STATE_WORDS = {
    "TASK_STATE_INPUT_REQUIRED": "{name} needs more from you: mention it again to answer.",
}


@dataclass
class OutsideTurns:
    """Asks outside agents for the round driver, and keeps what they leave in the chat."""

    store: Store
    hub: Hub
    outside: OutsideAgents

    async def ask(self, conversation_id: str, outside_id: str, text: str) -> Outcome | OutsideError:
        """Send `text` (the user's message, nothing else of the chat); its answer, or why none."""
        context_id = self.store.context_id(conversation_id, outside_id)
        try:
            return await self.outside.ask(outside_id, text, context_id)
        except OutsideError as error:
            return error

    async def keep(
        self,
        conversation_id: str,
        outside_id: str,
        name: str,
        turn: int,
        answer: Outcome | OutsideError,
    ) -> str | None:
        """Keep what `ask` brought back. Words when nothing came back at all (the round ends in
        error, never as if it had answered); None when the agent answered."""
        if isinstance(answer, OutsideError):
            failed = f"{name} did not answer: {answer.message}"
            if not answer.answered:
                return failed
            await self._note(conversation_id, failed)
            return None
        if answer.context_id:
            await self.store.set_context_id(conversation_id, outside_id, answer.context_id)
        if answer.text:
            # The taint first: the chat never holds these words without it.
            await self.store.set_taint(conversation_id, {"kind": "person", "by": name})
            place = {"turn": turn, "handed_by": None}
            said = await self.store.add_message(
                conversation_id, "outside", answer.text, agent=outside_id, round=place
            )
            self.hub.message(said, name)
            event = await self.store.add_event(
                conversation_id, "peer.message", {"agent": outside_id, "text": answer.text}
            )
            self.hub.event(event)
        words = OUTSIDE_STATE_WORDS.get(answer.state)
        if words:
            await self._note(conversation_id, words.format(name=name))
        return None

    async def _note(self, conversation_id: str, text: str) -> None:
        self.hub.message(await self.store.add_message(conversation_id, "note", text))
