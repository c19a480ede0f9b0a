"""The /pairings API: who may come in through the A2A door, as thin HTTP adapters.

  GET    conch/api/pairings              → {"pairings": [Pairing]} (never a key)
  POST   conch/api/pairings {agents, remote?, label?}
                                          → 201 the pairing plus `key` and `paste`, this once
  DELETE conch/api/pairings/{id}         → 204; the key opens nothing from the next request on
  GET    conch/api/pairings/{id}/chats   → {"chats": [...]}, "What it said"

ConchHandlers like the rest of the API: Jupyter auth, or the kernel key for reading only (code
an agent runs must never let anyone in); a door key opens nothing here. The address handed to
the other side ends in a slash: clients that resolve the card relative to the address they were
given (the JavaScript SDK does) look in the agent's folder.
"""

from __future__ import annotations

from jupyter_server.auth.decorator import authorized
from pydantic import Field, StrictBool, StrictStr
from tornado import web

from ..agents.agent_store import AgentError
from ..core.policy import check_door, check_door_remote
from ..door.address import endpoint_url
from .base import ApiError, ConchHandler
from .bodies import Body, Text


class PairingIn(Body):
    agents: list[StrictStr] = Field(min_length=1, max_length=20)
    remote: StrictBool = False
    label: Text = Field(default="", max_length=80)


REMOTE_NOTE = (
    "Marked remote: this key also works from other computers, only over HTTPS and only while "
    "c.ConchApp.door_remote is on (it is {state})."
)


PAIRING_SETTINGS = ("let agents in through the door", "Settings (%conch pairings)")


class PairingsHandler(ConchHandler):
    users_own = PAIRING_SETTINGS

    @web.authenticated
    @authorized
    def get(self) -> None:
        pairings = self.conch.pairings.list()
        self.reply({"pairings": [p.to_public() for p in pairings]})

    @web.authenticated
    @authorized
    def post(self) -> None:
        body = self.body(PairingIn)
        check_door(self.conch.policy)  # 403 `policy`: the administrator closed the door
        check_door_remote(self.conch.policy, body.remote)
        try:
            agents = [self.conch.agents.get(agent_id) for agent_id in body.agents]
        except AgentError as error:
            # Not the AgentError's own 404: the agent is named in the body, not the address,
            # so the request is what is wrong (400).
            raise ApiError(400, "unknown_agent", error.message) from None
        coding = [a.name for a in agents if a.provider.kind == "acp"]
        if coding:
            # The door's guests answer in words only; a coding agent works on this computer.
            raise ApiError(
                400,
                "coding_agent",
                f"{coding[0]} is a coding agent (ACP): it works on this computer's files and"
                " commands, so the door never seats it. Pair one of your other agents.",
            )
        made = self.conch.pairings.create(
            [(a.id, a.name) for a in agents],
            address=endpoint_url(self, agents[0].id) + "/",
            remote=body.remote,
            label=body.label,
        )
        data = {**made.pairing.to_public(), "key": made.key, "paste": made.paste}
        if made.pairing.remote:
            state = "on" if self.conch.door_gate.remote else "off"
            data["note"] = REMOTE_NOTE.format(state=state)
        self.set_header("Cache-Control", "no-store")  # the key is shown this once
        self.reply(data, 201)


class PairingHandler(ConchHandler):
    users_own = PAIRING_SETTINGS

    @web.authenticated
    @authorized
    async def delete(self, pairing_id: str) -> None:
        self.conch.pairings.delete(pairing_id)
        await self.conch.peers.forget(pairing_id)
        self.set_status(204)
        self.finish()


class PairingChatsHandler(ConchHandler):
    """ "What it said": the chats a pairing's door opened, each readable at /conversations/{id}."""

    @web.authenticated
    @authorized
    def get(self, pairing_id: str) -> None:
        self.conch.pairings.get(pairing_id)  # 404 for no such pairing
        store = self.conch.store
        chats = [
            {**c.to_json(), "spent_usd": round(store.spent(c.id), 6)}
            for c in store.peer_chats(pairing_id)
        ]
        self.reply({"chats": chats})


def pairing_routes() -> list[tuple[str, type[ConchHandler]]]:
    pairing = r"conch/api/pairings/(?P<pairing_id>[^/]{1,64})"
    return [
        (r"conch/api/pairings", PairingsHandler),
        (pairing, PairingHandler),
        (pairing + r"/chats", PairingChatsHandler),
    ]
