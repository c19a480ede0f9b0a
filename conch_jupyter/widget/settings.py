"""SettingsWidget: your agents, outside agents, and the agents that can talk to yours.

Where the page was served by the Jupyter server running Conch, the view reads and changes all of
this straight from the server (js/settings-source.js) and this widget only says which section to
show. Elsewhere (the relay) each list is a trait the view draws and each button is a custom
message handled here, as the Python side's own calls are. A section
whose API this server does not have (yet) says so in words instead of failing. A pairing's key
is shown once: it goes to the view in a message of its own and is never kept in a trait, so it
cannot end up saved in the notebook with the widget state.
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import traitlets

from ..client import ConchClientError
from .base import Action, ClientFactory, KernelWidget

SECTIONS = ("agents", "outside", "pairings")
UNAVAILABLE = {
    "outside": "Outside agents are not available on this server.",
    "pairings": "Letting other agents in is not available on this server.",
}
AGENT_FIELDS = ("name", "persona", "instructions", "provider", "price")
READ_ONLY = (
    "Read-only here: this page reaches Conch only through the notebook's kernel, and the kernel"
    " can read settings but not change them. Change them in JupyterLab or Notebook 7"
    " (%conch agents there)."
)


class SettingsWidget(KernelWidget):
    """Settings → Agents, drawn in the notebook."""

    section = traitlets.Unicode("agents").tag(sync=True)
    agents = traitlets.List(traitlets.Dict()).tag(sync=True)
    # None: this server has no such API (the view says so in `unavailable`).
    outside = traitlets.List(traitlets.Dict(), allow_none=True, default_value=[]).tag(sync=True)
    pairings = traitlets.List(traitlets.Dict(), allow_none=True, default_value=[]).tag(sync=True)
    unavailable = traitlets.Dict().tag(sync=True)
    # What a pairing's agent said: {pairing, chats: [{id, created, conversation}], note}, each
    # chat as the server sent it (the view draws it, as it draws the chat).
    said = traitlets.Dict(allow_none=True, default_value=None).tag(sync=True)
    problem = traitlets.Dict().tag(sync=True)  # section -> words
    working = traitlets.Unicode("").tag(sync=True)  # the action running now, if any
    # Why nothing can be changed from here, or "": the relay holds only the kernel key.
    read_only = traitlets.Unicode("").tag(sync=True)
    # What the server's administrator locked (GET /policy's "locked"), drawn as locked.
    locked = traitlets.Dict().tag(sync=True)

    def __init__(
        self,
        section: str = "agents",
        *,
        client_factory: ClientFactory | None = None,
        **kwargs: Any,
    ) -> None:
        if section not in SECTIONS:
            raise ValueError(f"section must be one of {', '.join(SECTIONS)}")
        super().__init__(client_factory=client_factory, view="settings", section=section, **kwargs)
        with contextlib.suppress(ConchClientError):  # no server found: the refresh says so
            self.read_only = READ_ONLY if self.client().reads_only else ""
        self.act(self._refresh({}))

    def actions(self) -> Mapping[str, Action]:
        return {
            "refresh": self._refresh,
            "agent.save": self._save_agent,
            "agent.remove": self._remove_agent,
            "outside.add": self._add_outside,
            "outside.rename": self._rename_outside,
            "outside.remove": self._remove_outside,
            "outside.repair": self._repair_outside,
            "outside.accept_key": self._accept_outside_key,
            "pairing.add": self._add_pairing,
            "pairing.remove": self._remove_pairing,
            "pairing.said": self._pairing_said,
            "said.close": self._close_said,
        }

    def say_problem(self, words: str) -> None:
        self.problem = {**self.problem, self.section: words}
        self.working = ""

    # --- loading ---

    async def _refresh(self, _content: dict[str, Any]) -> None:
        client = self.client()
        try:
            self.locked = dict((await client.policy()).get("locked") or {})
        except ConchClientError as error:
            if error.status not in (404, 405, 501):  # an older server: nothing locked
                raise
            self.locked = {}
        self.agents = await client.agents()
        await self._load("outside", client.outside)
        await self._load("pairings", client.pairings)

    async def _load(
        self, section: str, fetch: Callable[[], Awaitable[list[dict[str, Any]]]]
    ) -> None:
        try:
            rows: list[dict[str, Any]] | None = await fetch()
            words = ""
        except ConchClientError as error:
            if error.status not in (404, 405, 501):
                raise
            rows, words = None, UNAVAILABLE[section]
        self.set_trait(section, rows)
        self.unavailable = {**self.unavailable, section: words}

    async def _act(
        self,
        name: str,
        section: str,
        work: Callable[[], Awaitable[None]],
        *,
        done: str = "",
        reads: bool = False,
    ) -> None:
        """Run one action: say it is running, then done or its problem in words. A change is not
        even asked for where only the kernel key is held (`read_only`): the server refuses it."""
        if self.read_only and not reads:
            self.problem = {**self.problem, section: self.read_only}
            self.send({"type": "done", "action": name, "ok": False, "code": "only_the_user"})
            return
        self.working = name
        self.problem = {**self.problem, section: ""}
        try:
            await work()
        except ConchClientError as error:
            self.problem = {**self.problem, section: error.message}
            # The code lets the view ask for what is missing (a name, on `name_taken`).
            self.send({"type": "done", "action": name, "ok": False, "code": error.code})
        else:
            self.send({"type": "done", "action": name, "ok": True, "words": done})
        finally:
            self.working = ""

    # --- your agents ---

    async def _save_agent(self, content: dict[str, Any]) -> None:
        fields = content.get("agent") or {}
        body = {k: v for k, v in fields.items() if k in AGENT_FIELDS}
        agent_id = content.get("id")

        async def work() -> None:
            client = self.client()
            if agent_id:
                await client.update_agent(str(agent_id), **body)
            else:
                await client.create_agent(**body)
            self.agents = await client.agents()

        await self._act("agent.save", "agents", work)

    async def _remove_agent(self, content: dict[str, Any]) -> None:
        async def work() -> None:
            await self.client().delete_agent(str(content.get("id")))
            self.agents = await self.client().agents()

        await self._act("agent.remove", "agents", work)

    # --- outside agents ---

    async def _add_outside(self, content: dict[str, Any]) -> None:
        paste = str(content.get("paste", "")).strip()
        if not paste:
            self.problem = {**self.problem, "outside": "Paste the agent's address first."}
            return

        name = str(content.get("name") or "").strip() or None  # else the card's, if it is clear

        async def work() -> None:
            await self.client().add_outside(paste, name)
            await self._load("outside", self.client().outside)

        await self._act("outside.add", "outside", work)

    async def _rename_outside(self, content: dict[str, Any]) -> None:
        async def work() -> None:
            await self.client().rename_outside(str(content.get("id")), str(content.get("name")))
            await self._load("outside", self.client().outside)

        await self._act("outside.rename", "outside", work)

    async def _remove_outside(self, content: dict[str, Any]) -> None:
        async def work() -> None:
            await self.client().delete_outside(str(content.get("id")))
            await self._load("outside", self.client().outside)

        await self._act("outside.remove", "outside", work)

    async def _accept_outside_key(self, content: dict[str, Any]) -> None:
        async def work() -> None:
            seen = content.get("thumbprint")
            await self.client().accept_outside_key(
                str(content.get("id")), seen if isinstance(seen, str) else None
            )
            await self._load("outside", self.client().outside)

        await self._act("outside.accept_key", "outside", work)

    async def _repair_outside(self, _content: dict[str, Any]) -> None:
        async def work() -> None:
            self.outside = await self.client().repair_outside()

        await self._act("outside.repair", "outside", work)

    # --- agents that can talk to yours ---

    async def _add_pairing(self, content: dict[str, Any]) -> None:
        agents = [str(a) for a in content.get("agents") or []]
        if not agents:
            self.problem = {**self.problem, "pairings": "Choose at least one of your agents."}
            return

        async def work() -> None:
            made = await self.client().create_pairing(agents, remote=bool(content.get("remote")))
            keys = ("id", "agents", "remote", "address", "key", "paste", "note")
            shown = {k: made.get(k) for k in keys}
            self.send({"type": "pairing.created", **shown})
            await self._load("pairings", self.client().pairings)

        await self._act("pairing.add", "pairings", work)

    async def _remove_pairing(self, content: dict[str, Any]) -> None:
        async def work() -> None:
            await self.client().delete_pairing(str(content.get("id")))
            if self.said and self.said.get("pairing") == content.get("id"):
                self.set_trait("said", None)
            await self._load("pairings", self.client().pairings)

        await self._act("pairing.remove", "pairings", work)

    async def _pairing_said(self, content: dict[str, Any]) -> None:
        pairing = str(content.get("id"))

        async def work() -> None:
            client = self.client()
            chats = []
            for chat in await client.pairing_chats(pairing):
                # Raw, as the server keeps it: the view draws it as items (js/timeline.js).
                conversation = await client.conversation(chat["id"])
                chats.append(
                    {"id": chat["id"], "created": chat.get("created"), "conversation": conversation}
                )
            note = "" if chats else "It has not said anything yet."
            self.said = {"pairing": pairing, "chats": chats, "note": note}

        await self._act("pairing.said", "pairings", work, reads=True)

    async def _close_said(self, _content: dict[str, Any]) -> None:
        self.set_trait("said", None)
