"""The /outside API: outside agents (A2A agents elsewhere) as thin HTTP adapters.

  GET    conch/api/outside                → {"outside": [OutsideAgent]}
  POST   conch/api/outside {paste, name?} → 201 OutsideAgent (its card read; key kept sealed)
  GET    conch/api/outside/{id}           → OutsideAgent
  PATCH  conch/api/outside/{id} {name}    → OutsideAgent, renamed (its id stays)
  DELETE conch/api/outside/{id}           → 204 (the entry and its key)
  POST   conch/api/outside/repair         → {"outside": [OutsideAgent]} ("Repair everything")
  POST   conch/api/outside/{id}/repair {accept_key?, thumbprint?} → OutsideAgent (its card read
         again; with accept_key, the key its card now shows replaces the one pinned — if given,
         only when it is the `thumbprint` the user was shown, null for "not signed", else 409
         `key_changed`; the user's auth only)

An OutsideAgent is {id, name, address, claim, has_key, last_problem, version, created,
clashes_with, signed: {verified, kid, thumbprint} | null, key_change: {kid, thumbprint} | null
(both null: no longer signed), signature_problem}: never a key. A card whose signature does not
check out is 422 `bad_signature`, at paste and when a key is to be accepted. A paste Conch cannot
read is 400; an address the guard refuses is 400 too (asking again will not help); an agent whose
card cannot be read or used is 422, with the reason in words. A name that is not a name is 400; one
that clashes with one of your agents' names (or reads as another outside agent's) is 409
`name_taken`, naming the clash. Each status is the OutsideError's own (a2a/outside/listing.py); the
handlers let it through.
"""

from __future__ import annotations

from jupyter_server.auth.decorator import authorized
from pydantic import Field
from tornado import web

from ..a2a.outside.service import ANY_KEY
from .base import ConchHandler
from .bodies import Body, Text


class PasteIn(Body):
    paste: str = Field(min_length=1, max_length=10_000)
    name: Text | None = Field(default=None, max_length=200)


class RenameIn(Body):
    name: Text = Field(max_length=200)


class RepairIn(Body):
    accept_key: bool = False
    thumbprint: str | None = Field(default=None, max_length=100)  # the key the user was shown


OUTSIDE_SETTINGS = ("add, rename, remove or repair outside agents", "Settings (%conch outside)")


class OutsideListHandler(ConchHandler):
    users_own = OUTSIDE_SETTINGS

    @web.authenticated
    @authorized
    def get(self) -> None:
        self.reply({"outside": [a.to_public() for a in self.conch.outside.list()]})

    @web.authenticated
    @authorized
    async def post(self) -> None:
        body = self.body(PasteIn)
        agent = await self.conch.outside.add(body.paste, body.name)
        self.conch.rounds.names_changed()
        self.reply(agent.to_public(), 201)


class OutsideAgentHandler(ConchHandler):
    users_own = OUTSIDE_SETTINGS

    @web.authenticated
    @authorized
    def get(self, outside_id: str) -> None:
        self.reply(self.conch.outside.get(outside_id).to_public())

    @web.authenticated
    @authorized
    def patch(self, outside_id: str) -> None:
        body = self.body(RenameIn)
        renamed = self.conch.outside.rename(outside_id, body.name)
        self.conch.rounds.names_changed()
        self.reply(renamed.to_public())

    @web.authenticated
    @authorized
    def delete(self, outside_id: str) -> None:
        self.conch.outside.remove(outside_id)
        self.conch.rounds.names_changed()
        self.set_status(204)
        self.finish()


class OutsideRepairHandler(ConchHandler):
    users_own = OUTSIDE_SETTINGS

    @web.authenticated
    @authorized
    async def post(self) -> None:
        agents = await self.conch.outside.repair()
        self.conch.rounds.names_changed()
        self.reply({"outside": [a.to_public() for a in agents]})


class OutsideAgentRepairHandler(ConchHandler):
    users_own = OUTSIDE_SETTINGS  # so the kernel key cannot accept a key

    @web.authenticated
    @authorized
    async def post(self, outside_id: str) -> None:
        body = self.body(RepairIn) if self.request.body else RepairIn()
        seen = body.thumbprint if "thumbprint" in body.model_fields_set else ANY_KEY
        agent = await self.conch.outside.repair_one(
            outside_id, accept_key=body.accept_key, seen=seen
        )
        self.conch.rounds.names_changed()
        self.reply(agent.to_public())


def outside_routes() -> list[tuple[str, type[ConchHandler]]]:
    """Before conch/api's catch-all; /repair before /{id}, whose ids never are "repair"."""
    return [
        (r"conch/api/outside", OutsideListHandler),
        (r"conch/api/outside/repair", OutsideRepairHandler),
        (r"conch/api/outside/(?P<outside_id>[^/]{1,100})/repair", OutsideAgentRepairHandler),
        (r"conch/api/outside/(?P<outside_id>[^/]{1,100})", OutsideAgentHandler),
    ]
