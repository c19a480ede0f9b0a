"""ConchApp: the Jupyter server extension, the one source of truth for chats, rounds and agents.

It opens the data folder, builds the services once, registers the handlers under `base_url`,
publishes CONCH_SERVER_URL and CONCH_KERNEL_KEY for kernels started after it, and ends every
running round when the server stops (rounds are never resumed).
"""

from __future__ import annotations

import os
import secrets
import time
from pathlib import Path
from typing import Any

import httpx
from jupyter_core.paths import jupyter_data_dir
from jupyter_server.extension.application import ExtensionApp
from tornado import web
from traitlets import Bool, Dict, Float, Int, Unicode

from .. import __version__
from ..a2a.door.rules import DoorGate
from ..a2a.outside.service import OutsideAgents
from ..agents.agent_store import AgentStore
from ..coding.mcp import McpEndpoint
from ..coding.rules import IDLE_SECONDS, LIVE_SESSIONS, QUIET_SECONDS
from ..coding.sessions import CodingAgents
from ..core.files import ensure_private_dir
from ..core.policy import (
    BadPolicy,
    Policy,
    PolicyRefused,
    check_provider,
    parse_policy,
)
from ..core.sealed import SealedFile
from ..door.http import install_door
from ..door.pairing import PairingStore
from ..door.service import PeerService
from ..door.signer import DoorSigner
from ..mcp_servers.service import McpServerService
from ..notebook.documents import NotebookDocuments
from ..notebook.kernel import NotebookKernels
from ..notebook.service import NotebookTools
from ..providers import address_of, detect_default_provider
from ..providers.base import ProviderConfig
from ..rounds.driver import RoundService
from ..rounds.spend import Budget
from ..rounds.turn import Turns
from ..store.chats import Store
from ..store.hub import Hub
from .handlers import API_NOT_FOUND, api_routes
from .mcp_handler import McpHandler
from .mcp_server_handlers import mcp_server_routes
from .outside_handlers import outside_routes
from .pairing_handlers import pairing_routes
from .services import ConchServices

KERNEL_KEY_ENV = "CONCH_KERNEL_KEY"
SERVER_URL_ENV = "CONCH_SERVER_URL"
# The server's root, so a kernel can turn the full path Jupyter gives it (JPY_SESSION_NAME)
# back into its notebook's path under the root, as the API spells it.
ROOT_DIR_ENV = "CONCH_ROOT_DIR"


def serverapp_settings(server: Any) -> dict[str, Any]:
    """The server's tornado settings (empty without a server)."""
    web_app = getattr(server, "web_app", None) if server is not None else None
    settings = getattr(web_app, "settings", None)
    return settings if isinstance(settings, dict) else {}


def allowed_default(policy: Policy, found: ProviderConfig) -> ProviderConfig:
    """The provider the first agents get: the one found (a key in the environment, a local
    Ollama), unless the administrator's policy does not allow it; then the offline model."""
    try:
        check_provider(policy, found.kind, address_of(found.kind, found.base_url))
    except PolicyRefused:
        return ProviderConfig("offline", model="offline")
    return found


def routes() -> list[tuple[str, type[web.RequestHandler]]]:
    """Every Conch route, relative to base_url: the API, its catch-all last. (The door is no
    route: initialize_handlers puts it first in the server's router.)"""
    return [
        *api_routes(),
        *outside_routes(),
        *pairing_routes(),
        *mcp_server_routes(),
        (r"conch/mcp", McpHandler),  # the notebook's tools for coding agents (their own keys)
        API_NOT_FOUND,
    ]


class ConchApp(ExtensionApp):
    name = "conch"
    extension_url = "/conch/api/agents"
    load_other_extensions = True

    data_dir = Unicode(
        "",
        config=True,
        help="Where Conch keeps agents, chats and keys (default: <jupyter data dir>/conch).",
    )
    seal_key_file = Unicode(
        "",
        config=True,
        help="The key that seals stored secrets; kept apart from data_dir so a backup of the "
        "data alone opens no secret (default: conch-seal.key beside data_dir).",
    )
    chat_limit_usd = Float(
        5.0,
        allow_none=True,
        config=True,
        help="Metered spend one chat may reach before its agents stop answering (None: no limit).",
    )
    monthly_budget_usd = Float(
        50.0,
        allow_none=True,
        config=True,
        help="Metered spend across all chats per calendar month (UTC) (None: no budget).",
    )
    offline_delay = Float(
        0.03, config=True, help="Seconds per word the offline model waits, so you can watch."
    )
    retry_delay = Float(1.0, config=True, help="Seconds before a passing failure is tried again.")
    door_remote = Bool(
        False,
        config=True,
        help="Let paired agents on other computers in through the A2A door (HTTPS only).",
    )

    policy = Dict(
        {},
        config=True,
        help="An administrator's policy, which no request can change: what every chat, agent "
        "and pairing on this server may be (keys: modes, max_chat_usd, max_monthly_usd, door, "
        "door_remote, outside_hosts, providers, acp; docs/jupyterhub.md). Read at start: a key "
        "or value Conch cannot read stops Conch from loading, with words naming it.",
    )

    acp_quiet_seconds = Float(
        QUIET_SECONDS,
        config=True,
        help="Seconds a coding agent (ACP) may say nothing mid-turn, with no question waiting"
        " for you, before Conch ends its process and the round (reason error).",
    )

    acp_live_sessions = Int(
        LIVE_SESSIONS,
        config=True,
        help="How many chats' ACP sessions one coding agent's process holds open at once (the"
        " least recently used is closed, and taken up again when its chat speaks).",
    )
    acp_idle_seconds = Float(
        IDLE_SECONDS,
        config=True,
        help="Seconds a coding agent's process may run with no turn before it ends (the next"
        " turn starts it again and resumes the chat's session).",
    )

    def initialize_settings(self) -> None:
        # First: under a policy it cannot read, Conch does not start at all (no API, no door):
        # Jupyter logs the extension as failed to load, and this line says why in words.
        try:
            policy = parse_policy(self.policy)
        except BadPolicy as error:
            self.log.error("Conch is not loaded: %s", error.message)
            raise
        data = Path(self.data_dir or Path(jupyter_data_dir()) / "conch")
        ensure_private_dir(data)
        ensure_private_dir(data / "agents")
        seal_key = Path(self.seal_key_file or data.parent / "conch-seal.key")
        http = httpx.AsyncClient(follow_redirects=False)
        store = Store(data / "conch.sqlite3", clock=time.time)
        agents = AgentStore(
            data / "agents" / "agents.json",
            SealedFile(data / "models.secrets.json", seal_key),
            clock=time.time,
            other_names=lambda: {o.name for o in outside.list()},
        )
        a2a_secrets = SealedFile(data / "a2a.secrets.json", seal_key)
        outside = OutsideAgents(
            data,
            a2a_secrets,
            taken_names=lambda: {a.name for a in agents.list()},
            clock=time.time,
            retry_delay=self.retry_delay,
            policy=policy,
        )
        if not agents.path.exists():
            agents.ensure_defaults(allowed_default(policy, detect_default_provider(os.environ)))
        hub = Hub()
        budget = Budget(self.chat_limit_usd, self.monthly_budget_usd, policy=policy)
        server = self.serverapp
        kernels = (
            NotebookKernels(
                sessions=server.session_manager,
                kernels=server.kernel_manager,
                contents=server.contents_manager,
            )
            if server is not None
            else None
        )
        documents = None
        if server is not None and kernels is not None:
            documents = NotebookDocuments(
                contents=server.contents_manager,
                is_open=kernels.is_open,
                # jupyter-collaboration's extension, where it is installed (conch-jupyter[live]);
                # looked up at each call, as extensions load in any order.
                live=lambda: server.web_app.settings.get("jupyter_server_ydoc"),
            )
        tools = NotebookTools(
            store=store, hub=hub, kernels=kernels, documents=documents, policy=policy
        )
        kernel_key = secrets.token_urlsafe(32)
        mcp = McpEndpoint(tools, url=self._mcp_url)
        coding = CodingAgents(
            store=store,
            hub=hub,
            tools=tools,
            root_dir=str(server.root_dir) if server is not None else "",
            secrets=lambda: {kernel_key, self._jupyter_token()},
            quiet_seconds=self.acp_quiet_seconds,
            live_sessions=self.acp_live_sessions,
            idle_seconds=self.acp_idle_seconds,
            mcp=mcp,
        )
        mcp_servers = McpServerService(
            store=store,
            secrets=SealedFile(data / "mcp.secrets.json", seal_key),
            policy=policy,
            clock=time.time,
            hidden=lambda: {kernel_key, self._jupyter_token()},
            version=__version__,
        )
        turns = Turns(
            store,
            agents,
            hub,
            http,
            offline_delay=self.offline_delay,
            retry_delay=self.retry_delay,
            notebook=tools,
            policy=policy,
            coding=coding,
            mcp=mcp_servers,
        )
        rounds = RoundService(
            store=store,
            agents=agents,
            hub=hub,
            turns=turns,
            budget=budget,
            clock=time.time,
            outside=outside,
        )
        door_signer = DoorSigner(a2a_secrets)
        self.services = ConchServices(
            data_dir=data,
            store=store,
            agents=agents,
            hub=hub,
            rounds=rounds,
            http=http,
            pairings=PairingStore(data / "pairings.json", clock=time.time),
            door_gate=DoorGate(remote=self.door_remote, clock=time.time, policy=policy),
            peers=PeerService(
                store=store,
                agents=agents,
                turns=turns,
                clock=time.time,
                budget=budget,
                signer=door_signer,
            ),
            outside=outside,
            tools=tools,
            coding=coding,
            mcp=mcp,
            mcp_servers=mcp_servers,
            door_signer=door_signer,
            kernel_key=kernel_key,
            policy=policy,
        )
        self.settings["conch"] = self.services
        # Kernels inherit the server's environment when they start.
        os.environ[KERNEL_KEY_ENV] = kernel_key
        if server is not None:
            os.environ[ROOT_DIR_ENV] = str(server.root_dir)
        self._publish_url()

    def _mcp_url(self) -> str | None:
        """Where a coding agent on this computer reaches the notebook's tools (loopback)."""
        server = self.serverapp
        if server is None or not getattr(server, "port", 0):
            return None
        ip = str(getattr(server, "ip", "") or "")
        host = ip if ip not in ("", "0.0.0.0", "::", "localhost", "*") else "127.0.0.1"  # noqa: S104
        host = f"[{host}]" if ":" in host else host
        return f"http://{host}:{server.port}{server.base_url}conch/mcp"

    def _jupyter_token(self) -> str:
        server = self.serverapp
        provider = getattr(server, "identity_provider", None) if server is not None else None
        token = getattr(provider, "token", "") or getattr(server, "token", "") or ""
        return token if isinstance(token, str) else ""

    def initialize_handlers(self) -> None:
        self.handlers.extend(routes())
        if self.serverapp is not None:
            install_door(self.serverapp.web_app)

    async def _start_jupyter_server_extension(self, serverapp: Any) -> None:
        # The port is final only now (port_retries may have moved it).
        self._publish_url()
        services: ConchServices | None = getattr(self, "services", None)
        if services is not None:
            # What undid an agent's writes was held by the server that stopped: no Undo now.
            await services.store.end_undos()
            self._open_chat_rooms(services)

    def _open_chat_rooms(self, services: ConchServices) -> None:
        """Every Jupyter Chat document as a Conch room, where jupyterlab-chat is installed and
        loaded (conch-jupyter[chat]); looked up now, when every extension has loaded."""
        manager = serverapp_settings(self.serverapp).get("chat_manager")
        if manager is None:
            return
        try:
            from ..chat_rooms.rooms import ChatRooms
        except ImportError as error:  # a jupyterlab-chat Conch cannot use
            self.log.warning("Conch is not in Jupyter Chat: %s", error)
            return
        self.chat_rooms = ChatRooms(
            manager,
            store=services.store,
            hub=services.hub,
            rounds=services.rounds,
            agents=services.agents,
            tools=services.tools,
        )
        self.chat_rooms.start()

    def _publish_url(self) -> None:
        if self.serverapp is not None:
            os.environ[SERVER_URL_ENV] = self.serverapp.connection_url

    async def stop_extension(self) -> None:
        rooms = getattr(self, "chat_rooms", None)
        if rooms is not None:
            await rooms.close()
        services: ConchServices | None = getattr(self, "services", None)
        if services is not None:
            await services.close()
